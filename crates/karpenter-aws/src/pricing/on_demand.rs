//! On-demand prices from the AWS Pricing API `GetProducts` response.
//!
//! Owns: reading `PriceList` entries (each a JSON document as a string: `product.attributes`
//! and `terms.OnDemand.*.priceDimensions.*.pricePerUnit`) into a price per instance type, as
//! upstream's `onDemandPage` does, and re-applying the request's `TERM_MATCH` filters to every
//! entry (Linux, no pre-installed software, capacity status `Used`, the region, and tenancy
//! `Shared` for `Compute Instance` or `Dedicated` for `Compute Instance (bare metal)`), so a
//! page with stray products cannot slip a Windows or dedicated price in.
//!
//! Must not: call the API or panic on an entry; every entry it cannot use is reported in
//! [`OnDemandPage::skipped`] with the reason.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// Prices read from one or more `GetProducts` pages, and the entries left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OnDemandPage {
    /// USD (CNY in `cn-*` regions) per hour by instance type.
    pub prices: BTreeMap<String, f64>,
    pub skipped: Vec<Skipped>,
}

/// An entry that gave no price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Position in `PriceList`.
    pub index: usize,
    pub instance_type: Option<String>,
    pub reason: String,
}

/// The `GetProducts` output, as the SDK and the CLI print it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetProductsOutput {
    #[serde(default)]
    pub price_list: Vec<String>,
    #[serde(default)]
    pub next_token: Option<String>,
}

#[derive(Deserialize)]
struct PriceItem {
    product: Product,
    #[serde(default)]
    terms: Terms,
}

#[derive(Deserialize)]
struct Product {
    #[serde(rename = "productFamily", default)]
    product_family: Option<String>,
    #[serde(default)]
    attributes: BTreeMap<String, Value>,
}

#[derive(Default, Deserialize)]
struct Terms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions", default)]
    price_dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize)]
struct Dimension {
    #[serde(rename = "pricePerUnit", default)]
    price_per_unit: BTreeMap<String, String>,
}

/// The currency prices are read in: CNY in the China regions, else USD.
pub fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// Reads `entries` (a page's `PriceList`) for `region`. Later entries for the same instance type
/// replace earlier ones, as upstream's map merge does.
pub fn parse_price_list(entries: &[String], region: &str) -> OnDemandPage {
    let mut page = OnDemandPage::default();
    for (index, entry) in entries.iter().enumerate() {
        match price_of(entry, region) {
            Ok((instance_type, price)) => {
                page.prices.insert(instance_type, price);
            }
            Err((instance_type, reason)) => page.skipped.push(Skipped {
                index,
                instance_type,
                reason,
            }),
        }
    }
    page
}

type EntryResult = Result<(String, f64), (Option<String>, String)>;

fn price_of(entry: &str, region: &str) -> EntryResult {
    let item: PriceItem = serde_json::from_str(entry)
        .map_err(|error| (None, format!("not a price list document: {error}")))?;
    let attribute = |name: &str| item.product.attributes.get(name).and_then(Value::as_str);
    let instance_type = attribute("instanceType")
        .filter(|it| !it.is_empty())
        .ok_or((None, "no product.attributes.instanceType".to_string()))?
        .to_string();
    let skip = |reason: String| Err((Some(instance_type.clone()), reason));
    for (name, expected) in [
        ("operatingSystem", "Linux"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
        ("regionCode", region),
        ("marketoption", "OnDemand"),
    ] {
        if let Some(actual) = attribute(name)
            && actual != expected
        {
            return skip(format!("{name} is {actual:?}, not {expected:?}"));
        }
    }
    let family = item.product.product_family.as_deref().unwrap_or_default();
    let tenancy = attribute("tenancy").unwrap_or_default();
    match (family, tenancy) {
        ("Compute Instance", "Shared") | ("Compute Instance (bare metal)", "Dedicated") => {}
        _ => {
            return skip(format!(
                "product family {family:?} with tenancy {tenancy:?} is not priced (only Shared compute instances and Dedicated bare metal are)"
            ));
        }
    }
    let currency = currency(region);
    let mut price = None;
    let mut unusable = Vec::new();
    for term in item.terms.on_demand.values() {
        for dimension in term.price_dimensions.values() {
            let raw = dimension.price_per_unit.get(currency);
            match raw.map(|text| text.parse::<f64>()) {
                Some(Ok(value)) if value.is_finite() && value > 0.0 => price = Some(value),
                _ => unusable.push(format!("{:?}", raw.map_or("", String::as_str))),
            }
        }
    }
    match price {
        Some(price) => Ok((instance_type, price)),
        None if unusable.is_empty() => skip("no on-demand price dimension".to_string()),
        None => skip(format!(
            "no positive {currency} price (pricePerUnit {})",
            unusable.join(", ")
        )),
    }
}
