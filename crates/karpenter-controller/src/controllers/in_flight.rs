//! Which objects a loop has a step in flight for, so it starts at most one per object, and
//! which wait after a failed step.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Names of objects with a step in flight, shared by a loop and the tasks it spawns.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<Mutex<HashSet<String>>>);

impl InFlight {
    /// The set, to look at and mark names in one critical section (a panicked holder does not
    /// make it unusable: the set is only ever inserted to and removed from).
    pub fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        match self.0.lock() {
            Ok(set) => set,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The step for `name` ended.
    pub fn done(&self, name: &str) {
        self.lock().remove(name);
    }
}

/// When objects whose last step failed may be tried again: 1 s after the first failure,
/// doubling, at most [`Backoff::MAX`] (a step failing against a cloud API is not retried at
/// scan speed); a success forgets the object.
#[derive(Debug, Clone, Default)]
pub struct Backoff(Arc<Mutex<HashMap<String, (u32, Instant)>>>);

impl Backoff {
    pub const FIRST: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(300);

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (u32, Instant)>> {
        match self.0.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// `name`'s step failed at `now`; the delay before it is tried again.
    pub fn failed(&self, name: &str, now: Instant) -> Duration {
        let mut map = self.lock();
        let failures = map.get(name).map_or(0, |(n, _)| *n).saturating_add(1);
        let delay = Self::FIRST
            .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
            .min(Self::MAX);
        map.insert(name.to_owned(), (failures, now + delay));
        delay
    }

    /// `name`'s step succeeded.
    pub fn succeeded(&self, name: &str) {
        self.lock().remove(name);
    }

    /// The objects still waiting at `now`.
    pub fn waiting(&self, now: Instant) -> HashSet<String> {
        self.lock()
            .iter()
            .filter(|(_, (_, until))| *until > now)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_up_to_the_cap_and_a_success_forgets() {
        let backoff = Backoff::default();
        let now = Instant::now();
        let delays: Vec<u64> = (0..12)
            .map(|_| backoff.failed("a", now).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert!(backoff.waiting(now).contains("a"));
        assert!(!backoff.waiting(now + Backoff::MAX).contains("a"));
        backoff.succeeded("a");
        assert_eq!(backoff.failed("a", now), Backoff::FIRST);
    }
}
