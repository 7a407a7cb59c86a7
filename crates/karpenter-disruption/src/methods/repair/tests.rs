use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use karpenter_api::labels as l;
use karpenter_cloud::repair::ObservedCondition;
use karpenter_cloud::{ConditionStatus, RepairAction, RepairMatcher, RepairPolicy};
use karpenter_scheduling::builders::PodBuilder;

use super::*;
use crate::decide::decide;
use crate::testing::{managed, now, pool_with};

/// Ready=False after 10 minutes (the fallback, no drain), KWOKRebootRequired=True after 30 s.
fn settings(threshold: &str) -> RepairSettings {
    let policies = vec![
        RepairPolicy::replace(
            "Ready",
            ConditionStatus::False,
            "",
            Duration::from_secs(600),
        )
        .with_grace(Duration::ZERO),
        RepairPolicy {
            action: RepairAction::RebootNode,
            ..RepairPolicy::replace(
                "KWOKRebootRequired",
                ConditionStatus::True,
                ".*",
                Duration::from_secs(30),
            )
        },
    ];
    let Ok(matcher) = RepairMatcher::new(&policies) else {
        panic!("valid policies");
    };
    let Ok(unhealthy_threshold) = UnhealthyThreshold::parse(threshold) else {
        panic!("valid threshold");
    };
    RepairSettings {
        matcher: Arc::new(matcher),
        unhealthy_threshold,
    }
}

/// A managed node of `general` whose Ready went False `minutes_ago`.
fn broken(name: &str, minutes_ago: i64) -> NodeState {
    let mut node = managed(name, "general");
    node.ready = false;
    node.conditions.push(ObservedCondition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: "KubeletNotReady".into(),
        last_transition: Some(now() - chrono::Duration::minutes(minutes_ago)),
    });
    node
}

fn healthy(name: &str) -> NodeState {
    let mut node = managed(name, "general");
    node.conditions.push(ObservedCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "KubeletReady".into(),
        last_transition: None,
    });
    node
}

/// Consolidation is off, so only repair acts.
fn quiet_pool(budgets: serde_json::Value) -> karpenter_api::v1::NodePool {
    pool_with(
        "general",
        serde_json::json!({"consolidateAfter": "Never", "budgets": budgets}),
    )
}

fn snapshot(nodes: Vec<NodeState>, threshold: &str) -> Snapshot {
    Snapshot {
        node_pools: vec![quiet_pool(serde_json::json!([{"nodes": "10%"}]))],
        nodes,
        repair: Some(settings(threshold)),
        ..Default::default()
    }
}

fn repaired(snapshot: &Snapshot) -> Vec<String> {
    decide(snapshot, now())
        .commands
        .iter()
        .filter(|c| c.method == Method::Repair)
        .flat_map(|c| c.candidates.iter().map(|c| c.node.clone()))
        .collect()
}

fn codes(snapshot: &Snapshot, node: &str) -> Vec<Code> {
    decide(snapshot, now())
        .reasons_for(node)
        .map(|r| r.codes())
        .unwrap_or_default()
}

fn with_healthy(mut nodes: Vec<NodeState>, total: usize) -> Vec<NodeState> {
    let n = nodes.len();
    for i in n..total {
        nodes.push(healthy(&format!("ok-{i}")));
    }
    nodes
}

#[test]
fn a_node_is_repaired_once_its_condition_outlasts_the_toleration_and_not_before() {
    let snap = snapshot(with_healthy(vec![broken("fresh", 9)], 10), "20%");
    assert!(repaired(&snap).is_empty());
    assert_eq!(
        codes(&snap, "fresh").first(),
        Some(&Code::UnhealthyTolerated)
    );
    let text = decide(&snap, now()).reason_for("fresh").unwrap_or_default();
    assert!(
        text.starts_with("unhealthy: Ready=False (KubeletNotReady); repair tolerates it until 10:01:00 UTC (10m toleration)"),
        "{text}"
    );
    let snap = snapshot(with_healthy(vec![broken("stale", 10)], 10), "20%");
    let decision = decide(&snap, now());
    assert_eq!(repaired(&snap), ["stale"]);
    let command = &decision.commands[0];
    assert_eq!(command.reason, DisruptionReason::Unhealthy);
    assert_eq!(
        command
            .repair
            .as_ref()
            .map(|r| (r.condition.as_str(), r.termination_grace_period)),
        Some(("Ready", Some(Duration::ZERO)))
    );
    assert!(
        command.explanation.starts_with(
            "node stale is unhealthy: Ready=False (KubeletNotReady) since 09:50:00 UTC, past its 10m toleration (fallback policy Ready=False); its pods fit on other nodes; no drain (forceful)"
        ),
        "{}",
        command.explanation
    );
}

#[test]
fn the_do_not_repair_annotation_vetoes_repair_but_do_not_disrupt_does_not() {
    let mut vetoed = broken("vetoed", 20);
    vetoed
        .annotations
        .insert(DO_NOT_REPAIR.into(), "true".into());
    let snap = snapshot(with_healthy(vec![vetoed], 10), "20%");
    assert!(repaired(&snap).is_empty());
    assert_eq!(codes(&snap, "vetoed").first(), Some(&Code::DoNotRepair));
    assert_eq!(
        decide(&snap, now())
            .reasons_for("vetoed")
            .and_then(|r| r.first().map(|r| r.text.clone()))
            .as_deref(),
        Some(
            "unhealthy (Ready=False (KubeletNotReady)) but repair is blocked through the \"karpenter.sh/do-not-repair\" annotation"
        )
    );
    let mut protected = broken("protected", 20);
    protected
        .annotations
        .insert(l::DO_NOT_DISRUPT.into(), "true".into());
    let snap = snapshot(with_healthy(vec![protected], 10), "20%");
    assert_eq!(repaired(&snap), ["protected"]);
}

#[test]
fn nothing_is_repaired_while_more_than_the_threshold_of_a_pool_is_unhealthy() {
    // 3 of 10: 20% of 10 is 2, and 3 > 2.
    let three = snapshot(
        with_healthy(vec![broken("a", 20), broken("b", 20), broken("c", 1)], 10),
        "20%",
    );
    assert!(repaired(&three).is_empty());
    assert_eq!(
        codes(&three, "a").first(),
        Some(&Code::UnhealthyThresholdExceeded)
    );
    assert_eq!(
        decide(&three, now())
            .reasons_for("b")
            .and_then(|r| r.first().map(|r| r.text.clone()))
            .as_deref(),
        Some("more than 20% of nodes in nodepool \"general\" are unhealthy (3 of 10)")
    );
    // 2 of 10 is within 20%.
    let two = snapshot(
        with_healthy(vec![broken("a", 20), broken("b", 20)], 10),
        "20%",
    );
    assert_eq!(repaired(&two), ["a"]);
    // The threshold is a setting: 30% tolerates the three.
    let three_at_30 = snapshot(
        with_healthy(vec![broken("a", 20), broken("b", 20), broken("c", 1)], 10),
        "30%",
    );
    assert_eq!(repaired(&three_at_30), ["a"]);
    // Rounded up: one unhealthy node of a pool of 2 is repaired (20% of 2 rounds up to 1).
    let small = snapshot(with_healthy(vec![broken("a", 20)], 2), "20%");
    assert_eq!(repaired(&small), ["a"]);
}

#[test]
fn the_unhealthy_budget_paces_repair_and_not_ready_nodes_do_not_use_it_up() {
    let nodes = with_healthy(vec![broken("a", 20), broken("b", 20)], 10);
    let mut snap = snapshot(nodes, "20%");
    snap.node_pools = vec![quiet_pool(serde_json::json!([{"nodes": "1"}]))];
    assert_eq!(
        repaired(&snap),
        ["a"],
        "two NotReady nodes leave the budget of 1 intact"
    );
    snap.node_pools = vec![quiet_pool(
        serde_json::json!([{"nodes": "0", "reasons": ["Unhealthy"]}]),
    )];
    assert!(repaired(&snap).is_empty());
    assert_eq!(codes(&snap, "a").first(), Some(&Code::BudgetExhausted));
    // An uninitialized node needs no budget.
    let mut raw = broken("raw", 20);
    raw.initialized = false;
    snap.nodes = with_healthy(vec![raw], 10);
    assert_eq!(repaired(&snap), ["raw"]);
}

#[test]
fn candidates_go_longest_unhealthy_first_then_by_name() {
    let snap = snapshot(
        with_healthy(vec![broken("b", 15), broken("a", 15)], 10),
        "20%",
    );
    assert_eq!(repaired(&snap), ["a"], "equal scores: by name");
    let snap = snapshot(
        with_healthy(vec![broken("a", 15), broken("b", 50)], 10),
        "20%",
    );
    assert_eq!(
        repaired(&snap),
        ["b"],
        "b has aged longer past its toleration"
    );
}

#[test]
fn with_the_gate_off_repair_does_not_run() {
    let mut snap = snapshot(with_healthy(vec![broken("a", 60)], 10), "20%");
    snap.repair = None;
    let decision = decide(&snap, now());
    assert!(repaired(&snap).is_empty());
    assert!(!decision.evaluated.iter().any(|(m, _)| *m == Method::Repair));
    assert!(
        !decision
            .eligible
            .iter()
            .any(|(r, _)| *r == DisruptionReason::Unhealthy)
    );
}

#[test]
fn a_node_whose_pods_fit_nowhere_is_left_with_the_reason() {
    let mut node = broken("busy", 20);
    node.pods
        .push(Arc::new(PodBuilder::new("web").cpu("1").build().into()));
    let snap = snapshot(with_healthy(vec![node], 10), "20%");
    assert!(repaired(&snap).is_empty());
    assert_eq!(codes(&snap, "busy").first(), Some(&Code::Unschedulable));
}

#[test]
fn blocking_pods_stop_repair_only_when_nothing_bounds_the_drain() {
    let mut pod = PodBuilder::new("guarded").build();
    pod.metadata.annotations = Some(BTreeMap::from([(
        l::DO_NOT_DISRUPT.to_owned(),
        "true".to_owned(),
    )]));
    let mut node = managed("guarded", "general");
    node.conditions.push(ObservedCondition {
        type_: "KWOKRebootRequired".into(),
        status: "True".into(),
        reason: "Injected".into(),
        last_transition: Some(now() - chrono::Duration::minutes(5)),
    });
    node.pods.push(Arc::new(pod.into()));
    let snap = snapshot(with_healthy(vec![node.clone()], 10), "20%");
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "guarded").contains(&Code::RepairNeedsGracePeriod));
    node.termination_grace_period = Some(Duration::from_secs(120));
    let mut roomy = healthy("roomy");
    roomy.allocatable = karpenter_scheduling::ResourceList::parse([
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "10"),
    ])
    .unwrap_or_default();
    roomy.capacity = roomy.allocatable.clone();
    let snap = snapshot(with_healthy(vec![node, roomy], 10), "20%");
    let decision = decide(&snap, now());
    let command = decision.commands.first();
    assert_eq!(
        command.map(|c| c.replacements.len()),
        Some(0),
        "a reboot launches no replacement"
    );
    let repair = command.and_then(|c| c.repair.clone());
    assert_eq!(
        repair.map(|r| (r.reboot, r.termination_grace_period)),
        Some((true, None)),
        "a reboot policy reboots in place; without a policy bound the NodeClaim's own applies"
    );
}

#[test]
fn thresholds_are_a_percentage_or_a_count() {
    assert_eq!(UnhealthyThreshold::parse("20%").map(|t| t.limit(10)), Ok(2));
    assert_eq!(UnhealthyThreshold::parse("20%").map(|t| t.limit(11)), Ok(3));
    assert_eq!(UnhealthyThreshold::parse("4").map(|t| t.limit(100)), Ok(4));
    assert!(UnhealthyThreshold::parse("120%").is_err());
    assert!(UnhealthyThreshold::parse("many").is_err());
}

#[test]
fn a_rebooting_node_is_left_alone_and_a_rebooted_one_waits_out_its_toleration_again() {
    let mut node = broken("sick", 20);
    node.rebooting = true;
    let snap = snapshot(with_healthy(vec![node.clone()], 10), "20%");
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "sick").contains(&Code::Rebooting));
    node.rebooting = false;
    node.last_reboot_end = Some(now() - chrono::Duration::minutes(5));
    let snap = snapshot(with_healthy(vec![node.clone()], 10), "20%");
    assert!(
        repaired(&snap).is_empty(),
        "tolerated again after the reboot"
    );
    node.last_reboot_end = Some(now() - chrono::Duration::minutes(11));
    let snap = snapshot(with_healthy(vec![node], 10), "20%");
    assert_eq!(repaired(&snap), ["sick"]);
}

#[test]
fn a_node_rebooted_twice_in_a_day_is_replaced_instead_of_rebooted_a_third_time() {
    let mut node = healthy("flaky");
    node.conditions.push(ObservedCondition {
        type_: "KWOKRebootRequired".into(),
        status: "True".into(),
        reason: "Injected".into(),
        last_transition: Some(now() - chrono::Duration::minutes(5)),
    });
    let reboot = |snap: &Snapshot| {
        decide(snap, now())
            .commands
            .first()
            .and_then(|c| c.repair.clone())
            .map(|r| r.reboot)
    };
    node.committed_reboots = vec![
        now() - chrono::Duration::hours(30),
        now() - chrono::Duration::hours(3),
    ];
    let snap = snapshot(with_healthy(vec![node.clone()], 10), "20%");
    assert_eq!(
        reboot(&snap),
        Some(true),
        "one reboot in the last day: reboot again"
    );
    node.committed_reboots
        .push(now() - chrono::Duration::hours(1));
    let snap = snapshot(with_healthy(vec![node], 10), "20%");
    let decision = decide(&snap, now());
    let command = decision.commands.first();
    assert_eq!(
        command.and_then(|c| c.repair.clone()).map(|r| r.reboot),
        Some(false),
        "two reboots in the last day: replace"
    );
    assert!(
        command.is_some_and(|c| c.explanation.contains("rebooted 2 times in the last 24 h")),
        "{command:?}"
    );
}

/// `snapshot` with the pool static (`replicas`, `limits.nodes`) and one type in its catalog.
fn static_snapshot(nodes: Vec<NodeState>, replicas: i64, node_limit: Option<&str>) -> Snapshot {
    let mut snap = snapshot(nodes, "50%");
    let pool = &mut snap.node_pools[0];
    pool.spec.replicas = Some(replicas);
    if let Some(limit) = node_limit {
        pool.spec.limits =
            Some(serde_json::from_value(serde_json::json!({"nodes": limit})).unwrap_or_default());
    }
    let it = karpenter_scheduling::builders::InstanceTypeBuilder::new("m5.large")
        .resource("cpu", "2")
        .resource("memory", "8Gi")
        .resource("pods", "29")
        .offering("zone-a", "on-demand", 0.096, true)
        .build();
    snap.instance_types = Arc::new(BTreeMap::from([("general".to_owned(), vec![it])]));
    snap
}

#[test]
fn a_static_pools_broken_node_is_replaced_from_the_template_unless_the_pool_is_at_its_node_limit() {
    let nodes = vec![broken("sick", 20), healthy("ok-1"), healthy("ok-2")];
    let snap = static_snapshot(nodes.clone(), 3, None);
    let decision = decide(&snap, now());
    let command = decision.commands.first();
    assert_eq!(
        command.map(|c| c.method),
        Some(Method::Repair),
        "{decision:?}"
    );
    assert_eq!(repaired(&snap), ["sick"]);
    assert_eq!(
        command.map(|c| c.replacements.len()),
        Some(1),
        "one node from the template, no simulation"
    );
    assert!(
        command.is_some_and(|c| c.explanation.contains("static nodepool general")
            && c.explanation
                .contains("a node from the template replaces it")),
        "{command:?}"
    );
    // At limits.nodes, no replacement can be staged: left with the reason.
    let snap = static_snapshot(nodes.clone(), 3, Some("3"));
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "sick").contains(&Code::StaticPoolAtNodeLimit));
    // Scaling down (3 nodes for 2 replicas): the replacement would be surplus.
    let snap = static_snapshot(nodes, 2, None);
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "sick").contains(&Code::StaticPoolScalingDown));
}

#[test]
fn with_terminate_first_repair_a_static_pool_at_its_node_limit_loses_its_broken_node_first_if_it_will_be_refilled()
 {
    let nodes = vec![broken("sick", 20), healthy("ok-1"), healthy("ok-2")];
    let mut snap = static_snapshot(nodes.clone(), 3, Some("3"));
    snap.features.terminate_first_repair = true;
    let decision = decide(&snap, now());
    let command = decision.commands.first();
    assert_eq!(repaired(&snap), ["sick"], "{decision:?}");
    assert_eq!(
        command.and_then(|c| c.terminate_first),
        Some(TerminateFirst::StaticAtLimit)
    );
    assert!(
        command.is_some_and(|c| c.replacements.is_empty()),
        "delete-only"
    );
    assert!(
        command.is_some_and(|c| c
            .explanation
            .contains("static nodepool is at its node limit")
            && c.explanation.contains("no drain (forceful)")),
        "{command:?}"
    );
    // A pool the static loop would not refill (not Ready) keeps its node, with the reason.
    snap.node_pools[0].status = serde_json::from_value(serde_json::json!({
        "conditions": [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady",
            "message": "", "lastTransitionTime": "2026-11-23T10:00:00Z"}]
    }))
    .expect("status");
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "sick").contains(&Code::StaticPoolAtNodeLimit));
}

#[test]
fn with_terminate_first_repair_a_reserved_node_whose_pods_only_fit_in_its_own_slot_goes_first() {
    let mut sick = broken("sick", 20);
    sick.labels
        .insert(l::CAPACITY_TYPE.into(), "reserved".into());
    sick.labels
        .insert(l::CAPACITY_RESERVATION_ID.into(), "cr-1".into());
    sick.labels
        .insert(l::INSTANCE_TYPE.into(), "m5.large".into());
    sick.pods
        .push(Arc::new(PodBuilder::new("app").cpu("1").build().into()));
    let mut snap = snapshot(with_healthy(vec![sick], 10), "20%");
    snap.node_pools[0].spec.template.spec.requirements =
        serde_json::from_value(serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
        ]))
        .expect("requirements");
    let it = karpenter_scheduling::builders::InstanceTypeBuilder::new("m5.large")
        .resource("cpu", "2")
        .resource("memory", "8Gi")
        .resource("pods", "29")
        .reserved_offering("zone-a", 0.0, "cr-1", 0)
        .build();
    snap.instance_types = Arc::new(BTreeMap::from([("general".to_owned(), vec![it])]));
    // Without the gate: the pod fits nowhere while the node stays, so it stays.
    assert!(repaired(&snap).is_empty());
    assert!(codes(&snap, "sick").contains(&Code::Unschedulable));
    snap.features.terminate_first_repair = true;
    let decision = decide(&snap, now());
    let command = decision.commands.first();
    assert_eq!(repaired(&snap), ["sick"], "{decision:?}");
    assert_eq!(
        command.and_then(|c| c.terminate_first),
        Some(TerminateFirst::NoReservedCapacity)
    );
    assert!(
        command.is_some_and(|c| c.replacements.is_empty()),
        "delete-only"
    );
}
