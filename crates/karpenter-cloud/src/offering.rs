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
    /// A slot of a capacity reservation (an ODCR or a Capacity Block): never from a price
    /// table, only from the reservations an EC2NodeClass selects (or the KWOK cloud's).
    #[serde(rename = "reserved")]
    Reserved,
}

impl CapacityType {
    /// The label value (`on-demand`, `spot`, `reserved`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => labels::CAPACITY_TYPE_ON_DEMAND,
            Self::Spot => labels::CAPACITY_TYPE_SPOT,
            Self::Reserved => labels::CAPACITY_TYPE_RESERVED,
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

/// `karpenter.k8s.aws/capacity-reservation-type`: an On-Demand Capacity Reservation or a
/// Capacity Block for ML.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReservationKind {
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "capacity-block")]
    CapacityBlock,
}

impl ReservationKind {
    /// The label value (`default`, `capacity-block`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::CapacityBlock => "capacity-block",
        }
    }
}

/// The reservation a `reserved` offering launches into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    /// `cr-...`: the value of `karpenter.k8s.aws/capacity-reservation-id`.
    pub id: String,
    pub kind: ReservationKind,
    /// An interruptible reservation: its owner may reclaim the slots.
    pub interruptible: bool,
    /// Instances that can still be launched into it (EC2's `AvailableInstanceCount`, less the
    /// launches made since it was read). A full reservation stays `available` (healthy) with
    /// 0 here, as upstream keeps the two apart.
    pub available_instances: u32,
}

impl Reservation {
    /// The labels a node launched into it carries (upstream's reserved capacity labels):
    /// `karpenter.k8s.aws/capacity-reservation-{id,type,interruptible}`.
    pub fn labels(&self) -> [(String, String); 3] {
        [
            (labels::CAPACITY_RESERVATION_ID.to_owned(), self.id.clone()),
            (
                labels::CAPACITY_RESERVATION_TYPE.to_owned(),
                self.kind.as_str().to_owned(),
            ),
            (
                labels::CAPACITY_RESERVATION_INTERRUPTIBLE.to_owned(),
                self.interruptible.to_string(),
            ),
        ]
    }
}

/// Upstream's divisor of the on-demand price of a reserved offering: reserved capacity is
/// paid for already, so it is (all but) free, and keeps the on-demand order between types
/// that consolidation compares.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

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
    /// The reservation of a [`CapacityType::Reserved`] offering; `None` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
}

impl Offering {
    /// The `reserved` offering of `reservation` in `zone` for a type whose cheapest on-demand
    /// price is `on_demand`: that price / [`RESERVED_PRICE_DIVISOR`] (0 without one), an
    /// observed price. The one constructor of reserved offerings (every cloud provider's).
    pub fn reserved(
        zone: String,
        on_demand: Option<f64>,
        reservation: Reservation,
        available: bool,
    ) -> Offering {
        Offering {
            zone,
            capacity_type: CapacityType::Reserved,
            price_per_hour: on_demand.map_or(0.0, |p| p / RESERVED_PRICE_DIVISOR),
            available,
            price_is_estimate: false,
            reservation: Some(reservation),
        }
    }
}

#[cfg(feature = "scheduling")]
impl Offering {
    /// Whether `requirements` allow this offering: its zone, capacity type and reservation
    /// (id, type, interruptible; an offering without a reservation has none of those labels).
    /// Requirements on other keys are the instance type's business, not the offering's. The
    /// one filter of the workspace for a NodePool's narrowing, a simulated launch and the EC2
    /// launch plan.
    pub fn allowed_by(&self, requirements: &[karpenter_scheduling::RequirementSpec]) -> bool {
        let reservation = self.reservation.as_ref();
        requirements.iter().all(|r| match r.key.as_str() {
            labels::ZONE => r.matches(Some(&self.zone)),
            labels::CAPACITY_TYPE => r.matches(Some(self.capacity_type.as_str())),
            labels::CAPACITY_RESERVATION_ID => r.matches(reservation.map(|c| c.id.as_str())),
            labels::CAPACITY_RESERVATION_TYPE => r.matches(reservation.map(|c| c.kind.as_str())),
            labels::CAPACITY_RESERVATION_INTERRUPTIBLE => {
                r.matches(reservation.map(|c| if c.interruptible { "true" } else { "false" }))
            }
            _ => true,
        })
    }

    /// Available, and not a full reservation (upstream's `Launchable`): what a launch may pick.
    pub fn launchable(&self) -> bool {
        self.available
            && self
                .reservation
                .as_ref()
                .is_none_or(|r| r.available_instances > 0)
    }

    /// The offering's labels beyond zone and capacity type: a reserved offering's reservation
    /// id, type and interruptible flag, as `In` requirements (empty for the others).
    pub fn reservation_requirements(&self) -> Vec<karpenter_scheduling::RequirementSpec> {
        use karpenter_scheduling::RequirementSpec;
        let Some(r) = &self.reservation else {
            return Vec::new();
        };
        vec![
            RequirementSpec::is_in(labels::CAPACITY_RESERVATION_ID, &[r.id.as_str()]),
            RequirementSpec::is_in(labels::CAPACITY_RESERVATION_TYPE, &[r.kind.as_str()]),
            RequirementSpec::is_in(
                labels::CAPACITY_RESERVATION_INTERRUPTIBLE,
                &[if r.interruptible { "true" } else { "false" }],
            ),
        ]
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
                // Reservations are not a usage class: they come from the reservations a
                // NodeClass selects, never from a price table.
                CapacityType::Reserved => continue,
            };
            out.push(Offering {
                zone: zone.clone(),
                capacity_type: *capacity_type,
                price_per_hour,
                available: true,
                price_is_estimate,
                reservation: None,
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
            reservation: None,
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
