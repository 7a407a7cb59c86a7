//! Kubernetes events with upstream's reasons, through kube's [`Recorder`] (which aggregates
//! repeats of the same event into a series instead of writing a new object each time).
//! A failure to publish is logged, never fatal: events are for people.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use karpenter_api::v1::{NodeClaim, NodePool};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};

/// The controller's event recorder.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
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
        Events {
            recorder: Recorder::new(client, reporter),
        }
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
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason, "publishing an event failed");
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
}
