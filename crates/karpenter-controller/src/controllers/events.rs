//! Kubernetes events with upstream's reasons, through kube's [`Recorder`] (which aggregates
//! repeats of the same event into a series instead of writing a new object each time).
//!
//! Publishing never waits for the API server: events go through a bounded queue to one
//! writer task (as client-go's broadcaster does for upstream), so a batch that nominates
//! 1,000 pods creates its NodeClaims without 1,000 round trips in between. When the queue is
//! full the event is dropped and counted in the log. A failure to publish is logged, never
//! fatal: events are for people.

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use karpenter_api::v1::{NodeClaim, NodePool};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::mpsc;

/// Events waiting for the writer task, at most.
const QUEUE: usize = 2048;

/// The controller's event recorder.
#[derive(Clone)]
pub struct Events {
    queue: mpsc::Sender<(ObjectReference, Event)>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: "karpenter".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let recorder = Recorder::new(client, reporter);
        let (queue, mut pending) = mpsc::channel::<(ObjectReference, Event)>(QUEUE);
        tokio::spawn(async move {
            while let Some((reference, event)) = pending.recv().await {
                if let Err(error) = recorder.publish(&event, &reference).await {
                    tracing::warn!(%error, reason = %event.reason, "publishing an event failed");
                }
            }
        });
        Events { queue }
    }

    async fn publish(
        &self,
        reference: ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
    ) {
        let mut note = note.to_owned();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send((reference, event)) {
            tracing::warn!(
                reason,
                "event queue full ({QUEUE} waiting); an event was dropped"
            );
        }
    }

    pub async fn warn_pod(&self, pod: &Pod, reason: &str, note: &str) {
        self.publish(pod.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }

    pub async fn normal_pod(&self, pod: &Pod, reason: &str, note: &str) {
        self.publish(pod.object_ref(&()), EventType::Normal, reason, note)
            .await;
    }

    pub async fn warn_node_pool(&self, pool: &NodePool, reason: &str, note: &str) {
        self.publish(pool.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }

    pub async fn warn_node_claim(&self, claim: &NodeClaim, reason: &str, note: &str) {
        self.publish(claim.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }

    pub async fn normal_node_claim(&self, claim: &NodeClaim, reason: &str, note: &str) {
        self.publish(claim.object_ref(&()), EventType::Normal, reason, note)
            .await;
    }

    pub async fn normal_node(&self, node: &Node, reason: &str, note: &str) {
        self.publish(node.object_ref(&()), EventType::Normal, reason, note)
            .await;
    }

    pub async fn warn_node(&self, node: &Node, reason: &str, note: &str) {
        self.publish(node.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }
}
