//! What disruption reads of a pod beyond [`PodRecord`]'s own predicates (key, active,
//! terminal, DaemonSet or mirror pod, reschedulable, ready): its cost inputs and start time.

use chrono::{DateTime, Utc};
use karpenter_scheduling::PodRecord;

use crate::cost::PodCostInput;
use crate::snapshot::Features;

/// `controller.kubernetes.io/pod-deletion-cost`.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// `karpenter.sh/disruption-cost` (upstream v1.15): the user-facing way to steer which pods
/// consolidation prefers to evict, read before `pod-deletion-cost`.
pub const DISRUPTION_COST: &str = "karpenter.sh/disruption-cost";

pub fn started(pod: &PodRecord) -> Option<DateTime<Utc>> {
    let ts = pod.status.as_ref()?.start_time.as_ref()?;
    DateTime::from_timestamp(ts.0.as_second(), 0)
}

/// A pod's eviction-cost inputs (upstream `EvictionCost`): `karpenter.sh/disruption-cost` when
/// present, else, unless `PodDeletionCostManagement` is on (Karpenter then writes
/// `controller.kubernetes.io/pod-deletion-cost` itself, for the ReplicaSet controller, and no
/// longer reads it as the user's word), `controller.kubernetes.io/pod-deletion-cost`; a value
/// that is not a 32-bit integer counts as none (upstream logs it and skips it).
pub fn cost_input(pod: &PodRecord, features: Features) -> PodCostInput {
    let deletion_cost = match pod.annotation(DISRUPTION_COST) {
        Some(value) => value.parse().ok(),
        None if features.pod_deletion_cost_management => None,
        None => pod
            .annotation(POD_DELETION_COST)
            .and_then(|v| v.parse().ok()),
    };
    PodCostInput {
        deletion_cost,
        priority: pod.spec.as_ref().and_then(|s| s.priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::builders::PodBuilder;

    fn annotated(pairs: &[(&str, &str)]) -> PodRecord {
        let mut pod: PodRecord = PodBuilder::new("p").build().into();
        pod.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        pod
    }

    const GATE_OFF: Features = Features {
        spot_to_spot_consolidation: false,
        pod_deletion_cost_management: false,
        terminate_first_drift: false,
        terminate_first_repair: false,
    };
    const GATE_ON: Features = Features {
        spot_to_spot_consolidation: false,
        pod_deletion_cost_management: true,
        terminate_first_drift: false,
        terminate_first_repair: false,
    };

    #[test]
    fn disruption_cost_is_read_before_pod_deletion_cost() {
        let both = annotated(&[(DISRUPTION_COST, "-5"), (POD_DELETION_COST, "100")]);
        assert_eq!(cost_input(&both, GATE_OFF).deletion_cost, Some(-5));
        let legacy = annotated(&[(POD_DELETION_COST, "100")]);
        assert_eq!(cost_input(&legacy, GATE_OFF).deletion_cost, Some(100));
        let bad = annotated(&[(DISRUPTION_COST, "lots"), (POD_DELETION_COST, "100")]);
        assert_eq!(
            cost_input(&bad, GATE_OFF).deletion_cost,
            None,
            "an unparsable disruption-cost is skipped, not replaced by the legacy one"
        );
        assert_eq!(cost_input(&annotated(&[]), GATE_OFF).deletion_cost, None);
    }

    #[test]
    fn pod_deletion_cost_is_not_read_as_a_disruption_cost_once_karpenter_manages_it() {
        let legacy = annotated(&[(POD_DELETION_COST, "100")]);
        assert_eq!(cost_input(&legacy, GATE_ON).deletion_cost, None);
        let both = annotated(&[(DISRUPTION_COST, "-5"), (POD_DELETION_COST, "100")]);
        assert_eq!(
            cost_input(&both, GATE_ON).deletion_cost,
            Some(-5),
            "karpenter.sh/disruption-cost is still the user's word"
        );
    }
}
