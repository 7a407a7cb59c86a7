//! Spot prices from `ec2:DescribeSpotPriceHistory` output.
//!
//! Owns: reading `SpotPriceHistory` records (upstream asks for `Linux/UNIX` and
//! `Linux/UNIX (Amazon VPC)` from now on) into the latest price per (instance type, zone).
//! Must not: call EC2 or read the clock (the caller chose the start time); bad records are
//! skipped with a reason, never a panic.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset};
use serde::Deserialize;

/// The product descriptions upstream requests.
pub const LINUX_PRODUCT_DESCRIPTIONS: &[&str] = &["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// The `DescribeSpotPriceHistory` output.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SpotPriceHistoryOutput {
    #[serde(default)]
    pub spot_price_history: Vec<SpotPriceRecord>,
    #[serde(default)]
    pub next_token: Option<String>,
}

/// One `SpotPrice` record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SpotPriceRecord {
    #[serde(default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub product_description: Option<String>,
    /// USD per hour, as a decimal string.
    #[serde(default)]
    pub spot_price: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// The latest spot price per instance type and zone, and the records left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpotPrices {
    pub prices: BTreeMap<String, BTreeMap<String, f64>>,
    pub skipped: Vec<SkippedRecord>,
}

/// A record that gave no price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedRecord {
    pub index: usize,
    pub reason: String,
}

impl SpotPrices {
    /// Number of (instance type, zone) prices.
    pub fn len(&self) -> usize {
        self.prices.values().map(BTreeMap::len).sum()
    }

    /// True when no record gave a price.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The latest price per (type, zone) among `records`; on equal timestamps the later record wins.
pub fn latest_spot_prices(records: &[SpotPriceRecord]) -> SpotPrices {
    let mut latest: BTreeMap<(String, String), (DateTime<FixedOffset>, f64)> = BTreeMap::new();
    let mut skipped = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match read(record) {
            Ok((key, at, price)) => {
                let newer = latest.get(&key).is_none_or(|(seen, _)| at >= *seen);
                if newer {
                    latest.insert(key, (at, price));
                }
            }
            Err(reason) => skipped.push(SkippedRecord { index, reason }),
        }
    }
    let mut prices: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for ((instance_type, zone), (_, price)) in latest {
        prices.entry(instance_type).or_default().insert(zone, price);
    }
    SpotPrices { prices, skipped }
}

type Read = ((String, String), DateTime<FixedOffset>, f64);

fn read(record: &SpotPriceRecord) -> Result<Read, String> {
    let instance_type = record
        .instance_type
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or("no InstanceType")?;
    let zone = record
        .availability_zone
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or("no AvailabilityZone")?;
    if let Some(product) = &record.product_description
        && !LINUX_PRODUCT_DESCRIPTIONS.contains(&product.as_str())
    {
        return Err(format!("product {product:?} is not Linux/UNIX"));
    }
    let text = record.spot_price.as_deref().ok_or("no SpotPrice")?;
    let price = text
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && *p > 0.0)
        .ok_or_else(|| format!("SpotPrice {text:?} is not a positive number"))?;
    let stamp = record.timestamp.as_deref().ok_or("no Timestamp")?;
    let at = DateTime::parse_from_rfc3339(stamp)
        .map_err(|error| format!("Timestamp {stamp:?}: {error}"))?;
    Ok(((instance_type, zone), at, price))
}
