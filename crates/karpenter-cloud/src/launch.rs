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

/// Whether `claim` carries upstream's `karpenter.sh/price-overlay-applied: "true"`: a
/// NodeOverlay changed the price of one of its instance types, so the cloud's own prices are
/// not the ones the decision was made with. Its instance types are written cheapest first by
/// the overlaid prices: providers launch them in that order ([`prioritized`]), as upstream's
/// AWS provider then asks `CreateFleet` for its `prioritized` strategy.
pub fn overlay_prioritized(claim: &karpenter_api::v1::NodeClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::PRICE_OVERLAY_APPLIED))
        .is_some_and(|v| v == "true")
}

/// The first named instance type (in the order given: a priority) with an available offering
/// `requirements` allow, and of it the cheapest such offering.
pub fn prioritized<'a, 'n>(
    names: impl IntoIterator<Item = &'n str>,
    requirements: &[RequirementSpec],
    lookup: impl Fn(&str) -> Option<&'a InstanceTypeInfo>,
    available: impl Fn(&InstanceTypeInfo, &Offering) -> bool,
) -> Option<Launch<'a>> {
    names
        .into_iter()
        .find_map(|name| cheapest(std::iter::once(name), requirements, &lookup, &available))
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
            .filter(|o| o.launchable() && available(info, o))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Catalog, CatalogOptions};

    fn infos() -> Vec<InstanceTypeInfo> {
        Catalog::embedded()
            .unwrap_or_else(|e| panic!("{e}"))
            .instance_types(&CatalogOptions::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .filter(|i| i.name == "c5.large" || i.name == "m5.large")
            .collect()
    }

    #[test]
    fn an_overlay_priced_claim_launches_its_first_type_and_another_its_cheapest() {
        let infos = infos();
        let lookup = |n: &str| infos.iter().find(|i| i.name == n);
        let on_demand = [RequirementSpec::is_in(
            labels::CAPACITY_TYPE,
            &["on-demand"],
        )];
        // The claim lists m5.large first: an overlay made it the cheaper of the two.
        let names = ["m5.large", "c5.large"];
        let first = prioritized(names, &on_demand, lookup, |_, _| true);
        assert_eq!(first.map(|l| l.info.name.as_str()), Some("m5.large"));
        let cheapest = cheapest(names, &on_demand, lookup, |_, _| true);
        assert_eq!(cheapest.map(|l| l.info.name.as_str()), Some("c5.large"));
        // A first type without an available offering is passed over.
        let skipped = prioritized(names, &on_demand, lookup, |i, _| i.name != "m5.large");
        assert_eq!(skipped.map(|l| l.info.name.as_str()), Some("c5.large"));
    }

    #[test]
    fn only_the_price_overlay_annotation_makes_a_claim_prioritized() {
        let mut claim: karpenter_api::v1::NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                     "requirements": []}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!overlay_prioritized(&claim));
        claim.metadata.annotations = Some(BTreeMap::from([(
            labels::CAPACITY_OVERLAY_APPLIED.to_owned(),
            "true".to_owned(),
        )]));
        assert!(!overlay_prioritized(&claim));
        claim.metadata.annotations = Some(BTreeMap::from([(
            labels::PRICE_OVERLAY_APPLIED.to_owned(),
            "true".to_owned(),
        )]));
        assert!(overlay_prioritized(&claim));
    }
}
