//! Capacity reservations during one solve (upstream's `ReservationManager` and
//! `NodeClaim.offeringsToReserve`): a NodeClaim that can use `reserved` offerings holds one slot
//! of each compatible reservation that has one left, so the solve never plans more NodeClaims
//! into a reservation than it has free slots; the result pins a NodeClaim holding slots to
//! `karpenter.sh/capacity-type: reserved` and those reservation ids.
//!
//! Holding every compatible reservation (not one) is upstream's pessimism: the launch picks one
//! of them, so none may be promised to another NodeClaim meanwhile. Slots a NodeClaim no longer
//! needs (a later pod's requirements ruled its reservation out) go back.
//!
//! How a NodeClaim that finds no free slot behaves is [`ReservedOfferingMode`]'s business:
//! provisioning (strict) defers the pod to the next batch, whose catalog has the launches'
//! counts, rather than send it to paid capacity; a disruption simulation falls back to
//! on-demand or spot.

use crate::hash::FxHashMap;
use crate::input::ReservedOfferingMode;
use crate::intern::Sym;
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::type_index::TypeIndex;

/// Free slots per reservation id, for the whole solve.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    free: FxHashMap<Sym, u32>,
}

/// Why a pod cannot be added to a NodeClaim because of reservations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRefusal {
    /// Strict mode's refusal (upstream's `ReservedOfferingError`): the pod is deferred, not
    /// failed: no lower-weight NodePool is tried and no preference relaxed for it.
    pub strict: bool,
    pub reason: &'static str,
}

impl Reservations {
    /// The free slots of every reservation the catalogs offer; when several NodePools offer
    /// the same reservation with different counts (read at different times), the least.
    pub fn new<'a>(catalogs: impl IntoIterator<Item = &'a TypeIndex>) -> Self {
        let mut free: FxHashMap<Sym, u32> = FxHashMap::default();
        for catalog in catalogs {
            for it in &catalog.its {
                for o in &it.offerings {
                    if let Some(id) = o.reservation {
                        free.entry(id)
                            .and_modify(|n| *n = (*n).min(o.reservation_capacity))
                            .or_insert(o.reservation_capacity);
                    }
                }
            }
        }
        Reservations { free }
    }

    fn can_reserve(&self, held: &[Sym], id: Sym) -> bool {
        held.contains(&id) || self.free.get(&id).copied().unwrap_or(0) > 0
    }

    /// Moves a NodeClaim's holding from `held` to `wanted`: slots of reservations it no longer
    /// wants go back, slots of new ones are taken.
    pub fn exchange(&mut self, held: &[Sym], wanted: &[Sym]) {
        for id in held.iter().filter(|id| !wanted.contains(id)) {
            if let Some(n) = self.free.get_mut(id) {
                *n += 1;
            }
        }
        for id in wanted.iter().filter(|id| !held.contains(id)) {
            if let Some(n) = self.free.get_mut(id) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// The reservations a NodeClaim holding `held` should hold once it has `requirements`
    /// and instance types `its`: every compatible reservation with a slot for it. An error
    /// when the pod must not be added (see [`ReservedOfferingMode`]).
    pub fn to_hold(
        &self,
        catalog: &TypeIndex,
        its: &Bitset,
        requirements: &Requirements,
        held: &[Sym],
        mode: ReservedOfferingMode,
        interner: &crate::intern::Interner,
    ) -> Result<Vec<Sym>, ReservationRefusal> {
        let strict = mode == ReservedOfferingMode::Strict;
        // The common case: none of the types offers a reservation.
        if !its.intersects(&catalog.reserved) {
            return if strict && !held.is_empty() {
                Err(refusal(
                    true,
                    "its requirements would remove all compatible reserved offerings",
                ))
            } else {
                Ok(Vec::new())
            };
        }
        let mut with_capacity = false;
        let mut full = false;
        // Every type in `its` has a compatible available offering; one without reservations
        // is an on-demand or spot fallback.
        let mut fallback = !its.is_subset_of(&catalog.reserved);
        let mut hold: Vec<Sym> = Vec::new();
        for i in its.iter().filter(|i| catalog.reserved.contains(*i)) {
            for o in catalog.its[i].offerings.iter().filter(|o| o.available) {
                if fallback && o.reservation.is_none() {
                    continue;
                }
                if requirements.intersects(&o.requirements, interner).is_err() {
                    continue;
                }
                let Some(id) = o.reservation else {
                    fallback = true;
                    continue;
                };
                if o.reservation_capacity == 0 && self.free.get(&id).copied().unwrap_or(0) == 0 {
                    full = true;
                    continue;
                }
                with_capacity = true;
                if self.can_reserve(held, id) && !hold.contains(&id) {
                    hold.push(id);
                }
            }
        }
        if strict && with_capacity && hold.is_empty() {
            return Err(refusal(
                true,
                "compatible reserved offerings have capacity, but this solve has already promised it",
            ));
        }
        if full && !with_capacity && !fallback {
            return Err(refusal(
                strict,
                "the only compatible reserved offerings are full",
            ));
        }
        if strict && !held.is_empty() && hold.is_empty() {
            return Err(refusal(
                true,
                "its requirements would remove all compatible reserved offerings",
            ));
        }
        hold.sort_unstable();
        Ok(hold)
    }
}

fn refusal(strict: bool, reason: &'static str) -> ReservationRefusal {
    ReservationRefusal { strict, reason }
}
