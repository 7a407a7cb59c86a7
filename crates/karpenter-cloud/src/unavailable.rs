//! Offerings recently found without capacity (upstream's unavailable-offerings cache): every
//! provider marks an offering that failed a launch (insufficient capacity, a spot
//! interruption) unavailable for [`UNAVAILABLE_FOR`], and leaves it out of the instance types
//! it offers and of the launches it tries until the mark expires.
//!
//! One cache for every provider (the EC2 one and the simulated one). It reads no clock: the
//! caller passes `now`, on any clock (providers use `std::time::Instant`, tests a `Duration`
//! since their start, as `karpenter_lifecycle::Batcher` does). It owns the marks, their expiry and a version that changes whenever
//! the set changes (a mark added or expired), which providers fold into their catalog version
//! so callers caching instance types know to ask again.

use std::collections::{HashMap, HashSet};
use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::provider::OfferingRef;
use crate::{InstanceTypeInfo, Offering};

/// How long an offering that ran out of capacity is not offered (upstream: 3 minutes).
pub const UNAVAILABLE_FOR: Duration = Duration::from_secs(180);

/// The marks, shared by a provider's calls (`&self`), on the clock `T`.
#[derive(Debug)]
pub struct UnavailableOfferings<T = Instant> {
    until: Mutex<HashMap<OfferingRef, T>>,
    version: AtomicU64,
}

impl<T> Default for UnavailableOfferings<T> {
    fn default() -> Self {
        UnavailableOfferings {
            until: Mutex::new(HashMap::new()),
            version: AtomicU64::new(0),
        }
    }
}

/// The offerings unavailable at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unavailable(HashSet<OfferingRef>);

impl<T: Copy + Ord + Add<Duration, Output = T>> UnavailableOfferings<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<OfferingRef, T>> {
        self.until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The marks with those expired at `now` dropped (which changes the version).
    fn current(&self, now: T) -> MutexGuard<'_, HashMap<OfferingRef, T>> {
        let mut until = self.lock();
        let before = until.len();
        until.retain(|_, expires| *expires > now);
        if until.len() != before {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
        until
    }

    /// Marks `offerings` unavailable from `now` for [`UNAVAILABLE_FOR`] (a mark already there
    /// is extended). Nothing to mark changes nothing.
    pub fn mark(&self, offerings: &[OfferingRef], now: T) {
        if offerings.is_empty() {
            return;
        }
        let expires = now + UNAVAILABLE_FOR;
        let mut until = self.lock();
        for offering in offerings {
            until.insert(offering.clone(), expires);
        }
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// The offerings unavailable at `now`.
    pub fn at(&self, now: T) -> Unavailable {
        Unavailable(self.current(now).keys().cloned().collect())
    }

    /// Each offering unavailable at `now` and how long it stays so, soonest back first (then
    /// by offering): for explanations (`karpenter explain pod`).
    pub fn remaining(&self, now: T) -> Vec<(OfferingRef, Duration)>
    where
        T: Sub<Output = Duration>,
    {
        let mut marks: Vec<(OfferingRef, Duration)> = self
            .current(now)
            .iter()
            .map(|(offering, expires)| (offering.clone(), *expires - now))
            .collect();
        marks.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        marks
    }

    /// Changes whenever an offering is marked or a mark has expired by `now`.
    pub fn version(&self, now: T) -> u64 {
        drop(self.current(now));
        self.version.load(Ordering::Relaxed)
    }
}

impl Unavailable {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `instance_type`'s `offering` is marked.
    pub fn contains(&self, instance_type: &str, offering: &Offering) -> bool {
        !self.0.is_empty()
            && self.0.contains(&OfferingRef {
                instance_type: instance_type.to_owned(),
                zone: offering.zone.clone(),
                capacity_type: offering.capacity_type,
            })
    }

    /// Turns the marked offerings of `infos` unavailable (`available: false`).
    pub fn apply(&self, infos: &mut [InstanceTypeInfo]) {
        if self.0.is_empty() {
            return;
        }
        for info in infos {
            for offering in &mut info.offerings {
                if self.contains(&info.name, offering) {
                    offering.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CapacityType;

    fn offering(zone: &str, capacity_type: CapacityType) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type,
            price_per_hour: 0.1,
            available: true,
            price_is_estimate: false,
            reservation: None,
        }
    }

    fn reference(instance_type: &str, zone: &str, capacity_type: CapacityType) -> OfferingRef {
        OfferingRef {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type,
        }
    }

    #[test]
    fn a_marked_offering_is_unavailable_until_its_mark_expires() {
        let cache = UnavailableOfferings::<Duration>::new();
        let start = Duration::ZERO;
        let spot_a = offering("us-east-1a", CapacityType::Spot);
        cache.mark(
            &[reference("m5.large", "us-east-1a", CapacityType::Spot)],
            start,
        );
        assert!(cache.at(start).contains("m5.large", &spot_a));
        let on_demand_a = offering("us-east-1a", CapacityType::OnDemand);
        assert!(!cache.at(start).contains("m5.large", &on_demand_a));
        assert!(!cache.at(start).contains("m5.xlarge", &spot_a));
        let just_before = start + UNAVAILABLE_FOR - Duration::from_secs(1);
        assert!(cache.at(just_before).contains("m5.large", &spot_a));
        assert!(cache.at(start + UNAVAILABLE_FOR).is_empty());
    }

    #[test]
    fn each_marked_offering_is_told_how_long_it_stays_unavailable() {
        let cache = UnavailableOfferings::<Duration>::new();
        let early = reference("m5.large", "us-east-1a", CapacityType::Spot);
        let late = reference("c5.large", "us-east-1b", CapacityType::OnDemand);
        cache.mark(std::slice::from_ref(&early), Duration::ZERO);
        cache.mark(std::slice::from_ref(&late), Duration::from_secs(60));
        let now = Duration::from_secs(90);
        assert_eq!(
            cache.remaining(now),
            [
                (early, UNAVAILABLE_FOR - now),
                (
                    late.clone(),
                    UNAVAILABLE_FOR + Duration::from_secs(60) - now
                )
            ]
        );
        assert_eq!(
            cache.remaining(UNAVAILABLE_FOR),
            [(late, Duration::from_secs(60))],
            "the first mark expired"
        );
    }

    #[test]
    fn the_version_changes_when_a_mark_is_added_or_expires_and_not_otherwise() {
        let cache = UnavailableOfferings::<Duration>::new();
        let start = Duration::ZERO;
        let v0 = cache.version(start);
        cache.mark(&[], start);
        assert_eq!(cache.version(start), v0, "nothing marked, nothing changed");
        cache.mark(&[reference("c5.large", "z", CapacityType::OnDemand)], start);
        let v1 = cache.version(start);
        assert_ne!(v1, v0);
        assert_eq!(cache.version(start + Duration::from_secs(1)), v1);
        assert_ne!(
            cache.version(start + UNAVAILABLE_FOR),
            v1,
            "the mark expired"
        );
    }

    #[test]
    fn applying_the_marks_turns_only_the_marked_offerings_unavailable() {
        let cache = UnavailableOfferings::<Duration>::new();
        let now = Duration::ZERO;
        cache.mark(&[reference("c5.large", "a", CapacityType::Spot)], now);
        let mut infos = vec![InstanceTypeInfo {
            name: "c5.large".into(),
            offerings: vec![
                offering("a", CapacityType::Spot),
                offering("a", CapacityType::OnDemand),
                offering("b", CapacityType::Spot),
            ],
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            label_choices: Default::default(),
        }];
        cache.at(now).apply(&mut infos);
        let available: Vec<bool> = infos[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(available, [false, true, true]);
    }
}
