//! `karpenter.sh/v1` NodePool: a template for NodeClaims plus disruption settings and limits.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::requirement_rules::*;
use super::common::{
    NodeClassReference, NodeSelectorRequirementWithMinValues, Taint, TemplateMetadata,
};
use crate::duration::{GoDuration, NillableDuration};

/// Default `spec.template.spec.expireAfter`.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";
/// Default `spec.disruption.consolidateAfter`.
pub const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";
/// Default `spec.disruption.budgets[*].nodes`.
pub const DEFAULT_BUDGET_NODES: &str = "10%";

/// NodePool is the Schema for the NodePools API.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "NodePool is the Schema for the NodePools API",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(
        name = "Nodes",
        type_ = "string",
        json_path = ".status.resources.nodes"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = "1"
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = "1"
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.replicas) == has(oldSelf.replicas)").message("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"),
    validation = Rule::new("!has(self.replicas) || (!has(self.limits) || self.limits.all(k, k == 'nodes'))").message("only 'limits.nodes' is supported on static NodePools"),
    validation = Rule::new("!has(self.replicas) || !has(self.weight)").message("'weight' is not supported on static NodePools"),
)]
pub struct NodePoolSpec {
    /// The template of NodeClaims this NodePool creates.
    pub template: NodeClaimTemplate,
    /// How and when Karpenter may disrupt nodes of this NodePool.
    #[serde(default)]
    pub disruption: Disruption,
    /// Upper bounds of the resources this NodePool may provision (`nodes` counts nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Priority of this NodePool over others; higher is tried first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// Fixed node count for a static NodePool (alpha, feature gate `StaticCapacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
}

/// The NodeClaim template of a NodePool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimTemplateSpec,
}

/// The NodeClaim spec a NodePool stamps out (no `resources`: those come from pods).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints applied to nodes for their whole life.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints expected to be removed by another controller once the node is initialized.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Constraints on the nodes this NodePool may launch.
    #[schemars(length(max = 100))]
    #[x_kube(
        validation = Rule::new(IN_HAS_VALUES).message(IN_HAS_VALUES_MESSAGE),
        validation = Rule::new(NUMERIC_SINGLE_VALUE).message(NUMERIC_SINGLE_VALUE_MESSAGE),
        validation = Rule::new(MIN_VALUES_LE_VALUES).message(MIN_VALUES_LE_VALUES_MESSAGE),
        validation = Rule::new("self.all(x, x.key != 'karpenter.sh/nodepool')").message(r#"label "karpenter.sh/nodepool" is restricted"#),
        validation = Rule::new("self.all(x, x.key != 'kubernetes.io/hostname')").message(r#"label "kubernetes.io/hostname" is restricted"#),
        validation = Rule::new(KARPENTER_DOMAIN).message(KARPENTER_DOMAIN_MESSAGE),
    )]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The node class the NodeClaims launch with.
    pub node_class_ref: NodeClassReference,
    /// How long a node may drain before it is forcibly terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<GoDuration>,
    /// How long a node lives before Karpenter replaces it; `Never` disables expiry.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

pub(crate) fn default_expire_after() -> NillableDuration {
    NillableDuration::parse(DEFAULT_EXPIRE_AFTER).unwrap_or_else(|_| NillableDuration::never())
}

fn default_consolidate_after() -> NillableDuration {
    NillableDuration::parse(DEFAULT_CONSOLIDATE_AFTER).unwrap_or_else(|_| NillableDuration::never())
}

/// When Karpenter may consolidate nodes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated.
    #[default]
    WhenEmptyOrUnderutilized,
    /// Consolidate only when the savings justify the disruption (alpha).
    Balanced,
}

impl ConsolidationPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }
}

/// Why a node is voluntarily disrupted; budgets may be limited to some reasons.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
    /// Voluntary node repair (upstream v1.15 paces repair through the budgets).
    Unhealthy,
}

impl DisruptionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
            DisruptionReason::Unhealthy => "Unhealthy",
        }
    }
}

/// Disruption settings of a NodePool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long after a pod was added to or removed from a node it may be consolidated;
    /// `Never` disables consolidation. Defaults to `0s` (since upstream v1.15 it may be
    /// omitted).
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    /// Which nodes consolidation may act on.
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Limits on how many nodes may be disrupted at once.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    #[x_kube(validation = Rule::new("self.all(x, has(x.schedule) == has(x.duration))").message("'schedule' must be set with 'duration'"))]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::default()]
}

fn default_budget_nodes() -> String {
    DEFAULT_BUDGET_NODES.to_owned()
}

/// Pattern of `budgets[*].nodes`: a count or a percentage.
pub const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// Pattern of `budgets[*].schedule`: a 5-field cron expression or a macro.
pub const BUDGET_SCHEDULE_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// Pattern of `budgets[*].duration`: hours and/or minutes.
pub const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";

/// A disruption budget: at most `nodes` nodes may be disrupted at once, while the budget is
/// active (always, or during `duration` after each `schedule` hit, in UTC).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Reasons this budget applies to (Underutilized, Empty, Drifted, Unhealthy); all reasons
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,
    /// Number or percentage of nodes that may be disrupted at once.
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = BUDGET_NODES_PATTERN))]
    pub nodes: String,
    /// Cron schedule (UTC) at which the budget becomes active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = BUDGET_SCHEDULE_PATTERN))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = BUDGET_DURATION_PATTERN))]
    pub duration: Option<GoDuration>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            reasons: None,
            nodes: default_budget_nodes(),
            schedule: None,
            duration: None,
        }
    }
}

/// Observed state of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources in use by this NodePool's nodes (including the `nodes` count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, Quantity>>,
    /// Number of nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The generation of the node class last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Conditions: Ready, ValidationSucceeded, NodeClassReady, NodeRegistrationHealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// NodePool status condition types and the reasons upstream writes with them.
pub mod conditions {
    /// The root: `ValidationSucceeded` and `NodeClassReady` both true.
    pub const READY: &str = "Ready";
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    pub const NODE_CLASS_READY: &str = "NodeClassReady";
    /// Not part of `Ready`: whether the pool's recent NodeClaims registered.
    pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
    /// The dependents of [`READY`], in upstream's order.
    pub const READY_DEPENDENTS: [&str; 2] = [VALIDATION_SUCCEEDED, NODE_CLASS_READY];
}
