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
//!
//! Speed: once every slot is promised, most NodeClaims must refuse most pods. The instance
//! types offering a reservation with a free slot are kept per catalog as slots move
//! ([`Reservations::free_types`]), so the in-flight scan passes over a NodeClaim that could keep
//! no reservation with the pod without trying it in full, and [`Reservations::to_hold`] scans
//! only the catalog's reserved offerings.

use crate::hash::FxHashMap;
use crate::input::ReservedOfferingMode;
use crate::intern::Sym;
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::type_index::TypeIndex;

/// Free slots per reservation id, for the whole solve, and where the free ones are offered.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    mode: ReservedOfferingMode,
    free: FxHashMap<Sym, u32>,
    /// Per reservation id, its available offerings: (catalog, instance type), one entry each.
    offered: FxHashMap<Sym, Vec<(usize, usize)>>,
    /// Per catalog and instance type, how many of its available reservation offerings have
    /// a free slot.
    free_offers: Vec<Vec<u32>>,
    /// Per catalog, the instance types with a count above in `free_offers`.
    free_types: Vec<Bitset>,
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
    /// Catalogs are numbered in the order given (the solver's NodePool order).
    pub fn new<'a>(
        catalogs: impl IntoIterator<Item = &'a TypeIndex>,
        mode: ReservedOfferingMode,
    ) -> Self {
        let catalogs: Vec<&TypeIndex> = catalogs.into_iter().collect();
        let mut free: FxHashMap<Sym, u32> = FxHashMap::default();
        for catalog in &catalogs {
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
        let mut offered: FxHashMap<Sym, Vec<(usize, usize)>> = FxHashMap::default();
        let mut free_offers = Vec::with_capacity(catalogs.len());
        let mut free_types = Vec::with_capacity(catalogs.len());
        for (c, catalog) in catalogs.iter().enumerate() {
            let mut offers = vec![0u32; catalog.len()];
            let mut types = Bitset::empty(catalog.len());
            for r in &catalog.reservation_offerings {
                offered.entry(r.id).or_default().push((c, r.it));
                if free.get(&r.id).copied().unwrap_or(0) > 0 {
                    offers[r.it] += 1;
                    types.insert(r.it);
                }
            }
            free_offers.push(offers);
            free_types.push(types);
        }
        Reservations {
            mode,
            free,
            offered,
            free_offers,
            free_types,
        }
    }

    fn can_reserve(&self, held: &[Sym], id: Sym) -> bool {
        held.contains(&id) || self.free.get(&id).copied().unwrap_or(0) > 0
    }

    /// The instance types of catalog `catalog` (its number in [`Self::new`]) offering a
    /// reservation with a free slot.
    pub fn free_types(&self, catalog: usize) -> Option<&Bitset> {
        self.free_types.get(catalog)
    }

    /// Keeps `free_types` in step with reservation `id` gaining its first free slot
    /// (`gained`) or losing its last.
    fn free_changed(&mut self, id: Sym, gained: bool) {
        let Some(places) = self.offered.get(&id) else {
            return;
        };
        for &(c, it) in places {
            let (Some(offers), Some(types)) =
                (self.free_offers.get_mut(c), self.free_types.get_mut(c))
            else {
                continue;
            };
            let Some(n) = offers.get_mut(it) else {
                continue;
            };
            if gained {
                *n += 1;
                types.insert(it);
            } else {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    types.remove(it);
                }
            }
        }
    }

    /// Moves a NodeClaim's holding from `held` to `wanted`: slots of reservations it no longer
    /// wants go back, slots of new ones are taken.
    pub fn exchange(&mut self, held: &[Sym], wanted: &[Sym]) {
        for &id in held.iter().filter(|id| !wanted.contains(id)) {
            if let Some(n) = self.free.get_mut(&id) {
                *n += 1;
                if *n == 1 {
                    self.free_changed(id, true);
                }
            }
        }
        for &id in wanted.iter().filter(|id| !held.contains(id)) {
            if let Some(n) = self.free.get_mut(&id)
                && *n > 0
            {
                *n -= 1;
                if *n == 0 {
                    self.free_changed(id, false);
                }
            }
        }
    }

    /// The reservations a NodeClaim holding `held` should hold once it has `requirements`
    /// and instance types `its` of catalog `catalog_no` (its number in [`Self::new`]): every
    /// compatible reservation with a slot for it. An error when the pod must not be added (see
    /// [`ReservedOfferingMode`]).
    pub fn to_hold(
        &self,
        catalog_no: usize,
        catalog: &TypeIndex,
        its: &Bitset,
        requirements: &Requirements,
        held: &[Sym],
        interner: &crate::intern::Interner,
    ) -> Result<Vec<Sym>, ReservationRefusal> {
        let strict = self.mode == ReservedOfferingMode::Strict;
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
        // Falling back, holding nothing, no type with a free slot: no slot to take, and a
        // type without reservations to go to (what the scan below concludes, sooner).
        if !strict
            && held.is_empty()
            && !its.is_subset_of(&catalog.reserved)
            && self
                .free_types
                .get(catalog_no)
                .is_some_and(|free| !its.intersects(free))
        {
            return Ok(Vec::new());
        }
        let mut with_capacity = false;
        let mut full = false;
        let mut hold: Vec<Sym> = Vec::new();
        // Per base (see `TypeIndex::reservation_bases`): whether `requirements` overlap it,
        // when they say nothing of reservation ids.
        let mut bases: Option<Vec<Option<bool>>> = requirements
            .get(catalog.reservation_key)
            .is_none()
            .then(|| vec![None; catalog.reservation_bases.len()]);
        for r in catalog
            .reservation_offerings
            .iter()
            .filter(|r| its.contains(r.it))
        {
            let o = &catalog.its[r.it].offerings[r.offering];
            let compatible = match bases.as_mut().and_then(|b| b.get_mut(r.base)) {
                Some(Some(known)) => *known,
                Some(slot) => *slot
                    .insert(requirements.overlaps(&catalog.reservation_bases[r.base], interner)),
                None => requirements.overlaps(&o.requirements, interner),
            };
            if !compatible {
                continue;
            }
            if o.reservation_capacity == 0 && self.free.get(&r.id).copied().unwrap_or(0) == 0 {
                full = true;
                continue;
            }
            with_capacity = true;
            if self.can_reserve(held, r.id) && !hold.contains(&r.id) {
                hold.push(r.id);
            }
        }
        // Every type in `its` has a compatible available offering; one without a reservation
        // is an on-demand or spot fallback.
        let fallback = !its.is_subset_of(&catalog.reserved)
            || its.iter().any(|i| {
                catalog.its[i].offerings.iter().any(|o| {
                    o.available
                        && o.reservation.is_none()
                        && requirements.overlaps(&o.requirements, interner)
                })
            });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{InstanceType, Offering, RequirementSpec};
    use crate::intern::Interner;
    use crate::solver::dims::Dims;
    use karpenter_api::labels as l;

    /// Two types, each with an on-demand offering and a reservation of one slot.
    fn catalog(interner: &mut Interner) -> TypeIndex {
        let types: Vec<InstanceType> = ["a", "b"]
            .iter()
            .map(|name| {
                let offering = |capacity_type: &str, id: Option<String>| Offering {
                    zone: "test-zone-1".into(),
                    capacity_type: capacity_type.into(),
                    price: 1.0,
                    available: true,
                    requirements: id
                        .iter()
                        .map(|id| RequirementSpec::is_in(l::CAPACITY_RESERVATION_ID, &[id]))
                        .collect(),
                    reservation_capacity: u32::from(id.is_some()),
                };
                InstanceType {
                    name: (*name).into(),
                    requirements: vec![RequirementSpec::is_in(l::INSTANCE_TYPE, &[name])],
                    offerings: vec![
                        offering(l::CAPACITY_TYPE_ON_DEMAND, None),
                        offering(l::CAPACITY_TYPE_RESERVED, Some(format!("cr-{name}"))),
                    ],
                    capacity: Default::default(),
                    overhead: Default::default(),
                }
            })
            .collect();
        TypeIndex::build(&types, interner, &Dims::default())
    }

    fn members(b: Option<&Bitset>) -> Vec<usize> {
        b.map(|b| b.iter().collect()).unwrap_or_default()
    }

    #[test]
    fn a_type_leaves_the_free_types_with_its_reservations_last_slot_and_comes_back_with_it() {
        let mut interner = Interner::new();
        let catalog = catalog(&mut interner);
        let (a, b) = (interner.intern("cr-a"), interner.intern("cr-b"));
        let mut reservations = Reservations::new([&catalog], ReservedOfferingMode::Strict);
        assert_eq!(members(reservations.free_types(0)), vec![0, 1]);
        reservations.exchange(&[], &[a, b]);
        assert_eq!(members(reservations.free_types(0)), Vec::<usize>::new());
        reservations.exchange(&[a, b], &[b]);
        assert_eq!(members(reservations.free_types(0)), vec![0]);
        // Taking a slot of a full reservation changes nothing.
        reservations.exchange(&[], &[b]);
        assert_eq!(members(reservations.free_types(0)), vec![0]);
        assert_eq!(reservations.free_types(1), None);
    }
}
