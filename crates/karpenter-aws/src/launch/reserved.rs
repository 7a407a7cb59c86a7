//! Which reservation a NodeClaim launches into, when it launches reserved (upstream's
//! `getCapacityType` and its instance filters for reserved capacity, v1.15.1):
//!
//! 1. reserved is chosen (before spot, before on-demand) when the claim allows it and some
//!    type has a *launchable* reserved offering the claim allows: available and with a free
//!    slot ([`launchable`]; a full reservation does not pin the claim to reserved);
//! 2. one kind of reservation per launch: the partition (ODCR, Capacity Block, interruptible
//!    ODCR) with the cheapest offering, ties in that order;
//! 3. Capacity Blocks: only the type with the cheapest block offering, only that offering;
//! 4. per type and zone, the reservation with the most free slots.
//!
//! Each chosen offering becomes a launch template of its own that targets its reservation
//! ([`crate::launch::plan`]).

use std::collections::BTreeMap;

use karpenter_cloud::offering::ReservationKind;
use karpenter_cloud::{CapacityType, InstanceTypeInfo, Offering};

/// Whether a launch can go into `offering` now: available and, for a reserved one, with a
/// free slot (upstream's `Offering.Launchable`).
pub fn launchable(offering: &Offering) -> bool {
    offering.available
        && offering
            .reservation
            .as_ref()
            .is_none_or(|r| r.available_instances > 0)
}

/// The partition order upstream breaks price ties with.
fn priority(kind: ReservationKind, interruptible: bool) -> u8 {
    match (kind, interruptible) {
        (ReservationKind::Default, false) => 0,
        (ReservationKind::CapacityBlock, _) => 1,
        (ReservationKind::Default, true) => 2,
    }
}

/// The reserved offerings a launch may use, per instance type (in the order of `candidates`).
pub type Choice<'a> = Vec<(&'a InstanceTypeInfo, Vec<&'a Offering>)>;

/// The reserved offerings to launch into, from each candidate's launchable reserved offerings
/// the claim allows (`allowed`: its requirements, the unavailable marks); `None` when there is none (the claim launches spot or
/// on-demand).
pub fn choose<'a>(
    candidates: &[&'a InstanceTypeInfo],
    allowed: &dyn Fn(&InstanceTypeInfo, &Offering) -> bool,
) -> Option<Choice<'a>> {
    let reserved: Choice<'a> = candidates
        .iter()
        .map(|info| {
            let offerings: Vec<&Offering> = info
                .offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::Reserved && launchable(o))
                .filter(|o| allowed(info, o))
                .filter(|o| o.reservation.is_some())
                .collect();
            (*info, offerings)
        })
        .filter(|(_, offerings)| !offerings.is_empty())
        .collect();
    let partition = |o: &Offering| {
        o.reservation
            .as_ref()
            .map(|r| (r.kind, r.interruptible))
            .unwrap_or((ReservationKind::Default, false))
    };
    // 2. The partition with the cheapest offering; ties by upstream's order.
    let (kind, interruptible) = reserved
        .iter()
        .flat_map(|(_, offerings)| offerings.iter())
        .min_by(|a, b| {
            a.price_per_hour.total_cmp(&b.price_per_hour).then_with(|| {
                let (ka, ia) = partition(a);
                let (kb, ib) = partition(b);
                priority(ka, ia).cmp(&priority(kb, ib))
            })
        })
        .map(|o| partition(o))?;
    let mut chosen: Choice<'a> = reserved
        .into_iter()
        .map(|(info, offerings)| {
            let kept: Vec<&Offering> = offerings
                .into_iter()
                .filter(|o| partition(o) == (kind, interruptible))
                .collect();
            (info, kept)
        })
        .filter(|(_, offerings)| !offerings.is_empty())
        .collect();
    // 3. A Capacity Block launch names one type and one block.
    if kind == ReservationKind::CapacityBlock {
        let best = chosen
            .iter()
            .flat_map(|(info, offerings)| offerings.iter().map(move |o| (*info, *o)))
            .min_by(|a, b| a.1.price_per_hour.total_cmp(&b.1.price_per_hour))?;
        chosen = vec![(best.0, vec![best.1])];
    }
    // 4. Per type and zone, the reservation with the most free slots.
    for (_, offerings) in &mut chosen {
        let mut by_zone: BTreeMap<&str, &Offering> = BTreeMap::new();
        for offering in offerings.iter() {
            let slots = |o: &Offering| o.reservation.as_ref().map_or(0, |r| r.available_instances);
            by_zone
                .entry(offering.zone.as_str())
                .and_modify(|best| {
                    if slots(offering) > slots(best) {
                        *best = offering;
                    }
                })
                .or_insert(offering);
        }
        *offerings = by_zone.into_values().collect();
    }
    Some(chosen)
}

#[cfg(test)]
mod tests {
    use karpenter_cloud::offering::Reservation;

    use super::*;

    fn reserved(
        zone: &str,
        id: &str,
        kind: ReservationKind,
        interruptible: bool,
        slots: u32,
        price: f64,
    ) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: CapacityType::Reserved,
            price_per_hour: price,
            available: true,
            price_is_estimate: false,
            reservation: Some(Reservation {
                id: id.into(),
                kind,
                interruptible,
                available_instances: slots,
            }),
        }
    }

    fn info(name: &str, offerings: Vec<Offering>) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.into(),
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings,
            label_choices: Default::default(),
        }
    }

    fn all(_: &InstanceTypeInfo, _: &Offering) -> bool {
        true
    }

    fn ids(choice: &Choice<'_>) -> Vec<(String, Vec<String>)> {
        choice
            .iter()
            .map(|(info, offerings)| {
                (
                    info.name.clone(),
                    offerings
                        .iter()
                        .filter_map(|o| Some(o.reservation.as_ref()?.id.clone()))
                        .collect(),
                )
            })
            .collect()
    }

    use ReservationKind::{CapacityBlock, Default as Odcr};

    #[test]
    fn a_full_or_unavailable_reservation_does_not_make_the_launch_reserved() {
        let mut sick = reserved("a", "cr-sick", Odcr, false, 3, 1e-8);
        sick.available = false;
        let types = [info(
            "c5.large",
            vec![reserved("a", "cr-full", Odcr, false, 0, 1e-8), sick],
        )];
        let candidates: Vec<&InstanceTypeInfo> = types.iter().collect();
        assert!(choose(&candidates, &all).is_none());
    }

    #[test]
    fn per_zone_the_reservation_with_most_free_slots_is_taken() {
        let types = [info(
            "c5.large",
            vec![
                reserved("a", "cr-1", Odcr, false, 1, 1e-8),
                reserved("a", "cr-2", Odcr, false, 5, 1e-8),
                reserved("b", "cr-3", Odcr, false, 1, 1e-8),
            ],
        )];
        let candidates: Vec<&InstanceTypeInfo> = types.iter().collect();
        let choice = choose(&candidates, &all).unwrap();
        assert_eq!(
            ids(&choice),
            [(
                "c5.large".to_owned(),
                vec!["cr-2".to_owned(), "cr-3".to_owned()]
            )]
        );
    }

    #[test]
    fn one_kind_per_launch_the_cheapest_then_odcr_before_blocks_before_interruptible() {
        let types = [
            info(
                "c5.large",
                vec![reserved("a", "cr-odcr", Odcr, false, 1, 2e-8)],
            ),
            info(
                "p5.48xlarge",
                vec![reserved("a", "cr-block", CapacityBlock, false, 1, 1e-8)],
            ),
            info(
                "m5.large",
                vec![reserved("a", "cr-int", Odcr, true, 1, 2e-8)],
            ),
        ];
        let candidates: Vec<&InstanceTypeInfo> = types.iter().collect();
        assert_eq!(
            ids(&choose(&candidates, &all).unwrap()),
            [("p5.48xlarge".to_owned(), vec!["cr-block".to_owned()])]
        );
        let tie: Vec<&InstanceTypeInfo> = vec![&types[0], &types[2]];
        assert_eq!(
            ids(&choose(&tie, &all).unwrap()),
            [("c5.large".to_owned(), vec!["cr-odcr".to_owned()])]
        );
    }

    #[test]
    fn a_capacity_block_launch_names_one_type_and_its_cheapest_block() {
        let types = [
            info(
                "p5.48xlarge",
                vec![
                    reserved("a", "cr-b1", CapacityBlock, false, 1, 3e-8),
                    reserved("b", "cr-b2", CapacityBlock, false, 1, 2e-8),
                ],
            ),
            info(
                "p4d.24xlarge",
                vec![reserved("a", "cr-b3", CapacityBlock, false, 1, 4e-8)],
            ),
        ];
        let candidates: Vec<&InstanceTypeInfo> = types.iter().collect();
        assert_eq!(
            ids(&choose(&candidates, &all).unwrap()),
            [("p5.48xlarge".to_owned(), vec!["cr-b2".to_owned()])]
        );
    }
}
