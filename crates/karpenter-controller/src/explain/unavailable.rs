//! Offerings marked unavailable after insufficient capacity, as a pod's explanation tells them:
//! the marks of a NodePool's instance types that could have held a pod the batch placed nowhere,
//! and those cheaper than the type a new NodeClaim was launched as (why the cheaper one was not
//! picked). Pure: the marks and their remaining time come from the cloud
//! ([`karpenter_cloud::CloudProvider::unavailable_offerings`]), the instance types from the
//! batch's catalogs.
//!
//! Compatibility is read coarsely: a type counts when its allocatable holds the requests and,
//! for a NodeClaim, when the claim's `In`/`NotIn` requirements on zone, capacity type and the
//! type's own single-valued labels allow the offering.

use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::Operator;
use karpenter_cloud::OfferingRef;
use karpenter_scheduling::{InstanceType, NewNodeClaim, Offering, RequirementSpec, ResourceList};

use super::convert::rfc3339;
use super::model::UnavailableAnswer;

/// At most this many offerings are told per place (cheapest first); the rest are counted.
pub const MAX_TOLD: usize = 10;

/// A mark, as the cloud lists it: the offering and how long it stays unavailable.
pub type Mark = (OfferingRef, Duration);

fn marked<'a>(marks: &'a [Mark], instance_type: &str, offering: &Offering) -> Option<&'a Mark> {
    marks.iter().find(|(o, _)| {
        o.instance_type == instance_type
            && o.zone == offering.zone
            && o.capacity_type.as_str() == offering.capacity_type
    })
}

fn answer(at: DateTime<Utc>, mark: &Mark, price: f64) -> UnavailableAnswer {
    let (offering, remaining) = mark;
    UnavailableAnswer {
        instance_type: offering.instance_type.clone(),
        zone: offering.zone.clone(),
        capacity_type: offering.capacity_type.as_str().to_owned(),
        price,
        until: rfc3339(at + chrono::Duration::from_std(*remaining).unwrap_or_default()),
        remaining: karpenter_api::duration::format_go_duration(Duration::from_secs(
            remaining.as_secs(),
        )),
    }
}

/// Cheapest first, then by name, zone, capacity type; at most [`MAX_TOLD`].
fn sorted(mut told: Vec<UnavailableAnswer>) -> Vec<UnavailableAnswer> {
    told.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
            .then_with(|| a.capacity_type.cmp(&b.capacity_type))
    });
    told.truncate(MAX_TOLD);
    told
}

/// The marked offerings of `types` whose type holds `requests`, at `at`.
pub fn holding(
    at: DateTime<Utc>,
    marks: &[Mark],
    types: &[InstanceType],
    requests: &ResourceList,
) -> Vec<UnavailableAnswer> {
    if marks.is_empty() {
        return Vec::new();
    }
    let told = types
        .iter()
        .filter(|t| requests.fits_in(&t.allocatable()))
        .flat_map(|t| {
            t.offerings
                .iter()
                .filter_map(|o| marked(marks, &t.name, o).map(|m| answer(at, m, o.price)))
        })
        .collect();
    sorted(told)
}

/// Whether `value` of `key` is allowed by the `In`/`NotIn` requirements on `key` (any other
/// operator, or no requirement, allows it).
fn allows(requirements: &[RequirementSpec], key: &str, value: &str) -> bool {
    requirements
        .iter()
        .filter(|r| r.key == key)
        .all(|r| match r.operator {
            Operator::In => r.values.iter().any(|v| v == value),
            Operator::NotIn => !r.values.iter().any(|v| v == value),
            _ => true,
        })
}

/// Whether `claim`'s requirements allow `offering` of `it`.
fn compatible(claim: &NewNodeClaim, it: &InstanceType, offering: &Offering) -> bool {
    let reqs = &claim.requirements;
    allows(reqs, labels::ZONE, &offering.zone)
        && allows(reqs, labels::CAPACITY_TYPE, &offering.capacity_type)
        && it.requirements.iter().all(|own| {
            own.operator != Operator::In
                || own.values.len() != 1
                || allows(reqs, &own.key, &own.values[0])
        })
}

/// The marked offerings of `types` cheaper than the cheapest option `claim` was launched with,
/// that its requirements allow and whose type holds its requests.
pub fn cheaper(
    at: DateTime<Utc>,
    marks: &[Mark],
    types: &[InstanceType],
    claim: &NewNodeClaim,
) -> Vec<UnavailableAnswer> {
    let Some(picked) = claim.instance_type_options.first() else {
        return Vec::new();
    };
    if marks.is_empty() {
        return Vec::new();
    }
    let told = types
        .iter()
        .filter(|t| claim.requests.fits_in(&t.allocatable()))
        .flat_map(|t| {
            t.offerings
                .iter()
                .filter(|o| o.price < picked.price && compatible(claim, t, o))
                .filter_map(|o| marked(marks, &t.name, o).map(|m| answer(at, m, o.price)))
        })
        .collect();
    sorted(told)
}

#[cfg(test)]
mod tests {
    use karpenter_cloud::CapacityType;
    use karpenter_scheduling::{InstanceTypeOption, Quantity};

    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-27T10:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn cpu(n: &str) -> ResourceList {
        ResourceList::new().with("cpu", Quantity::parse(n).unwrap_or_default())
    }

    fn offering(zone: &str, capacity_type: &str, price: f64) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price,
            available: false,
            requirements: Vec::new(),
            reservation_capacity: 0,
        }
    }

    fn instance_type(name: &str, cpus: &str, offerings: Vec<Offering>) -> InstanceType {
        InstanceType {
            name: name.into(),
            requirements: vec![RequirementSpec::new(
                labels::INSTANCE_TYPE,
                Operator::In,
                &[name],
            )],
            offerings,
            capacity: cpu(cpus),
            overhead: Default::default(),
        }
    }

    fn mark(instance_type: &str, zone: &str, capacity_type: CapacityType, secs: u64) -> Mark {
        (
            OfferingRef {
                instance_type: instance_type.into(),
                zone: zone.into(),
                capacity_type,
            },
            Duration::from_secs(secs),
        )
    }

    fn types() -> Vec<InstanceType> {
        vec![
            instance_type(
                "c5.large",
                "2",
                vec![
                    offering("us-east-1a", "spot", 0.03),
                    offering("us-east-1a", "on-demand", 0.085),
                ],
            ),
            instance_type(
                "m5.large",
                "2",
                vec![offering("us-east-1a", "on-demand", 0.096)],
            ),
            instance_type(
                "c5.xlarge",
                "4",
                vec![offering("us-east-1a", "on-demand", 0.17)],
            ),
        ]
    }

    #[test]
    fn a_pod_placed_nowhere_is_told_the_marked_offerings_of_types_that_hold_it() {
        let marks = [
            mark("c5.large", "us-east-1a", CapacityType::OnDemand, 150),
            mark("c5.xlarge", "us-east-1a", CapacityType::OnDemand, 30),
        ];
        let told = holding(at(), &marks, &types(), &cpu("3"));
        assert_eq!(told.len(), 1, "c5.large cannot hold 3 cpu: {told:?}");
        assert_eq!(told[0].instance_type, "c5.xlarge");
        assert_eq!(told[0].until, "2026-11-27T10:00:30Z");
        assert_eq!(told[0].remaining, "30s");
        assert_eq!(holding(at(), &marks, &types(), &cpu("1")).len(), 2);
        assert!(holding(at(), &[], &types(), &cpu("1")).is_empty());
    }

    #[test]
    fn a_launch_is_told_the_cheaper_marked_offerings_its_requirements_allow() {
        let claim = NewNodeClaim {
            node_pool: "general".into(),
            requirements: vec![RequirementSpec::new(
                labels::CAPACITY_TYPE,
                Operator::In,
                &["on-demand"],
            )],
            instance_type_min_values: None,
            instance_type_options: vec![InstanceTypeOption {
                name: "m5.large".into(),
                price: 0.096,
            }],
            requests: cpu("1"),
            pods: Vec::new(),
            min_values_relaxed: false,
            labels: Default::default(),
        };
        let marks = [
            mark("c5.large", "us-east-1a", CapacityType::OnDemand, 120),
            mark("c5.large", "us-east-1a", CapacityType::Spot, 120),
            mark("c5.xlarge", "us-east-1a", CapacityType::OnDemand, 120),
        ];
        let told = cheaper(at(), &marks, &types(), &claim);
        let names: Vec<String> = told
            .iter()
            .map(|u| format!("{} {}", u.instance_type, u.capacity_type))
            .collect();
        // Spot is not allowed, c5.xlarge is dearer than m5.large.
        assert_eq!(names, ["c5.large on-demand"]);
        assert_eq!(told[0].until, "2026-11-27T10:02:00Z");
        assert_eq!(told[0].remaining, "2m");
    }
}
