//! Per-key exponential backoff of failed steps: a step that failed for a key waits `first`,
//! then twice as long after each further failure, at most `max`; a success forgets it. A
//! different step for the same key is a new start (a NodeClaim whose launch keeps failing is
//! still finalized at once when it is deleted).
//!
//! It also says whether a failure is worth a warning: the first one, and one whose message
//! differs from the last (a step failing the same way every few minutes is logged once per
//! change, not at every retry).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The failures of one key's step.
#[derive(Debug, Clone)]
struct Failures {
    count: u32,
    until: Instant,
    message: String,
}

/// What [`Backoff::failed`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed {
    /// How long the step waits before it is tried again.
    pub delay: Duration,
    /// The failures in a row, this one included.
    pub count: u32,
    /// The first failure, or one that differs from the last: log it as a warning.
    pub news: bool,
}

/// Failed steps by key and step name, and when each may run again.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: HashMap<(String, &'static str), Failures>,
}

impl Backoff {
    /// Waits `first` after a first failure, doubling up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            failures: HashMap::new(),
        }
    }

    /// `step` of `key` failed at `now` with `message`: how long it waits.
    pub fn failed(&mut self, key: &str, step: &'static str, message: &str, now: Instant) -> Failed {
        let key = (key.to_owned(), step);
        let previous = self.failures.get(&key);
        let count = previous.map_or(0, |f| f.count).saturating_add(1);
        let news = previous.is_none_or(|f| f.message != message);
        let delay = self
            .first
            .saturating_mul(2u32.saturating_pow(count.saturating_sub(1).min(20)))
            .min(self.max);
        self.failures.insert(
            key,
            Failures {
                count,
                until: now + delay,
                message: message.to_owned(),
            },
        );
        Failed { delay, count, news }
    }

    /// `step` of `key` failed and is to be tried again after exactly `delay` (the error said
    /// how long), counted like any failure.
    pub fn failed_for(
        &mut self,
        key: &str,
        step: &'static str,
        message: &str,
        delay: Duration,
        now: Instant,
    ) -> Failed {
        let mut failed = self.failed(key, step, message, now);
        if let Some(f) = self.failures.get_mut(&(key.to_owned(), step)) {
            f.until = now + delay;
        }
        failed.delay = delay;
        failed
    }

    /// `step` of `key` succeeded: its failures are forgotten.
    pub fn succeeded(&mut self, key: &str, step: &'static str) {
        self.failures.remove(&(key.to_owned(), step));
    }

    /// Until when `step` of `key` waits at `now`; `None` when it may run.
    pub fn waiting(&self, key: &str, step: &'static str, now: Instant) -> Option<Instant> {
        self.failures
            .get(&(key.to_owned(), step))
            .map(|f| f.until)
            .filter(|until| *until > now)
    }

    /// Forgets every key `keep` rejects (objects that are gone), so the map does not grow
    /// with every NodeClaim that ever failed.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.failures.retain(|(key, _), _| keep(key));
    }

    /// How many key/step pairs wait.
    pub fn len(&self) -> usize {
        self.failures.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.failures.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_up_to_the_cap_and_a_success_forgets() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let now = Instant::now();
        let delays: Vec<u64> = (0..12)
            .map(|_| backoff.failed("a", "launch", "boom", now).delay.as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert!(backoff.waiting("a", "launch", now).is_some());
        assert!(
            backoff
                .waiting("a", "launch", now + Duration::from_secs(300))
                .is_none()
        );
        backoff.succeeded("a", "launch");
        assert_eq!(
            backoff.failed("a", "launch", "boom", now).delay,
            Duration::from_secs(1)
        );
    }

    #[test]
    fn another_step_of_the_same_key_does_not_wait() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let now = Instant::now();
        backoff.failed("claim", "launch", "boom", now);
        assert!(backoff.waiting("claim", "launch", now).is_some());
        assert!(backoff.waiting("claim", "remove-finalizer", now).is_none());
        assert!(backoff.waiting("other", "launch", now).is_none());
    }

    #[test]
    fn only_the_first_failure_and_a_changed_message_are_news() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let now = Instant::now();
        let news: Vec<bool> = ["denied", "denied", "denied", "throttled", "throttled"]
            .iter()
            .map(|m| backoff.failed("k", "resolve", m, now).news)
            .collect();
        assert_eq!(news, [true, false, false, true, false]);
    }

    #[test]
    fn an_error_that_names_its_delay_waits_exactly_that_long() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let now = Instant::now();
        let failed = backoff.failed_for("k", "s", "later", Duration::from_secs(42), now);
        assert_eq!(failed.delay, Duration::from_secs(42));
        assert_eq!(
            backoff.waiting("k", "s", now),
            Some(now + Duration::from_secs(42))
        );
    }

    #[test]
    fn keys_of_objects_that_are_gone_are_forgotten() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let now = Instant::now();
        backoff.failed("gone", "s", "x", now);
        backoff.failed("here", "s", "x", now);
        backoff.retain(|key| key == "here");
        assert_eq!(backoff.len(), 1);
        assert!(backoff.waiting("here", "s", now).is_some());
    }
}
