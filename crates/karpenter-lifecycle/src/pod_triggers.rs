//! Which provisionable pods trigger the batch window at a look over them, as upstream's
//! `provisioner.trigger.pod` controller does: a pod triggers when it is first seen
//! provisionable, whenever it changed (a new `resourceVersion`: kube-scheduler rewrote its
//! `PodScheduled` condition, it was nominated, its spec changed), and every [`POD_REQUEUE`]
//! while it stays provisionable (that controller's `RequeueAfter`).
//!
//! So a pod a batch left pending (nominated to an in-flight NodeClaim, or placed nowhere)
//! opens the next batch only when it changes or 10 s later, not at the next look; and while a
//! scale-out keeps kube-scheduler rewriting the pending pods' conditions, each rewrite is a
//! trigger the [`crate::Batcher`] has not seen in its window, which keeps the window open up to
//! `BATCH_MAX_DURATION`, gathering the burst into fewer, larger NodeClaims as upstream does.
//!
//! Generic over the clock, like the [`crate::Batcher`].

use std::collections::HashMap;
use std::ops::Add;
use std::time::Duration;

/// How often a pod that stays provisionable triggers the window again (upstream's pod
/// controller requeues a provisionable pod every 10 s).
pub const POD_REQUEUE: Duration = Duration::from_secs(10);

/// What is remembered of one provisionable pod.
#[derive(Debug, Clone, Copy)]
struct Noted<T> {
    /// Its `resourceVersion` when it last triggered.
    version: u64,
    /// When it last triggered.
    triggered: T,
    /// When it was last looked at (still provisionable then).
    seen: T,
}

/// The provisionable pods' last triggers, by uid.
#[derive(Debug, Clone)]
pub struct PodTriggers<T> {
    requeue: Duration,
    pods: HashMap<String, Noted<T>>,
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Default for PodTriggers<T> {
    fn default() -> Self {
        Self::new(POD_REQUEUE)
    }
}

impl<T: Copy + Ord + Add<Duration, Output = T>> PodTriggers<T> {
    pub fn new(requeue: Duration) -> Self {
        PodTriggers {
            requeue,
            pods: HashMap::new(),
        }
    }

    /// The provisionable pod `uid`, at `version`, looked at `now`: whether it triggers the
    /// window (first seen, changed since it last did, or [`POD_REQUEUE`] after it last did).
    pub fn due(&mut self, uid: &str, version: u64, now: T) -> bool {
        // Looked up before the uid is copied: nearly every pod of a look was seen before.
        if let Some(noted) = self.pods.get_mut(uid) {
            noted.seen = now;
            let due = noted.version != version || noted.triggered + self.requeue <= now;
            if due {
                noted.version = version;
                noted.triggered = now;
            }
            return due;
        }
        self.pods.insert(
            uid.to_owned(),
            Noted {
                version,
                triggered: now,
                seen: now,
            },
        );
        true
    }

    /// Forgets the pods not looked at since `since` (no longer provisionable): one that
    /// becomes provisionable again triggers as a new one.
    pub fn forget_unseen(&mut self, since: T) {
        self.pods.retain(|_, noted| noted.seen >= since);
    }

    /// How many pods are remembered.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn a_pod_triggers_when_first_seen_and_not_again_while_unchanged() {
        let mut t = PodTriggers::default();
        assert!(t.due("a", 7, s(0)));
        assert!(!t.due("a", 7, ms(100)));
        assert!(!t.due("a", 7, ms(9_900)));
    }

    #[test]
    fn a_pod_that_stays_provisionable_triggers_again_every_ten_seconds() {
        let mut t = PodTriggers::default();
        assert!(t.due("a", 7, s(0)));
        assert!(t.due("a", 7, s(10)));
        assert!(!t.due("a", 7, s(15)));
        assert!(t.due("a", 7, s(20)));
    }

    #[test]
    fn a_changed_pod_triggers_at_once_and_restarts_its_requeue() {
        let mut t = PodTriggers::default();
        assert!(t.due("a", 7, s(0)));
        assert!(t.due("a", 8, s(3)));
        assert!(!t.due("a", 8, s(10)));
        assert!(t.due("a", 8, s(13)));
    }

    #[test]
    fn pods_trigger_each_on_their_own() {
        let mut t = PodTriggers::default();
        assert!(t.due("a", 1, s(0)));
        assert!(t.due("b", 1, s(4)));
        assert!(t.due("a", 1, s(10)));
        assert!(!t.due("b", 1, s(10)));
        assert!(t.due("b", 1, s(14)));
    }

    #[test]
    fn a_pod_forgotten_while_not_provisionable_triggers_as_new_when_it_is_again() {
        let mut t = PodTriggers::default();
        assert!(t.due("a", 1, s(0)));
        assert!(t.due("b", 1, s(0)));
        // A look at 2 s sees only b: a is bound (or gone).
        assert!(!t.due("b", 1, s(2)));
        t.forget_unseen(s(2));
        assert_eq!(t.len(), 1);
        assert!(t.due("a", 1, s(3)), "a was forgotten, so it is new again");
        assert!(!t.due("b", 1, s(3)));
    }
}
