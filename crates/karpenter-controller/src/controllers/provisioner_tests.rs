//! The batch window as the provisioner's scans feed it ([`poll_batch`]): which pending pods
//! open and extend a batch.

use chrono::{DateTime, Duration as Span, Utc};
use k8s_openapi::api::core::v1::Pod;
use karpenter_lifecycle::batcher::{DEFAULT_IDLE, DEFAULT_MAX};
use karpenter_lifecycle::{Batcher, PodTriggers};
use karpenter_state::{Cluster, Object};
use serde_json::json;

use super::poll_batch;

/// A pod kube-scheduler marked unschedulable, at `version` (its `resourceVersion`).
fn pending(name: &str, version: u64, message: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                     "resourceVersion": version.to_string(),
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r", "controller": true}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                   "reason": "Unschedulable", "message": message}]}
    }))
    .expect("a pod")
}

/// The provisioner's scans, every 100 ms on a virtual clock, over a cluster the test changes
/// between them; records when a batch was solved.
struct Scans {
    batcher: Batcher<DateTime<Utc>>,
    triggers: PodTriggers<DateTime<Utc>>,
    cluster: Cluster,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    solved: Vec<f64>,
}

impl Scans {
    fn new() -> Self {
        let start = DateTime::parse_from_rfc3339("2026-11-29T00:00:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        Scans {
            batcher: Batcher::new(DEFAULT_IDLE, DEFAULT_MAX),
            triggers: PodTriggers::default(),
            cluster: Cluster::new(),
            start,
            now: start,
            solved: Vec::new(),
        }
    }

    fn apply(&mut self, pod: Pod) {
        self.cluster.apply(Object::Pod(pod));
    }

    /// Scans until `seconds` after the start.
    fn until(&mut self, seconds: f64) {
        let end = self.start + Span::milliseconds((seconds * 1000.0) as i64);
        while self.now < end {
            let pending = self.cluster.provisionable_pods();
            let polled = poll_batch(
                &mut self.batcher,
                &mut self.triggers,
                &self.cluster,
                &pending,
                self.now,
            );
            if polled.solve {
                let at = (self.now - self.start).num_milliseconds() as f64 / 1000.0;
                self.solved.push(at);
            }
            self.now += Span::milliseconds(100);
        }
    }
}

#[test]
fn pods_a_batch_left_pending_open_the_next_batch_only_when_they_change_or_ten_seconds_later() {
    let mut scans = Scans::new();
    scans.apply(pending("a", 1, "0/3 nodes are available"));
    scans.apply(pending("b", 1, "0/3 nodes are available"));
    scans.until(12.0);
    // The first batch closes 1 s after the pods were seen; they stay pending (nominated to an
    // in-flight NodeClaim, say) and unchanged: the next batch opens 10 s after they first
    // triggered, as upstream's pod controller requeues them, and closes 1 s later.
    assert_eq!(scans.solved, vec![1.0, 11.0]);

    // kube-scheduler rewrites a's condition (a node joined): a triggers at once.
    scans.apply(pending("a", 2, "0/4 nodes are available"));
    scans.until(15.0);
    assert_eq!(scans.solved, vec![1.0, 11.0, 13.0]);
}

#[test]
fn a_pod_left_pending_and_rewritten_while_a_new_batch_is_open_extends_it() {
    let mut scans = Scans::new();
    scans.apply(pending("a", 1, "0/3 nodes are available"));
    scans.until(3.0);
    // a's batch closed at 1 s; a waits for the NodeClaim it launched. A new pod opens a batch.
    scans.apply(pending("b", 2, "0/3 nodes are available"));
    scans.until(3.8);
    // kube-scheduler retries a as a node joins and rewrites its condition: a pod this batch has
    // not counted yet, so the window stays open another idle duration (upstream's pod trigger
    // controller reconciles every update), gathering the scale-out into fewer batches.
    scans.apply(pending("a", 3, "0/4 nodes are available"));
    scans.until(6.0);
    assert_eq!(scans.solved, vec![1.0, 4.8]);
}
