//! What disruption needs to know about a pod: is it active, terminal, terminating, a DaemonSet
//! or mirror pod, reschedulable, ready; its cost inputs and start time.

use chrono::{DateTime, Utc};
use karpenter_scheduling::PodRecord;

use crate::cost::PodCostInput;

/// `controller.kubernetes.io/pod-deletion-cost`.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// The kubelet marks static (mirror) pods with this annotation.
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// `namespace/name`.
pub fn key(pod: &PodRecord) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn phase(pod: &PodRecord) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &PodRecord) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Has a deletion timestamp.
pub fn is_terminating(pod: &PodRecord) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Neither terminal nor terminating.
pub fn is_active(pod: &PodRecord) -> bool {
    !is_terminal(pod) && !is_terminating(pod)
}

fn owner_kind(pod: &PodRecord) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller.unwrap_or(true)))
        .map(|r| r.kind.as_str())
}

pub fn is_daemonset(pod: &PodRecord) -> bool {
    owner_kind(pod) == Some("DaemonSet")
}

pub fn is_mirror(pod: &PodRecord) -> bool {
    owner_kind(pod) == Some("Node")
        || pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_POD))
}

/// Pods that need a new home when the node goes: active (or terminating StatefulSet) pods
/// that are neither DaemonSet nor mirror pods.
pub fn is_reschedulable(pod: &PodRecord) -> bool {
    let alive = is_active(pod) || (is_terminating(pod) && owner_kind(pod) == Some("StatefulSet"));
    alive && !is_terminal(pod) && !is_daemonset(pod) && !is_mirror(pod)
}

/// Pod condition `Ready=True`.
pub fn is_ready(pod: &PodRecord) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True")
}

pub fn annotation<'a>(pod: &'a PodRecord, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

pub fn started(pod: &PodRecord) -> Option<DateTime<Utc>> {
    let ts = pod.status.as_ref()?.start_time.as_ref()?;
    DateTime::from_timestamp(ts.0.as_second(), 0)
}

pub fn cost_input(pod: &PodRecord) -> PodCostInput {
    PodCostInput {
        deletion_cost: annotation(pod, POD_DELETION_COST).and_then(|v| v.trim().parse().ok()),
        priority: pod.spec.as_ref().and_then(|s| s.priority),
    }
}
