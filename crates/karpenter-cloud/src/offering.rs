//! Offerings: the ways to buy a type in a zone, with a price and availability.

use karpenter_api::labels;
use serde::{Deserialize, Serialize};

use crate::options::CatalogOptions;
use crate::pricing::PriceTable;
use crate::pricing::list_prices::round_price;
use crate::shape::{InstanceShape, UsageClass};

/// `karpenter.sh/capacity-type` of an offering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CapacityType {
    #[serde(rename = "on-demand")]
    OnDemand,
    #[serde(rename = "spot")]
    Spot,
}

impl CapacityType {
    /// The label value (`on-demand`, `spot`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => labels::CAPACITY_TYPE_ON_DEMAND,
            Self::Spot => labels::CAPACITY_TYPE_SPOT,
        }
    }
}

impl From<UsageClass> for CapacityType {
    fn from(class: UsageClass) -> Self {
        match class {
            UsageClass::OnDemand => Self::OnDemand,
            UsageClass::Spot => Self::Spot,
        }
    }
}

/// One zone x capacity type of an instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour.
    pub price_per_hour: f64,
    pub available: bool,
    /// True when the price is not an observed price for this region and zone: every spot price
    /// derived from the discount, and on-demand prices of another region.
    pub price_is_estimate: bool,
}

#[cfg(feature = "scheduling")]
impl Offering {
    /// Whether `requirements` allow this offering: its zone and capacity type. Requirements
    /// on other keys are the instance type's business, not the offering's. The one filter of
    /// the workspace for a NodePool's narrowing, a simulated launch and the EC2 launch plan.
    pub fn allowed_by(&self, requirements: &[karpenter_scheduling::RequirementSpec]) -> bool {
        requirements.iter().all(|r| match r.key.as_str() {
            labels::ZONE => r.matches(Some(&self.zone)),
            labels::CAPACITY_TYPE => r.matches(Some(self.capacity_type.as_str())),
            _ => true,
        })
    }
}

/// The offerings of one type: every zone x each capacity type the type supports, in zone order,
/// on-demand before spot. Empty when the table has no on-demand price for the type.
pub fn offerings(
    shape: &InstanceShape,
    prices: &PriceTable,
    options: &CatalogOptions,
) -> Vec<Offering> {
    let Some(on_demand) = prices.on_demand(&shape.name) else {
        return Vec::new();
    };
    let foreign_region = prices.region() != options.region;
    let mut capacity_types: Vec<CapacityType> = shape
        .usage_classes
        .iter()
        .map(|class| CapacityType::from(*class))
        .collect();
    capacity_types.sort_unstable();
    capacity_types.dedup();

    let mut out = Vec::new();
    for zone in options.effective_zones() {
        for capacity_type in &capacity_types {
            let (price_per_hour, price_is_estimate) = match capacity_type {
                CapacityType::OnDemand => (on_demand, foreign_region),
                CapacityType::Spot => match prices.observed_spot(&shape.name, &zone) {
                    Some(observed) => (observed, foreign_region),
                    None => (round_price(on_demand * (1.0 - options.spot_discount)), true),
                },
            };
            out.push(Offering {
                zone: zone.clone(),
                capacity_type: *capacity_type,
                price_per_hour,
                available: true,
                price_is_estimate,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::tests::m5_large;

    fn table() -> PriceTable {
        let mut table = PriceTable::new("us-east-1", "test");
        table.set_on_demand("m5.large", 0.096);
        table
    }

    #[test]
    fn every_zone_gets_on_demand_and_spot_with_spot_at_forty_percent() {
        let offerings = offerings(&m5_large(), &table(), &CatalogOptions::default());
        let summary: Vec<(&str, &str, f64, bool)> = offerings
            .iter()
            .map(|o| {
                (
                    o.zone.as_str(),
                    o.capacity_type.as_str(),
                    o.price_per_hour,
                    o.price_is_estimate,
                )
            })
            .collect();
        // Spot = 0.096 x (1 - 0.6) = 0.0384, an estimate.
        assert_eq!(
            summary,
            [
                ("us-east-1a", "on-demand", 0.096, false),
                ("us-east-1a", "spot", 0.0384, true),
                ("us-east-1b", "on-demand", 0.096, false),
                ("us-east-1b", "spot", 0.0384, true),
                ("us-east-1c", "on-demand", 0.096, false),
                ("us-east-1c", "spot", 0.0384, true),
            ]
        );
        assert!(offerings.iter().all(|o| o.available));
    }

    #[test]
    fn the_spot_discount_is_configurable_and_observed_spot_prices_win() {
        let mut prices = table();
        prices.set_spot("m5.large", "us-east-1b", 0.04);
        let options = CatalogOptions {
            spot_discount: 0.5,
            ..CatalogOptions::default()
        };
        let spot: Vec<(f64, bool)> = offerings(&m5_large(), &prices, &options)
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot)
            .map(|o| (o.price_per_hour, o.price_is_estimate))
            .collect();
        assert_eq!(spot, [(0.048, true), (0.04, false), (0.048, true)]);
    }

    #[test]
    fn types_without_spot_or_without_a_price_get_fewer_offerings() {
        let mut on_demand_only = m5_large();
        on_demand_only.usage_classes = vec![UsageClass::OnDemand];
        assert_eq!(
            offerings(&on_demand_only, &table(), &CatalogOptions::default()).len(),
            3
        );

        let mut unpriced = m5_large();
        unpriced.name = "m5.xlarge".into();
        assert!(offerings(&unpriced, &table(), &CatalogOptions::default()).is_empty());
    }

    #[test]
    fn prices_from_another_region_are_estimates() {
        let options = CatalogOptions {
            region: "eu-west-1".into(),
            ..CatalogOptions::default()
        };
        let offerings = offerings(&m5_large(), &table(), &options);
        assert_eq!(offerings[0].zone, "eu-west-1a");
        assert!(offerings.iter().all(|o| o.price_is_estimate));
    }

    #[cfg(feature = "scheduling")]
    #[test]
    fn requirements_allow_an_offering_by_its_zone_and_capacity_type_only() {
        use karpenter_scheduling::RequirementSpec;
        let offering = Offering {
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 0.1,
            available: true,
            price_is_estimate: true,
        };
        let zone = |z: &str| RequirementSpec::is_in(labels::ZONE, &[z]);
        let capacity = |c: &str| RequirementSpec::is_in(labels::CAPACITY_TYPE, &[c]);
        assert!(offering.allowed_by(&[]));
        assert!(offering.allowed_by(&[zone("us-east-1a"), capacity("spot")]));
        assert!(!offering.allowed_by(&[zone("us-east-1b")]));
        assert!(!offering.allowed_by(&[capacity("on-demand")]));
        assert!(
            offering.allowed_by(&[RequirementSpec::is_in(labels::INSTANCE_FAMILY, &["c5"])]),
            "a requirement on the type is not the offering's"
        );
    }
}
