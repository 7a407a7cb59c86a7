//! The simulated cloud's repair policies, as upstream's KWOK provider has them: the kubelet's
//! `Ready` False (the set's default fallback) and Unknown after 10 minutes, replaced without a
//! drain; and the simulated faults tests inject, `KWOKUnhealthy=True` (replace after 30 s,
//! drain bounded to 45 s) and `KWOKRebootRequired=True` (reboot after 30 s, drain bounded to
//! 1 min; node repair reboots it in place, [`crate::Kwok`]'s reboot changes its `bootID`).
//!
//! `KWOK_REPAIR_TOLERATION` (a Go duration) replaces every policy's toleration, so a test of
//! `Ready=False` need not wait 10 minutes.

use std::time::Duration;

use karpenter_cloud::{ConditionStatus, RepairAction, RepairPolicy};

/// The condition a test sets to make a KWOK node unhealthy (upstream `KWOKUnhealthyCondition`).
pub const KWOK_UNHEALTHY: &str = "KWOKUnhealthy";
/// The condition a test sets to ask for a reboot (upstream `KWOKRebootRequiredCondition`).
pub const KWOK_REBOOT_REQUIRED: &str = "KWOKRebootRequired";

/// The policies, each toleration replaced by `toleration` when set.
pub fn policies(toleration: Option<Duration>) -> Vec<RepairPolicy> {
    let kubelet = Duration::from_secs(10 * 60);
    let simulated = Duration::from_secs(30);
    let mut policies = vec![
        RepairPolicy::replace("Ready", ConditionStatus::False, "", kubelet)
            .with_grace(Duration::ZERO),
        RepairPolicy::replace("Ready", ConditionStatus::Unknown, ".*", kubelet)
            .with_grace(Duration::ZERO),
        RepairPolicy::replace(KWOK_UNHEALTHY, ConditionStatus::True, ".*", simulated)
            .with_grace(Duration::from_secs(45)),
        RepairPolicy {
            action: RepairAction::RebootNode,
            ..RepairPolicy::replace(KWOK_REBOOT_REQUIRED, ConditionStatus::True, ".*", simulated)
                .with_grace(Duration::from_secs(60))
        },
    ];
    if let Some(toleration) = toleration {
        for policy in &mut policies {
            policy.toleration = toleration;
        }
    }
    policies
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloud::RepairMatcher;

    #[test]
    fn the_kwok_policies_are_a_valid_set_with_ready_false_as_the_fallback() {
        let policies = policies(None);
        assert!(RepairMatcher::new(&policies).is_ok());
        let fallbacks: Vec<&str> = policies
            .iter()
            .filter(|p| p.reason_regex.is_empty())
            .map(|p| p.condition_type.as_str())
            .collect();
        assert_eq!(fallbacks, ["Ready"]);
        assert_eq!(policies[0].toleration, Duration::from_secs(600));
    }

    #[test]
    fn a_repair_toleration_replaces_every_policys_toleration() {
        let short = Duration::from_secs(5);
        assert!(policies(Some(short)).iter().all(|p| p.toleration == short));
    }
}
