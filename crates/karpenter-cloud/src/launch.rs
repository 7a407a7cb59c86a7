//! Choosing what a NodeClaim launches, as a provider does: the cheapest available offering
//! (instance type, capacity type, zone) among the claim's instance-type options that its
//! requirements allow. With spot allowed and cheaper, that is spot, like upstream's AWS provider
//! (which prefers spot whenever the claim allows it). Ties go to the first option in price order,
//! then the first zone, on-demand before spot.

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_scheduling::{NewNodeClaim, RequirementSpec};

use crate::pool_types::PoolTypes;
use crate::{InstanceTypeInfo, Offering};

/// The offering a NodeClaim launches with.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch<'a> {
    pub info: &'a InstanceTypeInfo,
    pub offering: &'a Offering,
}

impl Launch<'_> {
    /// The labels the node carries: the type's labels, zone, capacity type, NodePool and the
    /// claim's labels.
    pub fn node_labels(&self, claim: &NewNodeClaim) -> BTreeMap<String, String> {
        let mut out = self.info.labels.clone();
        out.extend(claim.labels.clone());
        out.insert(labels::ZONE.to_string(), self.offering.zone.clone());
        out.insert(
            labels::CAPACITY_TYPE.to_string(),
            self.offering.capacity_type.as_str().to_string(),
        );
        out.insert(labels::NODEPOOL.to_string(), claim.node_pool.clone());
        out
    }
}

/// The cheapest offering of the claim; `None` when no option has an allowed, available one.
pub fn choose<'a>(claim: &NewNodeClaim, types: &'a PoolTypes) -> Option<Launch<'a>> {
    cheapest(
        claim.instance_type_options.iter().map(|o| &*o.name),
        &claim.requirements,
        |name| types.info(name),
        |_, _| true,
    )
}

/// The cheapest available offering among the named instance types that `requirements` allow
/// (zone and capacity type); ties go to the first type named, then the first offering.
/// `lookup` finds a type by name (a provider's own index: nothing is copied);
/// `available` may rule out offerings the type itself still marks available (a provider's
/// recent insufficient-capacity errors).
pub fn cheapest<'a, 'n>(
    names: impl IntoIterator<Item = &'n str>,
    requirements: &[RequirementSpec],
    lookup: impl Fn(&str) -> Option<&'a InstanceTypeInfo>,
    available: impl Fn(&InstanceTypeInfo, &Offering) -> bool,
) -> Option<Launch<'a>> {
    let mut best: Option<Launch<'a>> = None;
    for name in names {
        let Some(info) = lookup(name) else {
            continue;
        };
        for offering in info
            .offerings
            .iter()
            .filter(|o| o.available && available(info, o))
        {
            if !offering.allowed_by(requirements) {
                continue;
            }
            if best
                .as_ref()
                .is_none_or(|b| offering.price_per_hour < b.offering.price_per_hour)
            {
                best = Some(Launch { info, offering });
            }
        }
    }
    best
}
