//! [`Cluster`]: the index itself. Objects go in by [`Cluster::apply`] (create or update),
//! [`Cluster::delete`] and [`Cluster::reset`] (the full list of a kind after a relist, so
//! deletions missed while a watch was down are not kept); views come out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use karpenter_api::labels;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_disruption::{Features, Pdb, Snapshot};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::{ResourceList, SolveInput, SolveOptions};

use crate::node::StateNode;
use crate::object::{Kind, Object, ObjectRef};
use crate::provisionable::is_provisionable;
use crate::spec_pool::SpecPool;

type Key = (String, String);

fn namespaced(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

fn named(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// What a NodePool's nodes use, against its `limits`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePoolUsage {
    /// Summed capacity of its NodeClaims (in flight included), plus `nodes`.
    pub resources: ResourceList,
    pub nodes: u64,
}

/// The cluster-state index.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: BTreeMap<String, Node>,
    node_claims: BTreeMap<String, NodeClaim>,
    pods: BTreeMap<Key, Arc<PodRecord>>,
    /// The pods that are provisionable (`is_provisionable`, a function of the pod alone; the
    /// same records as `pods`), kept with `pods`: the provisioner asks at every scan (up to 10
    /// a second), and walking 5,000 pods to find the pending was a tenth of the controller's
    /// CPU in a 5,000-pod scale-out, then looking each pending key up in `pods` a fifth.
    provisionable: BTreeMap<Key, Arc<PodRecord>>,
    /// The pods' specs, one copy per distinct spec.
    pod_specs: SpecPool,
    /// The pods bound to each node (the same records as `pods`): a node's pods without a
    /// lookup per pod, which was most of a 20,000-pod scale-out's CPU.
    pods_by_node: HashMap<String, BTreeMap<Key, Arc<PodRecord>>>,
    node_pools: BTreeMap<String, NodePool>,
    daemonsets: BTreeMap<Key, DaemonSet>,
    pdbs: BTreeMap<Key, PodDisruptionBudget>,
    persistent_volume_claims: BTreeMap<Key, PersistentVolumeClaim>,
    persistent_volumes: BTreeMap<String, PersistentVolume>,
    storage_classes: BTreeMap<String, StorageClass>,
    namespaces: BTreeMap<String, Namespace>,
    volume_attachments: BTreeMap<String, VolumeAttachment>,
    node_classes: BTreeMap<String, EC2NodeClass>,
    node_overlays: BTreeMap<String, NodeOverlay>,
    /// Node (or in-flight NodeClaim) name -> nominated for pending pods until.
    nominations: HashMap<String, DateTime<Utc>>,
    /// NodeClaim names chosen by a disruption command.
    marked_for_deletion: BTreeSet<String>,
    /// Node name -> sequence number of its latest pod event (a pod bound to it, finished,
    /// terminating or deleted), from [`Cluster::apply`] and [`Cluster::delete`]; a relist
    /// ([`Cluster::reset`]) records none.
    pod_events: HashMap<String, u64>,
    pod_event_seq: u64,
    /// CapacityBuffers (feature gate `CapacityBuffer`): the virtual pods of each buffer ready
    /// for provisioning, by `namespace/name`, as the capacity-buffer loop resolved them.
    buffer_pods: BTreeMap<String, Vec<Arc<PodRecord>>>,
    /// Where the provisioner's last batch placed each buffer's virtual pods.
    buffer_placements: BTreeMap<String, karpenter_scheduling::capacity_buffer::BufferPlacement>,
    /// Nodes (or in-flight NodeClaims) the last batch placed virtual pods on, and NodeClaims it
    /// launched for them: they hold buffer headroom, and emptiness leaves them alone (upstream
    /// `Cluster.HasBufferPods`).
    buffer_nodes: BTreeSet<String>,
    /// Where the provisioner's last batch placed each pod (UID, or `namespace/name`): an
    /// existing node's name or the NodeClaim created for it. Given to the next batch as
    /// [`SolveInput::planned`] for the pods still pending.
    plans: HashMap<String, String>,
}

impl Cluster {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates or replaces an object.
    pub fn apply(&mut self, object: Object) {
        self.apply_object(object, true);
    }

    fn apply_object(&mut self, object: Object, record_pod_events: bool) {
        match object {
            Object::Node(o) => {
                self.nodes.insert(named(&o.metadata), o);
            }
            Object::NodeClaim(o) => {
                self.node_claims.insert(named(&o.metadata), o);
            }
            Object::Pod(o) => self.apply_pod(o, record_pod_events),
            Object::NodePool(o) => {
                self.node_pools.insert(named(&o.metadata), o);
            }
            Object::DaemonSet(o) => {
                self.daemonsets.insert(namespaced(&o.metadata), o);
            }
            Object::PodDisruptionBudget(o) => {
                self.pdbs.insert(namespaced(&o.metadata), o);
            }
            Object::PersistentVolumeClaim(o) => {
                self.persistent_volume_claims
                    .insert(namespaced(&o.metadata), o);
            }
            Object::PersistentVolume(o) => {
                self.persistent_volumes.insert(named(&o.metadata), o);
            }
            Object::StorageClass(o) => {
                self.storage_classes.insert(named(&o.metadata), o);
            }
            Object::Namespace(o) => {
                self.namespaces.insert(named(&o.metadata), o);
            }
            Object::VolumeAttachment(o) => {
                self.volume_attachments.insert(named(&o.metadata), o);
            }
            Object::EC2NodeClass(o) => {
                self.node_classes.insert(named(&o.metadata), o);
            }
            Object::NodeOverlay(o) => {
                self.node_overlays.insert(named(&o.metadata), o);
            }
        }
    }

    fn apply_pod(&mut self, pod: Pod, record_pod_events: bool) {
        let key = namespaced(&pod.metadata);
        let pod = self.pod_specs.record(pod);
        if record_pod_events && let Some(node) = pod.node_name() {
            let old = self.pods.get(&key);
            let event = match old {
                None => true,
                Some(old) => {
                    old.node_name() != Some(node)
                        || (pod.is_terminal() && !old.is_terminal())
                        || (pod.metadata.deletion_timestamp.is_some()
                            && old.metadata.deletion_timestamp.is_none())
                }
            };
            if event {
                self.record_pod_event(node.to_owned());
            }
        }
        self.unbind(&key);
        let pod = Arc::new(pod);
        if is_provisionable(&pod) {
            self.provisionable.insert(key.clone(), Arc::clone(&pod));
        } else {
            self.provisionable.remove(&key);
        }
        if let Some(node) = pod.node_name() {
            self.pods_by_node
                .entry(node.to_owned())
                .or_default()
                .insert(key.clone(), Arc::clone(&pod));
        }
        self.pods.insert(key, pod);
    }

    fn unbind(&mut self, key: &Key) {
        let Some(node) = self
            .pods
            .get(key)
            .and_then(|p| p.node_name())
            .map(str::to_owned)
        else {
            return;
        };
        if let Some(keys) = self.pods_by_node.get_mut(&node) {
            keys.remove(key);
            if keys.is_empty() {
                self.pods_by_node.remove(&node);
            }
        }
    }

    /// Removes an object (absent objects are fine: deletes can repeat).
    pub fn delete(&mut self, object: &ObjectRef) {
        let key = || {
            (
                object.namespace.clone().unwrap_or_else(|| "default".into()),
                object.name.clone(),
            )
        };
        match object.kind {
            Kind::Node => {
                self.nodes.remove(&object.name);
                self.nominations.remove(&object.name);
                self.pod_events.remove(&object.name);
            }
            Kind::NodeClaim => {
                self.node_claims.remove(&object.name);
                self.marked_for_deletion.remove(&object.name);
                self.nominations.remove(&object.name);
            }
            Kind::Pod => {
                let key = key();
                if let Some(node) = self.pods.get(&key).and_then(|p| p.node_name()) {
                    let node = node.to_owned();
                    self.record_pod_event(node);
                }
                self.unbind(&key);
                self.provisionable.remove(&key);
                self.pods.remove(&key);
            }
            Kind::NodePool => {
                self.node_pools.remove(&object.name);
            }
            Kind::DaemonSet => {
                self.daemonsets.remove(&key());
            }
            Kind::PodDisruptionBudget => {
                self.pdbs.remove(&key());
            }
            Kind::PersistentVolumeClaim => {
                self.persistent_volume_claims.remove(&key());
            }
            Kind::PersistentVolume => {
                self.persistent_volumes.remove(&object.name);
            }
            Kind::StorageClass => {
                self.storage_classes.remove(&object.name);
            }
            Kind::Namespace => {
                self.namespaces.remove(&object.name);
            }
            Kind::VolumeAttachment => {
                self.volume_attachments.remove(&object.name);
            }
            Kind::EC2NodeClass => {
                self.node_classes.remove(&object.name);
            }
            Kind::NodeOverlay => {
                self.node_overlays.remove(&object.name);
            }
        }
    }

    /// Replaces every object of `kind` with `objects` (objects of other kinds are ignored).
    pub fn reset(&mut self, kind: Kind, objects: Vec<Object>) {
        self.reset_keeping(kind, objects, &BTreeSet::new());
    }

    /// [`reset`](Self::reset) with a relist's race in mind: a list is a snapshot taken some
    /// time before it is complete, and the controller's own writes applied meanwhile are newer
    /// than it. So an object of `written` (written by the controller since the relist began)
    /// that the list does not have is kept (it was created after the snapshot; a deletion
    /// after it arrives as a watch event), and a listed copy older than the stored one (by
    /// `resourceVersion`, compared as the etcd revision it is) does not replace it.
    pub fn reset_keeping(
        &mut self,
        kind: Kind,
        objects: Vec<Object>,
        written: &BTreeSet<ObjectRef>,
    ) {
        let listed: BTreeSet<ObjectRef> = objects
            .iter()
            .filter(|o| o.kind() == kind)
            .map(Object::reference)
            .collect();
        for stale in self
            .references(kind)
            .into_iter()
            .filter(|r| !listed.contains(r) && !written.contains(r))
        {
            self.delete(&stale);
        }
        for object in objects.into_iter().filter(|o| o.kind() == kind) {
            let stored = self.revision(&object.reference());
            let incoming = revision_of(object.metadata());
            if matches!((incoming, stored), (Some(incoming), Some(stored)) if incoming < stored) {
                continue;
            }
            self.apply_object(object, false);
        }
    }

    /// The stored copy's `resourceVersion` as a number (`None`: absent or not a number).
    fn revision(&self, reference: &ObjectRef) -> Option<u64> {
        let meta = match reference.kind {
            Kind::NodeClaim => &self.node_claim(&reference.name)?.metadata,
            Kind::Node => &self.node(&reference.name)?.metadata,
            Kind::NodePool => &self.node_pool(&reference.name)?.metadata,
            _ => return None,
        };
        revision_of(meta)
    }

    fn record_pod_event(&mut self, node: String) {
        self.pod_event_seq += 1;
        self.pod_events.insert(node, self.pod_event_seq);
    }

    /// The sequence number of the latest pod event on `node` (a pod bound to it, finished,
    /// terminating, or deleted while bound); compare two readings to learn whether one
    /// happened in between (the caller owns the clock).
    pub fn pod_event_seq(&self, node: &str) -> Option<u64> {
        self.pod_events.get(node).copied()
    }

    /// The latest pod event's sequence number on any node (0 before the first).
    pub fn pod_event_max(&self) -> u64 {
        self.pod_event_seq
    }

    fn references(&self, kind: Kind) -> Vec<ObjectRef> {
        let names = |names: Vec<&String>| -> Vec<ObjectRef> {
            names
                .into_iter()
                .map(|n| ObjectRef::new(kind, None, n))
                .collect()
        };
        let keys = |keys: Vec<&Key>| -> Vec<ObjectRef> {
            keys.into_iter()
                .map(|(ns, n)| ObjectRef::new(kind, Some(ns), n))
                .collect()
        };
        match kind {
            Kind::Node => names(self.nodes.keys().collect()),
            Kind::NodeClaim => names(self.node_claims.keys().collect()),
            Kind::Pod => keys(self.pods.keys().collect()),
            Kind::NodePool => names(self.node_pools.keys().collect()),
            Kind::DaemonSet => keys(self.daemonsets.keys().collect()),
            Kind::PodDisruptionBudget => keys(self.pdbs.keys().collect()),
            Kind::PersistentVolumeClaim => keys(self.persistent_volume_claims.keys().collect()),
            Kind::PersistentVolume => names(self.persistent_volumes.keys().collect()),
            Kind::StorageClass => names(self.storage_classes.keys().collect()),
            Kind::Namespace => names(self.namespaces.keys().collect()),
            Kind::VolumeAttachment => names(self.volume_attachments.keys().collect()),
            Kind::EC2NodeClass => names(self.node_classes.keys().collect()),
            Kind::NodeOverlay => names(self.node_overlays.keys().collect()),
        }
    }

    /// Nominates a node (or in-flight NodeClaim, by the name [`StateNode::name`] gives it) for
    /// pending pods until `until`: disruption leaves it alone meanwhile.
    pub fn nominate(&mut self, node: &str, until: DateTime<Utc>) {
        let entry = self.nominations.entry(node.to_owned()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// Replaces the provisioner's plan: pod UID (or `namespace/name`) -> the node or NodeClaim
    /// name the last batch placed it on.
    pub fn set_plans(&mut self, plans: HashMap<String, String>) {
        self.plans = plans;
    }

    /// Marks (or unmarks) a NodeClaim as chosen by a disruption command.
    pub fn mark_for_deletion(&mut self, node_claim: &str, marked: bool) {
        if marked {
            self.marked_for_deletion.insert(node_claim.to_owned());
        } else {
            self.marked_for_deletion.remove(node_claim);
        }
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn node_claim(&self, name: &str) -> Option<&NodeClaim> {
        self.node_claims.get(name)
    }

    pub fn node_claims(&self) -> impl Iterator<Item = &NodeClaim> {
        self.node_claims.values()
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// The pod `namespace/name`, if the index holds it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodRecord> {
        self.pods
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|p| &**p)
    }

    pub fn pods(&self) -> impl Iterator<Item = &PodRecord> {
        self.pods.values().map(|p| &**p)
    }

    /// The pods' shared records: a record is replaced, never changed, so a caller holding the
    /// last one it saw can tell an unchanged pod by pointer.
    pub fn pod_records(&self) -> impl Iterator<Item = &Arc<PodRecord>> {
        self.pods.values()
    }

    pub fn node_pools(&self) -> impl Iterator<Item = &NodePool> {
        self.node_pools.values()
    }

    pub fn node_pool(&self, name: &str) -> Option<&NodePool> {
        self.node_pools.get(name)
    }

    pub fn node_classes(&self) -> impl Iterator<Item = &EC2NodeClass> {
        self.node_classes.values()
    }

    pub fn node_class(&self, name: &str) -> Option<&EC2NodeClass> {
        self.node_classes.get(name)
    }

    /// NodeOverlays (`karpenter.sh/v1alpha1`, watched with the `NodeOverlay` gate), by name.
    pub fn node_overlays(&self) -> impl Iterator<Item = &NodeOverlay> {
        self.node_overlays.values()
    }

    pub fn daemonsets(&self) -> impl Iterator<Item = &DaemonSet> {
        self.daemonsets.values()
    }

    /// VolumeAttachments to `node`.
    pub fn volume_attachments_on(&self, node: &str) -> Vec<&VolumeAttachment> {
        self.volume_attachments
            .values()
            .filter(|va| va.spec.node_name == node)
            .collect()
    }

    /// The persistent volume claim `namespace/name`.
    pub fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&PersistentVolumeClaim> {
        self.persistent_volume_claims
            .get(&(namespace.to_owned(), name.to_owned()))
    }

    /// Pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<&Arc<PodRecord>> {
        self.pods_by_node
            .get(node)
            .map(|pods| pods.values().collect())
            .unwrap_or_default()
    }

    /// Every node: NodeClaims joined with their Node by provider id (or in flight), then the
    /// Nodes no NodeClaim claims; by name.
    pub fn state_nodes(&self) -> Vec<StateNode<'_>> {
        let mut out = self.bare_state_nodes();
        for node in &mut out {
            node.pods = self.pods_on(node.name());
        }
        out
    }

    /// [`Cluster::state_nodes`] without their pods (`pods` empty: for callers that read nodes
    /// only; collecting every node's pods is the costly part at 20,000 pods).
    pub fn bare_state_nodes(&self) -> Vec<StateNode<'_>> {
        let by_provider: HashMap<&str, &Node> = self
            .nodes
            .values()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
            .collect();
        let mut claimed: BTreeSet<&str> = BTreeSet::new();
        let mut out = Vec::with_capacity(self.nodes.len().max(self.node_claims.len()));
        for claim in self.node_claims.values() {
            let node = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|id| by_provider.get(id).copied());
            if let Some(name) = node.and_then(|n| n.metadata.name.as_deref()) {
                claimed.insert(name);
            }
            out.push(self.bare_state_node(node, Some(claim)));
        }
        for (name, node) in &self.nodes {
            if !claimed.contains(name.as_str()) {
                out.push(self.bare_state_node(Some(node), None));
            }
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }

    /// The nodes named in `names`, in that order (names the index does not know are skipped,
    /// a repeated name gives the node once). For callers whose decisions may break ties by
    /// input order and that keep their own order (the simulator's launch order).
    pub fn state_nodes_in<S: AsRef<str>>(&self, names: &[S]) -> Vec<StateNode<'_>> {
        let mut by_name: HashMap<&str, StateNode<'_>> = self
            .state_nodes()
            .into_iter()
            .map(|n| (n.name(), n))
            .collect();
        names
            .iter()
            .filter_map(|name| by_name.remove(name.as_ref()))
            .collect()
    }

    /// The node named `name` (as [`StateNode::name`] names it), if any.
    pub fn state_node_named(&self, name: &str) -> Option<StateNode<'_>> {
        let mut node = self
            .bare_state_nodes()
            .into_iter()
            .find(|n| n.name() == name)?;
        node.pods = self.pods_on(name);
        Some(node)
    }

    /// A node without its pods (the caller adds them when it needs them).
    fn bare_state_node<'a>(
        &'a self,
        node: Option<&'a Node>,
        claim: Option<&'a NodeClaim>,
    ) -> StateNode<'a> {
        let mut state = StateNode {
            node,
            node_claim: claim,
            pods: Vec::new(),
            nominated_until: None,
            marked_for_deletion: claim
                .and_then(|c| c.metadata.name.as_deref())
                .is_some_and(|n| self.marked_for_deletion.contains(n)),
        };
        let name = state.name();
        state.nominated_until = self.nominations.get(name).copied().or_else(|| {
            claim
                .and_then(|c| c.metadata.name.as_deref())
                .and_then(|n| self.nominations.get(n).copied())
        });
        state
    }

    /// Pods waiting for capacity (upstream `IsProvisionable`), in name order.
    pub fn provisionable_pods(&self) -> Vec<&Arc<PodRecord>> {
        self.provisionable.values().collect()
    }

    /// What a NodePool's NodeClaims use (capacity of in-flight claims included), for
    /// `status.resources` and its `limits`.
    pub fn node_pool_usage(&self, pool: &str) -> NodePoolUsage {
        let mut usage = NodePoolUsage::default();
        for node in self.bare_state_nodes() {
            let in_pool = node
                .node_claim
                .and_then(|c| c.metadata.labels.as_ref())
                .and_then(|l| l.get(labels::NODEPOOL))
                .is_some_and(|p| p == pool);
            if !in_pool {
                continue;
            }
            usage.nodes += 1;
            usage.resources.add(&node.capacity());
        }
        usage
    }

    /// The solver's input for `pods`: the cluster's nodes, DaemonSets, volumes and namespaces
    /// around the NodePools and instance types the caller resolved.
    pub fn solve_input(
        &self,
        pods: Vec<Arc<PodRecord>>,
        node_pools: Vec<karpenter_scheduling::NodePool>,
        instance_types: karpenter_scheduling::PoolInstanceTypes,
        options: SolveOptions,
    ) -> SolveInput {
        let state_nodes = self.state_nodes();
        // Plans name a node, or the NodeClaim created for the pods (whose state node is named
        // after its Node once it has one): both resolve to the state node's name.
        let mut planned = BTreeMap::new();
        if !self.plans.is_empty() {
            let mut names: HashMap<&str, &str> = HashMap::new();
            for node in &state_nodes {
                names.insert(node.name(), node.name());
                if let Some(claim) = node.node_claim.and_then(|c| c.metadata.name.as_deref()) {
                    names.insert(claim, node.name());
                }
            }
            for pod in &pods {
                let uid = pod.uid_or_key();
                if let Some(node) = self.plans.get(&uid).and_then(|n| names.get(n.as_str())) {
                    planned.insert(uid, (*node).to_owned());
                }
            }
        }
        let existing_nodes = state_nodes.iter().map(StateNode::to_existing).collect();
        SolveInput {
            node_pools,
            instance_types,
            default_instance_types: Vec::new(),
            existing_nodes,
            daemonsets: self.daemonsets.values().cloned().collect(),
            pods,
            persistent_volume_claims: self.persistent_volume_claims.values().cloned().collect(),
            persistent_volumes: self.persistent_volumes.values().cloned().collect(),
            storage_classes: self.storage_classes.values().cloned().collect(),
            namespaces: self.namespaces.values().cloned().collect(),
            relocating: Default::default(),
            planned,
            options,
        }
    }

    /// Replaces the virtual pods of every CapacityBuffer (by `namespace/name`).
    pub fn set_buffer_pods(&mut self, pods: BTreeMap<String, Vec<Arc<PodRecord>>>) {
        self.buffer_pods = pods;
    }

    /// The virtual pods of every CapacityBuffer ready for provisioning.
    pub fn buffer_pods(&self) -> impl Iterator<Item = &Arc<PodRecord>> {
        self.buffer_pods.values().flatten()
    }

    /// Records where a provisioning batch placed the virtual pods: per buffer, and the nodes
    /// that hold them.
    pub fn set_buffer_placements(
        &mut self,
        placements: BTreeMap<String, karpenter_scheduling::capacity_buffer::BufferPlacement>,
        nodes: BTreeSet<String>,
    ) {
        self.buffer_placements = placements;
        self.buffer_nodes = nodes;
    }

    /// Records a NodeClaim launched for virtual pods as holding buffer headroom.
    pub fn add_buffer_node(&mut self, node_claim: &str) {
        self.buffer_nodes.insert(node_claim.to_owned());
    }

    /// Where the last batch placed buffer `key`'s virtual pods, if it saw any.
    pub fn buffer_placement(
        &self,
        key: &str,
    ) -> Option<karpenter_scheduling::capacity_buffer::BufferPlacement> {
        self.buffer_placements.get(key).copied()
    }

    /// Nodes the last batch placed virtual pods on.
    pub fn buffer_nodes(&self) -> &BTreeSet<String> {
        &self.buffer_nodes
    }

    /// The disruption snapshot at `now`. `queued` names the nodes the orchestration queue
    /// holds. CapacityBuffers' virtual pods are pending pods of the simulation (as upstream's
    /// `GetPendingPods`), and the nodes holding them are the snapshot's `buffer_nodes`.
    pub fn disruption_snapshot(
        &self,
        now: DateTime<Utc>,
        instance_types: karpenter_scheduling::PoolInstanceTypes,
        queued: &BTreeSet<&str>,
        features: Features,
        solve_options: SolveOptions,
    ) -> Snapshot {
        // A nomination keeps disruption off a node until the pods a batch placed there have
        // arrived. With no pod waiting for capacity none is on its way, and the nomination
        // ends early (not upstream, whose nomination lasts its 20 s: a scale-down right after
        // a scale-out waited it out before any consolidation).
        let awaited = !self.provisionable.is_empty();
        let nodes = self
            .state_nodes()
            .iter()
            .map(|n| {
                let mut state = n.to_node_state(now);
                state.queued = queued.contains(state.name.as_str());
                if !awaited {
                    state.nominated_until = None;
                }
                state
            })
            .collect();
        Snapshot {
            node_pools: self.node_pools.values().cloned().collect(),
            instance_types,
            nodes,
            pdbs: self.pdbs.values().filter_map(Pdb::from_k8s).collect(),
            pending_pods: self
                .provisionable_pods()
                .into_iter()
                .chain(self.buffer_pods())
                .cloned()
                .collect(),
            daemonsets: self.daemonsets.values().cloned().collect(),
            features,
            solve_options,
            repair: None,
            buffer_nodes: self.buffer_nodes.clone(),
        }
    }
}

/// A `resourceVersion` as the etcd revision it is (`None`: absent or not a number).
pub fn revision_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}
