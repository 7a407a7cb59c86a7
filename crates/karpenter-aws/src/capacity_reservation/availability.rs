//! Free slots per capacity reservation between two `DescribeCapacityReservations` answers
//! (upstream's `availabilityCache`): an answer sets the counts ([`Availability::sync`]), a
//! launch into a reservation takes one ([`Availability::mark_launched`]), a terminated
//! instance gives one back, once per instance ([`Availability::mark_terminated`]), and a
//! launch that found the reservation full zeroes it ([`Availability::set`]) until the next
//! answer says otherwise. A reservation a launch found without capacity for another reason is
//! unavailable for [`karpenter_cloud::UNAVAILABLE_FOR`] ([`Availability::mark_unavailable`]),
//! scoped to that reservation as upstream scopes its ICE cache entry.
//!
//! On a clock `T` given by the caller (no clock is read here).

use std::collections::HashMap;
use std::ops::Add;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a terminated instance is remembered, so its slot is given back once (upstream's
/// `terminatedInstanceTTL`).
pub const TERMINATED_INSTANCE_TTL: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy)]
struct Entry<T> {
    count: u32,
    synced: T,
}

#[derive(Debug)]
struct Inner<T> {
    counts: HashMap<String, Entry<T>>,
    /// Instances whose slot was given back, until when they are remembered.
    terminated: HashMap<String, T>,
    /// Reservations a launch found unavailable, until when.
    unavailable: HashMap<String, T>,
}

/// The free slots of the reservations the classes select, on the clock `T`.
#[derive(Debug)]
pub struct Availability<T> {
    inner: Mutex<Inner<T>>,
    version: AtomicU64,
}

impl<T> Default for Availability<T> {
    fn default() -> Self {
        Availability {
            inner: Mutex::new(Inner {
                counts: HashMap::new(),
                terminated: HashMap::new(),
                unavailable: HashMap::new(),
            }),
            version: AtomicU64::new(0),
        }
    }
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Availability<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// What EC2 answered at `now`: `AvailableInstanceCount` per reservation id.
    pub fn sync(&self, counts: impl IntoIterator<Item = (String, u32)>, now: T) {
        let mut inner = self.lock();
        let mut changed = false;
        for (id, count) in counts {
            let previous = inner.counts.insert(id, Entry { count, synced: now });
            changed |= previous.is_none_or(|p| p.count != count);
        }
        drop(inner);
        if changed {
            self.changed();
        }
    }

    /// Forces the count (a launch found the reservation full: 0).
    pub fn set(&self, id: &str, count: u32, now: T) {
        let previous = self
            .lock()
            .counts
            .insert(id.to_owned(), Entry { count, synced: now });
        if previous.is_none_or(|p| p.count != count) {
            self.changed();
        }
    }

    /// An instance was launched into `id` at `now`: one slot less, unless an answer read
    /// after the launch already counts it, or the reservation was never read.
    pub fn mark_launched(&self, id: &str, now: T) {
        let mut inner = self.lock();
        let Some(entry) = inner.counts.get_mut(id) else {
            return;
        };
        if entry.synced > now || entry.count == 0 {
            return;
        }
        entry.count -= 1;
        drop(inner);
        self.changed();
    }

    /// `instance` of reservation `id` is gone: its slot is back, once per instance.
    pub fn mark_terminated(&self, id: &str, instance: &str, now: T) {
        let mut inner = self.lock();
        inner.terminated.retain(|_, until| *until > now);
        if inner.terminated.contains_key(instance) {
            return;
        }
        inner
            .terminated
            .insert(instance.to_owned(), now + TERMINATED_INSTANCE_TTL);
        let Some(entry) = inner.counts.get_mut(id) else {
            return;
        };
        entry.count += 1;
        drop(inner);
        self.changed();
    }

    /// The free slots of `id` (0 for a reservation never read).
    pub fn get(&self, id: &str) -> u32 {
        self.lock().counts.get(id).map_or(0, |e| e.count)
    }

    /// A launch into `id` failed for want of capacity other than a full reservation: the
    /// reservation's offerings are unavailable for [`karpenter_cloud::UNAVAILABLE_FOR`].
    pub fn mark_unavailable(&self, id: &str, now: T) {
        self.lock()
            .unavailable
            .insert(id.to_owned(), now + karpenter_cloud::UNAVAILABLE_FOR);
        self.changed();
    }

    /// Whether `id` is marked unavailable at `now`.
    pub fn is_unavailable(&self, id: &str, now: T) -> bool {
        self.lock()
            .unavailable
            .get(id)
            .is_some_and(|until| *until > now)
    }

    /// Changes whenever a count or a mark changes (a mark's expiry is not a change: callers
    /// that cache offerings also key on the unavailable marks' own clock).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test clock: seconds.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct At(u64);

    impl Add<Duration> for At {
        type Output = At;
        fn add(self, d: Duration) -> At {
            At(self.0 + d.as_secs())
        }
    }

    #[test]
    fn launches_take_slots_down_to_zero_and_terminations_give_them_back_once() {
        let slots = Availability::new();
        slots.sync([("cr-1".to_owned(), 2)], At(0));
        slots.mark_launched("cr-1", At(1));
        slots.mark_launched("cr-1", At(2));
        slots.mark_launched("cr-1", At(3));
        assert_eq!(slots.get("cr-1"), 0, "never below zero");
        slots.mark_terminated("cr-1", "i-1", At(4));
        slots.mark_terminated("cr-1", "i-1", At(5));
        assert_eq!(
            slots.get("cr-1"),
            1,
            "a terminated instance's slot comes back once"
        );
        slots.mark_terminated("cr-1", "i-1", At(4 + 15 * 60 + 1));
        assert_eq!(slots.get("cr-1"), 2, "remembered for the TTL only");
    }

    #[test]
    fn an_answer_read_after_a_launch_is_not_decremented_and_unknown_reservations_have_no_slot() {
        let slots = Availability::new();
        slots.sync([("cr-1".to_owned(), 2)], At(10));
        slots.mark_launched("cr-1", At(9));
        assert_eq!(slots.get("cr-1"), 2);
        slots.mark_launched("cr-2", At(11));
        slots.mark_terminated("cr-2", "i-9", At(11));
        assert_eq!(slots.get("cr-2"), 0);
    }

    #[test]
    fn a_full_reservation_is_zeroed_until_the_next_answer_and_every_change_moves_the_version() {
        let slots = Availability::new();
        slots.sync([("cr-1".to_owned(), 3)], At(0));
        let v = slots.version();
        slots.set("cr-1", 0, At(1));
        assert_eq!(slots.get("cr-1"), 0);
        assert!(slots.version() > v);
        let v = slots.version();
        slots.sync([("cr-1".to_owned(), 0)], At(2));
        assert_eq!(slots.version(), v, "the same count is no change");
        slots.sync([("cr-1".to_owned(), 1)], At(3));
        assert_eq!(slots.get("cr-1"), 1);
        assert!(slots.version() > v);
    }

    #[test]
    fn an_unavailable_mark_lasts_its_ttl_and_names_one_reservation() {
        let slots = Availability::new();
        slots.mark_unavailable("cr-1", At(0));
        assert!(slots.is_unavailable("cr-1", At(1)));
        assert!(!slots.is_unavailable("cr-2", At(1)));
        let ttl = karpenter_cloud::UNAVAILABLE_FOR.as_secs();
        assert!(!slots.is_unavailable("cr-1", At(ttl)));
    }
}
