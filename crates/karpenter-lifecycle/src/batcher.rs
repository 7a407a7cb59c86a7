//! The provisioning batch window (upstream `Batcher`): the first trigger opens a batch; it
//! closes when no new *distinct* trigger arrived for the idle duration, or when the maximum
//! duration since it opened has passed. A trigger seen before in the same batch (the same pod
//! reconciled again) does not extend it.
//!
//! Generic over the clock: the controller uses `tokio::time::Instant`, a virtual clock can use
//! `std::time::Duration` since its start.

use std::collections::HashSet;
use std::ops::Add;
use std::time::Duration;

/// Upstream's `BATCH_IDLE_DURATION` default.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(1);
/// Upstream's `BATCH_MAX_DURATION` default.
pub const DEFAULT_MAX: Duration = Duration::from_secs(10);

/// How long an existing node stays nominated for the pods a batch placed on it (upstream: the
/// larger of two batch max durations and 10 s).
pub fn nomination_window(batch_max: Duration) -> Duration {
    (batch_max * 2).max(Duration::from_secs(10))
}

/// One batch window at a time.
#[derive(Debug, Clone)]
pub struct Batcher<T> {
    idle: Duration,
    max: Duration,
    /// (opened, last new trigger) of the open batch.
    open: Option<(T, T)>,
    seen: HashSet<String>,
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Batcher<T> {
    pub fn new(idle: Duration, max: Duration) -> Self {
        Batcher {
            idle,
            max,
            open: None,
            seen: HashSet::new(),
        }
    }

    /// Something needs provisioning (`key`: a pod uid). Opens a batch or, for a key not seen
    /// in this batch, extends its idle window.
    pub fn trigger(&mut self, key: &str, now: T) {
        // Looked up before it is copied: the provisioner triggers every pending pod on every
        // scan, and nearly all were seen already.
        let new = !self.seen.contains(key) && self.seen.insert(key.to_owned());
        match &mut self.open {
            None => self.open = Some((now, now)),
            Some((_, last)) if new => *last = now,
            Some(_) => {}
        }
    }

    /// When the open batch closes, if one is open.
    pub fn deadline(&self) -> Option<T> {
        self.open
            .map(|(opened, last)| (last + self.idle).min(opened + self.max))
    }

    /// Closes the batch when its deadline has passed; true when it did (provision now).
    pub fn poll(&mut self, now: T) -> bool {
        match self.deadline() {
            Some(deadline) if deadline <= now => {
                self.open = None;
                self.seen.clear();
                true
            }
            _ => false,
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    fn batcher() -> Batcher<Duration> {
        Batcher::new(s(1), s(10))
    }

    #[test]
    fn a_node_stays_nominated_for_two_batch_maxima_and_at_least_ten_seconds() {
        assert_eq!(nomination_window(DEFAULT_MAX), s(20));
        assert_eq!(nomination_window(s(2)), s(10));
    }

    #[test]
    fn a_lone_trigger_closes_the_batch_after_the_idle_duration() {
        let mut b = batcher();
        assert_eq!(b.deadline(), None);
        b.trigger("pod-a", s(5));
        assert_eq!(b.deadline(), Some(s(6)));
        assert!(!b.poll(s(5)));
        assert!(b.poll(s(6)));
        assert!(!b.is_open());
        assert!(!b.poll(s(7)), "a closed batch does not fire again");
    }

    #[test]
    fn new_pods_extend_the_window_until_the_maximum() {
        let mut b = batcher();
        for t in 0..20 {
            b.trigger(&format!("pod-{t}"), s(t));
            if b.poll(s(t)) {
                assert_eq!(
                    t, 10,
                    "the batch closes at the maximum, 10 s after it opened"
                );
                return;
            }
        }
        panic!("the batch never closed");
    }

    #[test]
    fn the_same_pod_again_does_not_extend_the_window() {
        let mut b = batcher();
        b.trigger("pod-a", s(0));
        b.trigger("pod-a", Duration::from_millis(900));
        assert_eq!(b.deadline(), Some(s(1)));
        assert!(b.poll(s(1)));
        b.trigger("pod-a", s(2));
        assert_eq!(b.deadline(), Some(s(3)), "a new batch opens for it again");
    }
}
