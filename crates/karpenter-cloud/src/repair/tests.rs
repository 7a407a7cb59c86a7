use super::*;
use chrono::TimeZone;

fn at(minute: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
        + chrono::Duration::minutes(minute)
}

fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

fn condition(type_: &str, status: &str, reason: &str, since: i64) -> ObservedCondition {
    ObservedCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        last_transition: Some(at(since)),
    }
}

/// Ready=False is the fallback (10 min); Ready=Unknown and a GPU fault reason have their own.
fn policies() -> Vec<RepairPolicy> {
    vec![
        RepairPolicy::replace("Ready", ConditionStatus::False, "", mins(10)).with_grace(mins(0)),
        RepairPolicy::replace("Ready", ConditionStatus::Unknown, ".*", mins(10)),
        RepairPolicy {
            priority: 50,
            ..RepairPolicy::replace(
                "AcceleratedHardwareReady",
                ConditionStatus::False,
                ".*XID(79).*",
                mins(2),
            )
            .with_grace(mins(5))
        },
        RepairPolicy {
            action: RepairAction::RebootNode,
            ..RepairPolicy::replace(
                "AcceleratedHardwareReady",
                ConditionStatus::False,
                ".*XID(46).*",
                mins(1),
            )
        },
    ]
}

fn matcher() -> RepairMatcher {
    match RepairMatcher::new(&policies()) {
        Ok(m) => m,
        Err(e) => panic!("the test set is valid: {e}"),
    }
}

#[test]
fn a_condition_becomes_eligible_once_its_toleration_has_passed_since_its_transition() {
    let m = matcher();
    let matches = m.matches(&[condition("Ready", "False", "KubeletNotReady", 5)], at(0));
    assert_eq!(matches.len(), 1);
    assert_eq!(matches[0].eligible_at, at(15));
    assert!(resolve(&matches, at(14), None).is_none(), "still tolerated");
    let result = resolve(&matches, at(15), None);
    assert_eq!(
        result.as_ref().map(|r| r.action),
        Some(RepairAction::ReplaceNode)
    );
    assert_eq!(result.map(|r| r.condition).as_deref(), Some("Ready"));
}

#[test]
fn a_transition_before_the_nodes_creation_counts_from_the_creation() {
    let m = matcher();
    let matches = m.matches(&[condition("Ready", "False", "", -60)], at(0));
    assert_eq!(matches[0].eligible_at, at(10));
    let mut missing = condition("Ready", "False", "", 0);
    missing.last_transition = None;
    assert_eq!(m.matches(&[missing], at(3))[0].eligible_at, at(13));
}

#[test]
fn a_reason_no_specific_policy_matches_falls_back_to_the_one_default_policy() {
    let m = matcher();
    let gpu = m.matches(
        &[condition(
            "AcceleratedHardwareReady",
            "False",
            "NvidiaXID79Error",
            0,
        )],
        at(0),
    );
    assert_eq!(gpu.len(), 1);
    assert!(!gpu[0].fallback);
    assert_eq!(gpu[0].eligible_at, at(2));
    let unknown_fault = m.matches(
        &[condition(
            "AcceleratedHardwareReady",
            "False",
            "SomethingElse",
            0,
        )],
        at(0),
    );
    assert_eq!(unknown_fault.len(), 1);
    assert!(unknown_fault[0].fallback, "{unknown_fault:?}");
    assert_eq!(
        unknown_fault[0].eligible_at,
        at(10),
        "the fallback's toleration"
    );
    assert_eq!(
        unknown_fault[0].policy.termination_grace_period,
        Some(mins(0))
    );
}

#[test]
fn a_condition_pair_no_policy_names_is_healthy() {
    let m = matcher();
    let healthy = [
        condition("Ready", "True", "KubeletReady", 0),
        condition("MemoryPressure", "False", "", 0),
        condition("AcceleratedHardwareReady", "True", "", 0),
    ];
    assert!(m.matches(&healthy, at(0)).is_empty());
    assert!(!healthy.iter().any(|c| m.covers(c)));
    assert!(m.covers(&condition("Ready", "Unknown", "NodeStatusUnknown", 0)));
}

#[test]
fn a_policy_set_needs_exactly_one_fallback_that_replaces() {
    let none = vec![RepairPolicy::replace(
        "Ready",
        ConditionStatus::False,
        ".*",
        mins(1),
    )];
    let err = RepairMatcher::new(&none).err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("must define one default fallback")),
        "{err:?}"
    );
    let two = vec![
        RepairPolicy::replace("Ready", ConditionStatus::False, "", mins(1)),
        RepairPolicy::replace("Ready", ConditionStatus::Unknown, "", mins(1)),
    ];
    let err = RepairMatcher::new(&two).err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("more than one default fallback")),
        "{err:?}"
    );
    let rebooting = vec![RepairPolicy {
        action: RepairAction::RebootNode,
        ..RepairPolicy::replace("Ready", ConditionStatus::False, "", mins(1))
    }];
    let err = RepairMatcher::new(&rebooting).err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("must use action ReplaceNode")),
        "{err:?}"
    );
}

#[test]
fn every_invalid_policy_of_a_set_is_reported() {
    let bad = vec![
        RepairPolicy::replace("Ready", ConditionStatus::False, "", mins(1)),
        RepairPolicy::replace("", ConditionStatus::False, ".*", mins(1)),
        RepairPolicy::replace("Kernel", ConditionStatus::False, "(", mins(1)),
        RepairPolicy {
            priority: 101,
            ..RepairPolicy::replace("Disk", ConditionStatus::False, ".*", mins(1))
        },
    ];
    let Err(InvalidRepairPolicies(errors)) = RepairMatcher::new(&bad) else {
        panic!("the set is invalid");
    };
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("empty condition type"));
    assert!(errors[1].contains("invalid reason regex"));
    assert!(errors[2].contains("priority 101"));
}

#[test]
fn the_more_disruptive_action_wins_then_the_higher_priority_and_the_shortest_bound_is_kept() {
    let m = matcher();
    let conditions = [
        condition("AcceleratedHardwareReady", "False", "XID46 XID79", 0),
        condition("Ready", "False", "", 0),
    ];
    let matches = m.matches(&conditions, at(0));
    assert_eq!(matches.len(), 3, "both GPU policies and the Ready fallback");
    // At minute 1 only the reboot is eligible.
    let early = resolve(&matches, at(1), None);
    assert_eq!(
        early.as_ref().map(|r| r.action),
        Some(RepairAction::RebootNode)
    );
    // At minute 2 the XID79 replacement (priority 50) outranks the reboot.
    let later = resolve(&matches, at(2), None);
    assert_eq!(
        later.as_ref().map(|r| r.action),
        Some(RepairAction::ReplaceNode)
    );
    assert_eq!(
        later.as_ref().map(|r| r.condition.as_str()),
        Some("AcceleratedHardwareReady")
    );
    assert_eq!(
        later
            .as_ref()
            .and_then(|r| r.termination_grace_period.clone()),
        Some((mins(5), "AcceleratedHardwareReady".to_owned()))
    );
    // At minute 10 Ready's forceful bound (0) is the shortest; XID79 keeps the action (priority).
    let all = resolve(&matches, at(10), None);
    assert_eq!(
        all.as_ref().map(|r| r.condition.as_str()),
        Some("AcceleratedHardwareReady")
    );
    assert_eq!(
        all.and_then(|r| r.termination_grace_period),
        Some((mins(0), "Ready".to_owned()))
    );
}

#[test]
fn the_score_is_the_dense_rank_plus_one_per_half_hour_past_eligibility() {
    let m = matcher();
    let gpu = m.matches(
        &[condition("AcceleratedHardwareReady", "False", "XID79", 0)],
        at(0),
    );
    let ready = m.matches(&[condition("Ready", "False", "", 0)], at(0));
    let now = at(10);
    let gpu_score = resolve(&gpu, now, None).map(|r| r.score_at(now));
    let ready_score = resolve(&ready, now, None).map(|r| r.score_at(now));
    // Priorities {0, 50} rank {0, 1}: XID79 is rank 1, eligible 8 minutes ago.
    assert_eq!(gpu_score, Some(1.0 + 8.0 / 30.0));
    assert_eq!(ready_score, Some(0.0));
    let much_later = at(10 + 30);
    assert_eq!(
        resolve(&ready, much_later, None).map(|r| r.score_at(much_later)),
        Some(1.0)
    );
}

#[test]
fn a_toleration_counts_from_not_before_at_the_earliest() {
    let m = matcher();
    let matches = m.matches(&[condition("Ready", "False", "", 0)], at(0));
    assert!(resolve(&matches, at(12), Some(at(5))).is_none());
    assert!(resolve(&matches, at(15), Some(at(5))).is_some());
}
