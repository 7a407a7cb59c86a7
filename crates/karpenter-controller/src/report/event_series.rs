//! Which recent events a new one repeats, remembered in a few dozen bytes each.
//!
//! An event repeated within [`SERIES_WINDOW`] (same type, reason, action and object) is folded
//! into the first one's `series` instead of being written as a new object, as client-go and
//! kube's `Recorder` do. kube's `Recorder` remembers each recent event whole (the
//! `events.k8s.io/v1` object, ~1.4 KB with its hash-map slot), which after a batch that
//! nominates 1,000 pods held 3 MiB for six minutes, the largest single item of the
//! controller's heap (heaptrack, `scripts/bench-controller --case scaleout`). [`Series`] keeps a
//! 64-bit digest of the key, the event's name and namespace, its count and when it was last
//! seen, and gives the table's memory back once it has emptied.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How long an event can be repeated into a series (kube's `Recorder` and client-go: 6 min).
pub const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events the same: everything but the note's text (which `action` digests)
/// and the time.
pub fn key(type_: &str, reason: &str, action: &str, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    (type_, reason, action).hash(&mut hasher);
    (
        &regarding.api_version,
        &regarding.kind,
        &regarding.namespace,
        &regarding.name,
        &regarding.uid,
    )
        .hash(&mut hasher);
    hasher.finish()
}

/// A recent event: where it is and how often it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recent {
    pub name: Box<str>,
    pub namespace: Box<str>,
    /// Occurrences so far, the first included.
    pub count: i32,
    pub last: Timestamp,
}

/// What to write for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// A new Event object.
    Create,
    /// A repeat: patch the existing object's `series` to this count.
    Repeat {
        name: Box<str>,
        namespace: Box<str>,
        count: i32,
    },
}

/// The recent events by key digest.
#[derive(Debug, Default)]
pub struct Series {
    recent: HashMap<u64, Recent>,
}

impl Series {
    /// What to write for an event with `key` at `now`; forgets events older than the window.
    pub fn write_for(&mut self, key: u64, now: Timestamp) -> Write {
        self.forget_before(now - SERIES_WINDOW);
        match self.recent.get(&key) {
            Some(recent) => Write::Repeat {
                name: recent.name.clone(),
                namespace: recent.namespace.clone(),
                count: recent.count.saturating_add(1),
            },
            None => Write::Create,
        }
    }

    /// Remembers that the event with `key` was written (created as `name` in `namespace`, or
    /// repeated) at `now`.
    pub fn written(&mut self, key: u64, name: &str, namespace: &str, now: Timestamp) {
        let recent = self.recent.entry(key).or_insert_with(|| Recent {
            name: name.into(),
            namespace: namespace.into(),
            count: 0,
            last: now,
        });
        recent.count = recent.count.saturating_add(1);
        recent.last = now;
    }

    /// Forgets the event with `key` (its object is gone).
    pub fn forget(&mut self, key: u64) {
        self.recent.remove(&key);
    }

    /// Events remembered now.
    pub fn len(&self) -> usize {
        self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// Room held for events (a table never shrinks by itself).
    pub fn capacity(&self) -> usize {
        self.recent.capacity()
    }

    fn forget_before(&mut self, cutoff: Timestamp) {
        self.recent.retain(|_, recent| recent.last > cutoff);
        if self.recent.len() < self.recent.capacity() / 4 {
            self.recent.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("shop".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_repeat_within_the_window_patches_the_first_event_with_a_growing_count() {
        let mut series = Series::default();
        let k = key("Warning", "FailedScheduling", "a", &pod("web-1"));
        assert_eq!(series.write_for(k, at(0)), Write::Create);
        series.written(k, "web-1.18b", "shop", at(0));
        for (second, count) in [(10, 2), (20, 3)] {
            assert_eq!(
                series.write_for(k, at(second)),
                Write::Repeat {
                    name: "web-1.18b".into(),
                    namespace: "shop".into(),
                    count,
                }
            );
            series.written(
                k,
                "ignored: the name stays the first one's",
                "x",
                at(second),
            );
        }
    }

    #[test]
    fn an_event_after_the_window_is_a_new_one() {
        let mut series = Series::default();
        let k = key("Normal", "Nominated", "a", &pod("web-1"));
        series.written(k, "web-1.1", "shop", at(0));
        assert_eq!(series.write_for(k, at(6 * 60 + 1)), Write::Create);
        assert!(series.is_empty());
    }

    #[test]
    fn the_key_tells_objects_reasons_and_notes_apart() {
        let base = key("Normal", "Nominated", "a", &pod("web-1"));
        assert_eq!(base, key("Normal", "Nominated", "a", &pod("web-1")));
        assert_ne!(base, key("Normal", "Nominated", "a", &pod("web-2")));
        assert_ne!(base, key("Warning", "Nominated", "a", &pod("web-1")));
        assert_ne!(base, key("Normal", "Evicted", "a", &pod("web-1")));
        assert_ne!(base, key("Normal", "Nominated", "b", &pod("web-1")));
    }

    #[test]
    fn the_table_gives_its_memory_back_once_its_events_are_old() {
        let mut series = Series::default();
        for i in 0..1000 {
            let k = key("Normal", "Nominated", "a", &pod(&format!("web-{i}")));
            series.written(k, &format!("web-{i}.1"), "shop", at(0));
        }
        assert_eq!(series.len(), 1000);
        let full = series.capacity();
        let k = key("Normal", "Nominated", "a", &pod("late"));
        assert_eq!(series.write_for(k, at(400)), Write::Create);
        series.written(k, "late.1", "shop", at(400));
        assert_eq!(series.len(), 1);
        assert!(
            series.capacity() < full / 8,
            "capacity {} after emptying, {full} when full",
            series.capacity()
        );
    }
}
