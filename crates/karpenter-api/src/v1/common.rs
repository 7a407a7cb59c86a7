//! Types shared by NodePool and NodeClaim: requirements, taints and the node class reference.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Label key pattern: an optional DNS-subdomain prefix and a name (Kubernetes qualified name).
pub const QUALIFIED_NAME_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?(\/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$|^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// Label value pattern (empty or alphanumeric with `-_.` inside, at most 63 characters).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// CEL rules shared by every requirement list (NodePool template and NodeClaim), as
/// `(rule, message)` pairs referenced from the `x_kube` attributes.
pub mod requirement_rules {
    pub const IN_HAS_VALUES: &str = "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)";
    pub const IN_HAS_VALUES_MESSAGE: &str =
        "requirements with operator 'In' must have a value defined";
    pub const NUMERIC_SINGLE_VALUE: &str = "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)";
    pub const NUMERIC_SINGLE_VALUE_MESSAGE: &str = "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value";
    pub const MIN_VALUES_LE_VALUES: &str = "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)";
    pub const MIN_VALUES_LE_VALUES_MESSAGE: &str = "requirements with 'minValues' must have at least that many values specified in the 'values' field";
    pub const KARPENTER_DOMAIN: &str = r#"self.all(x, x.key in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.key.find("^([^/]+)").endsWith("karpenter.sh"))"#;
    pub const KARPENTER_DOMAIN_MESSAGE: &str = r#"label domain "karpenter.sh" is restricted"#;
}

/// The operators a node selector requirement may use. `Gte` and `Lte` are Karpenter additions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    /// Parses the Kubernetes spelling (`"In"`, `"NotIn"`, ...); `None` for anything else.
    /// Pod node affinity and selectors carry operators as free strings, so callers reading
    /// those must handle an unknown one.
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }

    /// True for the numeric comparison operators, which take exactly one integer value.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
        )
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node selector requirement with an optional minimum number of distinct values
/// (`NodeSelectorRequirementWithMinValues`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key that the selector applies to.
    #[schemars(length(max = 316), regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: String,
    /// Represents a key's relationship to a set of values.
    pub operator: Operator,
    /// An array of string values. Required for In and NotIn, one integer for Gt/Lt/Gte/Lte,
    /// empty for Exists/DoesNotExist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63), regex(pattern = LABEL_VALUE_PATTERN)))]
    pub values: Vec<String>,
    /// The minimum number of unique values required to define the flexibility of the
    /// requirement (alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i32>,
}

impl NodeSelectorRequirementWithMinValues {
    pub fn new(key: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        Self {
            key: key.into(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            min_values: None,
        }
    }
}

/// The effect of a taint on pods that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint (the Kubernetes `Taint`, with the enum and patterns Karpenter's CRD enforces).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint key to be applied to a node.
    #[schemars(length(min = 1), regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: String,
    /// The taint value corresponding to the taint key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = LABEL_VALUE_PATTERN))]
    pub value: Option<String>,
    /// The effect of the taint on pods that do not tolerate the taint.
    pub effect: TaintEffect,
    /// The time at which the taint was added (only for NoExecute taints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

impl Taint {
    pub fn new(key: impl Into<String>, value: Option<&str>, effect: TaintEffect) -> Self {
        Self {
            key: key.into(),
            value: value.map(str::to_owned),
            effect,
            time_added: None,
        }
    }
}

/// A reference to the provider-specific node class (`EC2NodeClass`) a NodeClaim launches with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.group == oldSelf.group").message("nodeClassRef.group is immutable"),
    validation = Rule::new("self.kind == oldSelf.kind").message("nodeClassRef.kind is immutable"),
)]
pub struct NodeClassReference {
    /// API group of the node class (`karpenter.k8s.aws`).
    #[schemars(regex(pattern = r"^[^/]*$"))]
    #[x_kube(validation = Rule::new("self != ''").message("group may not be empty"))]
    pub group: String,
    /// Kind of the node class (`EC2NodeClass`).
    #[x_kube(validation = Rule::new("self != ''").message("kind may not be empty"))]
    pub kind: String,
    /// Name of the node class.
    #[x_kube(validation = Rule::new("self != ''").message("name may not be empty"))]
    pub name: String,
}

/// Metadata that Karpenter applies to nodes it creates from a template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels applied to every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 100))]
    #[schemars(inner(length(max = 63), regex(pattern = LABEL_VALUE_PATTERN)))]
    #[x_kube(
        validation = Rule::new(r#"self.all(x, x != "karpenter.sh/nodepool")"#).message(r#"label "karpenter.sh/nodepool" is restricted"#),
        validation = Rule::new(r#"self.all(x, x != "kubernetes.io/hostname")"#).message(r#"label "kubernetes.io/hostname" is restricted"#),
        validation = Rule::new(r#"self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))"#).message(r#"label domain "karpenter.sh" is restricted"#),
        validation = Rule::new(r#"self.all(x, x in ["karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition"] || !x.find("^([^/]+)").endsWith("karpenter.k8s.aws"))"#).message(r#"label domain "karpenter.k8s.aws" is restricted"#),
    )]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    /// Annotations applied to every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}
