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

/// The event's `action`: its reason and a digest of its note. kube's [`Recorder`] folds a
/// repeat of the same (type, reason, action, object) into a series of the *first* event, note
/// included, so an event whose note changed (`DisruptionBlocked` with a new reason,
/// `FailedScheduling` with new lines) would keep showing the old one. client-go keys on the
/// message too; putting the note's digest in `action` does the same here.
fn action(reason: &str, note: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in note.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{reason}-{hash:08x}")
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
            action: action(reason, &note),
            note: Some(note),
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

    pub async fn warn_node_class(
        &self,
        class: &karpenter_api::v1::EC2NodeClass,
        reason: &str,
        note: &str,
    ) {
        self.publish(class.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }

    pub async fn warn_node(&self, node: &Node, reason: &str, note: &str) {
        self.publish(node.object_ref(&()), EventType::Warning, reason, note)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::action;

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
