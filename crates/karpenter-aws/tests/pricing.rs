//! Pricing: the `GetProducts` parser over a recorded-looking page (fixtures written from the
//! public Price List format), spot price history, and the precedence of [`Prices`].
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeMap;

use karpenter_aws::pricing::on_demand::GetProductsOutput;
use karpenter_aws::pricing::spot::SpotPriceHistoryOutput;
use karpenter_aws::pricing::{
    PriceSource, Prices, PricingError, latest_spot_prices, parse_price_list, pricing_api_enabled,
    pricing_endpoint_region,
};
use karpenter_cloud::PriceTable;
use pretty_assertions::assert_eq;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/pricing/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn get_products() -> GetProductsOutput {
    serde_json::from_str(&fixture("get_products.json")).unwrap_or_else(|e| panic!("{e}"))
}

fn spot_history() -> SpotPriceHistoryOutput {
    serde_json::from_str(&fixture("describe_spot_price_history.json"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn linux_shared_and_dedicated_metal_products_give_on_demand_prices() {
    let page = parse_price_list(&get_products().price_list, "us-east-1");
    let prices: Vec<(&str, f64)> = page.prices.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        prices,
        [
            ("c6g.xlarge", 0.136),
            ("g4dn.xlarge", 0.526),
            ("m5.large", 0.096),
            ("m5.metal", 4.608),
            ("t3.micro", 0.0104),
        ]
    );
}

#[test]
fn unusable_products_are_skipped_with_a_reason() {
    let page = parse_price_list(&get_products().price_list, "us-east-1");
    let skipped: Vec<(usize, Option<&str>, &str)> = page
        .skipped
        .iter()
        .map(|s| (s.index, s.instance_type.as_deref(), s.reason.as_str()))
        .collect();
    let reasons: Vec<(usize, Option<&str>, &str)> = skipped
        .iter()
        .map(|(i, it, reason)| (*i, *it, reason.split(' ').next().unwrap_or_default()))
        .collect();
    assert_eq!(
        reasons,
        [
            (5, Some("m5.xlarge"), "no"),
            (6, Some("m5.2xlarge"), "operatingSystem"),
            (7, Some("m5.4xlarge"), "product"),
            (8, Some("c6g.large"), "capacitystatus"),
            (9, Some("c6g.2xlarge"), "no"),
            (10, None, "not"),
        ]
    );
    let malformed = skipped.first().map(|s| s.2).unwrap_or_default();
    assert!(malformed.contains("\"0.192USD\""), "{malformed}");
}

#[test]
fn another_regions_products_are_skipped() {
    let page = parse_price_list(&get_products().price_list, "eu-west-1");
    assert!(page.prices.is_empty());
    assert!(
        page.skipped
            .iter()
            .any(|s| s.reason.starts_with("regionCode is \"us-east-1\""))
    );
}

#[test]
fn china_regions_read_cny_prices() {
    let entry = r#"{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"m5.large","operatingSystem":"Linux","tenancy":"Shared","regionCode":"cn-north-1"}},"terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"pricePerUnit":{"CNY":"0.6390000000"}}}}}}}"#;
    let page = parse_price_list(&[entry.to_string()], "cn-north-1");
    assert_eq!(page.prices.get("m5.large"), Some(&0.639));
}

#[test]
fn the_latest_spot_price_per_type_and_zone_wins() {
    let spot = latest_spot_prices(&spot_history().spot_price_history);
    let flat: Vec<(&str, &str, f64)> = spot
        .prices
        .iter()
        .flat_map(|(it, zones)| {
            zones
                .iter()
                .map(move |(z, p)| (it.as_str(), z.as_str(), *p))
        })
        .collect();
    assert_eq!(
        flat,
        [
            ("c6g.xlarge", "us-east-1a", 0.0512),
            ("m5.large", "us-east-1a", 0.0364),
            ("m5.large", "us-east-1b", 0.038),
        ]
    );
    let reasons: Vec<(usize, &str)> = spot
        .skipped
        .iter()
        .map(|s| (s.index, s.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (4, "SpotPrice \"cheap\" is not a positive number"),
            (5, "no Timestamp"),
            (6, "product \"Windows\" is not Linux/UNIX"),
        ]
    );
}

fn fallback() -> PriceTable {
    let mut table = PriceTable::new("us-east-1", "test fallback");
    table.set_on_demand("m5.large", 0.1);
    table.set_on_demand("m6g.large", 0.077);
    table
}

#[test]
fn api_prices_take_precedence_over_the_fallback() {
    let mut prices = Prices::new("us-east-1", fallback());
    let page = parse_price_list(&get_products().price_list, "us-east-1");
    assert_eq!(prices.update_on_demand(&page.prices), Ok(()));
    let m5 = prices.on_demand("m5.large");
    assert_eq!(
        m5.map(|q| (q.price, q.source)),
        Some((0.096, PriceSource::PricingApi))
    );
    let m6g = prices.on_demand("m6g.large");
    assert_eq!(
        m6g.map(|q| (q.price, q.source)),
        Some((0.077, PriceSource::Fallback))
    );
    assert_eq!(prices.on_demand("x9.huge"), None);
}

#[test]
fn spot_is_the_on_demand_price_until_the_first_spot_update_then_only_observed() {
    let mut prices = Prices::new("us-east-1", fallback());
    let before = prices.spot("m5.large", "us-east-1c");
    assert_eq!(
        before.map(|q| (q.price, q.source)),
        Some((0.1, PriceSource::OnDemandAsSpot))
    );
    let spot = latest_spot_prices(&spot_history().spot_price_history);
    assert_eq!(prices.update_spot(&spot), Ok(()));
    let observed = prices.spot("m5.large", "us-east-1a");
    assert_eq!(
        observed.map(|q| (q.price, q.source)),
        Some((0.0364, PriceSource::SpotPriceHistory))
    );
    assert_eq!(prices.spot("m5.large", "us-east-1c"), None);
}

#[test]
fn empty_updates_are_errors_and_keep_previous_prices() {
    let mut prices = Prices::new("us-east-1", fallback());
    let spot = latest_spot_prices(&[]);
    assert!(matches!(
        prices.update_spot(&spot),
        Err(PricingError::NoPrices(_))
    ));
    assert!(matches!(
        prices.update_on_demand(&BTreeMap::new()),
        Err(PricingError::NoPrices(_))
    ));
    let still = prices.spot("m5.large", "us-east-1a");
    assert_eq!(still.map(|q| q.source), Some(PriceSource::OnDemandAsSpot));
}

#[test]
fn the_embedded_catalog_prices_are_the_fallback() {
    let prices = Prices::with_embedded_fallback("us-east-1").unwrap_or_else(|e| panic!("{e}"));
    let m5 = prices.on_demand("m5.large");
    assert_eq!(
        m5.map(|q| (q.price, q.source)),
        Some((0.096, PriceSource::Fallback))
    );
}

#[test]
fn the_price_table_keeps_the_fallback_region_until_the_api_answers() {
    let mut prices = Prices::new("eu-west-1", fallback());
    let zones = vec!["eu-west-1a".to_string()];
    assert_eq!(
        prices.to_price_table(&["m5.large"], &zones).region(),
        "us-east-1"
    );
    let mut api = BTreeMap::new();
    api.insert("m5.large".to_string(), 0.107);
    assert_eq!(prices.update_on_demand(&api), Ok(()));
    let table = prices.to_price_table(&["m5.large"], &zones);
    assert_eq!(table.region(), "eu-west-1");
    assert_eq!(table.on_demand("m5.large"), Some(0.107));
    assert_eq!(table.observed_spot("m5.large", "eu-west-1a"), Some(0.107));
}

#[test]
fn isolated_vpcs_and_govcloud_do_not_use_the_pricing_api() {
    assert!(pricing_api_enabled("us-east-1", false));
    assert!(!pricing_api_enabled("us-east-1", true));
    assert!(!pricing_api_enabled("us-gov-west-1", false));
    assert_eq!(pricing_endpoint_region("ap-northeast-1"), "ap-south-1");
    assert_eq!(pricing_endpoint_region("cn-north-1"), "cn-northwest-1");
    assert_eq!(pricing_endpoint_region("eu-west-3"), "eu-central-1");
    assert_eq!(pricing_endpoint_region("sa-east-1"), "us-east-1");
}
