//! Which pods wait for capacity (upstream `IsProvisionable`): pending with the scheduler's
//! `PodScheduled=False` reason `Unschedulable`, not bound, not nominated to a node, neither a
//! DaemonSet nor a mirror pod, not terminal or terminating.

use karpenter_scheduling::PodRecord;

/// True when the kube-scheduler tried and could not place the pod.
pub fn is_unschedulable(pod: &PodRecord) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
}

/// Not bound to a node and not nominated to one.
pub fn is_unbound(pod: &PodRecord) -> bool {
    let bound = pod.node_name().is_some();
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    !bound && !nominated
}

/// Upstream `IsProvisionable`.
pub fn is_provisionable(pod: &PodRecord) -> bool {
    is_unbound(pod)
        && is_unschedulable(pod)
        && pod.is_active()
        && !pod.is_daemonset()
        && !pod.is_mirror()
}
