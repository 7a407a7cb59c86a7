//! Prices: on-demand from the AWS Pricing API, spot from EC2's spot price history, and the
//! catalog's embedded prices as the fallback (reference `karpenter-aws.md` section 4).
//!
//! # What this module owns
//!
//! * [`on_demand`]: the `GetProducts` `PriceList` parser;
//! * [`spot`]: the latest spot price per (instance type, zone) from `DescribeSpotPriceHistory`;
//! * [`Prices`]: the combination, with this precedence —
//!   on-demand: a Pricing API price, else the fallback table;
//!   spot: an observed price for the zone, else (until the first successful spot update, as
//!   upstream initialises spot to the on-demand price) the on-demand price, else none.
//! * when the Pricing API may be used at all ([`pricing_api_enabled`]: not with `ISOLATED_VPC`,
//!   not in `us-gov-*`) and which endpoint region serves a region ([`pricing_endpoint_region`]).
//!
//! The fallback is the catalog crate's price table (`karpenter_cloud::Catalog::prices`; the
//! embedded one holds us-east-1 list prices). Upstream's static tables cover four regions and
//! fall back to us-east-1 elsewhere; here the one embedded table serves every region, and
//! [`Prices::to_price_table`] keeps its region so offerings built from fallback prices in
//! another region are flagged as estimates.
//!
//! # What it must not do
//!
//! No API calls, no clock, no refresh loop (the 12-hour refresh belongs to the async shell).

pub mod on_demand;
pub mod spot;

use std::collections::BTreeMap;

use karpenter_cloud::{Catalog, CatalogError, PriceTable};

pub use on_demand::{OnDemandPage, parse_price_list};
pub use spot::{SpotPrices, latest_spot_prices};

/// Whether the Pricing API is used: not in an isolated VPC (`ISOLATED_VPC=true`, no route to
/// the API) and not in the GovCloud regions, which it does not serve.
pub fn pricing_api_enabled(region: &str, isolated_vpc: bool) -> bool {
    !isolated_vpc && !region.starts_with("us-gov")
}

/// The Pricing API endpoint region for `region`: `ap-south-1` for `ap-*`, `cn-northwest-1` for
/// `cn-*`, `eu-central-1` for `eu-*`, else `us-east-1`.
pub fn pricing_endpoint_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// Where a price comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// `pricing:GetProducts`.
    PricingApi,
    /// `ec2:DescribeSpotPriceHistory`.
    SpotPriceHistory,
    /// The fallback table (the catalog's embedded prices).
    Fallback,
    /// A spot price not observed yet: the on-demand price stands in, as upstream does until
    /// its first spot update.
    OnDemandAsSpot,
}

/// A price and its source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quote {
    /// Per hour, in the region's currency.
    pub price: f64,
    pub source: PriceSource,
}

/// An update that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    /// Upstream fails the refresh (and keeps the previous prices) when a response has no price.
    #[error("{0}: the response held no usable price; the previous prices are kept")]
    NoPrices(&'static str),
}

/// On-demand and spot prices for one region.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    region: String,
    fallback: PriceTable,
    on_demand: BTreeMap<String, f64>,
    spot: BTreeMap<String, BTreeMap<String, f64>>,
    spot_updated: bool,
}

impl Prices {
    /// Prices for `region` before any API answer: only `fallback`.
    pub fn new(region: impl Into<String>, fallback: PriceTable) -> Self {
        Self {
            region: region.into(),
            fallback,
            on_demand: BTreeMap::new(),
            spot: BTreeMap::new(),
            spot_updated: false,
        }
    }

    /// Prices for `region` with the embedded catalog's prices as the fallback.
    pub fn with_embedded_fallback(region: impl Into<String>) -> Result<Self, CatalogError> {
        Ok(Self::new(region, Catalog::embedded()?.prices().clone()))
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Merges Pricing API prices (both of upstream's queries, shared and bare metal) over the
    /// ones already known. An empty update is an error and changes nothing.
    pub fn update_on_demand(&mut self, prices: &BTreeMap<String, f64>) -> Result<(), PricingError> {
        if prices.is_empty() {
            return Err(PricingError::NoPrices("pricing:GetProducts"));
        }
        self.on_demand
            .extend(prices.iter().map(|(k, v)| (k.clone(), *v)));
        Ok(())
    }

    /// Merges observed spot prices; from now on unobserved (type, zone) pairs have no spot
    /// price. An empty update is an error and changes nothing.
    pub fn update_spot(&mut self, spot: &SpotPrices) -> Result<(), PricingError> {
        if spot.is_empty() {
            return Err(PricingError::NoPrices("ec2:DescribeSpotPriceHistory"));
        }
        for (instance_type, zones) in &spot.prices {
            self.spot
                .entry(instance_type.clone())
                .or_default()
                .extend(zones.iter().map(|(k, v)| (k.clone(), *v)));
        }
        self.spot_updated = true;
        Ok(())
    }

    /// The on-demand price: the Pricing API's, else the fallback's.
    pub fn on_demand(&self, instance_type: &str) -> Option<Quote> {
        if let Some(price) = self.on_demand.get(instance_type) {
            return Some(Quote {
                price: *price,
                source: PriceSource::PricingApi,
            });
        }
        self.fallback.on_demand(instance_type).map(|price| Quote {
            price,
            source: PriceSource::Fallback,
        })
    }

    /// The spot price in `zone`: observed, else the on-demand price until the first spot
    /// update, else none.
    pub fn spot(&self, instance_type: &str, zone: &str) -> Option<Quote> {
        if let Some(price) = self.spot.get(instance_type).and_then(|z| z.get(zone)) {
            return Some(Quote {
                price: *price,
                source: PriceSource::SpotPriceHistory,
            });
        }
        if self.spot_updated {
            return None;
        }
        self.on_demand(instance_type).map(|quote| Quote {
            price: quote.price,
            source: PriceSource::OnDemandAsSpot,
        })
    }

    /// The catalog crate's [`PriceTable`] for `zones`, with the precedence above applied, for
    /// `karpenter_cloud::InstanceTypeInfo::resolve`. Its region is this region when the Pricing
    /// API answered, else the fallback's (so foreign fallback prices count as estimates).
    pub fn to_price_table(&self, instance_types: &[&str], zones: &[String]) -> PriceTable {
        let (region, source) = if self.on_demand.is_empty() {
            (self.fallback.region(), self.fallback.source())
        } else {
            (self.region.as_str(), "AWS Pricing API")
        };
        let mut table = PriceTable::new(region, source);
        for instance_type in instance_types {
            if let Some(quote) = self.on_demand(instance_type) {
                table.set_on_demand(*instance_type, quote.price);
            }
            for zone in zones {
                if let Some(quote) = self.spot(instance_type, zone) {
                    table.set_spot(*instance_type, zone.clone(), quote.price);
                }
            }
        }
        table
    }
}
