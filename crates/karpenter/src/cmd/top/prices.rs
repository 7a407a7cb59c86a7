//! Where `karpenter top` gets its prices (`--pricing`): AWS's own (the Pricing API's on-demand
//! prices and `DescribeSpotPriceHistory`'s latest spot prices, read with the same
//! [`PriceBook`] the controller keeps) when AWS credentials work, else the embedded catalog.
//! Each AWS source that fails falls back on its own to the embedded prices, and the header says
//! which source priced what and why a fallback was taken.

use std::time::Duration;

use aws_credential_types::provider::ProvideCredentials;
use karpenter_aws::pricing::Prices as RegionPrices;
use karpenter_aws_provider::clients::AwsClients;
use karpenter_aws_provider::pricing::PriceBook;
use karpenter_top::Prices;
use karpenter_top::view::TablePrices;

/// `--pricing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pricing {
    /// AWS's prices when AWS credentials are found, else the embedded catalog.
    Auto,
    /// AWS's prices; no AWS credentials or region is an error.
    Aws,
    /// The embedded catalog only (AWS is not called).
    Catalog,
}

/// How long finding AWS credentials may take (the default chain ends at instance metadata,
/// which a laptop does not answer).
const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(5);

/// How long each AWS price source may take (the Pricing API pages through thousands of
/// products).
const SOURCE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often the live view asks AWS again.
pub const REFRESH: Duration = Duration::from_secs(600);

/// The region's AWS prices, each source falling back to the embedded catalog.
#[derive(Debug, Clone)]
pub struct AwsPrices {
    /// On-demand from the Pricing API and observed spot prices.
    pub book: RegionPrices,
    /// What the book cannot answer: the embedded prices and the spot estimate.
    pub fallback: TablePrices,
    /// Types priced by the Pricing API, or why not.
    pub on_demand: Result<usize, String>,
    /// Spot prices observed, or why not.
    pub spot: Result<usize, String>,
}

impl Prices for AwsPrices {
    fn price(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64> {
        let observed = match capacity_type {
            "spot" => self
                .spot
                .is_ok()
                .then(|| self.book.spot(instance_type, zone))
                .flatten(),
            _ => self
                .on_demand
                .is_ok()
                .then(|| self.book.on_demand(instance_type))
                .flatten(),
        };
        observed
            .map(|q| q.price)
            .or_else(|| self.fallback.price(instance_type, zone, capacity_type))
    }

    fn source(&self) -> Option<String> {
        let region = self.book.region();
        let on_demand = match &self.on_demand {
            Ok(n) => format!("on-demand: AWS Pricing API ({n} types in {region})"),
            Err(e) => format!("on-demand: embedded catalog (Pricing API: {e})"),
        };
        let spot = match &self.spot {
            Ok(n) => format!("spot: EC2 spot price history ({n} type-zone prices)"),
            Err(e) => format!(
                "spot: on-demand x {:.2} (spot price history: {e})",
                1.0 - self.fallback.spot_discount
            ),
        };
        Some(format!("{on_demand}; {spot}"))
    }
}

/// The cluster's region: the most common `topology.kubernetes.io/region` label of its nodes
/// (read from one page of them), `None` when no node carries one.
pub async fn cluster_region(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, ListParams};
    let nodes = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default().limit(100))
        .await
        .ok()?;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for node in nodes.items {
        if let Some(region) = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("topology.kubernetes.io/region"))
        {
            *counts.entry(region.clone()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(region, _)| region)
}

/// The embedded catalog, with why AWS's prices are not shown.
#[derive(Debug, Clone)]
pub struct CatalogPrices {
    pub table: TablePrices,
    /// Why AWS was not asked or did not answer (`None`: `--pricing catalog`).
    pub without_aws: Option<String>,
}

impl Prices for CatalogPrices {
    fn price(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64> {
        self.table.price(instance_type, zone, capacity_type)
    }

    fn source(&self) -> Option<String> {
        let table = self.table.source()?;
        Some(match &self.without_aws {
            Some(why) => format!("{table}; not AWS's: {why}"),
            None => table,
        })
    }
}

/// Prices `top` can hand between threads.
pub type Shared = std::sync::Arc<dyn Prices + Send + Sync>;

/// The prices `pricing` asks for, in `region` (else the SDK configuration's). `Err` only for
/// [`Pricing::Aws`] without AWS credentials or region; [`Pricing::Auto`] then uses the catalog
/// and says why.
pub async fn read(
    pricing: Pricing,
    region: Option<String>,
    table: TablePrices,
) -> Result<Shared, String> {
    if pricing == Pricing::Catalog {
        return Ok(std::sync::Arc::new(CatalogPrices {
            table,
            without_aws: None,
        }));
    }
    match from_aws(region, table.clone()).await {
        Ok(prices) => Ok(std::sync::Arc::new(prices)),
        Err(why) if pricing == Pricing::Aws => Err(why),
        Err(why) => Ok(std::sync::Arc::new(CatalogPrices {
            table,
            without_aws: Some(why),
        })),
    }
}

/// AWS's prices for `region` (else the SDK configuration's region); `Err` when there are no
/// AWS credentials or no region. A source that fails is told in the answer, not here.
async fn from_aws(region: Option<String>, fallback: TablePrices) -> Result<AwsPrices, String> {
    let config = karpenter_aws_provider::clients::sdk_config(region).await;
    let Some(provider) = config.credentials_provider() else {
        return Err("no AWS credentials provider".to_owned());
    };
    match tokio::time::timeout(CREDENTIALS_TIMEOUT, provider.provide_credentials()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(format!("no AWS credentials ({e})")),
        Err(_) => {
            return Err(format!(
                "no AWS credentials found within {}s",
                CREDENTIALS_TIMEOUT.as_secs()
            ));
        }
    }
    let clients = AwsClients::new(&config, &[]).map_err(|e| e.to_string())?;
    let book = PriceBook::new(&clients.region, false).map_err(|e| e.to_string())?;
    let (on_demand, spot) = tokio::join!(
        tokio::time::timeout(SOURCE_TIMEOUT, book.refresh_on_demand(&clients)),
        tokio::time::timeout(SOURCE_TIMEOUT, book.refresh_spot(&clients)),
    );
    let on_demand = match bounded(on_demand) {
        // A region without the Pricing API (isolated VPC, GovCloud) prices nothing.
        Ok(0) => Err("not served in this region".to_owned()),
        other => other,
    };
    Ok(AwsPrices {
        book: book.with(Clone::clone),
        fallback,
        on_demand,
        spot: bounded(spot),
    })
}

/// A source's answer within [`SOURCE_TIMEOUT`], or why not.
fn bounded(
    answer: Result<Result<usize, karpenter_aws_provider::AwsError>, tokio::time::error::Elapsed>,
) -> Result<usize, String> {
    match answer {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", SOURCE_TIMEOUT.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_aws::pricing::spot::{SpotPriceRecord, latest_spot_prices};

    fn fallback() -> TablePrices {
        TablePrices::embedded(0.6).unwrap()
    }

    fn book() -> RegionPrices {
        let mut book = RegionPrices::with_embedded_fallback("us-west-2").unwrap();
        book.update_on_demand(&[("m5.large".to_owned(), 0.101)].into_iter().collect())
            .unwrap();
        let spot = latest_spot_prices(&[SpotPriceRecord {
            availability_zone: Some("us-west-2a".into()),
            instance_type: Some("m5.large".into()),
            product_description: Some("Linux/UNIX".into()),
            spot_price: Some("0.0321".into()),
            timestamp: Some("2026-11-28T10:00:00Z".into()),
        }]);
        book.update_spot(&spot).unwrap();
        book
    }

    #[test]
    fn aws_prices_answer_first_and_the_embedded_catalog_answers_the_rest() {
        let prices = AwsPrices {
            book: book(),
            fallback: fallback(),
            on_demand: Ok(1),
            spot: Ok(1),
        };
        assert_eq!(
            prices.price("m5.large", "us-west-2a", "on-demand"),
            Some(0.101)
        );
        assert_eq!(prices.price("m5.large", "us-west-2a", "spot"), Some(0.0321));
        // Not observed in that zone: the embedded estimate, never "unknown".
        let embedded = fallback().price("m5.large", "us-west-2b", "spot");
        assert!(embedded.is_some());
        assert_eq!(prices.price("m5.large", "us-west-2b", "spot"), embedded);
        assert_eq!(
            prices.source().unwrap(),
            "on-demand: AWS Pricing API (1 types in us-west-2); spot: EC2 spot price history (1 type-zone prices)"
        );
    }

    #[test]
    fn a_failed_source_falls_back_alone_and_says_why() {
        let prices = AwsPrices {
            book: book(),
            fallback: fallback(),
            on_demand: Err("pricing:GetProducts: AccessDenied".to_owned()),
            spot: Ok(1),
        };
        assert_eq!(
            prices.price("m5.large", "us-west-2a", "on-demand"),
            fallback().price("m5.large", "us-west-2a", "on-demand")
        );
        assert_eq!(prices.price("m5.large", "us-west-2a", "spot"), Some(0.0321));
        let source = prices.source().unwrap();
        assert!(
            source.starts_with(
                "on-demand: embedded catalog (Pricing API: pricing:GetProducts: AccessDenied); spot: EC2"
            ),
            "{source}"
        );
    }
}
