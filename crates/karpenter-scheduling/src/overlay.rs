//! NodeOverlays applied to the instance types of every NodePool: the one place that decides
//! which overlay changes which offering's price and which instance type's capacity, and which
//! overlays conflict (upstream's `nodeoverlay` controller and instance-type store, as one pure
//! function over values).
//!
//! The rules, as upstream v1.15:
//! - **Matching.** An overlay matches an instance type of a NodePool when its requirements are
//!   compatible with the type's requirements plus `karpenter.sh/nodepool In [pool]` plus the
//!   pool's template labels (a key the overlay names must be defined there, unless the overlay
//!   uses `NotIn`/`DoesNotExist` on it); of that type it matches the offerings whose zone,
//!   capacity type and further offering requirements intersect its requirements. A type with
//!   no matching offering is not matched at all.
//! - **Order.** Overlays are taken by weight, highest first (unset is 0); at equal weights the
//!   name later in the alphabet first. The first overlay to set an offering's price (or a
//!   resource of a type's capacity) wins; later ones leave it.
//! - **Price.** `price` replaces the offering's price; `priceAdjustment` adds an amount or a
//!   percentage of the cloud's price (never below 0). One change per offering, from the
//!   cloud's price: changes do not stack.
//! - **Capacity.** Extended resources are added to (or replace the same name in) the type's
//!   capacity, merged across overlays by resource name.
//! - **Conflicts.** An overlay that would set an offering's price, or a capacity resource, that
//!   an overlay *of the same weight* already set on an instance type both match conflicts
//!   (whatever the values): it is applied nowhere and reported with the overlay it conflicts
//!   with. Overlays failing [`validate_nodeoverlay`] are applied nowhere either. The rest
//!   still apply (upstream fails open).
//!
//! Better than upstream: the conflict names the other overlay, the NodePool, the instance type
//! and the offering or resource; and capacity conflicts are checked against every overlay of
//! the lowest weight seen so far on the type, where upstream remembers only the last one (so
//! `c`, `b`, `a` at one weight with `a` and `c` both adding `example.com/fuse` conflict here,
//! while upstream lets `a` pass as Ready and silently applies nothing of it).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use karpenter_api::labels;
use karpenter_api::v1alpha1::{NodeOverlay, PriceChange};
use karpenter_api::validation::validate_nodeoverlay;

use crate::hash::FxHashSet;
use crate::input::{InstanceType, NodePool, Offering, Operator, RequirementSpec};
use crate::intern::Interner;
use crate::quantity::Quantity;
use crate::requirements::Requirements;

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Valid and conflict-free: applied to this many instance types (over all NodePools).
    Applied { instance_types: usize },
    /// Failed the runtime validation: applied nowhere.
    Invalid(Vec<String>),
    /// Conflicts with an overlay of the same weight: applied nowhere.
    Conflict(Conflict),
}

impl Verdict {
    pub fn is_applied(&self) -> bool {
        matches!(self, Verdict::Applied { .. })
    }
}

/// Where two overlays of one weight both set the same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The overlay that set it first (and keeps it).
    pub with: String,
    pub weight: i32,
    pub node_pool: String,
    pub instance_type: String,
    pub on: ConflictOn,
}

/// What both overlays set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictOn {
    /// The price of the offering in `zone` of `capacity_type`.
    Price { zone: String, capacity_type: String },
    /// A capacity resource.
    Capacity { resource: String },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.on {
            ConflictOn::Price {
                zone,
                capacity_type,
            } => format!("the price of the {capacity_type} offering in {zone}"),
            ConflictOn::Capacity { resource } => format!("capacity {resource}"),
        };
        write!(
            f,
            "conflict with overlay {:?} of the same weight {}: both set {what} of instance type {} of NodePool {}",
            self.with, self.weight, self.instance_type, self.node_pool
        )
    }
}

/// A price an overlay changed, for reports.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceOverlaid {
    pub zone: String,
    pub capacity_type: String,
    pub before: f64,
    pub after: f64,
    pub overlay: String,
}

/// What the overlays changed on one instance type of one NodePool, for reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeOverlaid {
    pub prices: Vec<PriceOverlaid>,
    /// Resource -> (quantity, overlay).
    pub capacity: BTreeMap<String, (Quantity, String)>,
}

/// The result of [`apply`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Per overlay name.
    pub verdicts: BTreeMap<String, Verdict>,
    /// Per (NodePool, instance type) the overlays changed.
    pub changed: BTreeMap<(String, String), TypeOverlaid>,
}

impl Outcome {
    /// Whether an overlay changed a price, and whether one changed the capacity, of any of
    /// `instance_types` of `node_pool` (upstream's NodeClaim annotations
    /// `karpenter.sh/price-overlay-applied` and `karpenter.sh/capacity-overlay-applied`).
    pub fn applied_to<'a>(
        &self,
        node_pool: &str,
        instance_types: impl IntoIterator<Item = &'a str>,
    ) -> (bool, bool) {
        let (mut price, mut capacity) = (false, false);
        if self.changed.is_empty() {
            return (price, capacity);
        }
        for it in instance_types {
            if let Some(changed) = self.changed.get(&(node_pool.to_owned(), it.to_owned())) {
                price |= !changed.prices.is_empty();
                capacity |= !changed.capacity.is_empty();
            }
        }
        (price, capacity)
    }
}

/// An overlay's parsed spec.
struct Parsed {
    weight: i32,
    requirements: Requirements,
    price: Option<PriceChange>,
    capacity: Vec<(String, Quantity)>,
}

/// The winning price of one offering and who set it at the lowest weight seen.
struct PriceSlot {
    change: PriceChange,
    overlay: String,
    lowest_weight: i32,
    lowest_overlay: String,
}

/// The merged capacity of one type and the resources set at the lowest weight seen.
#[derive(Default)]
struct CapacitySlot {
    merged: BTreeMap<String, (Quantity, String)>,
    lowest_weight: Option<i32>,
    /// Resource -> overlay, for every overlay applied at `lowest_weight`.
    lowest: BTreeMap<String, String>,
}

/// One (NodePool, instance type) an overlay matched, with its matching offerings.
struct Match {
    pool: usize,
    instance_type: usize,
    offerings: Vec<usize>,
}

/// The overlay's spec, or the problems that make it invalid.
fn parse(overlay: &NodeOverlay, interner: &mut Interner) -> Result<Parsed, Vec<String>> {
    let errors: Vec<String> = validate_nodeoverlay(overlay)
        .iter()
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    let price = match overlay.price_change() {
        None => None,
        Some(Ok(change)) => Some(change),
        Some(Err(e)) => return Err(vec![e.to_string()]),
    };
    let mut capacity = Vec::new();
    for (name, quantity) in overlay.spec.capacity.iter().flatten() {
        match Quantity::try_from(quantity) {
            Ok(q) => capacity.push((name.clone(), q)),
            Err(e) => return Err(vec![format!("spec.capacity[{name}]: {e}")]),
        }
    }
    let specs: Vec<RequirementSpec> = overlay
        .spec
        .requirements
        .iter()
        .map(|r| RequirementSpec {
            key: r.key.clone(),
            operator: r.operator,
            values: r.values.clone(),
            min_values: None,
        })
        .collect();
    Ok(Parsed {
        weight: overlay.weight(),
        requirements: Requirements::from_specs(&specs, interner),
        price,
        capacity,
    })
}

fn offering_requirements(offering: &Offering, interner: &mut Interner) -> Requirements {
    let mut reqs = Requirements::from_specs(&offering.requirements, interner);
    reqs.add_expression(
        labels::ZONE,
        Operator::In,
        [offering.zone.as_str()],
        None,
        interner,
    );
    reqs.add_expression(
        labels::CAPACITY_TYPE,
        Operator::In,
        [offering.capacity_type.as_str()],
        None,
        interner,
    );
    reqs
}

/// The requirements an instance type of `pool` has in a simulation: its own, the NodePool's
/// name and its template labels.
fn type_requirements(pool: &NodePool, it: &InstanceType, interner: &mut Interner) -> Requirements {
    let mut reqs = Requirements::from_labels(&pool.labels, interner);
    reqs.add_expression(
        labels::NODEPOOL,
        Operator::In,
        [pool.name.as_str()],
        None,
        interner,
    );
    let own = Requirements::from_specs(&it.requirements, interner);
    reqs.add_all(&own, interner);
    reqs
}

/// Applies `overlays` to `instance_types` (NodePool name -> its types) in place, and says what
/// became of each overlay and what changed. `pools` gives each NodePool's template labels; a
/// pool without instance types, or types without a pool, are left alone.
pub fn apply(
    overlays: &[NodeOverlay],
    pools: &[NodePool],
    instance_types: &mut BTreeMap<String, Vec<InstanceType>>,
) -> Outcome {
    let mut outcome = Outcome::default();
    if overlays.is_empty() {
        return outcome;
    }
    let mut interner = Interner::new();
    let mut ordered: Vec<&NodeOverlay> = overlays.iter().collect();
    ordered.sort_by(|a, b| {
        b.weight()
            .cmp(&a.weight())
            .then_with(|| b.metadata.name.cmp(&a.metadata.name))
    });

    // Each (pool, type)'s requirements and its offerings' requirements, computed once.
    let pool_list: Vec<(&NodePool, &Vec<InstanceType>)> = pools
        .iter()
        .filter_map(|p| instance_types.get(&p.name).map(|types| (p, types)))
        .collect();
    let compiled: Vec<Vec<(Requirements, Vec<Requirements>)>> = pool_list
        .iter()
        .map(|(pool, types)| {
            types
                .iter()
                .map(|it| {
                    let reqs = type_requirements(pool, it, &mut interner);
                    let offerings = it
                        .offerings
                        .iter()
                        .map(|o| offering_requirements(o, &mut interner))
                        .collect();
                    (reqs, offerings)
                })
                .collect()
        })
        .collect();

    let none = FxHashSet::default();
    let mut prices: HashMap<(usize, usize, usize), PriceSlot> = HashMap::new();
    let mut capacities: HashMap<(usize, usize), CapacitySlot> = HashMap::new();
    for overlay in ordered {
        let name = overlay.metadata.name.clone().unwrap_or_default();
        let parsed = match parse(overlay, &mut interner) {
            Ok(parsed) => parsed,
            Err(errors) => {
                outcome.verdicts.insert(name, Verdict::Invalid(errors));
                continue;
            }
        };
        // Every match first, and every conflict, before anything is applied: an overlay
        // applies everywhere or nowhere.
        let mut matches = Vec::new();
        let mut conflict = None;
        'pools: for (p, types) in compiled.iter().enumerate() {
            for (t, (reqs, offering_reqs)) in types.iter().enumerate() {
                if reqs
                    .compatible(&parsed.requirements, &none, &interner)
                    .is_err()
                {
                    continue;
                }
                let offerings: Vec<usize> = offering_reqs
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| parsed.requirements.overlaps(o, &interner))
                    .map(|(i, _)| i)
                    .collect();
                if offerings.is_empty() {
                    continue;
                }
                let (pool, its) = pool_list[p];
                let it = &its[t];
                let at = |on| Conflict {
                    with: String::new(),
                    weight: parsed.weight,
                    node_pool: pool.name.clone(),
                    instance_type: it.name.clone(),
                    on,
                };
                if parsed.price.is_some() {
                    for &o in &offerings {
                        if let Some(slot) = prices.get(&(p, t, o))
                            && slot.lowest_weight == parsed.weight
                        {
                            let offering = &it.offerings[o];
                            conflict = Some(Conflict {
                                with: slot.lowest_overlay.clone(),
                                ..at(ConflictOn::Price {
                                    zone: offering.zone.clone(),
                                    capacity_type: offering.capacity_type.clone(),
                                })
                            });
                            break 'pools;
                        }
                    }
                }
                if let Some(slot) = capacities.get(&(p, t))
                    && slot.lowest_weight == Some(parsed.weight)
                    && let Some((resource, with)) = parsed
                        .capacity
                        .iter()
                        .find_map(|(r, _)| slot.lowest.get(r).map(|w| (r, w)))
                {
                    conflict = Some(Conflict {
                        with: with.clone(),
                        ..at(ConflictOn::Capacity {
                            resource: resource.clone(),
                        })
                    });
                    break 'pools;
                }
                matches.push(Match {
                    pool: p,
                    instance_type: t,
                    offerings,
                });
            }
        }
        if let Some(conflict) = conflict {
            outcome.verdicts.insert(name, Verdict::Conflict(conflict));
            continue;
        }
        for m in &matches {
            if let Some(change) = parsed.price {
                for &o in &m.offerings {
                    prices
                        .entry((m.pool, m.instance_type, o))
                        .and_modify(|slot| {
                            slot.lowest_weight = parsed.weight;
                            slot.lowest_overlay = name.clone();
                        })
                        .or_insert_with(|| PriceSlot {
                            change,
                            overlay: name.clone(),
                            lowest_weight: parsed.weight,
                            lowest_overlay: name.clone(),
                        });
                }
            }
            if !parsed.capacity.is_empty() {
                let slot = capacities.entry((m.pool, m.instance_type)).or_default();
                if slot.lowest_weight != Some(parsed.weight) {
                    slot.lowest_weight = Some(parsed.weight);
                    slot.lowest.clear();
                }
                for (resource, quantity) in &parsed.capacity {
                    slot.merged
                        .entry(resource.clone())
                        .or_insert_with(|| (*quantity, name.clone()));
                    slot.lowest.insert(resource.clone(), name.clone());
                }
            }
        }
        outcome.verdicts.insert(
            name,
            Verdict::Applied {
                instance_types: matches.len(),
            },
        );
    }

    // Write the winners into the instance types.
    let names: Vec<String> = pool_list.iter().map(|(p, _)| p.name.clone()).collect();
    for (p, pool_name) in names.iter().enumerate() {
        let Some(types) = instance_types.get_mut(pool_name) else {
            continue;
        };
        for (t, it) in types.iter_mut().enumerate() {
            let mut changed = TypeOverlaid::default();
            for (o, offering) in it.offerings.iter_mut().enumerate() {
                if let Some(slot) = prices.get(&(p, t, o)) {
                    let before = offering.price;
                    offering.price = slot.change.apply(before);
                    changed.prices.push(PriceOverlaid {
                        zone: offering.zone.clone(),
                        capacity_type: offering.capacity_type.clone(),
                        before,
                        after: offering.price,
                        overlay: slot.overlay.clone(),
                    });
                }
            }
            if let Some(slot) = capacities.get(&(p, t)) {
                for (resource, (quantity, overlay)) in &slot.merged {
                    it.capacity.set(resource, *quantity);
                    changed
                        .capacity
                        .insert(resource.clone(), (*quantity, overlay.clone()));
                }
            }
            if !changed.prices.is_empty() || !changed.capacity.is_empty() {
                outcome
                    .changed
                    .insert((pool_name.clone(), it.name.clone()), changed);
            }
        }
    }
    outcome
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;
