//! The cluster as disruption sees it: plain values, captured at one moment.
//!
//! A [`Snapshot`] carries the NodePools (v1 types), the instance-type catalog offered to each
//! pool, every node with its NodeClaim facts and its pods, the PodDisruptionBudgets, the pods
//! still pending, DaemonSets (their overhead on replacements) and feature flags. Controllers and
//! the simulator build it; nothing here reads a clock or a cache.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels;
use karpenter_api::v1::NodePool;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::{InstanceType, ResourceList, SolveOptions};

use crate::pdb::Pdbs;
pub use crate::repair_settings::RepairSettings;
pub use karpenter_cloud::repair::ObservedCondition;

/// Feature gates that change disruption decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// `SpotToSpotConsolidation`: allow replacing spot nodes with cheaper spot nodes.
    pub spot_to_spot_consolidation: bool,
    /// `PodDeletionCostManagement`: Karpenter writes `controller.kubernetes.io/pod-deletion-cost`
    /// ([`crate::deletion_cost`]) and stops reading it as a pod's disruption cost.
    pub pod_deletion_cost_management: bool,
    /// `TerminateFirstDrift`: a drifted node whose replacement cannot be staged first (full
    /// reservations, a static pool at its node limit) is deleted first
    /// (`terminate_first.rs`).
    pub terminate_first_drift: bool,
    /// `TerminateFirstRepair`: the same for node repair.
    pub terminate_first_repair: bool,
}

/// A `Drifted=True` condition as the NodeClaim disruption controller set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftMark {
    /// `NodePoolDrifted`, `RequirementsDrifted`, `InstanceTypeNotFound` or a provider reason.
    pub reason: String,
    /// The condition's last transition time.
    pub since: DateTime<Utc>,
}

/// One node with its NodeClaim facts (a node without a NodeClaim is not managed by us).
#[derive(Debug, Clone)]
pub struct NodeState {
    pub name: String,
    /// The NodeClaim backing the node; `None` for nodes Karpenter does not manage.
    pub node_claim: Option<String>,
    /// Node labels: nodepool, instance type, capacity type, zone, hostname, ...
    pub labels: BTreeMap<String, String>,
    /// Node (and NodeClaim) annotations, e.g. `karpenter.sh/do-not-disrupt`, nodepool hash.
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    /// Price per hour; `None` looks it up in the pool's catalog (zone and capacity type).
    pub price: Option<f64>,
    /// `Initialized=True`.
    pub initialized: bool,
    /// When the node became initialized (the Consolidatable clock starts here).
    pub initialized_at: Option<DateTime<Utc>>,
    /// Node `Ready=True`.
    pub ready: bool,
    /// Marked for deletion by a disruption command (counts against budgets).
    pub marked_for_deletion: bool,
    /// Deletion timestamp set (on the Node or the NodeClaim): draining.
    pub deleting: bool,
    /// `InstanceTerminating=True`: drained, the instance is going away (no longer counted in
    /// its pool's budget).
    pub instance_terminating: bool,
    /// In the orchestration queue already.
    pub queued: bool,
    /// Rebooting in place (`Rebooting=True`): no disruption method takes it.
    pub rebooting: bool,
    /// When its last in-place reboot ended (`Rebooting=False`): repair tolerations count
    /// from then at the earliest.
    pub last_reboot_end: Option<DateTime<Utc>>,
    /// In-place reboots committed for its NodeClaim lately
    /// ([`crate::reboot_history::RebootHistory`]): two within a day and repair replaces it.
    pub committed_reboots: Vec<DateTime<Utc>>,
    /// Nominated for pending pods until this time.
    pub nominated_until: Option<DateTime<Utc>>,
    /// `Drifted=True`, if the drift controller said so. When `None`, the drift method detects
    /// NodePool-hash, requirements and instance-type drift itself.
    pub drifted: Option<DriftMark>,
    /// Last time a pod was bound to or left the node.
    pub last_pod_event: Option<DateTime<Utc>>,
    pub created: DateTime<Utc>,
    /// NodeClaim `spec.expireAfter` (`None` = Never).
    pub expire_after: Option<Duration>,
    /// NodeClaim `spec.terminationGracePeriod`.
    pub termination_grace_period: Option<Duration>,
    /// Pods bound to the node.
    pub pods: Vec<Arc<PodRecord>>,
    /// The Node's status conditions (node repair matches them against the cloud's policies).
    pub conditions: Vec<ObservedCondition>,
    /// A Node exists (false for a NodeClaim still in flight).
    pub has_node: bool,
    /// The NodeClaim's instance was launched (it has a provider id).
    pub launched: bool,
}

impl NodeState {
    /// A Ready, initialized node with the given labels; everything else empty.
    pub fn new(name: &str, created: DateTime<Utc>) -> Self {
        NodeState {
            name: name.to_owned(),
            node_claim: None,
            labels: BTreeMap::from([(labels::HOSTNAME.to_owned(), name.to_owned())]),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            capacity: ResourceList::new(),
            allocatable: ResourceList::new(),
            price: None,
            initialized: true,
            initialized_at: Some(created),
            ready: true,
            marked_for_deletion: false,
            deleting: false,
            instance_terminating: false,
            queued: false,
            rebooting: false,
            last_reboot_end: None,
            committed_reboots: Vec::new(),
            nominated_until: None,
            drifted: None,
            last_pod_event: None,
            created,
            expire_after: None,
            termination_grace_period: None,
            pods: Vec::new(),
            conditions: Vec::new(),
            has_node: true,
            launched: true,
        }
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    pub fn node_pool(&self) -> Option<&str> {
        self.label(labels::NODEPOOL)
    }

    pub fn instance_type(&self) -> Option<&str> {
        self.label(labels::INSTANCE_TYPE)
    }

    pub fn capacity_type(&self) -> Option<&str> {
        self.label(labels::CAPACITY_TYPE)
    }

    pub fn zone(&self) -> Option<&str> {
        self.label(labels::ZONE)
    }

    /// Managed by Karpenter: has a NodeClaim and a nodepool label.
    pub fn managed(&self) -> bool {
        self.node_claim.is_some() && self.node_pool().is_some()
    }
}

/// Everything one disruption pass needs.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub node_pools: Vec<NodePool>,
    /// Instance types offered to each NodePool, by NodePool name.
    pub instance_types: karpenter_scheduling::input::PoolInstanceTypes,
    pub nodes: Vec<NodeState>,
    pub pdbs: Pdbs,
    /// Pods waiting for capacity (they are simulated along with the candidates' pods).
    pub pending_pods: Vec<Arc<PodRecord>>,
    pub daemonsets: Vec<DaemonSet>,
    pub features: Features,
    pub solve_options: SolveOptions,
    /// Node repair (feature gate `NodeRepair`): the cloud's policies and the threshold; `None`
    /// when the gate is off.
    pub repair: Option<RepairSettings>,
    /// Nodes (by Node or NodeClaim name) holding CapacityBuffer headroom (the provisioner's last
    /// batch placed virtual pods on them or launched them for virtual pods): emptiness does not
    /// remove them (upstream `Cluster.HasBufferPods`).
    pub buffer_nodes: BTreeSet<String>,
}

impl Snapshot {
    pub fn node_pool(&self, name: &str) -> Option<&NodePool> {
        self.node_pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    pub fn catalog(&self, pool: &str) -> &[InstanceType] {
        self.instance_types.get(pool).map_or(&[], Vec::as_slice)
    }

    pub fn instance_type(&self, pool: &str, name: &str) -> Option<&InstanceType> {
        self.catalog(pool).iter().find(|it| it.name == name)
    }

    /// The node's price: as given, else the catalog offering matching its zone and capacity
    /// type, else 0.
    pub fn node_price(&self, node: &NodeState) -> f64 {
        if let Some(p) = node.price {
            return p;
        }
        let (Some(pool), Some(it)) = (node.node_pool(), node.instance_type()) else {
            return 0.0;
        };
        self.instance_type(pool, it)
            .and_then(|it| {
                it.offerings
                    .iter()
                    .find(|o| {
                        Some(o.zone.as_str()) == node.zone()
                            && Some(o.capacity_type.as_str()) == node.capacity_type()
                    })
                    .map(|o| o.price)
            })
            .unwrap_or(0.0)
    }
}
