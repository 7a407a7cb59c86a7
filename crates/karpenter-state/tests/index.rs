//! The cluster-state index without a cluster: objects in, node shapes and derived views out.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeSet;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::v1::NodeClaim;
use karpenter_state::{Cluster, Kind, Object, ObjectRef};
use serde_json::json;

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    match serde_json::from_value(value) {
        Ok(object) => object,
        Err(e) => panic!("test object parses: {e}"),
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

/// A NodeClaim of pool `general`, launched as `provider_id` with 2 CPU; initialized or not.
fn node_claim(name: &str, provider_id: Option<&str>, initialized: bool) -> NodeClaim {
    let mut status = json!({
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        "conditions": [
            {"type": "Initialized", "status": if initialized { "True" } else { "Unknown" },
             "reason": "", "message": "", "lastTransitionTime": "2026-01-01T11:00:00Z"},
            {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "",
             "lastTransitionTime": "2026-01-01T11:30:00Z"}
        ],
        "lastPodEventTime": "2026-01-01T11:50:00Z"
    });
    if let Some(id) = provider_id {
        status["providerID"] = json!(id);
    }
    parse(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "labels": {"karpenter.sh/nodepool": "general"}
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}
            ],
            "taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
            "expireAfter": "720h"
        },
        "status": status
    }))
}

fn node(name: &str, provider_id: &str, cpu: &str) -> Node {
    parse(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general", "kubernetes.io/hostname": name}},
        "spec": {"providerID": provider_id, "taints": [{"key": "cni", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": cpu, "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
}

fn pod(name: &str, node: Option<&str>, unschedulable: bool) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {"phase": "Pending"}
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"]["phase"] = json!("Running");
    }
    if unschedulable {
        pod["status"]["conditions"] =
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
    }
    parse(pod)
}

#[test]
fn a_node_claim_joins_its_node_by_provider_id_and_carries_its_pods() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim(
        "general-abc",
        Some("kwok://n1"),
        true,
    )));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    cluster.apply(Object::Pod(pod("web-1", Some("n1"), false)));
    let nodes = cluster.state_nodes();
    assert_eq!(nodes.len(), 1, "one joined node, not a node and a claim");
    let n = &nodes[0];
    assert_eq!(n.name(), "n1");
    assert!(n.managed() && n.initialized() && n.ready());
    assert_eq!(n.pods.len(), 1);
    let existing = n.to_existing();
    assert_eq!(existing.pods.len(), 1);
    assert_eq!(
        existing
            .labels
            .get("karpenter.sh/nodepool")
            .map(String::as_str),
        Some("general")
    );
}

#[test]
fn an_in_flight_node_claim_is_a_node_shaped_by_its_requirements_and_status() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim("general-abc", None, false)));
    let nodes = cluster.state_nodes();
    let n = &nodes[0];
    assert_eq!(n.name(), "general-abc");
    assert!(!n.initialized());
    let labels = n.labels();
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("m5.large")
    );
    assert!(
        !labels.contains_key("topology.kubernetes.io/zone"),
        "multi-valued requirements are not labels"
    );
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some("general-abc")
    );
    let taints: Vec<String> = n.taints().iter().map(|t| t.key.clone()).collect();
    assert_eq!(taints, ["team"], "startup taints are not the node's yet");
    assert_eq!(n.allocatable().get("cpu").millis(), 1930);
}

#[test]
fn an_uninitialized_node_takes_resources_it_does_not_report_yet_from_its_node_claim() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim("c", Some("kwok://n1"), false)));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "0")));
    let n = &cluster.state_nodes()[0];
    assert_eq!(
        n.capacity().get("cpu").millis(),
        2000,
        "the node says 0 CPU: the claim's 2 stand"
    );
    assert_eq!(n.allocatable().get("cpu").millis(), 1930);
    assert_eq!(
        n.capacity().get("pods").millis(),
        29_000,
        "what the node reports stands"
    );
}

#[test]
fn nodes_without_a_node_claim_are_unmanaged_and_initialized() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::Node(node("static-1", "aws:///us-east-1a/i-1", "4")));
    let n = &cluster.state_nodes()[0];
    assert!(!n.managed());
    assert!(n.initialized());
    assert!(n.to_node_state(now()).node_claim.is_none());
}

#[test]
fn only_unschedulable_unbound_pods_are_provisionable() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::Pod(pod("waiting", None, true)));
    cluster.apply(Object::Pod(pod("not-tried-yet", None, false)));
    cluster.apply(Object::Pod(pod("running", Some("n1"), false)));
    let names: Vec<&str> = cluster
        .provisionable_pods()
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["waiting"]);
}

#[test]
fn the_provisionable_and_bound_pods_follow_every_apply_delete_and_relist() {
    // The index keeps the provisionable pods and each node's pods beside the pods: after
    // any sequence of changes it must answer what a scan of every pod answers.
    let mut cluster = Cluster::new();
    let scan = |cluster: &Cluster| -> Vec<String> {
        cluster
            .pods()
            .filter(|p| karpenter_state::provisionable::is_provisionable(p))
            .map(|p| p.key())
            .collect()
    };
    let indexed = |cluster: &Cluster| -> Vec<String> {
        cluster
            .provisionable_pods()
            .iter()
            .map(|p| p.key())
            .collect()
    };
    let mut seed = 7_u64;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % n
    };
    for step in 0..2_000 {
        let name = format!("p{}", next(40));
        match next(10) {
            0..=3 => cluster.apply(Object::Pod(pod(&name, None, true))),
            4 => cluster.apply(Object::Pod(pod(&name, None, false))),
            5 => cluster.apply(Object::Pod(pod(&name, Some("n1"), false))),
            6 => cluster.apply(Object::Pod(pod(&name, Some("n2"), false))),
            7..=8 => cluster.delete(&ObjectRef::new(Kind::Pod, Some("shop"), &name)),
            _ => {
                let kept: Vec<Object> = cluster
                    .pods()
                    .filter(|_| next(2) == 0)
                    .map(|p| Object::Pod(Pod::from(p)))
                    .collect();
                cluster.reset(Kind::Pod, kept);
            }
        }
        assert_eq!(indexed(&cluster), scan(&cluster), "after step {step}");
        for pod in cluster.provisionable_pods() {
            let current = cluster
                .pod("shop", &pod.key()[5..])
                .expect("a provisionable pod is in the index");
            assert!(
                std::ptr::eq(current, &**pod),
                "the provisionable {} is the current record, not an older one",
                pod.key()
            );
        }
        for node in ["n1", "n2"] {
            let on: Vec<String> = cluster.pods_on(node).iter().map(|p| p.key()).collect();
            let scanned: Vec<String> = cluster
                .pods()
                .filter(|p| p.node_name() == Some(node))
                .map(|p| p.key())
                .collect();
            assert_eq!(on, scanned, "{node}'s pods after step {step}");
            for pod in cluster.pods_on(node) {
                let current = cluster
                    .pod(
                        pod.metadata.namespace.as_deref().unwrap_or_default(),
                        &pod.key()[5..],
                    )
                    .expect("a pod of the node is in the index");
                assert!(
                    std::ptr::eq(current, &**pod),
                    "{node} holds the current record, not an older one"
                );
            }
        }
    }
    assert!(
        !scan(&cluster).is_empty(),
        "the sequence leaves some pending"
    );
}

#[test]
fn moving_or_deleting_a_pod_updates_the_node_it_was_bound_to() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::Pod(pod("web-1", Some("n1"), false)));
    assert_eq!(cluster.pods_on("n1").len(), 1);
    cluster.apply(Object::Pod(pod("web-1", Some("n2"), false)));
    assert!(cluster.pods_on("n1").is_empty());
    assert_eq!(cluster.pods_on("n2").len(), 1);
    cluster.delete(&ObjectRef::new(Kind::Pod, Some("shop"), "web-1"));
    assert!(cluster.pods_on("n2").is_empty());
    cluster.delete(&ObjectRef::new(Kind::Pod, Some("shop"), "web-1"));
}

#[test]
fn reset_drops_objects_missing_from_the_relist() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::Pod(pod("a", Some("n1"), false)));
    cluster.apply(Object::Pod(pod("b", Some("n1"), false)));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    cluster.reset(Kind::Pod, vec![Object::Pod(pod("b", Some("n1"), false))]);
    let names: Vec<&str> = cluster
        .pods_on("n1")
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["b"]);
    assert!(cluster.node("n1").is_some(), "other kinds are untouched");
}

#[test]
fn a_relist_keeps_what_the_controller_wrote_after_the_snapshot_and_never_steps_back() {
    let versioned = |name: &str, version: &str| {
        let mut claim = node_claim(name, None, false);
        claim.metadata.resource_version = Some(version.to_owned());
        Object::NodeClaim(claim)
    };
    let mut cluster = Cluster::new();
    cluster.apply(versioned("old", "10"));
    cluster.apply(versioned("gone", "11"));
    // Written by the controller while the relist ran: created, and updated past the list.
    cluster.apply(versioned("created", "20"));
    cluster.apply(versioned("updated", "21"));
    let written = BTreeSet::from([
        ObjectRef::new(Kind::NodeClaim, None, "created"),
        ObjectRef::new(Kind::NodeClaim, None, "updated"),
    ]);
    cluster.reset_keeping(
        Kind::NodeClaim,
        vec![versioned("old", "10"), versioned("updated", "15")],
        &written,
    );
    let names: BTreeSet<String> = cluster
        .node_claims()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["old".to_owned(), "created".to_owned(), "updated".to_owned()]),
        "gone was deleted before the snapshot; created was made after it"
    );
    assert_eq!(
        cluster
            .node_claim("updated")
            .and_then(|c| c.metadata.resource_version.clone())
            .as_deref(),
        Some("21"),
        "the listed copy is older than the one written"
    );
    // Without the controller's writes, a relist is the list.
    cluster.reset(Kind::NodeClaim, vec![versioned("old", "10")]);
    assert_eq!(cluster.node_claims().count(), 1);
}

#[test]
fn node_pool_usage_counts_in_flight_claims_and_nodes() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim("a", Some("kwok://n1"), true)));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    cluster.apply(Object::NodeClaim(node_claim("b", None, false)));
    let usage = cluster.node_pool_usage("general");
    assert_eq!(usage.nodes, 2);
    assert_eq!(usage.resources.get("cpu").millis(), 4000);
    assert_eq!(cluster.node_pool_usage("other").nodes, 0);
}

#[test]
fn the_disruption_view_carries_drift_pod_events_expiry_nomination_and_queueing() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim("a", Some("kwok://n1"), true)));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    cluster.nominate("n1", now() + chrono::Duration::seconds(20));
    cluster.mark_for_deletion("a", true);
    // The nomination is for a pod still waiting for capacity.
    cluster.apply(Object::Pod(pod("waiting", None, true)));
    let snapshot = cluster.disruption_snapshot(
        now(),
        Default::default(),
        &BTreeSet::from(["n1"]),
        Default::default(),
        Default::default(),
    );
    let n = &snapshot.nodes[0];
    assert_eq!(n.node_claim.as_deref(), Some("a"));
    assert_eq!(
        n.drifted.as_ref().map(|d| d.reason.as_str()),
        Some("NodePoolDrifted")
    );
    assert!(n.last_pod_event.is_some());
    assert_eq!(
        n.expire_after,
        Some(std::time::Duration::from_secs(720 * 3600))
    );
    assert!(n.nominated_until.is_some() && n.queued && n.marked_for_deletion);
    cluster.mark_for_deletion("a", false);
    let snapshot = cluster.disruption_snapshot(
        now() + chrono::Duration::seconds(30),
        Default::default(),
        &BTreeSet::new(),
        Default::default(),
        Default::default(),
    );
    let n = &snapshot.nodes[0];
    assert!(n.nominated_until.is_none(), "a nomination ends");
    assert!(!n.queued && !n.marked_for_deletion);
}

#[test]
fn pod_disruption_budgets_reach_the_snapshot_with_their_status() {
    let mut cluster = Cluster::new();
    let pdb: PodDisruptionBudget = parse(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
    }));
    cluster.apply(Object::PodDisruptionBudget(pdb));
    let snapshot = cluster.disruption_snapshot(
        now(),
        Default::default(),
        &BTreeSet::new(),
        Default::default(),
        Default::default(),
    );
    assert_eq!(snapshot.pdbs.len(), 1);
    assert_eq!(snapshot.pdbs[0].disruptions_allowed, 1);
    assert_eq!(snapshot.pdbs[0].min_available.as_deref(), Some("2"));
    assert!(snapshot.pdbs[0].matches(&pod("web-1", Some("n1"), false).into()));
}

#[test]
fn state_nodes_in_follows_the_callers_order_and_skips_unknown_names() {
    let mut cluster = Cluster::new();
    for name in ["general-2", "general-10", "general-1"] {
        cluster.apply(Object::Node(node(name, &format!("kwok://{name}"), "2")));
    }
    cluster.apply(Object::NodeClaim(node_claim("general-3", None, false)));
    let by_name: Vec<&str> = cluster.state_nodes().iter().map(|n| n.name()).collect();
    assert_eq!(
        by_name,
        ["general-1", "general-10", "general-2", "general-3"]
    );
    let ordered: Vec<&str> = cluster
        .state_nodes_in(&["general-3", "general-2", "gone", "general-10", "general-2"])
        .iter()
        .map(|n| n.name())
        .collect();
    assert_eq!(ordered, ["general-3", "general-2", "general-10"]);
}

#[test]
fn a_pod_event_time_with_a_fraction_of_a_second_keeps_it() {
    let at = now() + chrono::Duration::milliseconds(1500);
    let mut claim = node_claim("general-abc", Some("kwok://n1"), true);
    if let Some(status) = claim.status.as_mut() {
        status.last_pod_event_time = karpenter_state::conditions::api_time(at);
    }
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(claim));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    let state = cluster
        .state_node_named("n1")
        .map(|n| n.to_node_state(now()));
    assert_eq!(state.and_then(|s| s.last_pod_event), Some(at));
}

#[test]
fn volume_attachments_are_found_by_node_and_forgotten_when_deleted() {
    let attachment = |name: &str, node: &str| {
        Object::VolumeAttachment(parse(json!({
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                     "source": {"persistentVolumeName": format!("pv-{name}")}}
        })))
    };
    let mut cluster = Cluster::new();
    cluster.apply(attachment("a", "n1"));
    cluster.apply(attachment("b", "n2"));
    cluster.apply(attachment("c", "n1"));
    let on = |cluster: &Cluster, node: &str| -> Vec<String> {
        cluster
            .volume_attachments_on(node)
            .iter()
            .filter_map(|va| va.metadata.name.clone())
            .collect()
    };
    assert_eq!(on(&cluster, "n1"), ["a", "c"]);
    cluster.delete(&ObjectRef::new(Kind::VolumeAttachment, None, "a"));
    assert_eq!(on(&cluster, "n1"), ["c"]);
    cluster.reset(Kind::VolumeAttachment, vec![attachment("b", "n2")]);
    assert!(on(&cluster, "n1").is_empty(), "a relist drops what is gone");
    assert_eq!(on(&cluster, "n2"), ["b"]);
}

#[test]
fn pod_events_are_binds_finishes_terminations_and_deletions_not_status_churn_or_relists() {
    let mut cluster = Cluster::new();
    cluster.reset(Kind::Pod, vec![Object::Pod(pod("old", Some("n1"), false))]);
    assert_eq!(
        cluster.pod_event_seq("n1"),
        None,
        "a relist is not a pod event"
    );
    cluster.apply(Object::Pod(pod("web-1", None, true)));
    assert_eq!(
        cluster.pod_event_seq("n1"),
        None,
        "pending pods touch no node"
    );
    cluster.apply(Object::Pod(pod("web-1", Some("n1"), false)));
    let bound = cluster.pod_event_seq("n1");
    assert!(bound.is_some(), "a bind is an event");
    let mut relabelled = pod("web-1", Some("n1"), false);
    relabelled.metadata.labels = Some([("v".to_owned(), "2".to_owned())].into());
    cluster.apply(Object::Pod(relabelled));
    assert_eq!(cluster.pod_event_seq("n1"), bound, "an update is not");
    let mut finished = pod("web-1", Some("n1"), false);
    finished.status.get_or_insert_default().phase = Some("Succeeded".into());
    cluster.apply(Object::Pod(finished));
    let after_finish = cluster.pod_event_seq("n1");
    assert!(after_finish > bound, "finishing is an event");
    let mut terminating = pod("old", Some("n1"), false);
    terminating.metadata.deletion_timestamp = karpenter_state::conditions::api_time(now());
    cluster.apply(Object::Pod(terminating));
    let after_terminating = cluster.pod_event_seq("n1");
    assert!(after_terminating > after_finish, "terminating is an event");
    cluster.delete(&ObjectRef::new(Kind::Pod, Some("shop"), "old"));
    assert!(
        cluster.pod_event_seq("n1") > after_terminating,
        "a deletion is an event"
    );
    cluster.delete(&ObjectRef::new(Kind::Node, None, "n1"));
    assert_eq!(cluster.pod_event_seq("n1"), None, "forgotten with the node");
}

fn replica(name: &str, node: Option<&str>, cpu: &str) -> Pod {
    let mut pod = pod(name, node, false);
    pod.metadata.owner_references = Some(vec![parse(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1",
        "controller": true
    }))]);
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].resources = Some(parse(json!({"requests": {"cpu": cpu}})));
    }
    pod
}

#[test]
fn replicas_on_one_node_share_their_spec_and_a_changed_spec_is_its_own() {
    let mut cluster = Cluster::new();
    for name in ["web-1", "web-2", "web-3"] {
        cluster.apply(Object::Pod(replica(name, Some("n1"), "500m")));
    }
    cluster.apply(Object::Pod(replica("web-4", Some("n1"), "2")));
    let on_n1 = cluster.pods_on("n1");
    let spec = |i: usize| on_n1[i].spec.as_ref().expect("a spec");
    assert!(std::sync::Arc::ptr_eq(spec(0), spec(1)));
    assert!(std::sync::Arc::ptr_eq(spec(1), spec(2)));
    assert!(!std::sync::Arc::ptr_eq(spec(2), spec(3)));
    let cpu = |i: usize| {
        spec(i).containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.clone())
    };
    assert_eq!(cpu(0).as_deref(), Some("500m"));
    assert_eq!(cpu(3).as_deref(), Some("2"), "web-4 reads its own spec");

    // Bound elsewhere, a replica's spec says so; the others' still say n1.
    cluster.apply(Object::Pod(replica("web-1", Some("n2"), "500m")));
    assert_eq!(cluster.pods_on("n2")[0].node_name(), Some("n2"));
    assert!(
        cluster
            .pods_on("n1")
            .iter()
            .all(|p| p.node_name() == Some("n1"))
    );
}

#[test]
fn a_nodes_conditions_reach_the_snapshot_for_node_repair_and_an_in_flight_claim_has_no_node() {
    let mut cluster = Cluster::new();
    let mut broken = node("n1", "kwok://n1", "2");
    broken.status.as_mut().unwrap().conditions = Some(parse(json!([
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
         "lastTransitionTime": "2026-01-01T11:40:00Z"}
    ])));
    cluster.apply(Object::Node(broken));
    cluster.apply(Object::NodeClaim(node_claim("n1", Some("kwok://n1"), true)));
    cluster.apply(Object::NodeClaim(node_claim("n2", None, false)));
    let snapshot = cluster.disruption_snapshot(
        now(),
        Default::default(),
        &BTreeSet::new(),
        Default::default(),
        Default::default(),
    );
    let n1 = snapshot.nodes.iter().find(|n| n.name == "n1").unwrap();
    assert!(n1.has_node);
    assert_eq!(n1.conditions.len(), 1);
    assert_eq!(n1.conditions[0].type_, "Ready");
    assert_eq!(n1.conditions[0].status, "False");
    assert_eq!(n1.conditions[0].reason, "KubeletNotReady");
    assert_eq!(
        n1.conditions[0].last_transition,
        Utc.with_ymd_and_hms(2026, 1, 1, 11, 40, 0).single()
    );
    let n2 = snapshot.nodes.iter().find(|n| n.name == "n2").unwrap();
    assert!(!n2.has_node && n2.conditions.is_empty());
}

#[test]
fn a_rebooting_nodes_fence_is_not_a_taint_to_the_solver_so_its_evicted_pods_wait_for_it() {
    let fenced = |rebooting: &str| {
        let mut claim = node_claim("c", Some("kwok://n1"), true);
        let status = claim.status.get_or_insert_with(Default::default);
        status.conditions.get_or_insert_with(Vec::new).push(parse(json!({
            "type": "Rebooting", "status": rebooting, "reason": "RebootRequested", "message": "",
            "lastTransitionTime": "2026-01-01T11:55:00Z"
        })));
        let mut node = node("n1", "kwok://n1", "2");
        node.spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(parse(
                json!({"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}),
            ));
        let mut cluster = Cluster::new();
        cluster.apply(Object::NodeClaim(claim));
        cluster.apply(Object::Node(node));
        let keys: Vec<String> = cluster.state_nodes()[0]
            .to_existing()
            .taints
            .iter()
            .map(|t| t.key.clone())
            .collect();
        keys
    };
    assert_eq!(
        fenced("True"),
        ["cni"],
        "reboot in progress: capacity coming back"
    );
    assert_eq!(
        fenced("False"),
        ["cni", "karpenter.sh/rebooting"],
        "no reboot in progress: a fence left behind is a taint like any"
    );
}

#[test]
fn the_next_batch_is_given_the_last_plan_for_its_pods_by_the_name_their_node_has_now() {
    let mut cluster = Cluster::new();
    // Launched, its Node not registered yet: the state node is the NodeClaim.
    cluster.apply(Object::NodeClaim(node_claim("c", Some("kwok://c"), false)));
    cluster.apply(Object::NodeClaim(node_claim("d", Some("kwok://d"), true)));
    cluster.apply(Object::Node(node("node-d", "kwok://d", "2")));
    for name in ["a", "b", "new"] {
        cluster.apply(Object::Pod(pod(name, None, true)));
    }
    cluster.set_plans(
        [
            ("shop/a".to_owned(), "c".to_owned()),
            ("shop/b".to_owned(), "d".to_owned()),
            ("shop/gone".to_owned(), "c".to_owned()),
            ("shop/new".to_owned(), "no-such-node".to_owned()),
        ]
        .into_iter()
        .collect(),
    );
    let pods = cluster.provisionable_pods().into_iter().cloned().collect();
    let input = cluster.solve_input(pods, Vec::new(), Default::default(), Default::default());
    assert_eq!(
        input.planned.into_iter().collect::<Vec<_>>(),
        [
            ("shop/a".to_owned(), "c".to_owned()),
            ("shop/b".to_owned(), "node-d".to_owned())
        ],
        "plans of the batch's pods onto nodes that exist, by the node's name once registered"
    );
}

#[test]
fn a_nomination_ends_once_no_pod_waits_for_capacity() {
    let mut cluster = Cluster::new();
    cluster.apply(Object::NodeClaim(node_claim("a", Some("kwok://n1"), true)));
    cluster.apply(Object::Node(node("n1", "kwok://n1", "2")));
    cluster.nominate("n1", now() + chrono::Duration::seconds(20));
    cluster.apply(Object::Pod(pod("waiting", None, true)));
    let nominated = |cluster: &Cluster| {
        cluster
            .disruption_snapshot(
                now(),
                Default::default(),
                &BTreeSet::new(),
                Default::default(),
                Default::default(),
            )
            .nodes[0]
            .nominated_until
    };
    assert_eq!(
        nominated(&cluster),
        Some(now() + chrono::Duration::seconds(20))
    );
    // The pod it was for is bound: nothing is on its way to the node any more.
    cluster.apply(Object::Pod(pod("waiting", Some("n1"), false)));
    assert_eq!(nominated(&cluster), None);
}
