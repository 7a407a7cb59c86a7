//! Kubernetes events with upstream's reasons (`events.k8s.io/v1`, as upstream writes them).
//!
//! Publishing never waits for the API server: events go through a bounded queue to one
//! writer task (as client-go's broadcaster does for upstream), so a batch that nominates
//! 1,000 pods creates its NodeClaims without 1,000 round trips in between. When the queue is
//! full the event is dropped and counted in the log. A failure to publish is logged, never
//! fatal: events are for people. A repeat of a recent event becomes a count on the first one
//! ([`super::event_series`]), as kube's `Recorder` and client-go do, remembering a digest of
//! each recent event rather than the whole object. Before an event is queued,
//! [`super::event_gate`] drops what upstream's recorder drops: a repeat within its dedupe
//! timeout, and a `Nominated` event beyond 5 per second.

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_scheduling::PodRecord;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

use super::event_gate::{Gate, Policy};
use super::event_series::{self, Series, Write};

/// Events waiting for the writer task, at most.
const QUEUE: usize = 2048;

/// The reporting controller, as upstream names it.
const REPORTER: &str = "karpenter";

const NORMAL: &str = "Normal";
const WARNING: &str = "Warning";

/// An event waiting to be written.
#[derive(Debug)]
struct Pending {
    regarding: ObjectReference,
    type_: &'static str,
    reason: String,
    action: String,
    note: String,
}

/// The controller's event recorder.
#[derive(Clone)]
pub struct Events {
    queue: mpsc::Sender<Pending>,
    /// Upstream's dedupe and rate limits, shared by every clone.
    gate: Arc<Mutex<Gate>>,
    /// Events dropped because the queue was full, since the start.
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

/// The event's `action`: its reason and a digest of its note. A repeat of the same (type,
/// reason, action, object) is folded into a series of the *first* event, note included, so an
/// event whose note changed (`DisruptionBlocked` with a new reason, `FailedScheduling` with
/// new lines) would keep showing the old one. client-go keys on the message too; putting the
/// note's digest in `action` does the same here.
fn action(reason: &str, note: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in note.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{reason}-{hash:08x}")
}

/// The Event object first written for `pending` at `now`, named as client-go names events.
fn new_event(pending: Pending, instance: &str, now: Timestamp) -> Event {
    let name = format!(
        "{}.{:x}",
        pending.regarding.name.as_deref().unwrap_or(REPORTER),
        now.as_nanosecond()
    );
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace_of(&pending.regarding).to_owned()),
            ..ObjectMeta::default()
        },
        action: Some(pending.action),
        reason: Some(pending.reason),
        note: Some(pending.note),
        type_: Some(pending.type_.to_owned()),
        event_time: Some(MicroTime(now)),
        regarding: Some(pending.regarding),
        reporting_controller: Some(REPORTER.to_owned()),
        reporting_instance: Some(instance.to_owned()),
        ..Event::default()
    }
}

/// Where an event about `regarding` lives: its namespace, or `default` for a cluster-scoped
/// object (as client-go does).
fn namespace_of(regarding: &ObjectReference) -> &str {
    regarding.namespace.as_deref().unwrap_or("default")
}

/// The writer task's state: the client and the recent events.
struct Writer {
    client: Client,
    instance: String,
    series: Series,
}

impl Writer {
    async fn write(&mut self, pending: Pending) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = event_series::key(
            pending.type_,
            &pending.reason,
            &pending.action,
            &pending.regarding,
        );
        if let Write::Repeat {
            name,
            namespace,
            count,
        } = self.series.write_for(key, now)
        {
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(now) },
            });
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.series.written(key, &name, &namespace, now);
                    return Ok(());
                }
                // The first one is gone (the API server's event TTL): start a new series.
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    self.series.forget(key);
                }
                Err(error) => return Err(error),
            }
        }
        let event = new_event(pending, &self.instance, now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let created = api.create(&PostParams::default(), &event).await?;
        let name = created.metadata.name.unwrap_or_default();
        self.series.written(key, &name, &namespace, now);
        Ok(())
    }
}

impl Events {
    pub fn new(client: Client) -> Self {
        let mut writer = Writer {
            client,
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| REPORTER.to_owned()),
            series: Series::default(),
        };
        let (queue, mut pending) = mpsc::channel::<Pending>(QUEUE);
        tokio::spawn(async move {
            while let Some(event) = pending.recv().await {
                let reason = event.reason.clone();
                if let Err(error) = writer.write(event).await {
                    tracing::warn!(%error, %reason, "publishing an event failed");
                }
            }
        });
        Events {
            queue,
            gate: Arc::default(),
            dropped: Arc::default(),
        }
    }

    async fn publish(
        &self,
        regarding: ObjectReference,
        type_: &'static str,
        reason: &str,
        note: &str,
    ) {
        self.publish_under(&Policy::always(), regarding, type_, reason, note)
            .await;
    }

    /// Publishes unless `policy` skips it (see [`super::event_gate`]).
    async fn publish_under(
        &self,
        policy: &Policy,
        regarding: ObjectReference,
        type_: &'static str,
        reason: &str,
        note: &str,
    ) {
        if *policy != Policy::always() {
            // A poisoned gate still answers: its maps are whole after any panic elsewhere.
            let mut gate = match self.gate.lock() {
                Ok(gate) => gate,
                Err(poisoned) => poisoned.into_inner(),
            };
            if !gate.admit(reason, policy, std::time::Instant::now()) {
                return;
            }
        }
        let mut note = note.to_owned();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let event = Pending {
            regarding,
            type_,
            reason: reason.to_owned(),
            action: action(reason, &note),
            note,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(event) {
            // Logged at the first drop and at each power of ten, not per event: a full queue
            // is a storm, and a line per dropped event was a second one.
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if is_power_of_ten(dropped) {
                tracing::warn!(
                    reason,
                    dropped,
                    "event queue full ({QUEUE} waiting); events dropped since the start"
                );
            }
        }
    }

    /// A pod's `Nominated` event for `target` (`nodeclaim/NAME`, `node/NAME`), under upstream's
    /// limits: once per pod per 2 minutes, 5 per second overall.
    pub async fn nominated_pod(&self, pod: &PodRecord, target: &str) {
        self.publish_under(
            &Policy::pod_nomination(&pod.uid_or_key()),
            pod_ref(pod),
            NORMAL,
            "Nominated",
            &format!("Pod should schedule on: {target}"),
        )
        .await;
    }

    /// A pod's `FailedScheduling` event: written once per pod and message per 5 minutes.
    pub async fn pod_failed_to_schedule(&self, pod: &PodRecord, message: &str) {
        self.publish_under(
            &Policy::pod_failed_to_schedule(&pod.uid_or_key(), message),
            pod_ref(pod),
            WARNING,
            "FailedScheduling",
            message,
        )
        .await;
    }

    pub async fn warn_pod(&self, pod: &PodRecord, reason: &str, note: &str) {
        self.publish(pod_ref(pod), WARNING, reason, note).await;
    }

    pub async fn normal_pod(&self, pod: &PodRecord, reason: &str, note: &str) {
        self.publish(pod_ref(pod), NORMAL, reason, note).await;
    }

    pub async fn warn_node_pool(&self, pool: &NodePool, reason: &str, note: &str) {
        self.publish(pool.object_ref(&()), WARNING, reason, note)
            .await;
    }

    pub async fn normal_node_pool(&self, pool: &NodePool, reason: &str, note: &str) {
        self.publish(pool.object_ref(&()), NORMAL, reason, note)
            .await;
    }

    pub async fn warn_node_claim(&self, claim: &NodeClaim, reason: &str, note: &str) {
        self.publish(claim.object_ref(&()), WARNING, reason, note)
            .await;
    }

    pub async fn normal_node_claim(&self, claim: &NodeClaim, reason: &str, note: &str) {
        self.publish(claim.object_ref(&()), NORMAL, reason, note)
            .await;
    }

    pub async fn normal_node(&self, node: &Node, reason: &str, note: &str) {
        self.publish(node.object_ref(&()), NORMAL, reason, note)
            .await;
    }

    pub async fn warn_node_class(
        &self,
        class: &karpenter_api::v1::EC2NodeClass,
        reason: &str,
        note: &str,
    ) {
        self.publish(class.object_ref(&()), WARNING, reason, note)
            .await;
    }

    pub async fn warn_node(&self, node: &Node, reason: &str, note: &str) {
        self.publish(node.object_ref(&()), WARNING, reason, note)
            .await;
    }
}

/// 1, 10, 100, ...
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

/// The reference an event about `pod` names (as kube's `Resource::object_ref` makes it).
fn pod_ref(pod: &PodRecord) -> ObjectReference {
    use k8s_openapi::Resource as _;
    ObjectReference {
        api_version: Some(Pod::API_VERSION.into()),
        kind: Some(Pod::KIND.into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::{action, is_power_of_ten};

    #[test]
    fn drops_are_logged_at_one_and_each_power_of_ten() {
        let logged: Vec<u64> = (1..=20_000).filter(|n| is_power_of_ten(*n)).collect();
        assert_eq!(logged, vec![1, 10, 100, 1_000, 10_000]);
    }

    #[test]
    fn an_event_with_a_new_note_gets_a_new_action_and_a_repeat_the_same() {
        let first = action("DisruptionBlocked", "not consolidatable until 10:00:05 UTC");
        assert_eq!(
            first,
            action("DisruptionBlocked", "not consolidatable until 10:00:05 UTC")
        );
        assert_ne!(
            first,
            action(
                "DisruptionBlocked",
                "blocked: PDB shop/web allows 0 disruptions"
            )
        );
        assert!(first.starts_with("DisruptionBlocked-"));
        assert!(first.len() <= 128, "the API's limit for action");
    }
}
