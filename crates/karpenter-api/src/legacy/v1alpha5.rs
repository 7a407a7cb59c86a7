//! `karpenter.sh/v1alpha5` Provisioner and Machine (removed upstream in v0.33).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::{Object, Unknown};
use crate::v1::{Operator, Taint};

/// `karpenter.sh/v1alpha5` Provisioner.
pub type Provisioner = Object<ProvisionerSpec>;
/// `karpenter.sh/v1alpha5` Machine (managed by the controller; never converted by hand).
pub type Machine = Object<serde_json::Value>;

/// The v1alpha5 Provisioner spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionerSpec {
    /// Labels applied to every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations applied to every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Plain node selector requirements (no `minValues` yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// Kubelet settings, kept as an open map (clusterDNS, containerRuntime, maxPods, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_configuration: Option<BTreeMap<String, serde_json::Value>>,
    /// Inline AWS provider settings (an AWSNodeTemplate spec), as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<ProviderRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_empty: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_until_expired: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<Consolidation>,
    /// Anything else (reported as dropped by the converter).
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// A Kubernetes `NodeSelectorRequirement`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `spec.providerRef`: the AWSNodeTemplate to launch with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
}

/// `spec.limits`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    #[serde(
        default,
        deserialize_with = "super::quantity_map",
        skip_serializing_if = "Option::is_none"
    )]
    pub resources: Option<BTreeMap<String, Quantity>>,
}

/// `spec.consolidation`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Consolidation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}
