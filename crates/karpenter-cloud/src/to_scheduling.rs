//! Conversion into the scheduling solver's input type, [`karpenter_scheduling::InstanceType`].
//!
//! Requirements follow upstream's `computeRequirements`: every label becomes `key In [value]`,
//! every label choice `key In [values]`;
//! zone and capacity type are `In` the offerings' values; the AWS instance-fact keys a type does
//! not have (no GPU, no local NVMe, ...) are `DoesNotExist`, so a NodePool that requires, say,
//! `karpenter.k8s.aws/instance-gpu-count Exists` does not match a type without GPUs; and
//! `node.kubernetes.io/windows-build` is `DoesNotExist` (the catalog is Linux-only). The
//! capacity-reservation keys are `DoesNotExist` for a type without reserved offerings, and `In`
//! the reservations' values for one with them; its other offerings then say `DoesNotExist` for
//! them, so a NodeClaim pinned to a reservation can only launch into it (upstream's
//! `computeRequirements` and offering resolvers).

use std::collections::BTreeSet;

use karpenter_api::labels;
use karpenter_scheduling::{
    InstanceType, Offering as SchedulingOffering, Operator, Overhead as SchedulingOverhead,
    Quantity, RequirementSpec, ResourceList,
};

use crate::instance_type::InstanceTypeInfo;
use crate::resources::Resources;

/// The instance-fact keys a type either has a value for or does not have at all.
pub const INSTANCE_FACT_KEYS: &[&str] = &[
    labels::INSTANCE_CATEGORY,
    labels::INSTANCE_FAMILY,
    labels::INSTANCE_GENERATION,
    labels::INSTANCE_SIZE,
    labels::INSTANCE_CPU,
    labels::INSTANCE_CPU_MANUFACTURER,
    labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    labels::INSTANCE_MEMORY,
    labels::INSTANCE_HYPERVISOR,
    labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    labels::INSTANCE_LOCAL_NVME,
    labels::INSTANCE_NETWORK_BANDWIDTH,
    labels::INSTANCE_EBS_BANDWIDTH,
    labels::INSTANCE_GPU_NAME,
    labels::INSTANCE_GPU_MANUFACTURER,
    labels::INSTANCE_GPU_COUNT,
    labels::INSTANCE_GPU_MEMORY,
    labels::INSTANCE_ACCELERATOR_NAME,
    labels::INSTANCE_ACCELERATOR_MANUFACTURER,
    labels::INSTANCE_ACCELERATOR_COUNT,
    labels::INSTANCE_CAPABILITY_FLEX,
];

/// Keys no catalog type has.
const ABSENT_KEYS: &[&str] = &[labels::WINDOWS_BUILD];

/// The labels of a reserved offering.
pub const RESERVATION_KEYS: &[&str] = &[
    labels::CAPACITY_RESERVATION_ID,
    labels::CAPACITY_RESERVATION_TYPE,
    labels::CAPACITY_RESERVATION_INTERRUPTIBLE,
];

impl From<&InstanceTypeInfo> for InstanceType {
    fn from(info: &InstanceTypeInfo) -> Self {
        InstanceType {
            name: info.name.clone(),
            requirements: requirements(info),
            offerings: info
                .offerings
                .iter()
                .map(|offering| SchedulingOffering {
                    zone: offering.zone.clone(),
                    capacity_type: offering.capacity_type.as_str().to_string(),
                    price: offering.price_per_hour,
                    available: offering.available,
                    requirements: match &offering.reservation {
                        Some(_) => offering.reservation_requirements(),
                        None if has_reservations(info) => RESERVATION_KEYS
                            .iter()
                            .map(|k| RequirementSpec::new(*k, Operator::DoesNotExist, &[]))
                            .collect(),
                        None => Vec::new(),
                    },
                    reservation_capacity: offering
                        .reservation
                        .as_ref()
                        .map_or(0, |r| r.available_instances),
                })
                .collect(),
            capacity: resource_list(&info.capacity),
            overhead: SchedulingOverhead {
                kube_reserved: resource_list(&info.overhead.kube_reserved),
                system_reserved: resource_list(&info.overhead.system_reserved),
                eviction_threshold: resource_list(&info.overhead.eviction_threshold),
            },
        }
    }
}

/// Consumes the listing (its parts are freed as soon as the conversion is made, so a
/// catalog converted from an owned listing is never held twice whole).
impl From<InstanceTypeInfo> for InstanceType {
    fn from(info: InstanceTypeInfo) -> Self {
        InstanceType::from(&info)
    }
}

fn has_reservations(info: &InstanceTypeInfo) -> bool {
    info.offerings.iter().any(|o| o.reservation.is_some())
}

fn requirements(info: &InstanceTypeInfo) -> Vec<RequirementSpec> {
    let mut out: Vec<RequirementSpec> = info
        .labels
        .iter()
        .map(|(key, value)| RequirementSpec::is_in(key.clone(), &[value.as_str()]))
        .collect();
    for (key, values) in &info.label_choices {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        out.push(RequirementSpec::is_in(key.clone(), &values));
    }
    let zones: BTreeSet<&str> = info.offerings.iter().map(|o| o.zone.as_str()).collect();
    let capacity_types: BTreeSet<&str> = info
        .offerings
        .iter()
        .map(|o| o.capacity_type.as_str())
        .collect();
    out.push(RequirementSpec::is_in(
        labels::ZONE,
        &zones.into_iter().collect::<Vec<_>>(),
    ));
    out.push(RequirementSpec::is_in(
        labels::CAPACITY_TYPE,
        &capacity_types.into_iter().collect::<Vec<_>>(),
    ));
    for key in INSTANCE_FACT_KEYS
        .iter()
        .filter(|key| !info.labels.contains_key(**key))
        .chain(ABSENT_KEYS)
    {
        out.push(RequirementSpec::new(*key, Operator::DoesNotExist, &[]));
    }
    if has_reservations(info) {
        // `In` the reservations' values, as upstream's `computeRequirements`.
        let reservations: Vec<&crate::offering::Reservation> = info
            .offerings
            .iter()
            .filter_map(|o| o.reservation.as_ref())
            .collect();
        let values = |f: &dyn Fn(&crate::offering::Reservation) -> String| {
            let set: BTreeSet<String> = reservations.iter().map(|r| f(r)).collect();
            set.into_iter().collect::<Vec<_>>()
        };
        for (key, values) in [
            (labels::CAPACITY_RESERVATION_ID, values(&|r| r.id.clone())),
            (
                labels::CAPACITY_RESERVATION_TYPE,
                values(&|r| r.kind.as_str().to_owned()),
            ),
            (
                labels::CAPACITY_RESERVATION_INTERRUPTIBLE,
                values(&|r| r.interruptible.to_string()),
            ),
        ] {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            out.push(RequirementSpec::is_in(key, &values));
        }
    } else {
        for key in RESERVATION_KEYS {
            out.push(RequirementSpec::new(*key, Operator::DoesNotExist, &[]));
        }
    }
    out
}

fn resource_list(resources: &Resources) -> ResourceList {
    let mut list = ResourceList::new();
    let mut set = |name: &str, quantity: Quantity| {
        if !quantity.is_zero() {
            list.set(name, quantity);
        }
    };
    set(
        labels::RESOURCE_CPU,
        Quantity::from_millis(i128::from(resources.cpu_millis)),
    );
    set(
        labels::RESOURCE_MEMORY,
        Quantity::from_units(i128::from(resources.memory_bytes)),
    );
    set(
        labels::RESOURCE_EPHEMERAL_STORAGE,
        Quantity::from_units(i128::from(resources.ephemeral_storage_bytes)),
    );
    set(
        labels::RESOURCE_PODS,
        Quantity::from_units(i128::from(resources.pods)),
    );
    for (name, amount) in &resources.extended {
        set(name, Quantity::from_units(i128::from(*amount)));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CatalogOptions;
    use crate::pricing::PriceTable;
    use crate::shape::tests::m5_large;

    fn m5_large_info() -> InstanceTypeInfo {
        let mut prices = PriceTable::new("us-east-1", "test");
        prices.set_on_demand("m5.large", 0.096);
        match InstanceTypeInfo::resolve(&m5_large(), &prices, &CatalogOptions::default()) {
            Some(info) => info,
            None => panic!("m5.large has a price"),
        }
    }

    fn quantity(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or(Quantity::from_units(-1))
    }

    #[test]
    fn m5_large_converts_with_exact_quantities_and_allocatable() {
        let it = InstanceType::from(&m5_large_info());
        assert_eq!(it.name, "m5.large");
        assert_eq!(it.capacity.get("cpu"), quantity("2"));
        assert_eq!(it.capacity.get("memory"), quantity("7577Mi"));
        assert_eq!(it.capacity.get("pods"), quantity("29"));
        assert_eq!(it.capacity.get("ephemeral-storage"), quantity("20Gi"));
        let allocatable = it.allocatable();
        assert_eq!(allocatable.get("cpu"), quantity("1930m"));
        assert_eq!(allocatable.get("memory"), quantity("6903Mi"));
        assert_eq!(allocatable.get("ephemeral-storage"), quantity("17Gi"));
        assert_eq!(allocatable.get("pods"), quantity("29"));
    }

    #[test]
    fn offerings_keep_zone_capacity_type_price_and_availability() {
        let it = InstanceType::from(&m5_large_info());
        let offerings: Vec<(&str, &str, f64, bool)> = it
            .offerings
            .iter()
            .map(|o| {
                (
                    o.zone.as_str(),
                    o.capacity_type.as_str(),
                    o.price,
                    o.available,
                )
            })
            .take(2)
            .collect();
        assert_eq!(
            offerings,
            [
                ("us-east-1a", "on-demand", 0.096, true),
                ("us-east-1a", "spot", 0.0384, true)
            ]
        );
    }

    #[test]
    fn requirements_hold_labels_offering_values_and_absent_facts() {
        let it = InstanceType::from(&m5_large_info());
        let find = |key: &str| it.requirements.iter().find(|r| r.key == key).cloned();
        assert_eq!(
            find(labels::INSTANCE_TYPE),
            Some(RequirementSpec::is_in(labels::INSTANCE_TYPE, &["m5.large"]))
        );
        assert_eq!(
            find(labels::ZONE),
            Some(RequirementSpec::is_in(
                labels::ZONE,
                &["us-east-1a", "us-east-1b", "us-east-1c"]
            ))
        );
        assert_eq!(
            find(labels::CAPACITY_TYPE),
            Some(RequirementSpec::is_in(
                labels::CAPACITY_TYPE,
                &["on-demand", "spot"]
            ))
        );
        for key in [
            labels::INSTANCE_GPU_COUNT,
            labels::INSTANCE_LOCAL_NVME,
            labels::WINDOWS_BUILD,
        ] {
            assert_eq!(
                find(key).map(|r| r.operator),
                Some(Operator::DoesNotExist),
                "{key}"
            );
        }
        // Every key appears once.
        let keys: BTreeSet<&str> = it.requirements.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys.len(), it.requirements.len());
    }

    #[test]
    fn a_label_choice_is_a_requirement_on_all_of_its_values() {
        let mut info = m5_large_info();
        info.label_choices.insert(
            "karpenter.k8s.aws/instance-tenancy".into(),
            vec!["default".into(), "dedicated".into()],
        );
        let it = InstanceType::from(&info);
        let tenancy = it
            .requirements
            .iter()
            .find(|r| r.key == "karpenter.k8s.aws/instance-tenancy")
            .cloned();
        assert_eq!(
            tenancy,
            Some(RequirementSpec::is_in(
                "karpenter.k8s.aws/instance-tenancy",
                &["default", "dedicated"]
            ))
        );
    }
}
