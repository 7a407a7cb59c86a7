//! `karpenter.sh/v1` NodeClaim: a request for one node, and its lifecycle status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::requirement_rules::*;
use super::common::{NodeClassReference, NodeSelectorRequirementWithMinValues, Taint};
use super::nodepool::default_expire_after;
use crate::duration::{GoDuration, NillableDuration};

/// NodeClaim is the Schema for the NodeClaims API.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    doc = "NodeClaim is the Schema for the NodeClaims API",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/capacity-type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
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
        name = "ImageID",
        type_ = "string",
        json_path = ".status.imageID",
        priority = "1"
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = "1"
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/nodepool",
        priority = "1"
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = "1"
    ),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable"))]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[schemars(length(max = 100))]
    #[x_kube(
        validation = Rule::new(IN_HAS_VALUES).message(IN_HAS_VALUES_MESSAGE),
        validation = Rule::new(NUMERIC_SINGLE_VALUE).message(NUMERIC_SINGLE_VALUE_MESSAGE),
        validation = Rule::new(MIN_VALUES_LE_VALUES).message(MIN_VALUES_LE_VALUES_MESSAGE),
        validation = Rule::new(KARPENTER_DOMAIN).message(KARPENTER_DOMAIN_MESSAGE),
    )]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Minimum resources the node must provide (the pods' requests plus DaemonSet overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    pub node_class_ref: NodeClassReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<GoDuration>,
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

/// Resource requests of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// Observed state of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

/// NodeClaim condition types.
pub mod conditions {
    pub const LAUNCHED: &str = "Launched";
    pub const REGISTERED: &str = "Registered";
    pub const INITIALIZED: &str = "Initialized";
    pub const READY: &str = "Ready";
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    pub const DRIFTED: &str = "Drifted";
    pub const DRAINED: &str = "Drained";
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    /// An in-place reboot: `True` while it runs (its reason the phase), `False` once it ended.
    pub const REBOOTING: &str = "Rebooting";

    /// The reasons of [`REBOOTING`]: its phases and terminal outcomes, and the `Initialized`
    /// reason while a reboot runs.
    pub mod rebooting {
        /// Committed (by node repair); the reboot controller fences, drains and issues it.
        pub const REQUESTED: &str = "RebootRequested";
        /// The cloud accepted it; the Node's new boot is awaited.
        pub const ISSUED: &str = "RebootIssued";
        /// The Node booted again and is Ready.
        pub const SUCCEEDED: &str = "RebootSucceeded";
        /// It could not be issued, or the Node did not come back in time.
        pub const FAILED: &str = "RebootFailed";
        /// `Initialized=Unknown`'s reason once a reboot is issued.
        pub const REBOOTING: &str = "Rebooting";
    }
}
