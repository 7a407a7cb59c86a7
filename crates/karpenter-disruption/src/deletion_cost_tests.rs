//! The pod-deletion-cost ranking, rule by rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_api::labels as l;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::builders::{InstanceTypeBuilder, PodBuilder, match_labels, taint};
use serde_json::json;

use super::*;
use crate::pdb::Pdb;
use crate::snapshot::{DriftMark, Features};
use crate::testing::{managed, now, pool, pool_with};

/// Budgets that rank every node (the default, 10%, ranks one node in ten).
fn unbounded() -> serde_json::Value {
    json!({"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]})
}

fn snapshot(nodes: Vec<NodeState>) -> Snapshot {
    Snapshot {
        node_pools: vec![pool_with("general", unbounded())],
        nodes,
        features: Features {
            pod_deletion_cost_management: true,
            ..Features::default()
        },
        ..Default::default()
    }
}

/// A running pod controlled by `kind` (`None`: a bare pod).
fn pod_of(name: &str, controller: Option<(&str, &str)>) -> PodRecord {
    let mut pod: PodRecord = PodBuilder::new(name).build().into();
    if let Some((api_version, kind)) = controller {
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: format!("{name}-owner"),
            uid: format!("{name}-owner"),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
    }
    pod
}

fn replica(name: &str) -> PodRecord {
    pod_of(name, Some(("apps/v1", "ReplicaSet")))
}

fn annotate(mut pod: PodRecord, key: &str, value: &str) -> PodRecord {
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    pod
}

/// A managed node of `general` at `price` with `replicas` ReplicaSet pods.
fn node(name: &str, price: f64, replicas: usize) -> NodeState {
    let mut node = managed(name, "general");
    node.price = Some(price);
    for i in 0..replicas {
        node.pods.push(Arc::new(replica(&format!("{name}-{i}"))));
    }
    node
}

fn with_pod(mut node: NodeState, pod: PodRecord) -> NodeState {
    node.pods.push(Arc::new(pod));
    node
}

/// (name, group, desired) of every managed node, in the plan's order.
fn ranking(plan: &Plan) -> Vec<(&str, Group, Desired)> {
    plan.ranking
        .iter()
        .map(|r| (r.name.as_str(), r.group, r.desired))
        .collect()
}

fn group_of(plan: &Plan, name: &str) -> Option<Group> {
    plan.ranking
        .iter()
        .find(|r| r.name == name)
        .map(|r| r.group)
}

fn written(plan: &Plan) -> Vec<&str> {
    plan.writes.iter().map(|w| w.node.as_str()).collect()
}

#[test]
fn ranks_run_from_minus_n_for_the_first_node_to_minus_one_for_the_last() {
    assert_eq!((0..3).map(|i| rank(i, 3)).collect::<Vec<_>>(), [-3, -2, -1]);
    assert_eq!(rank(0, 1), -1);
}

#[test]
fn the_node_consolidation_prefers_gets_the_lowest_cost_ties_broken_by_name() {
    // Savings ratio = price / (1 + pods): "few" 1/2, "b-many" and "a-many" 1/4, "cheap" 0.4/2.
    let plan = plan(
        &snapshot(vec![
            node("b-many", 1.0, 3),
            node("few", 1.0, 1),
            node("a-many", 1.0, 3),
            node("cheap", 0.4, 1),
        ]),
        now(),
    );
    assert_eq!(
        ranking(&plan),
        [
            ("few", Group::Consolidatable, Desired::Cost(-4)),
            ("a-many", Group::Consolidatable, Desired::Cost(-3)),
            ("b-many", Group::Consolidatable, Desired::Cost(-2)),
            ("cheap", Group::Consolidatable, Desired::Cost(-1)),
        ]
    );
    assert_eq!(written(&plan), ["few", "a-many", "b-many", "cheap"]);
    let few = &plan.writes[0];
    assert_eq!(few.pods.len(), 1);
    assert_eq!(few.desired.value().as_deref(), Some("-4"));
}

#[test]
fn nodes_going_away_come_first_at_the_lowest_cost_then_drifted_then_consolidatable() {
    let mut tainted = node("tainted", 0.1, 1);
    tainted
        .taints
        .push(taint(l::DISRUPTED_TAINT_KEY, None, "NoSchedule"));
    let mut marked = node("marked", 0.1, 1);
    marked.marked_for_deletion = true;
    let mut deleting = node("deleting", 0.1, 1);
    deleting.deleting = true;
    // A do-not-disrupt node already tainted is still going away.
    tainted
        .annotations
        .insert(l::DO_NOT_DISRUPT.into(), "true".into());
    let mut drifted = node("drifted", 0.2, 1);
    drifted.drifted = Some(DriftMark {
        reason: "NodePoolDrifted".into(),
        since: now(),
    });
    let plan = plan(
        &snapshot(vec![
            node("normal", 1.0, 1),
            drifted,
            tainted,
            marked,
            deleting,
        ]),
        now(),
    );
    assert_eq!(
        ranking(&plan),
        [
            ("deleting", Group::Disrupting, Desired::Cost(i32::MIN)),
            ("marked", Group::Disrupting, Desired::Cost(i32::MIN)),
            ("tainted", Group::Disrupting, Desired::Cost(i32::MIN)),
            ("drifted", Group::Drifted, Desired::Cost(-2)),
            ("normal", Group::Consolidatable, Desired::Cost(-1)),
        ]
    );
}

#[test]
fn nodes_with_nothing_to_gain_from_emptying_are_unranked_and_their_annotations_cleared() {
    let mut protected = node("protected", 1.0, 1);
    protected
        .annotations
        .insert(l::DO_NOT_DISRUPT.into(), "true".into());
    let pinned_pod = with_pod(node("do-not-disrupt-pod", 1.0, 1), {
        annotate(replica("precious"), l::DO_NOT_DISRUPT, "true")
    });
    let guarded = with_pod(node("guarded", 1.0, 1), {
        let mut pod = replica("guarded-pod");
        pod.metadata.labels = Some(BTreeMap::from([("app".into(), "db".into())]));
        pod
    });
    let bare = with_pod(node("bare", 1.0, 1), pod_of("bare-pod", None));
    let stateful = with_pod(
        node("stateful", 1.0, 1),
        pod_of("db-0", Some(("apps/v1", "StatefulSet"))),
    );
    let not_controller = with_pod(node("not-controller", 1.0, 1), {
        let mut pod = replica("linked");
        if let Some(refs) = pod.metadata.owner_references.as_mut() {
            refs[0].controller = Some(false);
        }
        pod
    });
    let mut system = pod_of("kube-proxy-static", None);
    system.metadata.namespace = Some("kube-system".into());
    let system_pod = with_pod(node("system", 1.0, 1), system);
    let job_and_ds = with_pod(
        with_pod(
            node("job-and-ds", 1.0, 1),
            pod_of("job", Some(("batch/v1", "Job"))),
        ),
        pod_of("ds", Some(("apps/v1", "DaemonSet"))),
    );
    let mut never = node("never", 1.0, 1);
    never.labels.insert(l::NODEPOOL.into(), "never".into());
    let mut never_drifted = node("never-drifted", 1.0, 1);
    never_drifted
        .labels
        .insert(l::NODEPOOL.into(), "never".into());
    never_drifted.drifted = Some(DriftMark {
        reason: "NodePoolDrifted".into(),
        since: now(),
    });
    let mut uninitialized = node("uninitialized", 1.0, 1);
    uninitialized.initialized = false;
    let mut snap = snapshot(vec![
        protected,
        pinned_pod,
        guarded,
        bare,
        stateful,
        not_controller,
        system_pod,
        job_and_ds,
        never,
        never_drifted,
        uninitialized,
    ]);
    snap.node_pools.push(pool_with(
        "never",
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
    ));
    snap.pdbs.push(Pdb {
        namespace: "default".into(),
        name: "db".into(),
        selector: match_labels(&[("app", "db")]),
        disruptions_allowed: 0,
        ..Default::default()
    });
    let plan = plan(&snap, now());
    let groups: BTreeMap<&str, Group> = plan
        .ranking
        .iter()
        .map(|r| (r.name.as_str(), r.group))
        .collect();
    let unranked = Group::Unranked;
    assert_eq!(
        groups,
        BTreeMap::from([
            ("protected", unranked),
            ("do-not-disrupt-pod", unranked),
            ("guarded", unranked),
            ("bare", unranked),
            ("stateful", unranked),
            ("not-controller", unranked),
            ("system", Group::Consolidatable),
            ("job-and-ds", Group::Consolidatable),
            ("never", unranked),
            ("never-drifted", Group::Drifted),
            ("uninitialized", unranked),
        ])
    );
    assert!(
        plan.ranking
            .iter()
            .filter(|r| r.group == Group::Unranked)
            .all(|r| r.desired == Desired::Cleared)
    );
}

#[test]
fn a_node_whose_instance_type_its_pool_no_longer_offers_is_unranked() {
    let offered = InstanceTypeBuilder::new("m5.large")
        .offering("zone-a", "on-demand", 0.096, true)
        .build();
    let mut priced = node("priced", 0.0, 1);
    priced.price = None;
    priced
        .labels
        .insert(l::INSTANCE_TYPE.into(), "m5.large".into());
    priced.labels.insert(l::ZONE.into(), "zone-a".into());
    priced
        .labels
        .insert(l::CAPACITY_TYPE.into(), "on-demand".into());
    let mut gone = priced.clone();
    gone.name = "gone".into();
    gone.labels
        .insert(l::INSTANCE_TYPE.into(), "m4.large".into());
    let mut snap = snapshot(vec![priced, gone]);
    snap.instance_types = Arc::new(BTreeMap::from([("general".to_owned(), vec![offered])]));
    let plan = plan(&snap, now());
    assert_eq!(group_of(&plan, "priced"), Some(Group::Consolidatable));
    assert_eq!(group_of(&plan, "gone"), Some(Group::Unranked));
}

#[test]
fn a_drifted_node_of_a_static_pool_is_not_ranked_as_drifted() {
    let mut drifted = node("static-drifted", 1.0, 1);
    drifted.labels.insert(l::NODEPOOL.into(), "static".into());
    drifted.drifted = Some(DriftMark {
        reason: "NodePoolDrifted".into(),
        since: now(),
    });
    let mut snap = snapshot(vec![drifted]);
    let mut fixed = pool_with("static", unbounded());
    fixed.spec.replicas = Some(1);
    snap.node_pools.push(fixed);
    let plan = plan(&snap, now());
    assert_ne!(group_of(&plan, "static-drifted"), Some(Group::Drifted));
}

#[test]
fn each_pools_budgets_bound_its_ranked_nodes_the_best_ones_first_and_the_rest_are_unranked() {
    let mut snap = snapshot(
        (0..4)
            .map(|i| node(&format!("general-{i}"), 1.0 + f64::from(i), 1))
            .collect(),
    );
    // 4 nodes, 50%: two consolidatable; 25% of drift: one drifted.
    snap.node_pools = vec![pool_with(
        "general",
        json!({"consolidateAfter": "0s", "budgets": [
            {"nodes": "50%", "reasons": ["Underutilized"]},
            {"nodes": "25%", "reasons": ["Drifted"]}
        ]}),
    )];
    for name in ["general-0", "general-1"] {
        if let Some(n) = snap.nodes.iter_mut().find(|n| n.name == name) {
            n.drifted = Some(DriftMark {
                reason: "NodePoolDrifted".into(),
                since: now(),
            });
        }
    }
    let plan = plan(&snap, now());
    assert_eq!(
        ranking(&plan),
        [
            ("general-1", Group::Drifted, Desired::Cost(-3)),
            ("general-3", Group::Consolidatable, Desired::Cost(-2)),
            ("general-2", Group::Consolidatable, Desired::Cost(-1)),
            ("general-0", Group::Unranked, Desired::Cleared),
        ]
    );
}

#[test]
fn at_most_fifty_ranked_or_unranked_nodes_are_written_but_every_node_going_away_is() {
    let mut nodes: Vec<NodeState> = (0..60)
        .map(|i| node(&format!("n-{i:02}"), 1.0, 1))
        .collect();
    for i in 0..55 {
        let mut going = node(&format!("going-{i:02}"), 1.0, 1);
        going.marked_for_deletion = true;
        nodes.push(going);
    }
    let plan = plan(&snapshot(nodes), now());
    let going = plan
        .writes
        .iter()
        .filter(|w| w.group == Group::Disrupting)
        .count();
    assert_eq!(going, 55);
    assert_eq!(plan.writes.len() - going, MAX_NODES_PER_CYCLE);
    assert_eq!(
        plan.writes.last().map(|w| w.node.as_str()),
        Some("n-49"),
        "the best-ranked ones"
    );
}

#[test]
fn nodes_already_as_planned_or_without_replica_set_pods_take_no_slot_of_the_cap() {
    let mut nodes: Vec<NodeState> = Vec::new();
    // Ranked 1st..10th (ratio 1/1: no pods to move but a Job's): nothing to write.
    for i in 0..10 {
        nodes.push(with_pod(
            node(&format!("a-job-{i:02}"), 100.0, 0),
            pod_of(&format!("job-{i}"), Some(("batch/v1", "Job"))),
        ));
    }
    for i in 0..60 {
        nodes.push(node(&format!("b-rs-{i:02}"), 1.0, 1));
    }
    let first = plan(&snapshot(nodes.clone()), now());
    assert_eq!(first.writes.len(), MAX_NODES_PER_CYCLE);
    assert!(first.writes.iter().all(|w| w.node.starts_with("b-rs-")));
    // The planned values written: the next cycle writes the ten left.
    for node in &mut nodes {
        let desired = first
            .ranking
            .iter()
            .find(|r| r.name == node.name)
            .map(|r| r.desired);
        if let (Some(value), true) = (
            desired.and_then(Desired::value),
            first.writes.iter().any(|w| w.node == node.name),
        ) {
            node.pods = node
                .pods
                .iter()
                .map(|p| Arc::new(annotate((**p).clone(), POD_DELETION_COST, &value)))
                .collect();
        }
    }
    let second = plan(&snapshot(nodes), now());
    assert_eq!(
        written(&second),
        (50..60).map(|i| format!("b-rs-{i:02}")).collect::<Vec<_>>()
    );
}

#[test]
fn only_pods_controlled_by_a_replica_set_are_written() {
    let mixed = with_pod(
        with_pod(
            node("mixed", 1.0, 2),
            pod_of("job", Some(("batch/v1", "Job"))),
        ),
        pod_of("ds", Some(("apps/v1", "DaemonSet"))),
    );
    let plan = plan(&snapshot(vec![mixed]), now());
    let pods: Vec<String> = plan.writes[0].pods.iter().map(|p| p.key()).collect();
    assert_eq!(pods, ["default/mixed-0", "default/mixed-1"]);
}

#[test]
fn a_cost_a_user_set_is_overwritten_and_does_not_steer_the_ranking() {
    // The user's -1000 would make "steered" the cheapest to disrupt were it still read as a
    // disruption cost; with the gate on only karpenter.sh/disruption-cost is.
    let steered = with_pod(
        node("steered", 1.0, 1),
        annotate(replica("user-set"), POD_DELETION_COST, "1000000000"),
    );
    let plan = plan(&snapshot(vec![node("a-plain", 1.0, 2), steered]), now());
    assert_eq!(
        ranking(&plan),
        [
            ("a-plain", Group::Consolidatable, Desired::Cost(-2)),
            ("steered", Group::Consolidatable, Desired::Cost(-1)),
        ]
    );
    let steered = plan
        .writes
        .iter()
        .find(|w| w.node == "steered")
        .expect("the user's value is replaced");
    assert!(steered.pods.iter().any(|p| p.key() == "default/user-set"));
}

#[test]
fn a_node_all_of_whose_pods_already_carry_the_planned_cost_is_not_written() {
    let mut done = node("done", 1.0, 0);
    done.pods
        .push(Arc::new(annotate(replica("r"), POD_DELETION_COST, "-1")));
    let plan = plan(&snapshot(vec![done]), now());
    assert_eq!(
        ranking(&plan),
        [("done", Group::Consolidatable, Desired::Cost(-1))]
    );
    assert!(plan.writes.is_empty());
    // Cleared: an unranked node with no annotation left needs nothing either.
    let mut protected = node("protected", 1.0, 1);
    protected
        .annotations
        .insert(l::DO_NOT_DISRUPT.into(), "true".into());
    assert!(plan_of(vec![protected]).writes.is_empty());
}

#[test]
fn unmanaged_nodes_are_left_alone_even_when_they_are_being_deleted() {
    let mut unmanaged = NodeState::new("unmanaged", now());
    unmanaged.deleting = true;
    unmanaged.pods.push(Arc::new(replica("r")));
    let plan = plan_of(vec![unmanaged]);
    assert!(plan.ranking.is_empty() && plan.writes.is_empty());
}

fn plan_of(nodes: Vec<NodeState>) -> Plan {
    plan(&snapshot(nodes), now())
}

#[test]
fn with_the_default_budget_one_node_in_ten_of_a_pool_is_ranked() {
    let mut snap = snapshot((0..3).map(|i| node(&format!("n-{i}"), 1.0, 1)).collect());
    snap.node_pools = vec![pool("general")];
    let plan = plan(&snap, now());
    let ranked: Vec<&str> = plan
        .ranking
        .iter()
        .filter(|r| r.group == Group::Consolidatable)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(ranked, ["n-0"]);
}

#[test]
fn pods_that_would_not_move_do_not_make_a_node_costlier_to_empty() {
    // "daemons": one replica and three DaemonSet pods (they stay with the node); "pair": two
    // replicas. Only moving pods count: 1/2 beats 1/3.
    let mut daemons = node("daemons", 1.0, 1);
    for i in 0..3 {
        daemons.pods.push(Arc::new(pod_of(
            &format!("ds-{i}"),
            Some(("apps/v1", "DaemonSet")),
        )));
    }
    let plan = plan_of(vec![node("pair", 1.0, 2), daemons]);
    assert_eq!(
        ranking(&plan),
        [
            ("daemons", Group::Consolidatable, Desired::Cost(-2)),
            ("pair", Group::Consolidatable, Desired::Cost(-1)),
        ]
    );
}
