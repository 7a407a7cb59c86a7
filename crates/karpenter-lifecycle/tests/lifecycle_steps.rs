//! The lifecycle step table: a NodeClaim in each state, with or without its Node, and the one
//! step that follows.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_lifecycle::lifecycle::{
    Liveness, add_overlay_capacity, initialized_claim, initialized_node, launched,
    registered_claim, registered_node, set_condition,
};
use karpenter_lifecycle::{LifecycleConfig, Step, decide};
use serde_json::json;

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    match serde_json::from_value(value) {
        Ok(object) => object,
        Err(e) => panic!("test object parses: {e}"),
    }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

fn at(seconds: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(seconds)
}

fn claim(finalizer: bool) -> NodeClaim {
    let mut object = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "general-x1", "uid": "claim-uid", "creationTimestamp": "2026-01-01T12:00:00Z",
                     "labels": {"karpenter.sh/nodepool": "general", "team": "a"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}
        }
    });
    if finalizer {
        object["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    }
    parse(object)
}

fn instance() -> NodeClaim {
    let mut c = claim(false);
    c.metadata.labels = Some(
        [
            ("node.kubernetes.io/instance-type", "g4dn.xlarge"),
            ("team", "from-provider"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    let status: karpenter_api::v1::NodeClaimStatus = parse(json!({
        "providerID": "kwok://general-x1",
        "capacity": {"cpu": "4", "nvidia.com/gpu": "1"},
        "allocatable": {"cpu": "3920m", "nvidia.com/gpu": "1"}
    }));
    c.status = Some(status);
    c
}

fn node(ready: bool, taints: &[&str], gpu: &str) -> Node {
    let taints: Vec<serde_json::Value> = taints
        .iter()
        .map(|k| json!({"key": k, "effect": if *k == "karpenter.sh/unregistered" { "NoExecute" } else { "NoSchedule" }}))
        .collect();
    parse(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "general-x1", "labels": {"kubernetes.io/hostname": "general-x1"}},
        "spec": {"providerID": "kwok://general-x1", "taints": taints},
        "status": {
            "allocatable": {"cpu": "3920m", "nvidia.com/gpu": gpu},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
        }
    }))
}

fn config() -> LifecycleConfig {
    LifecycleConfig::default()
}

fn launched_claim(at_second: i64) -> NodeClaim {
    launched(&claim(true), &instance(), at(at_second))
}

#[test]
fn a_launched_claim_carries_the_capacity_overlays_added_to_its_instance_type_of_its_pool() {
    use karpenter_scheduling::Quantity;
    use karpenter_scheduling::overlay::{Outcome, TypeOverlaid};
    let overlaid = |pool: &str| {
        let mut outcome = Outcome::default();
        outcome.changed.insert(
            (pool.to_owned(), "g4dn.xlarge".to_owned()),
            TypeOverlaid {
                prices: Vec::new(),
                capacity: [(
                    "example.com/fuse".to_owned(),
                    (Quantity::from_units(10), "fuse".to_owned()),
                )]
                .into_iter()
                .collect(),
            },
        );
        outcome
    };
    let mut claim = launched_claim(0);
    // The instance's labels carry the type; the claim's its pool.
    add_overlay_capacity(&mut claim, &overlaid("general"));
    let status = claim.status.clone().unwrap_or_default();
    for list in [status.capacity, status.allocatable] {
        let list = list.unwrap_or_default();
        assert_eq!(
            list.get("example.com/fuse").map(|q| q.0.as_str()),
            Some("10")
        );
        assert!(list.contains_key("cpu"), "the cloud's resources kept");
    }
    let mut other = launched_claim(0);
    add_overlay_capacity(&mut other, &overlaid("gpu"));
    assert_eq!(
        other,
        launched_claim(0),
        "another pool's overlay changes nothing"
    );
}

/// (what, NodeClaim, its Node, now, the expected step).
type Row = (&'static str, NodeClaim, Option<Node>, DateTime<Utc>, Step);

#[test]
fn the_step_table() {
    let registered = registered_claim(&launched_claim(0), "general-x1", at(30));
    let mut deleting = claim(true);
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(at(1).timestamp()).unwrap_or_default(),
        ));
    let mut deleted = deleting.clone();
    deleted.metadata.finalizers = None;
    let mut deleting_with_grace = deleting.clone();
    deleting_with_grace.spec.termination_grace_period = serde_json::from_value(json!("10m")).ok();
    let mut deadline_written = deleting_with_grace.clone();
    deadline_written.metadata.annotations = Some(
        [(
            "karpenter.sh/nodeclaim-termination-timestamp".to_owned(),
            "2026-01-01T12:10:01Z".to_owned(),
        )]
        .into(),
    );
    let mut node_deleting = node(true, &[], "1");
    node_deleting.metadata.deletion_timestamp = deleting.metadata.deletion_timestamp.clone();
    let mut launched_deleting = launched_claim(0);
    launched_deleting.metadata.deletion_timestamp = deleting.metadata.deletion_timestamp.clone();
    let mut recorded_waiting = launched_claim(10);
    set_condition(
        &mut recorded_waiting,
        conditions::REGISTERED,
        "Unknown",
        "NodeNotFound",
        "Node not registered with cluster",
        at(11),
    );
    let mut initializing_recorded = registered.clone();
    set_condition(
        &mut initializing_recorded,
        conditions::INITIALIZED,
        "Unknown",
        "NotInitialized",
        "node is not Ready",
        at(41),
    );
    let rows: Vec<Row> = vec![
        (
            "a new NodeClaim gets the finalizer first",
            claim(false),
            None,
            at(0),
            Step::AddFinalizer,
        ),
        ("then it launches", claim(true), None, at(1), Step::Launch),
        (
            "a NodeClaim not launched within 5 minutes is deleted",
            claim(true),
            None,
            at(300),
            Step::Delete {
                reason: Liveness::LaunchTimeout,
            },
        ),
        (
            "a launched NodeClaim waits for its Node",
            launched_claim(10),
            None,
            at(20),
            Step::AwaitRegistration {
                requeue_after: Duration::from_secs(10),
            },
        ),
        (
            "the requeue never overshoots the registration TTL",
            launched_claim(10),
            None,
            at(10 + 895),
            Step::AwaitRegistration {
                requeue_after: Duration::from_secs(5),
            },
        ),
        (
            "a wait already recorded writes nothing until the requeue",
            recorded_waiting.clone(),
            None,
            at(20),
            Step::Wait {
                requeue_after: Some(Duration::from_secs(10)),
            },
        ),
        (
            "no Node 15 minutes after launch: deleted",
            launched_claim(10),
            None,
            at(10 + 900),
            Step::Delete {
                reason: Liveness::RegistrationTimeout,
            },
        ),
        (
            "its Node appears: register",
            launched_claim(10),
            Some(node(false, &["karpenter.sh/unregistered"], "0")),
            at(20),
            Step::Register {
                node: "general-x1".into(),
            },
        ),
        (
            "registered but not Ready",
            registered.clone(),
            Some(node(false, &[], "1")),
            at(40),
            Step::AwaitInitialization {
                node: "general-x1".into(),
                waiting_for: "node is not Ready".into(),
            },
        ),
        (
            "a startup taint holds initialization",
            registered.clone(),
            Some(node(true, &["cni"], "1")),
            at(40),
            Step::AwaitInitialization {
                node: "general-x1".into(),
                waiting_for: "startup taint cni is still on the node".into(),
            },
        ),
        (
            "a Node Readiness Controller taint holds initialization",
            registered.clone(),
            Some(node(true, &["readiness.k8s.io/network"], "1")),
            at(40),
            Step::AwaitInitialization {
                node: "general-x1".into(),
                waiting_for: "taint readiness.k8s.io/network is still on the node".into(),
            },
        ),
        (
            "an ephemeral taint holds initialization",
            registered.clone(),
            Some(node(true, &["node.kubernetes.io/not-ready"], "1")),
            at(40),
            Step::AwaitInitialization {
                node: "general-x1".into(),
                waiting_for: "taint node.kubernetes.io/not-ready is still on the node".into(),
            },
        ),
        (
            "a requested extended resource must be registered",
            registered.clone(),
            Some(node(true, &[], "0")),
            at(40),
            Step::AwaitInitialization {
                node: "general-x1".into(),
                waiting_for: "resource nvidia.com/gpu is not registered on the node".into(),
            },
        ),
        (
            "an initialization wait already recorded writes nothing",
            initializing_recorded.clone(),
            Some(node(false, &[], "1")),
            at(45),
            Step::Wait {
                requeue_after: None,
            },
        ),
        (
            "Ready, no startup taints, resources registered: initialize",
            registered.clone(),
            Some(node(true, &["dedicated"], "1")),
            at(40),
            Step::Initialize {
                node: "general-x1".into(),
            },
        ),
        (
            "initialized: nothing to do",
            initialized_claim(&registered, at(50)),
            Some(node(true, &[], "1")),
            at(60),
            Step::Done,
        ),
        (
            "a NodeClaim being deleted, never launched, loses its finalizer",
            deleting.clone(),
            None,
            at(2),
            Step::RemoveFinalizer,
        ),
        (
            "with a termination grace period, the drain's deadline is written first",
            deleting_with_grace.clone(),
            None,
            at(2),
            Step::AnnotateTerminationDeadline {
                deadline: "2026-01-01T12:10:01Z".into(),
            },
        ),
        (
            "then its Node is deleted",
            deadline_written.clone(),
            Some(node(true, &[], "1")),
            at(3),
            Step::DeleteNode {
                node: "general-x1".into(),
            },
        ),
        (
            "and the NodeClaim waits while its Node terminates",
            deadline_written.clone(),
            Some(node_deleting.clone()),
            at(4),
            Step::Wait {
                requeue_after: None,
            },
        ),
        (
            "once the Node is gone, the instance is terminated",
            launched_deleting.clone(),
            None,
            at(5),
            Step::TerminateInstance,
        ),
        (
            "once the finalizer is gone, nothing is left to do",
            deleted,
            None,
            at(3),
            Step::Done,
        ),
    ];
    for (what, claim, node, now, expected) in rows {
        assert_eq!(
            decide(&claim, node.as_ref(), now, &config()),
            expected,
            "{what}"
        );
    }
}

#[test]
fn a_shortened_registration_ttl_deletes_sooner() {
    let config = LifecycleConfig {
        registration_ttl: Duration::from_secs(30),
        ..LifecycleConfig::default()
    };
    assert_eq!(
        decide(&launched_claim(0), None, at(30), &config),
        Step::Delete {
            reason: Liveness::RegistrationTimeout
        }
    );
}

#[test]
fn launch_merges_provider_labels_under_the_node_claims_own() {
    let out = launched_claim(5);
    let labels = out.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("team").map(String::as_str),
        Some("a"),
        "the NodeClaim's label wins"
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("g4dn.xlarge")
    );
    let status = out.status.clone().unwrap_or_default();
    assert_eq!(status.provider_id.as_deref(), Some("kwok://general-x1"));
    assert!(karpenter_lifecycle::lifecycle::is_true(
        &out,
        conditions::LAUNCHED
    ));
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let mut c = launched_claim(5);
    let first = c
        .status
        .clone()
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    set_condition(
        &mut c,
        conditions::LAUNCHED,
        "True",
        "Launched",
        "again",
        at(100),
    );
    let again = c
        .status
        .clone()
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert_eq!(first[0].last_transition_time, again[0].last_transition_time);
    set_condition(
        &mut c,
        conditions::LAUNCHED,
        "False",
        "LaunchFailed",
        "x",
        at(200),
    );
    let changed = c
        .status
        .clone()
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert_ne!(
        first[0].last_transition_time,
        changed[0].last_transition_time
    );
}

#[test]
fn registration_syncs_labels_taints_finalizer_and_owner_and_drops_the_unregistered_taint() {
    let claim = launched_claim(0);
    let node = registered_node(
        &claim,
        &node(false, &["karpenter.sh/unregistered", "cni"], "0"),
    );
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("karpenter.sh/registered").map(String::as_str),
        Some("true")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(
        taints,
        ["cni", "dedicated"],
        "startup taint kept once, template taint added"
    );
    assert_eq!(
        node.metadata.finalizers.clone().unwrap_or_default(),
        ["karpenter.sh/termination"]
    );
    let owners = node.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("NodeClaim", "claim-uid")
    );
    let again = registered_node(&claim, &node);
    assert_eq!(again, node, "registration is idempotent");
    let initialized = initialized_node(&node);
    assert_eq!(
        initialized
            .metadata
            .labels
            .unwrap_or_default()
            .get("karpenter.sh/initialized")
            .map(String::as_str),
        Some("true")
    );
}
