//! The reserved offerings of a class's instance types (upstream's `ReservedCapacityResolver`):
//! one per reservation of the type the class selects, in the reservation's zone, priced at the
//! type's on-demand price / 10,000,000 (free, keeping the order consolidation compares; 0 when
//! the type has no on-demand price), with the reservation's free slots. It is available when
//! the type is offered in that zone to the class, the reservation is not `expiring` and no
//! launch found it without capacity lately; a full reservation stays available with 0 slots
//! (health and headroom are kept apart, as upstream).
//!
//! The instance types given are the class's own (those it cannot launch are not there), so
//! a reservation of any other type adds nothing.

use std::ops::Add;
use std::time::Duration;

use karpenter_api::v1::ec2nodeclass::CapacityReservationStatus;
use karpenter_cloud::offering::{Reservation, ReservationKind};
use karpenter_cloud::{InstanceTypeInfo, Offering};

use super::Availability;

/// The reservation of a status entry (its kind and flag as the status says).
pub fn reservation(status: &CapacityReservationStatus, available_instances: u32) -> Reservation {
    Reservation {
        id: status.id.clone(),
        kind: if status.reservation_type.as_deref() == Some("capacity-block") {
            ReservationKind::CapacityBlock
        } else {
            ReservationKind::Default
        },
        interruptible: status.interruptible.unwrap_or(false),
        available_instances,
    }
}

/// Adds the reserved offerings of `reservations` to `infos`, with the free slots and marks of
/// `availability` at `now`.
pub fn apply<T: Copy + Ord + Add<Duration, Output = T>>(
    infos: &mut [InstanceTypeInfo],
    reservations: &[CapacityReservationStatus],
    availability: &Availability<T>,
    now: T,
) {
    for info in infos.iter_mut() {
        let on_demand = info.cheapest_on_demand();
        for status in reservations.iter().filter(|r| r.instance_type == info.name) {
            let zone_offered = info
                .offerings
                .iter()
                .any(|o| o.reservation.is_none() && o.zone == status.availability_zone);
            let expiring = status.state.as_deref() == Some("expiring");
            info.offerings.push(Offering::reserved(
                status.availability_zone.clone(),
                on_demand,
                reservation(status, availability.get(&status.id)),
                zone_offered && !expiring && !availability.is_unavailable(&status.id, now),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use karpenter_cloud::CapacityType;

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

    fn info(name: &str, zones: &[&str]) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.into(),
            labels: BTreeMap::new(),
            capacity: karpenter_cloud::Resources::default(),
            overhead: Default::default(),
            offerings: zones
                .iter()
                .map(|z| Offering {
                    zone: (*z).into(),
                    capacity_type: CapacityType::OnDemand,
                    price_per_hour: 0.085,
                    available: true,
                    price_is_estimate: false,
                    reservation: None,
                })
                .collect(),
            label_choices: BTreeMap::new(),
        }
    }

    fn status(id: &str, instance_type: &str, zone: &str, state: &str) -> CapacityReservationStatus {
        CapacityReservationStatus {
            availability_zone: zone.into(),
            id: id.into(),
            instance_type: instance_type.into(),
            owner_id: "123456789012".into(),
            instance_match_criteria: Some("targeted".into()),
            reservation_type: Some("default".into()),
            interruptible: Some(false),
            state: Some(state.into()),
            end_time: None,
        }
    }

    #[test]
    fn a_reservation_adds_a_nearly_free_offering_with_its_free_slots_in_its_zone() {
        let now = At(0);
        let slots = Availability::new();
        slots.sync([("cr-1".to_owned(), 2)], now);
        let mut infos = vec![
            info("c5.large", &["us-west-2a", "us-west-2b"]),
            info("m5.large", &["us-west-2a"]),
        ];
        apply(
            &mut infos,
            &[status("cr-1", "c5.large", "us-west-2a", "active")],
            &slots,
            now,
        );
        let reserved: Vec<&Offering> = infos[0]
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
            .collect();
        assert_eq!(reserved.len(), 1);
        assert_eq!(reserved[0].zone, "us-west-2a");
        assert!((reserved[0].price_per_hour - 0.085 / 10_000_000.0).abs() < 1e-15);
        assert!(reserved[0].available);
        let r = reserved[0].reservation.clone().expect("a reservation");
        assert_eq!(
            (
                r.id.as_str(),
                r.kind,
                r.interruptible,
                r.available_instances
            ),
            ("cr-1", ReservationKind::Default, false, 2)
        );
        assert_eq!(
            infos[1].offerings.len(),
            1,
            "another type's reservation adds nothing"
        );
    }

    #[test]
    fn expiring_unoffered_zones_and_marked_reservations_are_unavailable_but_a_full_one_is_not() {
        let now = At(0);
        let slots = Availability::new();
        slots.sync([("cr-full".to_owned(), 0)], now);
        slots.mark_unavailable("cr-ice", now);
        let mut infos = vec![info("c5.large", &["us-west-2a"])];
        apply(
            &mut infos,
            &[
                status("cr-exp", "c5.large", "us-west-2a", "expiring"),
                status("cr-zone", "c5.large", "us-west-2c", "active"),
                status("cr-ice", "c5.large", "us-west-2a", "active"),
                status("cr-full", "c5.large", "us-west-2a", "active"),
            ],
            &slots,
            now,
        );
        let available: Vec<(String, bool)> = infos[0]
            .offerings
            .iter()
            .filter_map(|o| Some((o.reservation.as_ref()?.id.clone(), o.available)))
            .collect();
        assert_eq!(
            available,
            [
                ("cr-exp".to_owned(), false),
                ("cr-zone".to_owned(), false),
                ("cr-ice".to_owned(), false),
                ("cr-full".to_owned(), true),
            ]
        );
    }
}
