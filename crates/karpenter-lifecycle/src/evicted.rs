//! The pods a drain has evicted and the controller's copy does not yet show terminating.
//!
//! The Eviction API answers with a `Status`, not the pod: the controller learns that the pod is
//! terminating only when the watch delivers its new `deletionTimestamp`. A drain pass in
//! between (passes run every 200 ms while nodes drain, and the watch lags when a scale-down
//! evicts hundreds of pods at once) would ask for the same pod again; the API server answers a
//! second eviction of a terminating pod with 200 too, so the request is sent, counted in
//! `karpenter_pods_eviction_requests_total` and told as another `Evicted` event, for nothing:
//! the first eviction's deletion cannot be taken back. [`Evicted`] remembers each pod evicted
//! (by UID, so a new pod of the same name is not mistaken for it) for [`REMEMBERED`], and
//! [`Evicted::skip_in`] drops those pods' evictions from a drain plan: they still count as
//! waited for, so the drain ends only when they are gone. A pod still not terminating in the
//! copy after [`REMEMBERED`] is asked for again.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::termination::{DrainPlan, PodAction};

/// How long an evicted pod's eviction is not asked for again.
pub const REMEMBERED: Duration = Duration::from_secs(60);

/// Evicted pods by UID, with when they were evicted.
#[derive(Debug, Default, Clone)]
pub struct Evicted {
    at: HashMap<String, DateTime<Utc>>,
}

impl Evicted {
    /// Remembers that the pod with `uid` was evicted at `now`.
    pub fn record(&mut self, uid: &str, now: DateTime<Utc>) {
        self.at.insert(uid.to_owned(), now);
    }

    /// Whether the pod with `uid` was evicted less than [`REMEMBERED`] before `now`.
    pub fn contains(&self, uid: &str, now: DateTime<Utc>) -> bool {
        self.at.get(uid).is_some_and(|&at| fresh(at, now))
    }

    /// Forgets the evictions older than [`REMEMBERED`].
    pub fn forget_old(&mut self, now: DateTime<Utc>) {
        self.at.retain(|_, at| fresh(*at, now));
    }

    /// Whether no eviction is remembered.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Drops from `plan` the evictions of pods evicted already (`uid_of` gives a pod's UID by
    /// its `namespace/name`); returns how many. Deletions past a termination deadline stay:
    /// they shorten the grace period an eviction gave.
    pub fn skip_in<'a>(
        &self,
        plan: &mut DrainPlan,
        uid_of: impl Fn(&str) -> Option<&'a str>,
        now: DateTime<Utc>,
    ) -> usize {
        let before = plan.actions.len();
        plan.actions.retain(|(key, action)| {
            *action != PodAction::Evict || !uid_of(key).is_some_and(|uid| self.contains(uid, now))
        });
        before - plan.actions.len()
    }
}

fn fresh(at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    (now - at).to_std().map_or(true, |age| age < REMEMBERED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap_or_default()
    }

    fn plan() -> DrainPlan {
        DrainPlan {
            actions: vec![
                ("shop/a".into(), PodAction::Evict),
                ("shop/b".into(), PodAction::Evict),
                (
                    "shop/c".into(),
                    PodAction::ForceDelete {
                        grace_period_seconds: 5,
                    },
                ),
            ],
            waiting: 3,
            ..DrainPlan::default()
        }
    }

    fn uid_of(key: &str) -> Option<&'static str> {
        match key {
            "shop/a" => Some("uid-a"),
            "shop/b" => Some("uid-b"),
            "shop/c" => Some("uid-c"),
            _ => None,
        }
    }

    #[test]
    fn a_pod_evicted_already_is_not_asked_for_again_but_is_still_waited_for() {
        let mut evicted = Evicted::default();
        evicted.record("uid-a", at(0));
        evicted.record("uid-c", at(0));
        let mut plan = plan();
        assert_eq!(evicted.skip_in(&mut plan, uid_of, at(1)), 1);
        let keys: Vec<&str> = plan.actions.iter().map(|(k, _)| k.as_str()).collect();
        // The deletion past the deadline stays even for a pod evicted before.
        assert_eq!(keys, ["shop/b", "shop/c"]);
        assert_eq!(plan.waiting, 3);
    }

    #[test]
    fn a_new_pod_of_the_same_name_is_evicted() {
        let mut evicted = Evicted::default();
        evicted.record("uid-a-old", at(0));
        let mut plan = plan();
        assert_eq!(evicted.skip_in(&mut plan, uid_of, at(1)), 0);
        assert_eq!(plan.actions.len(), 3);
    }

    #[test]
    fn a_pod_still_not_terminating_after_a_minute_is_asked_for_again_and_forgotten() {
        let mut evicted = Evicted::default();
        evicted.record("uid-a", at(0));
        assert!(evicted.contains("uid-a", at(59)));
        assert!(!evicted.contains("uid-a", at(60)));
        let mut plan = plan();
        assert_eq!(evicted.skip_in(&mut plan, uid_of, at(60)), 0);
        evicted.forget_old(at(59));
        assert!(!evicted.is_empty());
        evicted.forget_old(at(60));
        assert!(evicted.is_empty());
    }
}
