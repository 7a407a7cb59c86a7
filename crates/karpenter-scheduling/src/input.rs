//! The solver's input: plain values describing NodePools, the instance-type catalog, the cluster
//! (existing nodes and their pods, DaemonSets, volumes, namespaces) and the pending pods.
//!
//! Cloud providers convert their catalogs into [`InstanceType`]; controllers snapshot cluster
//! state into [`SolveInput`]. Nothing here refers to a client, a clock or a cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Taint};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::{Deserialize, Serialize};

use crate::pod_record::PodRecord;
use crate::resources::ResourceList;

/// A node selector operator, including Karpenter's `Gte`/`Lte`: the API crate's type, the one
/// operator of the workspace.
pub use karpenter_api::v1::Operator;

/// One node selector requirement as users write it (`NodeSelectorRequirementWithMinValues`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequirementSpec {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

impl RequirementSpec {
    pub fn new(key: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        RequirementSpec {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// `key In [values]`.
    pub fn is_in(key: impl Into<String>, values: &[&str]) -> Self {
        Self::new(key, Operator::In, values)
    }

    pub fn with_min_values(mut self, min_values: u32) -> Self {
        self.min_values = Some(min_values);
        self
    }
}

/// Resources a node keeps for itself; allocatable = capacity - all three.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overhead {
    #[serde(default)]
    pub kube_reserved: ResourceList,
    #[serde(default)]
    pub system_reserved: ResourceList,
    #[serde(default)]
    pub eviction_threshold: ResourceList,
}

impl Overhead {
    pub fn total(&self) -> ResourceList {
        let mut total = self.kube_reserved.clone();
        total.add(&self.system_reserved);
        total.add(&self.eviction_threshold);
        total
    }
}

/// A place and purchase option where an instance type can be launched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    /// `topology.kubernetes.io/zone` value.
    pub zone: String,
    /// `karpenter.sh/capacity-type` value (`on-demand`, `spot`, `reserved`).
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// False when the cloud currently cannot launch it (e.g. insufficient capacity).
    #[serde(default = "default_true")]
    pub available: bool,
    /// Further offering labels (e.g. a capacity reservation id), beyond zone and capacity type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementSpec>,
    /// A `reserved` offering's free slots: how many NodeClaims of one solve may launch into
    /// its reservation (the `karpenter.k8s.aws/capacity-reservation-id` of `requirements`).
    /// 0 for the other capacity types, and for a full reservation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reservation_capacity: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_true() -> bool {
    true
}

/// A launchable instance type, as a cloud provider describes it.
///
/// `requirements` carries the instance type's labels as requirements (normally `In` with one or
/// more values: instance-type, arch, os, zones, capacity types, families...). Resources are exact
/// [`crate::Quantity`] values; allocatable = capacity - overhead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceType {
    pub name: String,
    #[serde(default)]
    pub requirements: Vec<RequirementSpec>,
    #[serde(default)]
    pub offerings: Vec<Offering>,
    pub capacity: ResourceList,
    #[serde(default)]
    pub overhead: Overhead,
}

impl InstanceType {
    /// Capacity minus overhead, never negative.
    pub fn allocatable(&self) -> ResourceList {
        let mut alloc = self.capacity.clone();
        alloc.sub(&self.overhead.total());
        for q in alloc.0.values_mut() {
            if q.millis() < 0 {
                *q = crate::Quantity::ZERO;
            }
        }
        alloc
    }
}

/// The scheduling-relevant part of a `karpenter.sh/v1` NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    pub name: String,
    /// `spec.weight` (nil is 0). Higher weights are tried first; ties by name descending.
    #[serde(default)]
    pub weight: i32,
    /// `spec.template.spec.requirements`.
    #[serde(default)]
    pub requirements: Vec<RequirementSpec>,
    /// `spec.template.metadata.labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub startup_taints: Vec<Taint>,
    /// `spec.limits` (may include the `nodes` pseudo-resource).
    #[serde(default)]
    pub limits: ResourceList,
}

/// A node already in the cluster, with the pods bound to it. NodeClaims launched earlier but
/// not yet registered are passed here too (labels from their single-valued requirements,
/// allocatable from their instance type, `initialized: false`), like upstream's state nodes.
/// `volume_limits` is carried but not yet enforced.
#[derive(Debug, Clone, Default)]
pub struct ExistingNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    /// Pods bound to the node (they use its resources and count for topology).
    pub pods: Vec<Arc<PodRecord>>,
    /// Initialized nodes are preferred; an uninitialized managed node hides its startup and
    /// ephemeral taints.
    pub initialized: bool,
    /// Nodes being deleted are not scheduled to (their pods still count for topology).
    pub deleting: bool,
    /// Volume attach limits per CSI driver (driver -> max volumes), from CSINode.
    pub volume_limits: BTreeMap<String, u32>,
    /// In a consolidation simulation: the node is still within its NodePool's
    /// `consolidateAfter`, so pods moved off candidates ([`SolveInput::relocating`]) may not
    /// land here; pending pods may (upstream `IsUnderConsolidateAfter`).
    pub refuses_relocated_pods: bool,
}

/// Preference handling (`--preference-policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreferencePolicy {
    #[default]
    Respect,
    Ignore,
}

/// minValues handling (`--min-values-policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    #[default]
    Strict,
    BestEffort,
}

/// What a NodeClaim that could use reserved capacity does when the solve has no slot left for
/// it (upstream's `ReservedOfferingMode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservedOfferingMode {
    /// Provisioning (upstream's provisioner passes `DisableReservedCapacityFallback`): a pod
    /// that could use a reservation with free slots this solve has already promised is
    /// deferred to the next batch (which sees the launches' counts) rather than sent to paid
    /// capacity, and no lower-weight NodePool is tried for it; a pod whose only options are
    /// full reservations waits too. A full reservation with an on-demand or spot fallback
    /// falls back.
    #[default]
    Strict,
    /// Disruption simulations: fall back to the on-demand or spot offerings a NodeClaim also
    /// has, and a NodePool whose only offerings are full reservations is passed over.
    Fallback,
}

/// Solver options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolveOptions {
    pub preference_policy: PreferencePolicy,
    pub min_values_policy: MinValuesPolicy,
    /// Instance types kept per NodeClaim (upstream `MaxInstanceTypes` = 600).
    pub max_instance_types: usize,
    /// Labels to treat as well known in addition to core, AWS and every label an instance type
    /// defines.
    pub extra_well_known_labels: Vec<String>,
    /// **karpenter-rs** (not upstream): a NodeClaim that takes a pod selected by a required
    /// anti-affinity group over a key other than the hostname (usually the zone) is pinned to
    /// one value of that key: among those that keep every minValues, the one with the cheapest
    /// compatible offering (then the most instance types, then the name). Upstream leaves such a NodeClaim free to land in any
    /// zone and so blocks every zone it could be in for the rest of the batch: one pod per
    /// zone-level anti-affinity group per batch. Pinned, a group of N pods over N zones is
    /// placed in one batch. Off: upstream's behaviour.
    pub pin_anti_affinity_domains: bool,
    /// See [`ReservedOfferingMode`].
    pub reserved_offering_mode: ReservedOfferingMode,
    /// **karpenter-rs** (not upstream): each pod goes to the existing node kube-scheduler's
    /// default scoring would pick (`NodeResourcesFit` `LeastAllocated`: the most free cpu and
    /// memory, as a share of allocatable, averaged) among those that take it, instead of the
    /// first in node order. Consolidation checks with it that a command's pods still fit
    /// when kube-scheduler spreads them, not only packed as planned. Off: upstream's order.
    pub spread_over_existing: bool,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            max_instance_types: 600,
            extra_well_known_labels: Vec::new(),
            pin_anti_affinity_domains: true,
            reserved_offering_mode: ReservedOfferingMode::Strict,
            spread_over_existing: false,
        }
    }
}

/// The instance types offered to each NodePool, by NodePool name: built once per catalog
/// change and shared (the provisioner, the disruption pass and its simulations, the NodeClaim
/// conditions read the same one) rather than copied per use.
pub type PoolInstanceTypes = Arc<BTreeMap<String, Vec<InstanceType>>>;

/// Everything one scheduling simulation needs.
#[derive(Debug, Clone, Default)]
pub struct SolveInput {
    pub node_pools: Vec<NodePool>,
    /// Instance types offered to each NodePool, by NodePool name. A pool missing here gets
    /// `default_instance_types`.
    pub instance_types: PoolInstanceTypes,
    pub default_instance_types: Vec<InstanceType>,
    pub existing_nodes: Vec<ExistingNode>,
    pub daemonsets: Vec<DaemonSet>,
    /// Pods to place.
    pub pods: Vec<Arc<PodRecord>>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    /// Namespaces with their labels, for pod-affinity `namespaceSelector`.
    pub namespaces: Vec<Namespace>,
    /// UIDs (or `namespace/name` when a pod has none) of pods that a consolidation simulation
    /// moves off its candidates; they avoid nodes with `refuses_relocated_pods`.
    pub relocating: std::collections::BTreeSet<String>,
    /// Where an earlier batch planned pods that are still pending: pod UID (or
    /// `namespace/name` when a pod has none) to the existing node or in-flight NodeClaim
    /// (by its node name) it was placed on. Those pods are placed before the others, each on
    /// its planned node first, so a later batch keeps the earlier plan rather than repacking
    /// the in-flight NodeClaims in a new order (which can leave a planned pod without room
    /// and launch a node too many). A plan that no longer fits is ignored.
    pub planned: BTreeMap<String, String>,
    pub options: SolveOptions,
}

impl SolveInput {
    /// The instance types offered to `pool`.
    pub fn instance_types_for(&self, pool: &str) -> &[InstanceType] {
        self.instance_types
            .get(pool)
            .map_or(self.default_instance_types.as_slice(), Vec::as_slice)
    }
}
