//! Price rules for replacements (upstream `computeConsolidation`, `computeSpotToSpotConsolidation`,
//! `filterOutSameInstanceType`).
//!
//! A replacement's instance-type options are kept only when their *worst* launch price (the
//! most expensive offering the claim could land on) is below the candidates' total price. A
//! replacement that may be spot or on-demand is restricted to spot, so a spot shortage cannot
//! turn a saving into an on-demand cost. All-spot candidates take the spot-to-spot path: gated
//! by `SpotToSpotConsolidation`, spot offerings only, and for a single node at least 15 cheaper
//! options (truncated to max(15, minValues)) so the replacement is not the next spot type to be
//! interrupted. Multi-node replacements must be cheaper than any candidate of the same type.

use std::collections::BTreeMap;

use karpenter_api::labels::{CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, ZONE};
use karpenter_scheduling::{
    InstanceType, InstanceTypeOption, NewNodeClaim, Offering, Operator, RequirementSpec,
};

use crate::candidate::Candidate;
use crate::reason::{Code, Reason};
use crate::snapshot::Snapshot;

/// Single-node spot-to-spot consolidation needs this many cheaper spot options.
pub const MIN_SPOT_TO_SPOT_OPTIONS: usize = 15;

fn allows(reqs: &[RequirementSpec], key: &str, value: &str) -> bool {
    reqs.iter()
        .filter(|r| r.key == key)
        .all(|r| match r.operator {
            Operator::In => r.values.iter().any(|v| v == value),
            Operator::NotIn => !r.values.iter().any(|v| v == value),
            Operator::DoesNotExist => false,
            _ => true,
        })
}

fn compatible<'a>(
    it: &'a InstanceType,
    reqs: &'a [RequirementSpec],
) -> impl Iterator<Item = &'a Offering> + 'a {
    it.offerings.iter().filter(move |o| {
        o.available && allows(reqs, ZONE, &o.zone) && allows(reqs, CAPACITY_TYPE, &o.capacity_type)
    })
}

/// The most expensive offering the claim could launch.
pub fn worst_launch_price(it: &InstanceType, reqs: &[RequirementSpec]) -> Option<f64> {
    compatible(it, reqs).map(|o| o.price).reduce(f64::max)
}

/// The cheapest offering the claim could launch.
pub fn cheapest_price(it: &InstanceType, reqs: &[RequirementSpec]) -> Option<f64> {
    compatible(it, reqs).map(|o| o.price).reduce(f64::min)
}

fn with_capacity_type(reqs: &[RequirementSpec], ct: &str) -> Vec<RequirementSpec> {
    let mut out: Vec<RequirementSpec> = reqs
        .iter()
        .filter(|r| r.key != CAPACITY_TYPE)
        .cloned()
        .collect();
    out.push(RequirementSpec::is_in(CAPACITY_TYPE, &[ct]));
    out
}

fn instance_type_min_values(reqs: &[RequirementSpec]) -> usize {
    reqs.iter()
        .filter(|r| r.key == karpenter_api::labels::INSTANCE_TYPE)
        .filter_map(|r| r.min_values)
        .max()
        .map_or(0, |m| m as usize)
}

/// Options whose worst launch price under `reqs` is below `limit`, re-priced and cheapest first.
fn cheaper_options(
    catalog: &BTreeMap<&str, &InstanceType>,
    options: &[InstanceTypeOption],
    reqs: &[RequirementSpec],
    limit: f64,
) -> Vec<InstanceTypeOption> {
    let mut kept: Vec<InstanceTypeOption> = options
        .iter()
        .filter_map(|o| {
            let it = catalog.get(&*o.name)?;
            let worst = worst_launch_price(it, reqs)?;
            (worst < limit).then(|| InstanceTypeOption {
                name: o.name.clone(),
                price: cheapest_price(it, reqs).unwrap_or(o.price),
            })
        })
        .collect();
    kept.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.name.cmp(&b.name))
    });
    kept
}

fn describe_cheapest(
    catalog: &BTreeMap<&str, &InstanceType>,
    options: &[InstanceTypeOption],
    reqs: &[RequirementSpec],
) -> String {
    options
        .iter()
        .filter_map(|o| {
            let it = catalog.get(&*o.name)?;
            Some((&*o.name, worst_launch_price(it, reqs)?))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or("no launchable option".to_owned(), |(n, p)| {
            format!("cheapest option {n} {p:.4}/h")
        })
}

/// Applies the price rules to the single replacement of `candidates`.
pub fn cheaper_replacement(
    snapshot: &Snapshot,
    claim: &NewNodeClaim,
    candidates: &[&Candidate],
    multi_node: bool,
) -> Result<NewNodeClaim, Reason> {
    let catalog: BTreeMap<&str, &InstanceType> = snapshot
        .catalog(&claim.node_pool)
        .iter()
        .map(|it| (it.name.as_str(), it))
        .collect();
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let reqs = &claim.requirements;
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type == CAPACITY_TYPE_SPOT);
    let can_spot = allows(reqs, CAPACITY_TYPE, CAPACITY_TYPE_SPOT);
    let min_values = instance_type_min_values(reqs);
    let mut out = claim.clone();
    if all_spot && can_spot {
        if !snapshot.features.spot_to_spot_consolidation {
            return Err(Reason::new(
                Code::SpotToSpotDisabled,
                "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)",
            ));
        }
        let spot = with_capacity_type(reqs, CAPACITY_TYPE_SPOT);
        let mut options = cheaper_options(&catalog, &claim.instance_type_options, &spot, total);
        if options.is_empty() {
            return Err(Reason::new(
                Code::NotCheaper,
                format!(
                    "no cheaper spot replacement: {} >= current {total:.4}/h",
                    describe_cheapest(&catalog, &claim.instance_type_options, &spot)
                ),
            ));
        }
        if !multi_node {
            if options.len() < MIN_SPOT_TO_SPOT_OPTIONS {
                return Err(Reason::new(
                    Code::SpotToSpotTooFewOptions,
                    format!(
                        "spot-to-spot consolidation needs {MIN_SPOT_TO_SPOT_OPTIONS} cheaper spot options, found {}",
                        options.len()
                    ),
                ));
            }
            options.truncate(MIN_SPOT_TO_SPOT_OPTIONS.max(min_values));
        }
        out.requirements = spot;
        out.instance_type_options = options;
    } else {
        let options = cheaper_options(&catalog, &claim.instance_type_options, reqs, total);
        if options.is_empty() {
            return Err(Reason::new(
                Code::NotCheaper,
                format!(
                    "no cheaper replacement: {} >= current {total:.4}/h",
                    describe_cheapest(&catalog, &claim.instance_type_options, reqs)
                ),
            ));
        }
        out.instance_type_options = options;
        if can_spot && allows(reqs, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND) {
            let spot = with_capacity_type(reqs, CAPACITY_TYPE_SPOT);
            let spot_options: Vec<InstanceTypeOption> = out
                .instance_type_options
                .iter()
                .filter_map(|o| {
                    let it = catalog.get(&*o.name)?;
                    Some(InstanceTypeOption {
                        name: o.name.clone(),
                        price: cheapest_price(it, &spot)?,
                    })
                })
                .collect();
            if spot_options.is_empty() {
                return Err(Reason::new(
                    Code::NotCheaper,
                    "no cheaper replacement: the cheaper options have no spot offering, and an on-demand+spot replacement is restricted to spot",
                ));
            }
            out.requirements = spot;
            out.instance_type_options = spot_options;
        }
    }
    if min_values > out.instance_type_options.len() {
        return Err(Reason::new(
            Code::MinValuesNotMet,
            format!(
                "only {} cheaper options, fewer than minValues {min_values}",
                out.instance_type_options.len()
            ),
        ));
    }
    Ok(out)
}

/// Multi-node rule: a replacement of several nodes must be cheaper than the cheapest candidate
/// whose instance type is among its options (else deleting the others is less disruptive).
pub fn filter_out_same_instance_type(
    claim: &NewNodeClaim,
    candidates: &[&Candidate],
) -> Vec<InstanceTypeOption> {
    let mut prices: BTreeMap<&str, f64> = BTreeMap::new();
    for c in candidates {
        let p = prices.entry(c.instance_type.as_str()).or_insert(c.price);
        *p = p.min(c.price);
    }
    let max_price = claim
        .instance_type_options
        .iter()
        .filter_map(|o| prices.get(&*o.name).copied())
        .fold(f64::MAX, f64::min);
    claim
        .instance_type_options
        .iter()
        .filter(|o| o.price < max_price)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::builders::InstanceTypeBuilder;

    #[test]
    fn the_worst_launch_price_is_the_dearest_offering_the_requirements_allow() {
        let it = InstanceTypeBuilder::new("m")
            .offering("a", "spot", 0.03, true)
            .offering("a", "on-demand", 0.10, true)
            .offering("b", "on-demand", 0.12, false)
            .build();
        assert_eq!(worst_launch_price(&it, &[]), Some(0.10));
        let spot = [RequirementSpec::is_in(CAPACITY_TYPE, &["spot"])];
        assert_eq!(worst_launch_price(&it, &spot), Some(0.03));
        assert_eq!(cheapest_price(&it, &[]), Some(0.03));
    }
}
