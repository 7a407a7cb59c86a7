//! Terminate-first disruption (upstream v1.15 RFC #3203, gates `TerminateFirstDrift` and
//! `TerminateFirstRepair`): where a node's replacement cannot be staged before it goes, because
//! capacity is structurally full, the node is deleted first and provisioning refills the slot
//! it frees. The command is delete-only and marked with a [`TerminateFirst`] reason; budgets
//! pace it and PDBs bound its drain, as for any disruption.
//!
//! Two postures qualify, both known before acting (a launch failure never does):
//! - **reserved capacity**: the node holds a slot of a capacity reservation, and the only place
//!   its pods fit is that reservation once the slot is free (for a dynamic pool, a strict
//!   simulation with the slot credited back, [`crate::simulate::Simulator::simulate_credited`];
//!   for a static pool, every offering its template allows is a full reservation,
//!   [`full_reservations`]);
//! - **a static NodePool at `limits.nodes`**: a replacement would be a node over the limit.
//!
//! A static pool is refilled by the static provisioning loop, which refuses a pool that is not
//! Ready or is being deleted; terminating first there would strand the workload, so such pools
//! are not [`refillable`]. This module owns those decisions; the methods (drift, static drift,
//! repair) ask it and build the command.

use std::collections::BTreeSet;

use karpenter_api::labels::{CAPACITY_RESERVATION_ID, CAPACITY_TYPE, ZONE};
use karpenter_api::v1::NodePool;
use karpenter_scheduling::{InstanceType, Offering, RequirementSpec};

use crate::candidate::Candidate;
use crate::pass::Pass;
use crate::pool;
use crate::simulate::{Outcome, reservation_id};
use crate::snapshot::Snapshot;

pub use crate::command::TerminateFirst;

/// `karpenter.sh/capacity-type` of a reserved offering.
const RESERVED: &str = "reserved";

/// The reservation a candidate holds a slot of: a `reserved` node's
/// `karpenter.k8s.aws/capacity-reservation-id` label.
pub fn held_reservation<'a>(snapshot: &'a Snapshot, candidate: &Candidate) -> Option<&'a str> {
    if candidate.capacity_type != RESERVED {
        return None;
    }
    snapshot
        .nodes
        .get(candidate.index)?
        .labels
        .get(CAPACITY_RESERVATION_ID)
        .map(String::as_str)
        .filter(|id| !id.is_empty())
}

/// For a dynamic pool's candidate whose pods fit nowhere while it stays: whether they all fit
/// once it is gone and the reservation slot it holds is free (strict, no fallback from
/// reserved capacity). Only a reserved candidate can: an on-demand or spot node frees nothing
/// a replacement could not have had first.
pub fn fits_once_gone(pass: &mut Pass<'_>, candidate: &Candidate) -> bool {
    let snapshot = pass.snapshot;
    let Some(reservation) = held_reservation(snapshot, candidate) else {
        return false;
    };
    let (outcome, _) = pass.sim.simulate_credited(snapshot, candidate, reservation);
    !matches!(outcome, Outcome::Unschedulable(_))
}

/// Whether the static provisioning loop would refill the pool after a node goes: the pool
/// does not report itself not Ready and is not being deleted.
pub fn refillable(node_pool: &NodePool) -> bool {
    !pool::reported_not_ready(node_pool) && node_pool.metadata.deletion_timestamp.is_none()
}

/// For a static pool: `Some(reservations still offered)` when every offering the pool's
/// template allows is a full capacity reservation (nothing could host a replacement staged
/// first), `None` when some offering could (upstream's `staticReservations`). An offering of
/// another capacity type, or a reservation with a free slot, is room to replace first.
pub fn full_reservations(
    catalog: &[InstanceType],
    node_pool: &NodePool,
) -> Option<BTreeSet<String>> {
    let requirements = pool_requirements(node_pool)?;
    let mut offered = BTreeSet::new();
    for it in catalog.iter().filter(|it| type_allowed(it, &requirements)) {
        for o in it
            .offerings
            .iter()
            .filter(|o| offering_allowed(o, &requirements))
        {
            if o.capacity_type != RESERVED || (o.available && o.reservation_capacity > 0) {
                return None;
            }
            if o.available {
                offered.extend(reservation_id(o).map(str::to_owned));
            }
        }
    }
    Some(offered)
}

/// The pool template's requirements and labels as requirements; `None` when the pool does not
/// convert (it is reported invalid elsewhere, and nothing is terminated first for it).
fn pool_requirements(node_pool: &NodePool) -> Option<Vec<RequirementSpec>> {
    let converted = karpenter_scheduling::v1::node_pool(node_pool).ok()?;
    let mut requirements = converted.requirements;
    requirements.extend(
        converted
            .labels
            .iter()
            .map(|(k, v)| RequirementSpec::is_in(k.clone(), &[v.as_str()])),
    );
    Some(requirements)
}

/// Every requirement on a key the instance type names allows one of its values (a key it does
/// not name is not held against it).
fn type_allowed(it: &InstanceType, requirements: &[RequirementSpec]) -> bool {
    requirements.iter().all(|r| {
        it.requirements
            .iter()
            .filter(|own| own.key == r.key)
            .all(|own| own.values.iter().any(|v| r.matches(Some(v))))
    })
}

fn offering_allowed(o: &Offering, requirements: &[RequirementSpec]) -> bool {
    requirements.iter().all(|r| match r.key.as_str() {
        ZONE => r.matches(Some(&o.zone)),
        CAPACITY_TYPE => r.matches(Some(&o.capacity_type)),
        CAPACITY_RESERVATION_ID => r.matches(reservation_id(o)),
        _ => true,
    })
}

#[cfg(test)]
mod tests;
