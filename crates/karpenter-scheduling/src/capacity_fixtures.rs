//! The capacity APIs added to upstream's scheduling benchmark input (`karpenter-bench
//! scheduling --overlays --reservations`, the `capacity` criterion cases), to measure what they
//! cost a solve: NodeOverlays adjusting the price of
//! slices of the catalog, and capacity reservations offered as `reserved` offerings, as the
//! controller feeds them to the solver (overlays applied to the converted types; reservations
//! with upstream's on-demand / 10,000,000 price and their free slots).

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_api::labels;
use karpenter_api::v1alpha1::{NodeOverlay, NodeOverlaySpec, NodeSelectorRequirement};

use crate::input::{InstanceType, Offering, Operator, RequirementSpec, SolveInput};

/// Free slots of each generated reservation.
pub const SLOTS: u32 = 10;

/// `count` overlays, each lowering the price of a different slice of the types by 1-20%, with
/// distinct weights (no conflicts).
pub fn overlays(type_names: &[String], count: usize) -> Vec<NodeOverlay> {
    let slice = type_names.len().div_ceil(count.max(1)).max(1);
    (0..count)
        .map(|i| {
            let names: Vec<&str> = type_names
                .iter()
                .skip(i * slice)
                .take(slice)
                .map(String::as_str)
                .collect();
            NodeOverlay::new(
                &format!("bench-{i}"),
                NodeOverlaySpec {
                    requirements: vec![NodeSelectorRequirement::new(
                        labels::INSTANCE_TYPE,
                        karpenter_api::v1::Operator::In,
                        &names,
                    )],
                    price_adjustment: Some(format!("-{}%", i % 20 + 1)),
                    price: None,
                    capacity: None,
                    weight: i32::try_from(i + 1).ok(),
                },
            )
        })
        .collect()
}

/// Applies `overlays` and adds `count` reservations of [`SLOTS`] slots, spread over the types
/// and zones, to the single NodePool's catalog of `input`.
pub fn add(input: &mut SolveInput, overlays: &[NodeOverlay], count: usize) {
    if overlays.is_empty() && count == 0 {
        return;
    }
    let pool = input.node_pools[0].name.clone();
    let mut types: BTreeMap<String, Vec<InstanceType>> = BTreeMap::from([(
        pool.clone(),
        std::mem::take(&mut input.default_instance_types),
    )]);
    crate::overlay::apply(overlays, &input.node_pools, &mut types);
    let Some(catalog) = types.get_mut(&pool) else {
        return;
    };
    let len = catalog.len().max(1);
    let stride = (len / count.max(1)).max(1);
    for r in 0..count {
        let Some(it) = catalog.get_mut((r * stride) % len) else {
            break;
        };
        let Some(on_demand) = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == labels::CAPACITY_TYPE_ON_DEMAND)
            .min_by(|a, b| a.price.total_cmp(&b.price))
            .cloned()
        else {
            continue;
        };
        let id = format!("cr-{r:017x}");
        it.offerings.push(Offering {
            zone: on_demand.zone.clone(),
            capacity_type: labels::CAPACITY_TYPE_RESERVED.to_owned(),
            price: on_demand.price / 10_000_000.0,
            available: true,
            requirements: vec![RequirementSpec::is_in(
                labels::CAPACITY_RESERVATION_ID,
                &[id.as_str()],
            )],
            reservation_capacity: SLOTS,
        });
        for req in &mut it.requirements {
            if req.key == labels::CAPACITY_TYPE
                && !req
                    .values
                    .iter()
                    .any(|v| v == labels::CAPACITY_TYPE_RESERVED)
            {
                req.values.push(labels::CAPACITY_TYPE_RESERVED.to_owned());
            }
        }
        match it
            .requirements
            .iter_mut()
            .find(|r| r.key == labels::CAPACITY_RESERVATION_ID && r.operator == Operator::In)
        {
            Some(req) => req.values.push(id),
            None => it.requirements.push(RequirementSpec::is_in(
                labels::CAPACITY_RESERVATION_ID,
                &[id.as_str()],
            )),
        }
    }
    input.instance_types = Arc::new(types);
}
