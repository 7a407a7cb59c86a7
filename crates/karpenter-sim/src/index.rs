//! The manifests as the controller's cluster-state index holds them, for `karpenter explain
//! -f`: every object applied to a [`karpenter_state::Cluster`] as the controller's watches apply
//! them (NodePools, EC2NodeClasses, NodeOverlays, NodeClaims, Nodes, pods, DaemonSets,
//! PodDisruptionBudgets, volumes, StorageClasses, Namespaces), so the provisioning solve and the
//! disruption pass read the same index shapes they read in the controller.
//!
//! Workloads (Deployments, ...) are expanded into pods as `simulate` expands them; an export of a
//! cluster (`kubectl get pods,nodes,nodeclaims,nodepools,pdb -o yaml`) has its pods and no need
//! of that. Two things a hand-written manifest lacks and the controller would find written by
//! other controllers are filled in, each with a note:
//!
//! - a pod without `spec.nodeName` and without a `PodScheduled` condition is taken as the
//!   kube-scheduler leaves a pod it cannot place (`PodScheduled=False`, `Unschedulable`);
//! - a NodePool without status conditions is taken as `Ready` (its class resolved).
//!
//! Objects that carry a status (an export's) are applied as they are.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use karpenter_api::v1::NodePool;
use karpenter_state::{Cluster, Object};

use crate::load::Manifests;
use crate::workload::expand_all;

/// Applies `object` as the controller's watches do: reduced to what its index keeps
/// ([`karpenter_state::slim`]) first.
fn apply(cluster: &mut Cluster, mut object: Object) {
    karpenter_state::slim::slim(&mut object);
    cluster.apply(object);
}

/// The index of `manifests` at `now` (the time written into the conditions it fills in), and
/// what it assumed.
pub fn cluster(manifests: &Manifests, now: DateTime<Utc>) -> (Cluster, Vec<String>) {
    let mut cluster = Cluster::new();
    let mut notes = Vec::new();
    let mut ready_assumed = Vec::new();
    for pool in &manifests.node_pools {
        let mut pool = pool.clone();
        if assume_ready(&mut pool, now) {
            ready_assumed.push(pool.metadata.name.clone().unwrap_or_default());
        }
        apply(&mut cluster, Object::NodePool(pool));
    }
    if !ready_assumed.is_empty() {
        notes.push(format!(
            "NodePool(s) without status conditions taken as Ready: {}",
            ready_assumed.join(", ")
        ));
    }
    for class in &manifests.node_classes {
        apply(&mut cluster, Object::EC2NodeClass(class.clone()));
    }
    for overlay in &manifests.node_overlays {
        apply(&mut cluster, Object::NodeOverlay(overlay.clone()));
    }
    for claim in &manifests.node_claims {
        apply(&mut cluster, Object::NodeClaim(claim.clone()));
    }
    for node in &manifests.nodes {
        apply(&mut cluster, Object::Node(node.clone()));
    }
    for namespace in &manifests.namespaces {
        apply(&mut cluster, Object::Namespace(namespace.clone()));
    }
    for class in &manifests.storage_classes {
        apply(&mut cluster, Object::StorageClass(class.clone()));
    }
    for volume in &manifests.persistent_volumes {
        apply(&mut cluster, Object::PersistentVolume(volume.clone()));
    }
    let expanded = expand_all(&manifests.workloads);
    for claim in manifests
        .persistent_volume_claims
        .iter()
        .chain(&expanded.persistent_volume_claims)
    {
        apply(&mut cluster, Object::PersistentVolumeClaim(claim.clone()));
    }
    for daemonset in &manifests.daemonsets {
        apply(&mut cluster, Object::DaemonSet(daemonset.clone()));
    }
    for pdb in &manifests.pod_disruption_budgets {
        apply(&mut cluster, Object::PodDisruptionBudget(pdb.clone()));
    }
    for pod in expanded.bound.into_values().flatten() {
        apply(&mut cluster, Object::Pod(pod));
    }
    let mut marked = 0;
    for mut pod in expanded.pending {
        marked += usize::from(mark_unschedulable(&mut pod, now));
        apply(&mut cluster, Object::Pod(pod));
    }
    if marked > 0 {
        notes.push(format!(
            "{marked} pod(s) without spec.nodeName or a PodScheduled condition taken as the kube-scheduler leaves them: PodScheduled=False (Unschedulable)"
        ));
    }
    (cluster, notes)
}

/// Gives a NodePool without status conditions `Ready=True`; whether it did.
fn assume_ready(pool: &mut NodePool, now: DateTime<Utc>) -> bool {
    let status = pool.status.get_or_insert_with(Default::default);
    if status.conditions.as_ref().is_some_and(|c| !c.is_empty()) {
        return false;
    }
    let Some(time) = karpenter_state::conditions::api_time(now) else {
        return false;
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for type_ in ["ValidationSucceeded", "NodeClassReady", "Ready"] {
        karpenter_api::conditions::set(
            conditions,
            pool.metadata.generation,
            type_,
            "True",
            type_,
            "",
            time.clone(),
        );
    }
    true
}

/// Gives an unbound pod without a `PodScheduled` condition the kube-scheduler's
/// `PodScheduled=False` (`Unschedulable`); whether it did.
fn mark_unschedulable(pod: &mut Pod, now: DateTime<Utc>) -> bool {
    let status = pod.status.get_or_insert_with(PodStatus::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if conditions.iter().any(|c| c.type_ == "PodScheduled") {
        return false;
    }
    conditions.push(PodCondition {
        type_: "PodScheduled".to_owned(),
        status: "False".to_owned(),
        reason: Some("Unschedulable".to_owned()),
        message: Some("0/0 nodes are available".to_owned()),
        last_transition_time: karpenter_state::conditions::api_time(now),
        ..PodCondition::default()
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
"#;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    #[test]
    fn a_hand_written_pending_pod_is_provisionable_and_its_pool_ready_with_notes() {
        let manifests = Manifests::load_text("m.yaml", MANIFESTS).expect("valid manifests");
        let (cluster, notes) = cluster(&manifests, now());
        let pending: Vec<String> = cluster
            .provisionable_pods()
            .iter()
            .map(|p| p.key())
            .collect();
        assert_eq!(pending, ["shop/web"]);
        let pool = cluster.node_pools().next().expect("the pool is indexed");
        assert_eq!(
            karpenter_lifecycle::nodepool_status::not_ready_reason(pool),
            None
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
    }
}
