//! What disruption reads of a pod beyond [`PodRecord`]'s own predicates (key, active,
//! terminal, DaemonSet or mirror pod, reschedulable, ready): its cost inputs and start time.

use chrono::{DateTime, Utc};
use karpenter_scheduling::PodRecord;

use crate::cost::PodCostInput;

/// `controller.kubernetes.io/pod-deletion-cost`.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

pub fn started(pod: &PodRecord) -> Option<DateTime<Utc>> {
    let ts = pod.status.as_ref()?.start_time.as_ref()?;
    DateTime::from_timestamp(ts.0.as_second(), 0)
}

pub fn cost_input(pod: &PodRecord) -> PodCostInput {
    PodCostInput {
        deletion_cost: pod
            .annotation(POD_DELETION_COST)
            .and_then(|v| v.trim().parse().ok()),
        priority: pod.spec.as_ref().and_then(|s| s.priority),
    }
}
