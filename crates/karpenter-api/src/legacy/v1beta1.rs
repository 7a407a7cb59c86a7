//! `karpenter.sh/v1beta1` NodePool and NodeClaim (removed upstream in v1.1).
//!
//! Differences from v1: `disruption.consolidationPolicy` is `WhenEmpty|WhenUnderutilized`,
//! `consolidateAfter` is optional, `expireAfter` lives under `disruption`, the template has a
//! `kubelet`, and `nodeClassRef` names an `apiVersion` rather than a `group`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::{Object, Unknown};
use crate::v1::nodeclaim::ResourceRequirements;
use crate::v1::{Budget, NodeSelectorRequirementWithMinValues, Taint, TemplateMetadata};

/// `karpenter.sh/v1beta1` NodePool.
pub type NodePool = Object<NodePoolSpec>;
/// `karpenter.sh/v1beta1` NodeClaim.
pub type NodeClaim = Object<NodeClaimSpec>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    pub template: NodeClaimTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    #[serde(
        default,
        deserialize_with = "super::quantity_map",
        skip_serializing_if = "Option::is_none"
    )]
    pub limits: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimSpec,
}

/// The NodeClaim spec (also the NodePool template spec).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Kubelet settings (moved to the EC2NodeClass in v1), as an open map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassReference>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The v1beta1 node class reference (`apiVersion`, not `group`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
}

/// v1beta1 consolidation policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenUnderutilized,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// Defaults to `WhenUnderutilized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// A duration or `Never`; only allowed with `WhenEmpty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<String>,
    /// A duration or `Never`; defaults to `720h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}
