//! Capacity reservations of the simulated cloud (`KWOK_CAPACITY_RESERVATIONS`), so reserved
//! capacity can be tried without AWS: each reservation offers `count` slots of one instance
//! type in one zone as `reserved` offerings, priced as upstream prices them (the type's
//! on-demand price / 10,000,000, so a reservation is always chosen first), launches into it
//! take a slot and deleting the instance gives it back.
//!
//! The ledger of which NodeClaim holds which slot is in memory; a controller that restarts
//! counts the reserved Nodes it finds (their `karpenter.k8s.aws/capacity-reservation-id` label)
//! the first time it needs the counts.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use karpenter_cloud::offering::{Reservation, ReservationKind};
use karpenter_cloud::{InstanceTypeInfo, Offering};

/// One reservation of the simulated cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KwokReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub count: u32,
    pub kind: ReservationKind,
    pub interruptible: bool,
}

impl KwokReservation {
    /// `id=instance-type:zone:count[:capacity-block][:interruptible]`.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let (id, rest) = entry
            .split_once('=')
            .ok_or_else(|| "missing `=` after the reservation id".to_owned())?;
        if id.is_empty() {
            return Err("empty reservation id".into());
        }
        let parts: Vec<&str> = rest.split(':').collect();
        let [instance_type, zone, count, flags @ ..] = parts.as_slice() else {
            return Err("expected instance-type:zone:count".into());
        };
        if instance_type.is_empty() || zone.is_empty() {
            return Err("empty instance type or zone".into());
        }
        let count = count
            .parse::<u32>()
            .map_err(|e| format!("count {count:?}: {e}"))?;
        let mut reservation = KwokReservation {
            id: id.to_owned(),
            instance_type: (*instance_type).to_owned(),
            zone: (*zone).to_owned(),
            count,
            kind: ReservationKind::Default,
            interruptible: false,
        };
        for flag in flags {
            match *flag {
                "capacity-block" => reservation.kind = ReservationKind::CapacityBlock,
                "interruptible" => reservation.interruptible = true,
                other => {
                    return Err(format!(
                        "unknown flag {other:?} (capacity-block or interruptible)"
                    ));
                }
            }
        }
        Ok(reservation)
    }
}

/// Which NodeClaim holds a slot of which reservation.
#[derive(Debug, Default)]
pub struct Ledger {
    /// `None` until seeded from the Nodes found.
    held: Mutex<Option<BTreeMap<String, String>>>,
    /// Bumped whenever a count changes: part of the cloud's catalog version, so the solver's
    /// cached catalog is rebuilt with the new counts.
    version: AtomicU64,
}

impl Ledger {
    fn with<T>(&self, f: impl FnOnce(&mut Option<BTreeMap<String, String>>) -> T) -> T {
        let mut held = match self.held.lock() {
            Ok(held) => held,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut held)
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Changes whenever a slot is taken or given back.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Whether the ledger still needs seeding from the Nodes.
    pub fn needs_seed(&self) -> bool {
        self.with(|held| held.is_none())
    }

    /// Seeds the ledger with `(node claim, reservation id)` of the reserved Nodes found; a
    /// ledger already seeded keeps its own record.
    pub fn seed(&self, found: impl IntoIterator<Item = (String, String)>) {
        let seeded = self.with(|held| {
            let seeding = held.is_none();
            if seeding {
                *held = Some(found.into_iter().collect());
            }
            seeding
        });
        if seeded {
            self.changed();
        }
    }

    /// Records `claim`'s launch into reservation `id`.
    pub fn take(&self, claim: &str, id: &str) {
        let before = self.with(|held| {
            held.get_or_insert_with(BTreeMap::new)
                .insert(claim.to_owned(), id.to_owned())
        });
        if before.as_deref() != Some(id) {
            self.changed();
        }
    }

    /// Gives back `claim`'s slot, if it holds one.
    pub fn release(&self, claim: &str) {
        let removed = self.with(|held| held.as_mut().and_then(|held| held.remove(claim)));
        if removed.is_some() {
            self.changed();
        }
    }

    /// Free slots of `reservation`.
    pub fn free(&self, reservation: &KwokReservation) -> u32 {
        let used = self.with(|held| {
            held.as_ref().map_or(0, |held| {
                held.values().filter(|id| **id == reservation.id).count()
            })
        });
        reservation
            .count
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
    }

    /// `infos` with a `reserved` offering per reservation of one of its types, in a zone the
    /// type is offered in, carrying its free slots.
    pub fn offerings(
        &self,
        reservations: &[KwokReservation],
        infos: &[InstanceTypeInfo],
    ) -> Vec<InstanceTypeInfo> {
        let mut out = infos.to_vec();
        for info in &mut out {
            let on_demand = info.cheapest_on_demand();
            for r in reservations.iter().filter(|r| r.instance_type == info.name) {
                if !info.offerings.iter().any(|o| o.zone == r.zone) {
                    continue;
                }
                info.offerings.push(Offering::reserved(
                    r.zone.clone(),
                    on_demand,
                    Reservation {
                        id: r.id.clone(),
                        kind: r.kind,
                        interruptible: r.interruptible,
                        available_instances: self.free(r),
                    },
                    true,
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use karpenter_cloud::CapacityType;
    use karpenter_cloud::offering::RESERVED_PRICE_DIVISOR;

    use super::*;

    fn info(name: &str) -> InstanceTypeInfo {
        let offering = |zone: &str, capacity_type, price| Offering {
            zone: zone.to_owned(),
            capacity_type,
            price_per_hour: price,
            available: true,
            price_is_estimate: false,
            reservation: None,
        };
        InstanceTypeInfo {
            name: name.to_owned(),
            offerings: vec![
                offering("z1", CapacityType::OnDemand, 0.1),
                offering("z1", CapacityType::Spot, 0.04),
            ],
            labels: BTreeMap::new(),
            capacity: karpenter_cloud::Resources::default(),
            overhead: karpenter_cloud::Overhead::default(),
            label_choices: BTreeMap::new(),
        }
    }

    #[test]
    fn a_reservation_entry_reads_its_type_zone_count_and_flags() {
        assert_eq!(
            KwokReservation::parse("cr-1=c5.large:us-east-1a:2:capacity-block:interruptible"),
            Ok(KwokReservation {
                id: "cr-1".into(),
                instance_type: "c5.large".into(),
                zone: "us-east-1a".into(),
                count: 2,
                kind: ReservationKind::CapacityBlock,
                interruptible: true,
            })
        );
        for bad in [
            "c5.large:us-east-1a:2",
            "=c5.large:us-east-1a:2",
            "cr-1=c5.large:us-east-1a",
            "cr-1=c5.large:us-east-1a:two",
            "cr-1=c5.large:us-east-1a:2:spot",
        ] {
            assert!(KwokReservation::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_reservation_is_offered_at_a_ten_millionth_of_on_demand_with_its_free_slots() {
        let ledger = Ledger::default();
        let r = KwokReservation::parse("cr-1=a:z1:2").expect("parses");
        let elsewhere = KwokReservation::parse("cr-2=a:z9:1").expect("parses");
        let version = ledger.version();
        ledger.take("claim-1", "cr-1");
        assert_ne!(
            ledger.version(),
            version,
            "a slot taken changes the catalog"
        );
        let version = ledger.version();
        ledger.take("claim-1", "cr-1");
        assert_eq!(
            ledger.version(),
            version,
            "a launch repeated takes nothing more"
        );
        let out = ledger.offerings(&[r.clone(), elsewhere], &[info("a"), info("b")]);
        let reserved: Vec<&Offering> = out[0]
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
            .collect();
        assert_eq!(
            reserved.len(),
            1,
            "no offering in a zone the type is not in"
        );
        assert!((reserved[0].price_per_hour - 0.1 / RESERVED_PRICE_DIVISOR).abs() < 1e-15);
        assert_eq!(
            reserved[0]
                .reservation
                .as_ref()
                .map(|r| r.available_instances),
            Some(1)
        );
        assert_eq!(out[1].offerings.len(), 2, "type b has no reservation");
        ledger.release("claim-1");
        assert_eq!(ledger.free(&r), 2);
        ledger.take("claim-2", "cr-1");
        ledger.take("claim-3", "cr-1");
        ledger.take("claim-4", "cr-1");
        assert_eq!(ledger.free(&r), 0, "never below zero");
    }

    #[test]
    fn a_seeded_ledger_counts_the_nodes_found_once() {
        let ledger = Ledger::default();
        assert!(ledger.needs_seed());
        ledger.seed([("n1".to_owned(), "cr-1".to_owned())]);
        ledger.seed([("n2".to_owned(), "cr-1".to_owned())]);
        let r = KwokReservation::parse("cr-1=a:z1:3").expect("parses");
        assert_eq!(ledger.free(&r), 2);
        assert!(!ledger.needs_seed());
    }
}
