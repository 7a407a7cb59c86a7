//! The EC2 provider's repair policies, as upstream's AWS provider v1.15.1 has them: the
//! kubelet's `Ready` False/Unknown and the EKS Node Monitoring Agent's conditions
//! (`AcceleratedHardwareReady` split by GPU XID family, `StorageReady`, `NetworkingReady`,
//! `KernelReady`, `ContainerRuntimeReady`). The unrecognised-GPU-fault policy is the set's one
//! default fallback.
//!
//! The reboot-clearable XIDs are rebooted in place only with the `RebootForRepair` AWS feature
//! gate (`ec2:RebootInstances`); without it (the default) they are replaced on the same timing,
//! as upstream.

use std::time::Duration;

use karpenter_cloud::{ConditionStatus, RepairAction, RepairPolicy};

const fn minutes(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

/// Reboot-clearable (transient) GPU XIDs: upstream reboots them with `RebootForRepair`.
pub const REBOOT_CLEARABLE_XIDS: &str =
    ".*XID(46|48|54|62|63|95|109|110|136|140|143|155|156|158).*";
/// Fatal GPU XIDs: replaced fast.
pub const FATAL_XIDS: &str = ".*XID(64|74|79|119|120).*";

/// Upstream v1.15.1's policies; `reboot_for_repair` is the `RebootForRepair` gate.
pub fn policies(reboot_for_repair: bool) -> Vec<RepairPolicy> {
    let false_ = ConditionStatus::False;
    let mut policies = vec![
        RepairPolicy::replace("Ready", false_, ".*", minutes(30)).with_grace(minutes(10)),
        RepairPolicy::replace("Ready", ConditionStatus::Unknown, ".*", minutes(30))
            .with_grace(minutes(10)),
        RepairPolicy {
            action: if reboot_for_repair {
                RepairAction::RebootNode
            } else {
                RepairAction::ReplaceNode
            },
            ..RepairPolicy::replace(
                "AcceleratedHardwareReady",
                false_,
                REBOOT_CLEARABLE_XIDS,
                minutes(10),
            )
            .with_grace(minutes(5))
        },
        RepairPolicy::replace("AcceleratedHardwareReady", false_, FATAL_XIDS, minutes(10))
            .with_grace(minutes(5)),
        RepairPolicy::replace("AcceleratedHardwareReady", false_, "", minutes(30))
            .with_grace(minutes(10)),
    ];
    for condition in [
        "StorageReady",
        "NetworkingReady",
        "KernelReady",
        "ContainerRuntimeReady",
    ] {
        policies.push(
            RepairPolicy::replace(condition, false_, ".*", minutes(30)).with_grace(minutes(10)),
        );
    }
    policies
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use karpenter_cloud::RepairMatcher;
    use karpenter_cloud::repair::{ObservedCondition, resolve};

    #[test]
    fn reboot_for_repair_reboots_the_reboot_clearable_gpu_faults_only() {
        let actions = |gate: bool| -> Vec<(String, RepairAction)> {
            policies(gate)
                .into_iter()
                .filter(|p| p.action == RepairAction::RebootNode)
                .map(|p| (p.reason_regex, p.action))
                .collect()
        };
        assert_eq!(actions(false), []);
        assert_eq!(
            actions(true),
            [(REBOOT_CLEARABLE_XIDS.to_owned(), RepairAction::RebootNode)]
        );
        assert!(RepairMatcher::new(&policies(true)).is_ok());
    }

    #[test]
    fn the_ec2_policies_are_a_valid_set_with_the_gpu_fallback() {
        let policies = policies(false);
        assert!(RepairMatcher::new(&policies).is_ok());
        assert_eq!(policies.len(), 9);
        let fallbacks: Vec<&str> = policies
            .iter()
            .filter(|p| p.reason_regex.is_empty())
            .map(|p| p.condition_type.as_str())
            .collect();
        assert_eq!(fallbacks, ["AcceleratedHardwareReady"]);
    }

    #[test]
    fn a_fatal_gpu_fault_is_repaired_after_ten_minutes_and_an_unknown_one_after_thirty() {
        let Ok(matcher) = RepairMatcher::new(&policies(false)) else {
            panic!("valid");
        };
        let created = chrono::Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or_default();
        let gpu = |reason: &str| {
            matcher.matches(
                &[ObservedCondition {
                    type_: "AcceleratedHardwareReady".into(),
                    status: "False".into(),
                    reason: reason.into(),
                    last_transition: Some(created),
                }],
                created,
            )
        };
        let ten = created + chrono::Duration::minutes(10);
        assert!(resolve(&gpu("NvidiaXID79Error"), ten, None).is_some());
        assert!(resolve(&gpu("NvidiaXID999Error"), ten, None).is_none());
        let thirty = created + chrono::Duration::minutes(30);
        assert!(resolve(&gpu("NvidiaXID999Error"), thirty, None).is_some());
    }
}
