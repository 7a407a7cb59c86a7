//! `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (feature gate `CapacityBuffer`): spare capacity
//! kept as virtual pods, shaped by a PodTemplate or a scalable workload's pod template.
//!
//! Same schema, CEL rules, names and printer columns as upstream's copy of the Cluster
//! Autoscaler API (`sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1`), and its constants.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The default (and only) provisioning strategy: virtual pods actively scale the cluster up.
pub const ACTIVE_PROVISIONING_STRATEGY: &str = "buffer.x-k8s.io/active-capacity";

/// Status condition types written to a CapacityBuffer.
pub mod conditions {
    /// The buffer's pod template and replica count are resolved.
    pub const READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
    /// Whether the buffer's virtual pods fit existing capacity (written by the provisioner).
    pub const PROVISIONING: &str = "Provisioning";
    /// Declared by upstream; not written by upstream v1.15 either.
    pub const LIMITED_BY_QUOTAS: &str = "LimitedByQuotas";
}

/// Condition reasons upstream writes.
pub mod reasons {
    pub const RESOLVED: &str = "Resolved";
    pub const SCALABLE_REF_NOT_FOUND: &str = "ScalableRefNotFound";
    pub const POD_TEMPLATE_NOT_FOUND: &str = "PodTemplateNotFound";
    pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
    pub const FITS_EXISTING_CAPACITY: &str = "FitsExistingCapacity";
    pub const REQUIRES_NEW_CAPACITY: &str = "RequiresNewCapacity";
    pub const NOT_READY_FOR_PROVISIONING: &str = "NotReadyForProvisioning";
    pub const BUFFER_EMPTY: &str = "BufferEmpty";
}

/// Supported `scalableRef` kinds (API group `apps`).
pub const KIND_DEPLOYMENT: &str = "Deployment";
pub const KIND_STATEFUL_SET: &str = "StatefulSet";
pub const KIND_REPLICA_SET: &str = "ReplicaSet";

/// Annotation marking a virtual pod built from a CapacityBuffer (value `"true"`).
pub const FAKE_POD_ANNOTATION_KEY: &str = "karpenter.sh/capacity-buffer-fake-pod";
pub const FAKE_POD_ANNOTATION_VALUE: &str = "true";
/// Annotation naming the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAME_ANNOTATION: &str = "karpenter.sh/capacity-buffer-name";
/// Annotation naming the namespace of the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAMESPACE_ANNOTATION: &str = "karpenter.sh/capacity-buffer-namespace";
/// The priority stamped on virtual pods (the lowest).
pub const VIRTUAL_POD_PRIORITY: i32 = i32::MIN;

fn default_provisioning_strategy() -> Option<String> {
    Some(ACTIVE_PROVISIONING_STRATEGY.to_owned())
}

/// CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity
/// within a cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1beta1",
    kind = "CapacityBuffer",
    plural = "capacitybuffers",
    singular = "capacitybuffer",
    shortname = "cb",
    category = "autoscaling",
    namespaced,
    status = "CapacityBufferStatus",
    derive = "PartialEq",
    doc = "CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity within a cluster.",
    printcolumn(
        name = "Strategy",
        type_ = "string",
        json_path = ".spec.provisioningStrategy",
        description = "The strategy to be used."
    ),
    printcolumn(
        name = "PodTemplate",
        type_ = "string",
        json_path = ".status.podTemplateRef.name",
        description = "The name of the PodTemplate used."
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The actual number of buffer chunks."
    ),
    printcolumn(
        name = "ConditionsType",
        type_ = "string",
        json_path = ".status.conditions[*].type",
        description = "List of all condition types."
    ),
    printcolumn(
        name = "ConditionsStatus",
        type_ = "string",
        json_path = ".status.conditions[*].status",
        description = "List of all condition statuses."
    ),
    printcolumn(
        name = "ConditionsReason",
        type_ = "string",
        json_path = ".status.conditions[*].reason",
        description = "List of all condition reasons."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "The age of the CapacityBuffer."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)").message("If podTemplateRef is set, replicas or limits must also be set"),
    validation = Rule::new("!(has(self.podTemplateRef) && has(self.scalableRef))").message("You must define either PodTemplateRef or ScalableRef, but not both"),
)]
pub struct CapacityBufferSpec {
    /// How the buffer is utilized; `buffer.x-k8s.io/active-capacity` (the default) creates
    /// placeholder pods that scale the cluster up.
    #[serde(
        default = "default_provisioning_strategy",
        skip_serializing_if = "Option::is_none"
    )]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate in the same namespace declaring the shape of one chunk of the buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A workload with a scale subresource whose pod template shapes the chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// Desired number of chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Desired chunks as a percentage of the `scalableRef`'s replicas (rounded up, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub percentage: Option<i32>,
    /// Resource totals capping the number of chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
}

/// A reference to an object in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LocalObjectRef {
    /// Name of the referent.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A reference to an object with a scale subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// API group of the referent; empty for the core group (`apps` is assumed when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind of the referent.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// Name of the referent.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Observed state of a CapacityBuffer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// The PodTemplate used to provision the buffer (when `spec.podTemplateRef` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// The number of chunks currently provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The observed generation of the PodTemplate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// Conditions: ReadyForProvisioning, Provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// The provisioning strategy observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}

impl CapacityBuffer {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// Whether the condition `type_` is `True` in the status.
    pub fn condition_is_true(&self, type_: &str) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
    }
}
