//! What one NodeClaim launches with (reference `karpenter-aws.md` 2.1 steps 4-7): the instance
//! types it may get, narrowed as upstream's `instance.Create` narrows them, the capacity type,
//! one subnet per zone, the AMI of each type and the launch-template groups.
//!
//! Order of the filters, as upstream: types with an available offering the claim allows;
//! exotic types (metal, GPUs, accelerators) dropped unless nothing else is left; spot
//! preferred when allowed and available; spot types dearer than the cheapest on-demand type
//! dropped; the [`MAX_INSTANCE_TYPES`] cheapest kept. The two price filters are skipped when
//! the claim carries `minValues` (they could break its flexibility).
//!
//! A claim that allows `reserved` launches into a reservation with a free slot when one fits
//! ([`super::reserved`]: reserved before spot before on-demand); each reservation gets a
//! template group of its own ([`TemplateGroup::reservation`]), which its launch template
//! targets.
//!
//! A claim whose price a NodeOverlay changed (`karpenter.sh/price-overlay-applied`) is
//! [`LaunchPlan::prioritized`]: its types are kept in the order the claim lists them (cheapest
//! first by the overlaid prices), each override's priority is that position, and the fleet asks
//! for upstream's `prioritized` strategies. The price filters still read EC2's prices.

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_api::v1::ec2nodeclass::AmiStatus;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, Operator};
use karpenter_cloud::offering::Reservation;
use karpenter_cloud::{CapacityType, InstanceTypeInfo, Offering};
use karpenter_scheduling::RequirementSpec;

use crate::nodeclass::amis;

/// Upstream's `maxInstanceTypes`: a fleet request names at most this many types.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// Why nothing can be launched for the claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No instance type the claim names has an available offering it allows.
    #[error(
        "no instance type of the nodeclaim has an available offering it allows ({tried} types tried)"
    )]
    NoOffering { tried: usize },
    /// The class has no subnet in any zone the offerings are in.
    #[error("the EC2NodeClass has no subnet in the zones the offerings are in ({zones})")]
    NoSubnet { zones: String },
    /// No status AMI is compatible with any remaining instance type.
    #[error("no AMI in the EC2NodeClass status is compatible with the instance types ({types})")]
    NoAmi { types: String },
}

/// One override of the fleet request.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub image_id: String,
    /// The offering's price, or with an overlay its type's position in the claim: lower is
    /// preferred.
    pub priority: f64,
}

/// Instance types that share one launch template: the same AMI and the same max pods.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateGroup {
    pub image_id: String,
    pub max_pods: i64,
    pub instance_types: Vec<String>,
    /// This group's overrides, cheapest first.
    pub overrides: Vec<Override>,
    /// The reservation a reserved launch's template targets (one template per reservation).
    pub reservation: Option<Reservation>,
}

/// The launch of one NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    pub capacity_type: CapacityType,
    pub groups: Vec<TemplateGroup>,
    /// A NodeOverlay changed a price of the claim: launch by the claim's order.
    pub prioritized: bool,
}

impl LaunchPlan {
    /// Every override, group by group.
    pub fn overrides(&self) -> impl Iterator<Item = &Override> {
        self.groups.iter().flat_map(|g| g.overrides.iter())
    }
}

fn is_exotic(info: &InstanceTypeInfo) -> bool {
    info.labels
        .get(labels::INSTANCE_SIZE)
        .is_some_and(|size| size.contains("metal"))
        || info.labels.contains_key(labels::INSTANCE_GPU_COUNT)
        || info.labels.contains_key(labels::INSTANCE_ACCELERATOR_COUNT)
}

/// The claim's allowed, available offerings of one type.
fn offerings<'a>(
    info: &'a InstanceTypeInfo,
    requirements: &'a [RequirementSpec],
    unavailable: &'a dyn Fn(&str, &Offering) -> bool,
) -> impl Iterator<Item = &'a Offering> + 'a {
    info.offerings.iter().filter(move |o| {
        super::reserved::launchable(o) && !unavailable(&info.name, o) && o.allowed_by(requirements)
    })
}

fn cheapest(
    info: &InstanceTypeInfo,
    requirements: &[RequirementSpec],
    unavailable: &dyn Fn(&str, &Offering) -> bool,
    capacity_type: CapacityType,
) -> Option<f64> {
    offerings(info, requirements, unavailable)
        .filter(|o| o.capacity_type == capacity_type)
        .map(|o| o.price_per_hour)
        .min_by(f64::total_cmp)
}

/// Plans the launch of `claim` from the class's instance types (`by_name`), its status
/// (subnets, AMIs) and the offerings recently found unavailable.
pub fn plan<'a>(
    claim: &NodeClaim,
    class: &EC2NodeClass,
    by_name: &dyn Fn(&str) -> Option<&'a InstanceTypeInfo>,
    unavailable: &dyn Fn(&str, &Offering) -> bool,
) -> Result<LaunchPlan, PlanError> {
    let requirements = karpenter_scheduling::v1::node_claim_requirements(claim);
    let has_min_values = claim
        .spec
        .requirements
        .iter()
        .any(|r| r.min_values.is_some());
    let names: Vec<&str> = claim
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == labels::INSTANCE_TYPE && r.operator == Operator::In)
        .flat_map(|r| r.values.iter().map(String::as_str))
        .collect();
    let tried = names.len();
    let mut candidates: Vec<&'a InstanceTypeInfo> = names
        .iter()
        .filter_map(|n| by_name(n))
        .filter(|info| offerings(info, &requirements, unavailable).next().is_some())
        .collect();
    if candidates.is_empty() {
        return Err(PlanError::NoOffering { tried });
    }
    // Reserved before spot before on-demand (upstream's getCapacityType): the reservation
    // filters come before the exotic one, so a reserved GPU type is not dropped for it.
    let allowed = |info: &InstanceTypeInfo, o: &Offering| {
        !unavailable(&info.name, o) && o.allowed_by(&requirements)
    };
    let reserved = super::reserved::choose(&candidates, &allowed);
    if let Some(choice) = &reserved {
        candidates = choice.iter().map(|(info, _)| *info).collect();
    }
    if !has_min_values && candidates.iter().any(|i| !is_exotic(i)) {
        candidates.retain(|i| !is_exotic(i));
    }
    // The reserved offerings each type may launch into (by reservation id).
    let reserved_ids: Option<BTreeMap<&str, Vec<&str>>> = reserved.as_ref().map(|choice| {
        choice
            .iter()
            .map(|(info, offerings)| {
                let ids = offerings
                    .iter()
                    .filter_map(|o| o.reservation.as_ref().map(|r| r.id.as_str()))
                    .collect();
                (info.name.as_str(), ids)
            })
            .collect()
    });
    let chosen = |info: &InstanceTypeInfo, o: &Offering| match &reserved_ids {
        None => true,
        Some(ids) => o.reservation.as_ref().is_some_and(|r| {
            ids.get(info.name.as_str())
                .is_some_and(|ids| ids.contains(&r.id.as_str()))
        }),
    };
    let spot_available = candidates.iter().any(|i| {
        offerings(i, &requirements, unavailable).any(|o| o.capacity_type == CapacityType::Spot)
    });
    let capacity_type = if reserved.is_some() {
        CapacityType::Reserved
    } else if spot_available {
        CapacityType::Spot
    } else {
        CapacityType::OnDemand
    };
    let mut priced: Vec<(&InstanceTypeInfo, f64)> = candidates
        .iter()
        .filter_map(|i| {
            let price = offerings(i, &requirements, unavailable)
                .filter(|o| o.capacity_type == capacity_type && chosen(i, o))
                .map(|o| o.price_per_hour)
                .min_by(f64::total_cmp)?;
            Some((*i, price))
        })
        .collect();
    if capacity_type == CapacityType::Spot && !has_min_values {
        let cheapest_on_demand = candidates
            .iter()
            .filter_map(|i| cheapest(i, &requirements, unavailable, CapacityType::OnDemand))
            .min_by(f64::total_cmp);
        if let Some(limit) = cheapest_on_demand {
            priced.retain(|(_, price)| *price <= limit);
        }
    }
    let prioritized = karpenter_cloud::launch::overlay_prioritized(claim);
    let position = |name: &str| names.iter().position(|n| *n == name).unwrap_or(usize::MAX);
    if prioritized {
        priced.sort_by_key(|(info, _)| position(&info.name));
    } else {
        priced.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.name.cmp(&b.0.name)));
    }
    priced.truncate(MAX_INSTANCE_TYPES);
    if priced.is_empty() {
        return Err(PlanError::NoOffering { tried });
    }

    let status = class.status.as_ref();
    // Subnets are listed most free addresses first: the first one of a zone is its pick.
    let mut subnet_of_zone: BTreeMap<&str, &str> = BTreeMap::new();
    for subnet in status
        .and_then(|s| s.subnets.as_deref())
        .unwrap_or_default()
    {
        subnet_of_zone
            .entry(subnet.zone.as_str())
            .or_insert(subnet.id.as_str());
    }
    let amis: &[AmiStatus] = status.and_then(|s| s.amis.as_deref()).unwrap_or_default();

    let mut groups: Vec<TemplateGroup> = Vec::new();
    let mut zones_without_subnet: Vec<String> = Vec::new();
    let mut without_ami: Vec<String> = Vec::new();
    for (info, _) in &priced {
        let Some(ami) = amis::ami_for(amis, &info.labels) else {
            without_ami.push(info.name.clone());
            continue;
        };
        let mut overrides: Vec<(Override, Option<Reservation>)> = Vec::new();
        for offering in offerings(info, &requirements, unavailable)
            .filter(|o| o.capacity_type == capacity_type && chosen(info, o))
        {
            let Some(subnet) = subnet_of_zone.get(offering.zone.as_str()) else {
                zones_without_subnet.push(offering.zone.clone());
                continue;
            };
            if overrides.iter().any(|(o, _)| o.zone == offering.zone) {
                continue;
            }
            let over = Override {
                instance_type: info.name.clone(),
                zone: offering.zone.clone(),
                subnet_id: (*subnet).to_owned(),
                image_id: ami.id.clone(),
                priority: if prioritized {
                    position(&info.name) as f64
                } else {
                    offering.price_per_hour
                },
            };
            overrides.push((over, offering.reservation.clone()));
        }
        let max_pods = info.capacity.pods;
        for (over, reservation) in overrides {
            let id = reservation.as_ref().map(|r| r.id.as_str());
            match groups.iter_mut().find(|g| {
                g.image_id == ami.id
                    && g.max_pods == max_pods
                    && g.reservation.as_ref().map(|r| r.id.as_str()) == id
            }) {
                Some(group) => {
                    if !group.instance_types.contains(&info.name) {
                        group.instance_types.push(info.name.clone());
                    }
                    group.overrides.push(over);
                }
                None => groups.push(TemplateGroup {
                    image_id: ami.id.clone(),
                    max_pods,
                    instance_types: vec![info.name.clone()],
                    overrides: vec![over],
                    reservation,
                }),
            }
        }
    }
    if groups.is_empty() {
        if !without_ami.is_empty() && without_ami.len() == priced.len() {
            return Err(PlanError::NoAmi {
                types: without_ami.join(", "),
            });
        }
        zones_without_subnet.sort();
        zones_without_subnet.dedup();
        return Err(PlanError::NoSubnet {
            zones: zones_without_subnet.join(", "),
        });
    }
    for group in &mut groups {
        group.overrides.sort_by(|a, b| {
            a.priority
                .total_cmp(&b.priority)
                .then_with(|| a.zone.cmp(&b.zone))
        });
    }
    Ok(LaunchPlan {
        capacity_type,
        groups,
        prioritized,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloud::Resources;

    fn info(
        name: &str,
        pods: i64,
        offers: &[(&str, CapacityType, f64)],
        extra: &[(&str, &str)],
    ) -> InstanceTypeInfo {
        let mut labels: BTreeMap<String, String> = BTreeMap::from([
            (labels::ARCH.to_owned(), "amd64".to_owned()),
            (labels::INSTANCE_TYPE.to_owned(), name.to_owned()),
        ]);
        for (k, v) in extra {
            labels.insert((*k).into(), (*v).into());
        }
        InstanceTypeInfo {
            name: name.into(),
            labels,
            capacity: Resources {
                cpu_millis: 2000,
                memory_bytes: 8 << 30,
                ephemeral_storage_bytes: 20 << 30,
                pods,
                extended: BTreeMap::new(),
            },
            overhead: Default::default(),
            offerings: offers
                .iter()
                .map(|(zone, capacity_type, price)| Offering {
                    zone: (*zone).into(),
                    capacity_type: *capacity_type,
                    price_per_hour: *price,
                    available: true,
                    price_is_estimate: false,
                    reservation: None,
                })
                .collect(),
            label_choices: BTreeMap::new(),
        }
    }

    fn claim(types: &[&str], extra: serde_json::Value) -> NodeClaim {
        let mut requirements = vec![serde_json::json!(
            {"key": labels::INSTANCE_TYPE, "operator": "In", "values": types}
        )];
        if let Some(more) = extra.as_array() {
            requirements.extend(more.iter().cloned());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": requirements}
        }))
        .unwrap()
    }

    fn class() -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
            "status": {
                "subnets": [
                    {"id": "subnet-a-big", "zone": "us-west-2a"},
                    {"id": "subnet-b", "zone": "us-west-2b"},
                    {"id": "subnet-a-small", "zone": "us-west-2a"}
                ],
                "amis": [
                    {"id": "ami-gpu", "requirements": [
                        {"key": labels::ARCH, "operator": "In", "values": ["amd64"]},
                        {"key": labels::INSTANCE_GPU_COUNT, "operator": "Exists"}]},
                    {"id": "ami-std", "requirements": [
                        {"key": labels::ARCH, "operator": "In", "values": ["amd64"]},
                        {"key": labels::INSTANCE_GPU_COUNT, "operator": "DoesNotExist"},
                        {"key": labels::INSTANCE_ACCELERATOR_COUNT, "operator": "DoesNotExist"}]}
                ]
            }
        }))
        .unwrap()
    }

    fn never(_: &str, _: &Offering) -> bool {
        false
    }

    use CapacityType::{OnDemand, Spot};

    #[test]
    fn spot_is_preferred_and_each_zone_gets_its_roomiest_subnet() {
        let types = [
            info(
                "m5.large",
                29,
                &[
                    ("us-west-2a", OnDemand, 0.096),
                    ("us-west-2a", Spot, 0.04),
                    ("us-west-2b", Spot, 0.05),
                ],
                &[],
            ),
            info(
                "c5.large",
                29,
                &[("us-west-2b", OnDemand, 0.085), ("us-west-2b", Spot, 0.03)],
                &[],
            ),
        ];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let plan = plan(
            &claim(&["m5.large", "c5.large"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(plan.capacity_type, Spot);
        assert_eq!(plan.groups.len(), 1, "same AMI and max pods: one template");
        let overrides: Vec<(&str, &str, &str)> = plan
            .overrides()
            .map(|o| {
                (
                    o.instance_type.as_str(),
                    o.zone.as_str(),
                    o.subnet_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            overrides,
            [
                ("c5.large", "us-west-2b", "subnet-b"),
                ("m5.large", "us-west-2a", "subnet-a-big"),
                ("m5.large", "us-west-2b", "subnet-b"),
            ]
        );
        assert!(plan.overrides().all(|o| o.image_id == "ami-std"));
    }

    #[test]
    fn a_claim_priced_by_an_overlay_launches_in_its_own_order() {
        let types = [
            info("c5.large", 29, &[("us-west-2a", OnDemand, 0.085)], &[]),
            info("m5.large", 29, &[("us-west-2a", OnDemand, 0.096)], &[]),
        ];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let mut overlaid = claim(&["m5.large", "c5.large"], serde_json::json!([]));
        overlaid.metadata.annotations = Some(BTreeMap::from([(
            labels::PRICE_OVERLAY_APPLIED.to_owned(),
            "true".to_owned(),
        )]));
        let plan = plan(&overlaid, &class(), &lookup, &never).unwrap();
        assert!(plan.prioritized);
        let order: Vec<(&str, f64)> = plan
            .overrides()
            .map(|o| (o.instance_type.as_str(), o.priority))
            .collect();
        assert_eq!(order, [("m5.large", 0.0), ("c5.large", 1.0)]);
        let plain = super::plan(
            &claim(&["m5.large", "c5.large"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert!(!plain.prioritized);
        assert_eq!(
            plain.overrides().next().map(|o| o.instance_type.as_str()),
            Some("c5.large")
        );
    }

    #[test]
    fn on_demand_when_the_claim_or_the_offerings_rule_spot_out() {
        let types = [info(
            "m5.large",
            29,
            &[("us-west-2a", OnDemand, 0.096), ("us-west-2a", Spot, 0.04)],
            &[],
        )];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let on_demand_only = claim(
            &["m5.large"],
            serde_json::json!([
                {"key": labels::CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
            ]),
        );
        assert_eq!(
            plan(&on_demand_only, &class(), &lookup, &never)
                .unwrap()
                .capacity_type,
            OnDemand
        );
        let spot_out = |_: &str, o: &Offering| o.capacity_type == Spot;
        let plan = plan(
            &claim(&["m5.large"], serde_json::json!([])),
            &class(),
            &lookup,
            &spot_out,
        )
        .unwrap();
        assert_eq!(plan.capacity_type, OnDemand);
        assert_eq!(plan.groups[0].overrides[0].priority, 0.096);
    }

    #[test]
    fn spot_types_dearer_than_the_cheapest_on_demand_type_are_dropped() {
        let types = [
            info(
                "cheap",
                29,
                &[("us-west-2a", OnDemand, 0.10), ("us-west-2a", Spot, 0.05)],
                &[],
            ),
            info(
                "pricey-spot",
                29,
                &[("us-west-2a", OnDemand, 0.30), ("us-west-2a", Spot, 0.20)],
                &[],
            ),
        ];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let plan = plan(
            &claim(&["cheap", "pricey-spot"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(plan.groups[0].instance_types, ["cheap"]);
    }

    #[test]
    fn exotic_types_are_used_only_when_nothing_else_fits() {
        let gpu = info(
            "g5.xlarge",
            58,
            &[("us-west-2a", OnDemand, 1.0)],
            &[(labels::INSTANCE_GPU_COUNT, "1")],
        );
        let plain = info("m5.large", 29, &[("us-west-2a", OnDemand, 0.1)], &[]);
        let both = [gpu.clone(), plain];
        let lookup = |n: &str| both.iter().find(|t| t.name == n);
        let plan1 = plan(
            &claim(&["g5.xlarge", "m5.large"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(
            plan1
                .groups
                .iter()
                .map(|g| g.instance_types.clone())
                .collect::<Vec<_>>(),
            [vec!["m5.large".to_owned()]]
        );
        let only = [gpu];
        let lookup = |n: &str| only.iter().find(|t| t.name == n);
        let plan2 = plan(
            &claim(&["g5.xlarge"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(plan2.groups[0].image_id, "ami-gpu");
    }

    #[test]
    fn types_with_different_max_pods_get_different_templates() {
        let types = [
            info("m5.large", 29, &[("us-west-2a", OnDemand, 0.096)], &[]),
            info("m5.xlarge", 58, &[("us-west-2a", OnDemand, 0.192)], &[]),
        ];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let plan = plan(
            &claim(&["m5.large", "m5.xlarge"], serde_json::json!([])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        let pods: Vec<i64> = plan.groups.iter().map(|g| g.max_pods).collect();
        assert_eq!(pods, [29, 58]);
    }

    fn with_reservation(
        mut info: InstanceTypeInfo,
        zone: &str,
        id: &str,
        slots: u32,
    ) -> InstanceTypeInfo {
        info.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: CapacityType::Reserved,
            price_per_hour: 0.085 / 10_000_000.0,
            available: true,
            price_is_estimate: false,
            reservation: Some(Reservation {
                id: id.into(),
                kind: karpenter_cloud::offering::ReservationKind::Default,
                interruptible: false,
                available_instances: slots,
            }),
        });
        info
    }

    fn capacity_types(values: &[&str]) -> serde_json::Value {
        serde_json::json!([{"key": labels::CAPACITY_TYPE, "operator": "In", "values": values}])
    }

    #[test]
    fn a_claim_allowing_reserved_launches_into_a_free_reservation_with_a_template_per_reservation()
    {
        let c5 = info(
            "c5.large",
            29,
            &[
                ("us-west-2a", OnDemand, 0.085),
                ("us-west-2b", OnDemand, 0.085),
            ],
            &[],
        );
        let types = [with_reservation(
            with_reservation(c5, "us-west-2a", "cr-a", 2),
            "us-west-2b",
            "cr-b",
            1,
        )];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let plan = plan(
            &claim(&["c5.large"], capacity_types(&["on-demand", "reserved"])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(plan.capacity_type, CapacityType::Reserved);
        let groups: Vec<(Option<&str>, Vec<&str>)> = plan
            .groups
            .iter()
            .map(|g| {
                (
                    g.reservation.as_ref().map(|r| r.id.as_str()),
                    g.overrides.iter().map(|o| o.zone.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            groups,
            [
                (Some("cr-a"), vec!["us-west-2a"]),
                (Some("cr-b"), vec!["us-west-2b"])
            ]
        );
    }

    #[test]
    fn a_full_reservation_falls_back_to_on_demand_and_a_claim_pinned_to_it_has_no_offering() {
        let c5 = info("c5.large", 29, &[("us-west-2a", OnDemand, 0.085)], &[]);
        let types = [with_reservation(c5, "us-west-2a", "cr-a", 0)];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let fallback = plan(
            &claim(&["c5.large"], capacity_types(&["on-demand", "reserved"])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(fallback.capacity_type, OnDemand);
        assert!(fallback.groups.iter().all(|g| g.reservation.is_none()));
        let mut pinned = capacity_types(&["reserved"]);
        pinned.as_array_mut().unwrap().push(serde_json::json!(
            {"key": labels::CAPACITY_RESERVATION_ID, "operator": "In", "values": ["cr-a"]}
        ));
        assert_eq!(
            plan(&claim(&["c5.large"], pinned), &class(), &lookup, &never),
            Err(PlanError::NoOffering { tried: 1 })
        );
    }

    #[test]
    fn a_claim_without_reserved_never_launches_into_a_reservation() {
        let c5 = info("c5.large", 29, &[("us-west-2a", OnDemand, 0.085)], &[]);
        let types = [with_reservation(c5, "us-west-2a", "cr-a", 2)];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        let plan = plan(
            &claim(&["c5.large"], capacity_types(&["on-demand"])),
            &class(),
            &lookup,
            &never,
        )
        .unwrap();
        assert_eq!(plan.capacity_type, OnDemand);
    }

    #[test]
    fn nothing_launchable_says_why() {
        let types = [info(
            "m5.large",
            29,
            &[("us-east-1a", OnDemand, 0.096)],
            &[],
        )];
        let lookup = |n: &str| types.iter().find(|t| t.name == n);
        assert_eq!(
            plan(
                &claim(&["m5.large"], serde_json::json!([])),
                &class(),
                &lookup,
                &never
            ),
            Err(PlanError::NoSubnet {
                zones: "us-east-1a".into()
            })
        );
        assert_eq!(
            plan(
                &claim(&["t9.nano"], serde_json::json!([])),
                &class(),
                &lookup,
                &never
            ),
            Err(PlanError::NoOffering { tried: 1 })
        );
        let arm = [info(
            "m7g.large",
            29,
            &[("us-west-2a", OnDemand, 0.08)],
            &[(labels::ARCH, "arm64")],
        )];
        let lookup = |n: &str| arm.iter().find(|t| t.name == n);
        assert!(matches!(
            plan(
                &claim(&["m7g.large"], serde_json::json!([])),
                &class(),
                &lookup,
                &never
            ),
            Err(PlanError::NoAmi { .. })
        ));
    }
}
