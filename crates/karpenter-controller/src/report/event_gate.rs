//! Which events are written at all: upstream's dedupe and rate limits, decided before an event
//! reaches the writer's queue.
//!
//! Upstream publishes through a recorder that drops an event whose dedupe key (its reason and
//! "dedupe values", e.g. the pod's UID) was published within the event's dedupe timeout, and
//! then an event whose token bucket is empty (`pkg/events/recorder.go`). Without both, a batch
//! of 5,000 pods asked for 5,000 `Nominated` events at once: the writer's queue (2,048) filled,
//! 1,594 events were dropped with a warning each, and the API server spent its time on event
//! writes while kube-scheduler was binding the same pods (`scripts/bench-controller --pods 5000`).
//!
//! [`Gate`] is pure: it is given `now` and remembers a 64-bit digest and an expiry per key.
//! It must not write anything; [`super::events`] asks it before queueing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// A named token bucket shared by every event that names it (upstream keeps one per kind of
/// event, as a package variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// `Nominated` pod events: upstream's `PodNominationRateLimiter`, 5 per second, burst 10.
    PodNomination,
}

impl Bucket {
    /// Events per second, and how many may go at once.
    fn rate(self) -> (f64, f64) {
        match self {
            Bucket::PodNomination => (5.0, 10.0),
        }
    }
}

/// When an event may be skipped: upstream's `DedupeValues`, `DedupeTimeout` and `RateLimiter`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// What makes two events the same beside their reason (upstream's dedupe values); none
    /// means the event is never deduplicated.
    pub dedupe: Vec<String>,
    /// How long an event stops its repeats (upstream's default: 2 minutes).
    pub dedupe_timeout: Option<Duration>,
    /// The token bucket it draws from, if any.
    pub bucket: Option<Bucket>,
}

/// Upstream's default dedupe timeout.
pub const DEFAULT_DEDUPE_TIMEOUT: Duration = Duration::from_secs(120);

/// How often expired keys are forgotten (upstream's cache janitor: every 10 s).
const PRUNE_EVERY: Duration = Duration::from_secs(10);

impl Policy {
    /// Every event is written (events without upstream dedupe values).
    pub fn always() -> Policy {
        Policy::default()
    }

    /// Upstream's `NominatePodEvent`: once per pod per 2 minutes, 5 per second overall.
    pub fn pod_nomination(pod_uid: &str) -> Policy {
        Policy {
            dedupe: vec![pod_uid.to_owned()],
            dedupe_timeout: None,
            bucket: Some(Bucket::PodNomination),
        }
    }

    /// Upstream's `PodFailedToScheduleEvent`: once per pod per 5 minutes. Ours also keys on the
    /// message, so a pod whose reason changed is told the new one (upstream keeps the old one
    /// for the 5 minutes); a batch repeating the same reason writes nothing.
    pub fn pod_failed_to_schedule(pod_uid: &str, message: &str) -> Policy {
        Policy {
            dedupe: vec![pod_uid.to_owned(), message.to_owned()],
            dedupe_timeout: Some(Duration::from_secs(5 * 60)),
            bucket: None,
        }
    }
}

/// A bucket's tokens as of `at`.
#[derive(Debug, Clone, Copy)]
struct Tokens {
    left: f64,
    at: Instant,
}

/// What has been published recently, by dedupe key, and the buckets' tokens.
#[derive(Debug, Default)]
pub struct Gate {
    /// Digest of (reason, dedupe values) -> when that key stops deduplicating.
    seen: HashMap<u64, Instant>,
    buckets: HashMap<Bucket, Tokens>,
    pruned: Option<Instant>,
}

impl Gate {
    /// Whether an event with `reason` under `policy` is written at `now`. As upstream: a
    /// deduplicated event is skipped; otherwise its key is remembered (even when its bucket
    /// then turns it away) and it takes a token from its bucket, if it has one.
    pub fn admit(&mut self, reason: &str, policy: &Policy, now: Instant) -> bool {
        self.prune(now);
        if !policy.dedupe.is_empty() {
            let key = key(reason, &policy.dedupe);
            if self.seen.get(&key).is_some_and(|until| *until > now) {
                return false;
            }
            let timeout = policy.dedupe_timeout.unwrap_or(DEFAULT_DEDUPE_TIMEOUT);
            self.seen.insert(key, now + timeout);
        }
        match policy.bucket {
            Some(bucket) => self.take(bucket, now),
            None => true,
        }
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    fn take(&mut self, bucket: Bucket, now: Instant) -> bool {
        let (rate, burst) = bucket.rate();
        let tokens = self.buckets.entry(bucket).or_insert(Tokens {
            left: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(tokens.at).as_secs_f64();
        tokens.left = (tokens.left + elapsed * rate).min(burst);
        tokens.at = now;
        if tokens.left >= 1.0 {
            tokens.left -= 1.0;
            true
        } else {
            false
        }
    }

    fn prune(&mut self, now: Instant) {
        if self
            .pruned
            .is_some_and(|at| now.saturating_duration_since(at) < PRUNE_EVERY)
        {
            return;
        }
        self.pruned = Some(now);
        self.seen.retain(|_, until| *until > now);
        if self.seen.len() < self.seen.capacity() / 4 {
            self.seen.shrink_to_fit();
        }
    }
}

fn key(reason: &str, values: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    reason.to_ascii_lowercase().hash(&mut hasher);
    values.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn an_event_without_dedupe_values_or_bucket_is_always_written() {
        let mut gate = Gate::default();
        let now = Instant::now();
        for _ in 0..100 {
            assert!(gate.admit("Launched", &Policy::always(), now));
        }
        assert!(gate.is_empty(), "nothing to remember");
    }

    #[test]
    fn a_pod_is_nominated_once_per_two_minutes() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        assert!(gate.admit("Nominated", &Policy::pod_nomination("uid-1"), t0));
        assert!(!gate.admit(
            "Nominated",
            &Policy::pod_nomination("uid-1"),
            t0 + secs(119.0)
        ));
        assert!(
            gate.admit(
                "Nominated",
                &Policy::pod_nomination("uid-2"),
                t0 + secs(119.0)
            ),
            "another pod is another key"
        );
        assert!(gate.admit(
            "Nominated",
            &Policy::pod_nomination("uid-1"),
            t0 + secs(120.5)
        ));
    }

    #[test]
    fn nominations_of_a_burst_are_written_ten_at_once_then_five_a_second() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        let admitted = (0..5_000)
            .filter(|i| gate.admit("Nominated", &Policy::pod_nomination(&format!("p{i}")), t0))
            .count();
        assert_eq!(admitted, 10, "the burst");
        let later = (0..5_000)
            .filter(|i| {
                gate.admit(
                    "Nominated",
                    &Policy::pod_nomination(&format!("q{i}")),
                    t0 + secs(1.0),
                )
            })
            .count();
        assert_eq!(later, 5, "one second refills five tokens");
        let after_a_pause = (0..100)
            .filter(|i| {
                gate.admit(
                    "Nominated",
                    &Policy::pod_nomination(&format!("r{i}")),
                    t0 + secs(60.0),
                )
            })
            .count();
        assert_eq!(after_a_pause, 10, "the bucket holds no more than its burst");
    }

    #[test]
    fn a_nomination_turned_away_by_the_bucket_is_still_deduplicated_as_upstream() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        for i in 0..10 {
            assert!(gate.admit("Nominated", &Policy::pod_nomination(&format!("p{i}")), t0));
        }
        assert!(!gate.admit("Nominated", &Policy::pod_nomination("late"), t0));
        assert!(
            !gate.admit("Nominated", &Policy::pod_nomination("late"), t0 + secs(5.0)),
            "its key was remembered when the bucket was empty"
        );
    }

    #[test]
    fn a_failed_scheduling_repeat_is_skipped_but_a_new_reason_is_told() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        let same = Policy::pod_failed_to_schedule("uid-1", "no instance type fits");
        assert!(gate.admit("FailedScheduling", &same, t0));
        assert!(!gate.admit("FailedScheduling", &same, t0 + secs(10.0)));
        assert!(!gate.admit("FailedScheduling", &same, t0 + secs(299.0)));
        let changed = Policy::pod_failed_to_schedule("uid-1", "nodepool limit exceeded");
        assert!(gate.admit("FailedScheduling", &changed, t0 + secs(20.0)));
        assert!(gate.admit("FailedScheduling", &same, t0 + secs(301.0)));
    }

    #[test]
    fn the_reason_is_part_of_the_key_in_any_case() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        assert!(gate.admit("Nominated", &Policy::pod_nomination("uid-1"), t0));
        assert!(!gate.admit("nominated", &Policy::pod_nomination("uid-1"), t0));
        let other = Policy {
            dedupe: vec!["uid-1".to_owned()],
            ..Policy::default()
        };
        assert!(
            gate.admit("Evicted", &other, t0),
            "another reason, another key"
        );
    }

    #[test]
    fn expired_keys_are_forgotten() {
        let mut gate = Gate::default();
        let t0 = Instant::now();
        for i in 0..1_000 {
            gate.admit(
                "FailedScheduling",
                &Policy::pod_failed_to_schedule(&format!("p{i}"), "m"),
                t0,
            );
        }
        assert_eq!(gate.len(), 1_000);
        gate.admit("Launched", &Policy::always(), t0 + secs(301.0));
        assert!(gate.is_empty(), "every key expired: {}", gate.len());
    }
}
