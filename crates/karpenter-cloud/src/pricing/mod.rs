//! Prices as a replaceable input.
//!
//! A [`PriceTable`] holds on-demand prices per type and, optionally, observed spot prices per
//! type and zone. A catalog carries one built from its entries' `price` fields (for the embedded
//! catalog: the list-price rule of [`list_prices`]); [`crate::Catalog::with_prices`] swaps in
//! another one, e.g. read with [`PriceTable::from_file`] or, later, fetched from the AWS Pricing
//! API (`--refresh-prices`). Spot prices that were not observed are estimated as
//! `on-demand x (1 - discount)` and always flagged as estimates.
//!
//! Price file format (JSON):
//!
//! ```json
//! {
//!   "region": "us-east-1",
//!   "source": "AWS Pricing API, 2026-01-01",
//!   "on_demand": { "m5.large": 0.096 },
//!   "spot": { "m5.large": { "us-east-1a": 0.0351 } }
//! }
//! ```

pub mod list_prices;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::PriceTableError;

/// On-demand and observed spot prices, USD per hour, for one region.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    region: String,
    source: String,
    on_demand: BTreeMap<String, f64>,
    spot: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    region: String,
    #[serde(default)]
    source: Option<String>,
    on_demand: BTreeMap<String, f64>,
    #[serde(default)]
    spot: BTreeMap<String, BTreeMap<String, f64>>,
}

impl PriceTable {
    /// An empty table for `region`; `source` says where the prices come from.
    pub fn new(region: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            source: source.into(),
            on_demand: BTreeMap::new(),
            spot: BTreeMap::new(),
        }
    }

    /// Sets the on-demand price of a type.
    pub fn set_on_demand(&mut self, instance_type: impl Into<String>, price: f64) {
        self.on_demand.insert(instance_type.into(), price);
    }

    /// Sets an observed spot price of a type in a zone.
    pub fn set_spot(
        &mut self,
        instance_type: impl Into<String>,
        zone: impl Into<String>,
        price: f64,
    ) {
        self.spot
            .entry(instance_type.into())
            .or_default()
            .insert(zone.into(), price);
    }

    /// The region the prices are for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Where the prices come from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The on-demand price of a type, USD per hour.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }

    /// An observed spot price of a type in a zone, USD per hour.
    pub fn observed_spot(&self, instance_type: &str, zone: &str) -> Option<f64> {
        self.spot.get(instance_type)?.get(zone).copied()
    }

    /// Number of types with an on-demand price.
    pub fn len(&self) -> usize {
        self.on_demand.len()
    }

    /// True when no type has an on-demand price.
    pub fn is_empty(&self) -> bool {
        self.on_demand.is_empty()
    }

    /// Reads a price file (format in the module docs).
    pub fn from_file(path: &Path) -> Result<Self, PriceTableError> {
        let text = std::fs::read_to_string(path).map_err(|source| PriceTableError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses a price file's text; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self, PriceTableError> {
        let invalid = |field: String, message: String| PriceTableError::Invalid {
            origin: origin.to_string(),
            field,
            message,
        };
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let file: PriceFile = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|error| invalid(error.path().to_string(), error.inner().to_string()))?;
        if file.region.trim().is_empty() {
            return Err(invalid("region".into(), "must not be empty".into()));
        }
        for (name, price) in &file.on_demand {
            check_price(*price).map_err(|message| invalid(format!("on_demand.{name}"), message))?;
        }
        for (name, zones) in &file.spot {
            for (zone, price) in zones {
                check_price(*price)
                    .map_err(|message| invalid(format!("spot.{name}.{zone}"), message))?;
            }
        }
        Ok(Self {
            source: file.source.unwrap_or_else(|| origin.to_string()),
            region: file.region,
            on_demand: file.on_demand,
            spot: file.spot,
        })
    }
}

fn check_price(price: f64) -> Result<(), String> {
    if price.is_finite() && price > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "must be a positive number of USD per hour, got {price}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_file_replaces_on_demand_and_spot_prices() {
        let table = PriceTable::parse(
            "prices.json",
            r#"{"region":"us-west-2","on_demand":{"m5.large":0.1},"spot":{"m5.large":{"us-west-2a":0.03}}}"#,
        );
        let table = match table {
            Ok(table) => table,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(table.region(), "us-west-2");
        assert_eq!(table.source(), "prices.json");
        assert_eq!(table.on_demand("m5.large"), Some(0.1));
        assert_eq!(table.observed_spot("m5.large", "us-west-2a"), Some(0.03));
        assert_eq!(table.observed_spot("m5.large", "us-west-2b"), None);
    }

    #[test]
    fn bad_price_files_name_the_file_and_field() {
        for (text, expected) in [
            (
                r#"{"region":"us-east-1","on_demand":{"m5.large":"cheap"}}"#,
                "prices.json: field `on_demand.m5.large`: invalid type",
            ),
            (
                r#"{"region":"us-east-1","on_demand":{"m5.large":-1}}"#,
                "prices.json: field `on_demand.m5.large`: must be a positive number",
            ),
            (
                r#"{"region":"us-east-1","on_demand":{},"spot":{"m5.large":{"a":0}}}"#,
                "prices.json: field `spot.m5.large.a`: must be a positive number",
            ),
            (
                r#"{"on_demand":{}}"#,
                "prices.json: field `.`: missing field `region`",
            ),
        ] {
            let message = PriceTable::parse("prices.json", text)
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
            assert!(message.starts_with(expected), "{message}");
        }
    }
}
