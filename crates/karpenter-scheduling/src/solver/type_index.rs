//! A NodePool's instance types, indexed for fast narrowing.
//!
//! Questions the solver asks thousands of times are answered with bitsets:
//! - which instance types are compatible with a requirement on key `k` (per-key, per-value
//!   bitsets, plus a slow path for irregular instance-type requirements);
//! - which have at least `x` of resource `r` allocatable (per-resource sorted order with
//!   suffix bitsets, one binary search);
//! - which have an available offering compatible with the requirements (bitsets per distinct
//!   offering signature).

use crate::hash::{FxHashMap, FxHashSet};
use crate::input::InstanceType;
use crate::intern::{Interner, Sym};
use crate::requirement::Requirement;
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::dims::{Dims, Res};

/// One offering, compiled.
#[derive(Debug, Clone)]
pub struct OfferingInfo {
    pub requirements: Requirements,
    /// Index into the catalog's offering signatures (available offerings only).
    pub sig: Option<usize>,
    pub capacity_type: Sym,
    pub price: f64,
    pub available: bool,
    /// A `reserved` offering's reservation id (`karpenter.k8s.aws/capacity-reservation-id`).
    pub reservation: Option<Sym>,
    /// Its free slots when the solve starts.
    pub reservation_capacity: u32,
    /// Available, and not a full reservation (upstream's `Launchable`): what a NodeClaim's
    /// price order and capacity types are made of, since a full reservation launches nothing.
    pub launchable: bool,
}

/// One instance type, compiled.
#[derive(Debug, Clone)]
pub struct ItInfo {
    pub name: std::sync::Arc<str>,
    pub requirements: Requirements,
    pub allocatable: Res,
    pub capacity: Res,
    pub offerings: Vec<OfferingInfo>,
}

#[derive(Debug, Clone, Default)]
struct KeyIndex {
    /// Instance types that do not define the key (always compatible).
    undefined: Bitset,
    /// For instance types whose requirement is a plain `In`, the types listing each value.
    by_value: FxHashMap<Sym, Bitset>,
    by_value_list: Vec<(Sym, Bitset)>,
    /// Instance types with any other requirement shape.
    irregular: Vec<(usize, Requirement)>,
}

#[derive(Debug, Clone)]
struct FitIndex {
    /// Allocatable amounts in ascending order.
    sorted: Vec<i64>,
    /// Instance type at each sorted position.
    order: Vec<usize>,
    /// `suffix[k]`: instance types at sorted positions `k..`.
    suffix: Vec<Bitset>,
}

/// The indexed catalog of one NodePool.
#[derive(Debug, Clone)]
pub struct TypeIndex {
    pub its: Vec<ItInfo>,
    pub all: Bitset,
    keys: FxHashMap<Sym, KeyIndex>,
    fits: Vec<FitIndex>,
    /// Distinct requirement sets of available offerings, with the types having one.
    offering_sigs: Vec<(Requirements, Bitset)>,
    /// Keys that appear in offering requirements.
    pub offering_keys: FxHashSet<Sym>,
    /// Instance types with an available reserved offering.
    pub reserved: Bitset,
    /// The available reserved offerings, in instance-type then offering order: what
    /// reservation bookkeeping scans instead of every offering of every type.
    pub reservation_offerings: Vec<ReservationOffering>,
    /// The distinct requirements of those offerings without the reservation id (a zone and
    /// `reserved`, typically): a NodeClaim that says nothing of reservation ids is compatible
    /// with an offering exactly when it is with its base, so a few checks answer for all.
    pub reservation_bases: Vec<Requirements>,
    /// `karpenter.k8s.aws/capacity-reservation-id`.
    pub reservation_key: Sym,
}

/// An available offering of a capacity reservation, located in its [`TypeIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationOffering {
    /// Instance type index.
    pub it: usize,
    /// Index among the instance type's offerings.
    pub offering: usize,
    /// The reservation id.
    pub id: Sym,
    /// Index of its requirements without the id in [`TypeIndex::reservation_bases`].
    pub base: usize,
}

impl TypeIndex {
    /// Compiles instance types. `dims` must already hold every resource the solve uses.
    pub fn build(types: &[InstanceType], interner: &mut Interner, dims: &Dims) -> TypeIndex {
        let zone = interner.intern(karpenter_api::labels::ZONE);
        let ct = interner.intern(karpenter_api::labels::CAPACITY_TYPE);
        let reservation_key = interner.intern(karpenter_api::labels::CAPACITY_RESERVATION_ID);
        let reserved_ct = interner.intern(karpenter_api::labels::CAPACITY_TYPE_RESERVED);
        let mut its: Vec<ItInfo> = types
            .iter()
            .map(|it| {
                let offerings = it
                    .offerings
                    .iter()
                    .map(|o| {
                        let mut reqs = Requirements::from_specs(&o.requirements, interner);
                        let z = interner.intern(&o.zone);
                        let c = interner.intern(&o.capacity_type);
                        reqs.add(zone, Requirement::is_in([z]), interner);
                        reqs.add(ct, Requirement::is_in([c]), interner);
                        let reservation = (c == reserved_ct)
                            .then(|| reqs.get(reservation_key)?.single_value())
                            .flatten();
                        OfferingInfo {
                            sig: None,
                            requirements: reqs,
                            capacity_type: c,
                            price: o.price,
                            available: o.available,
                            launchable: o.available
                                && (c != reserved_ct || o.reservation_capacity > 0),
                            reservation,
                            reservation_capacity: o.reservation_capacity,
                        }
                    })
                    .collect();
                ItInfo {
                    name: it.name.as_str().into(),
                    requirements: Requirements::from_specs(&it.requirements, interner),
                    allocatable: dims.res_known(&it.allocatable()),
                    capacity: dims.res_known(&it.capacity),
                    offerings,
                }
            })
            .collect();
        let n = its.len();
        let mut keys: FxHashMap<Sym, KeyIndex> = FxHashMap::default();
        for it in &its {
            for key in it.requirements.keys() {
                keys.entry(key).or_insert_with(|| KeyIndex {
                    undefined: Bitset::empty(n),
                    ..Default::default()
                });
            }
        }
        for (i, it) in its.iter().enumerate() {
            for (key, index) in keys.iter_mut() {
                match it.requirements.get(*key) {
                    None => index.undefined.insert(i),
                    Some(r)
                        if !r.complement
                            && !r.values.is_empty()
                            && r.gte.is_none()
                            && r.lte.is_none() =>
                    {
                        for v in &r.values {
                            index
                                .by_value
                                .entry(*v)
                                .or_insert_with(|| Bitset::empty(n))
                                .insert(i);
                        }
                    }
                    Some(r) => index.irregular.push((i, r.clone())),
                }
            }
        }
        for index in keys.values_mut() {
            let mut list: Vec<(Sym, Bitset)> = index
                .by_value
                .iter()
                .map(|(k, b)| (*k, b.clone()))
                .collect();
            list.sort_by_key(|(k, _)| *k);
            index.by_value_list = list;
        }
        let fits = (0..dims.len())
            .map(|d| {
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&i| crate::solver::dims::get(&its[i].allocatable, d));
                let sorted: Vec<i64> = order
                    .iter()
                    .map(|&i| crate::solver::dims::get(&its[i].allocatable, d))
                    .collect();
                let mut suffix = vec![Bitset::empty(n); n + 1];
                for k in (0..n).rev() {
                    let mut b = suffix[k + 1].clone();
                    b.insert(order[k]);
                    suffix[k] = b;
                }
                FitIndex {
                    sorted,
                    order,
                    suffix,
                }
            })
            .collect();
        let mut offering_sigs: Vec<(Requirements, Bitset)> = Vec::new();
        let mut offering_keys = FxHashSet::default();
        for (i, it) in its.iter_mut().enumerate() {
            for o in it.offerings.iter_mut().filter(|o| o.available) {
                offering_keys.extend(o.requirements.keys());
                match offering_sigs.iter().position(|(r, _)| *r == o.requirements) {
                    Some(s) => {
                        offering_sigs[s].1.insert(i);
                        o.sig = Some(s);
                    }
                    None => {
                        let mut b = Bitset::empty(n);
                        b.insert(i);
                        offering_sigs.push((o.requirements.clone(), b));
                        o.sig = Some(offering_sigs.len() - 1);
                    }
                }
            }
        }
        let mut reserved = Bitset::empty(n);
        let mut reservation_offerings = Vec::new();
        let mut reservation_bases: Vec<Requirements> = Vec::new();
        for (i, it) in its.iter().enumerate() {
            for (offering, o) in it.offerings.iter().enumerate() {
                if let (true, Some(id)) = (o.available, o.reservation) {
                    reserved.insert(i);
                    let mut base = o.requirements.clone();
                    base.remove(reservation_key);
                    let base = match reservation_bases.iter().position(|b| *b == base) {
                        Some(b) => b,
                        None => {
                            reservation_bases.push(base);
                            reservation_bases.len() - 1
                        }
                    };
                    reservation_offerings.push(ReservationOffering {
                        it: i,
                        offering,
                        id,
                        base,
                    });
                }
            }
        }
        TypeIndex {
            all: Bitset::full(n),
            its,
            keys,
            fits,
            offering_sigs,
            offering_keys,
            reserved,
            reservation_offerings,
            reservation_bases,
            reservation_key,
        }
    }

    /// The instance types offering one of the reservations `ids` (sorted).
    pub fn reservation_types(&self, ids: &[Sym]) -> Bitset {
        let mut types = Bitset::empty(self.its.len());
        for r in &self.reservation_offerings {
            if ids.binary_search(&r.id).is_ok() {
                types.insert(r.it);
            }
        }
        types
    }

    pub fn len(&self) -> usize {
        self.its.len()
    }

    pub fn is_empty(&self) -> bool {
        self.its.is_empty()
    }

    pub fn defined_keys(&self) -> impl Iterator<Item = Sym> + '_ {
        self.keys.keys().copied()
    }

    /// Narrows `bits` to instance types compatible with `req` on `key`.
    pub fn narrow_by_requirement(
        &self,
        bits: &mut Bitset,
        key: Sym,
        req: &Requirement,
        interner: &Interner,
    ) {
        let Some(index) = self.keys.get(&key) else {
            return;
        };
        let mut ok = index.undefined.clone();
        if req.complement || req.gte.is_some() || req.lte.is_some() {
            for (v, b) in &index.by_value_list {
                if req.has(*v, interner) {
                    ok.or_with(b);
                }
            }
        } else {
            for v in &req.values {
                if let Some(b) = index.by_value.get(v) {
                    ok.or_with(b);
                }
            }
        }
        for (i, it_req) in &index.irregular {
            if it_req.compatible_with(req, interner) {
                ok.insert(*i);
            }
        }
        bits.and_with(&ok);
    }

    /// Narrows `bits` to instance types compatible with every requirement in `reqs`.
    pub fn narrow_by_requirements(
        &self,
        bits: &mut Bitset,
        reqs: &Requirements,
        interner: &Interner,
    ) {
        for (key, req) in reqs.iter() {
            self.narrow_by_requirement(bits, key, req, interner);
        }
    }

    /// Element-wise maximum allocatable over the instance types in `bits`.
    pub fn max_allocatable(&self, bits: &Bitset) -> Res {
        self.fits
            .iter()
            .map(|index| {
                index
                    .order
                    .iter()
                    .zip(&index.sorted)
                    .rev()
                    .find(|(i, _)| bits.contains(**i))
                    .map_or(0, |(_, v)| *v)
            })
            .collect()
    }

    /// Narrows `bits` to instance types with at least the sum of `parts` allocatable.
    pub fn narrow_by_fit_sum<const N: usize>(&self, bits: &mut Bitset, parts: [&Res; N]) {
        let dims = parts.iter().map(|p| p.len()).max().unwrap_or(0);
        for d in 0..dims {
            let n: i64 = parts
                .iter()
                .map(|p| crate::solver::dims::get(p, d))
                .fold(0, i64::saturating_add);
            if n <= 0 {
                continue;
            }
            match self.fits.get(d) {
                Some(index) => {
                    let k = index.sorted.partition_point(|v| *v < n);
                    bits.and_with(&index.suffix[k]);
                }
                None => bits.clear(),
            }
        }
    }

    /// Whether instance type `it` survives [`Self::narrow_by_fit_sum`] with `parts`.
    pub fn fits_sum<const N: usize>(&self, it: usize, parts: [&Res; N]) -> bool {
        let Some(info) = self.its.get(it) else {
            return false;
        };
        let dims = parts.iter().map(|p| p.len()).max().unwrap_or(0);
        (0..dims).all(|d| {
            let n: i64 = parts
                .iter()
                .map(|p| crate::solver::dims::get(p, d))
                .fold(0, i64::saturating_add);
            n <= 0 || (d < self.fits.len() && crate::solver::dims::get(&info.allocatable, d) >= n)
        })
    }

    /// Narrows `bits` to instance types with an available offering compatible with `reqs`.
    pub fn narrow_by_offerings(&self, bits: &mut Bitset, reqs: &Requirements, interner: &Interner) {
        let mut ok = Bitset::empty(self.its.len());
        for (sig, b) in &self.offering_sigs {
            if reqs.overlaps(sig, interner) {
                ok.or_with(b);
            }
        }
        bits.and_with(&ok);
    }

    /// Which offering signatures are compatible with `reqs`.
    pub fn compatible_signatures(&self, reqs: &Requirements, interner: &Interner) -> Vec<bool> {
        self.offering_sigs
            .iter()
            .map(|(sig, _)| reqs.overlaps(sig, interner))
            .collect()
    }

    /// Cheapest launchable offering of `it` whose signature is in `mask`.
    pub fn cheapest_price_in(&self, it: usize, mask: &[bool]) -> Option<f64> {
        self.its
            .get(it)?
            .offerings
            .iter()
            .filter(|o| o.launchable)
            .filter(|o| o.sig.is_some_and(|s| mask.get(s).copied().unwrap_or(false)))
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }

    /// Capacity types of launchable offerings of `it` whose signature is in `mask`.
    pub fn capacity_types_in<'a>(
        &'a self,
        it: usize,
        mask: &'a [bool],
    ) -> impl Iterator<Item = Sym> + 'a {
        self.its
            .get(it)
            .into_iter()
            .flat_map(|t| t.offerings.iter())
            .filter(|o| o.launchable)
            .filter(|o| o.sig.is_some_and(|s| mask.get(s).copied().unwrap_or(false)))
            .map(|o| o.capacity_type)
    }
}
