//! Prices for the region, kept fresh (reference `karpenter-aws.md` 4): on-demand from the
//! Pricing API (`GetProducts`, two queries: shared tenancy and bare metal; skipped in isolated
//! VPCs and GovCloud), spot from `DescribeSpotPriceHistory` (the latest price per type and
//! zone), and the embedded catalog's prices until, or instead of, an answer. A failed refresh
//! keeps what was known; [`PriceBook::version`] moves whenever prices change so converted
//! catalogs are rebuilt.

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_pricing::types::{Filter, FilterType};
use karpenter_aws::pricing::on_demand::parse_price_list;
use karpenter_aws::pricing::spot::{SpotPriceRecord, latest_spot_prices};
use karpenter_aws::pricing::{Prices, pricing_api_enabled};
use karpenter_cloud::CatalogError;

use crate::clients::AwsClients;
use crate::error::AwsError;

/// The product descriptions of Linux spot prices.
pub const SPOT_PRODUCTS: &[&str] = &["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// The region's prices.
#[derive(Debug)]
pub struct PriceBook {
    prices: RwLock<Prices>,
    version: AtomicU64,
    isolated_vpc: bool,
}

impl PriceBook {
    /// The embedded prices, until a refresh.
    pub fn new(region: &str, isolated_vpc: bool) -> Result<Self, CatalogError> {
        Ok(PriceBook {
            prices: RwLock::new(Prices::with_embedded_fallback(region)?),
            version: AtomicU64::new(0),
            isolated_vpc,
        })
    }

    /// Reads the prices.
    pub fn with<T>(&self, f: impl FnOnce(&Prices) -> T) -> T {
        match self.prices.read() {
            Ok(prices) => f(&prices),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn update(
        &self,
        f: impl FnOnce(&mut Prices) -> Result<(), karpenter_aws::pricing::PricingError>,
    ) -> Result<(), karpenter_aws::pricing::PricingError> {
        let mut prices = match self.prices.write() {
            Ok(prices) => prices,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut prices)?;
        self.version.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Changes whenever the prices do.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Asks the Pricing API for the region's on-demand prices; the number of types priced.
    /// `Ok(0)` when the region has no Pricing API (isolated VPC, GovCloud).
    pub async fn refresh_on_demand(&self, clients: &AwsClients) -> Result<usize, AwsError> {
        let region = clients.region.clone();
        if !pricing_api_enabled(&region, self.isolated_vpc) {
            return Ok(0);
        }
        let mut all = std::collections::BTreeMap::new();
        for (tenancy, family) in [
            ("Shared", "Compute Instance"),
            ("Dedicated", "Compute Instance (bare metal)"),
        ] {
            let entries = self.products(clients, &region, tenancy, family).await?;
            let page = parse_price_list(&entries, &region);
            if page.prices.is_empty() {
                return Err(AwsError::new(
                    "pricing:GetProducts",
                    "NoPrices",
                    format!(
                        "no {family} prices with tenancy {tenancy} in {region} ({} entries skipped)",
                        page.skipped.len()
                    ),
                ));
            }
            all.extend(page.prices);
        }
        let count = all.len();
        self.update(|prices| prices.update_on_demand(&all))
            .map_err(|e| AwsError::new("pricing:GetProducts", "NoPrices", e.to_string()))?;
        Ok(count)
    }

    async fn products(
        &self,
        clients: &AwsClients,
        region: &str,
        tenancy: &str,
        family: &str,
    ) -> Result<Vec<String>, AwsError> {
        let term = |field: &str, value: &str| {
            Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
                .map_err(|e| AwsError::new("pricing:GetProducts", "InvalidRequest", e.to_string()))
        };
        let filters = vec![
            term("regionCode", region)?,
            term("serviceCode", "AmazonEC2")?,
            term("preInstalledSw", "NA")?,
            term("operatingSystem", "Linux")?,
            term("capacitystatus", "Used")?,
            term("marketoption", "OnDemand")?,
            term("tenancy", tenancy)?,
            term("productFamily", family)?,
        ];
        let mut entries = Vec::new();
        let mut pages = clients
            .pricing
            .get_products()
            .service_code("AmazonEC2")
            .set_filters(Some(filters))
            .max_results(100)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("pricing:GetProducts", &e))?;
            entries.extend(page.price_list().iter().cloned());
        }
        Ok(entries)
    }

    /// Reads the current spot prices; the number of (type, zone) prices.
    pub async fn refresh_spot(&self, clients: &AwsClients) -> Result<usize, AwsError> {
        let mut records = Vec::new();
        let mut pages = clients
            .ec2
            .describe_spot_price_history()
            .set_product_descriptions(Some(
                SPOT_PRODUCTS.iter().map(|s| (*s).to_owned()).collect(),
            ))
            .start_time(aws_smithy_types::DateTime::from(
                std::time::SystemTime::now(),
            ))
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeSpotPriceHistory", &e))?;
            records.extend(page.spot_price_history().iter().map(|r| {
                SpotPriceRecord {
                    availability_zone: r.availability_zone().map(str::to_owned),
                    instance_type: r.instance_type().map(|t| t.as_str().to_owned()),
                    product_description: r.product_description().map(|p| p.as_str().to_owned()),
                    spot_price: r.spot_price().map(str::to_owned),
                    timestamp: r
                        .timestamp()
                        .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok()),
                }
            }));
        }
        let spot = latest_spot_prices(&records);
        let count = spot.len();
        self.update(|prices| prices.update_spot(&spot))
            .map_err(|e| {
                AwsError::new("ec2:DescribeSpotPriceHistory", "NoPrices", e.to_string())
            })?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_any_refresh_the_embedded_prices_answer() {
        let book = PriceBook::new("us-east-1", false).unwrap();
        let price = book.with(|p| p.on_demand("m5.large").map(|q| q.price));
        assert!(price.is_some_and(|p| p > 0.0), "{price:?}");
        assert_eq!(book.version(), 0);
    }
}
