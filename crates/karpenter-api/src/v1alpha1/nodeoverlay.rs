//! `karpenter.sh/v1alpha1` NodeOverlay: requirements that select instance types (and their
//! offerings) in scheduling simulations, and what to assume for them instead of what the cloud
//! says: a price (`price`, absolute) or a price change (`priceAdjustment`, `+0.5`, `-10%`), and
//! extended resources added to the capacity. `weight` orders overlapping overlays.
//!
//! The schema carries upstream's rules (patterns, bounds, CEL); the runtime checks upstream
//! adds at reconcile time are [`crate::validation::validate_nodeoverlay`]. Applying overlays to
//! instance types is `karpenter_scheduling::overlay`'s job, not this module's.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::v1::Operator;
use crate::v1::common::QUALIFIED_NAME_PATTERN;

/// `spec.priceAdjustment`'s pattern: a signed amount, `+N%`, or `-N%` with N below 100 (or
/// exactly `-100%`).
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";
/// `spec.price`'s pattern: a non-negative decimal.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";
/// The largest `spec.weight`.
pub const MAX_WEIGHT: i32 = 10_000;
/// The resources a NodeOverlay may not set: every node reports them already.
pub const RESTRICTED_CAPACITY: &[&str] = crate::labels::WELL_KNOWN_RESOURCES;

/// NodeOverlay adjusts the price and capacity Karpenter assumes for matching instance types.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    singular = "nodeoverlay",
    shortname = "overlays",
    category = "karpenter",
    status = "NodeOverlayStatus",
    derive = "PartialEq",
    doc = "NodeOverlay adjusts the price and capacity Karpenter assumes for matching instance types",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.price) || !has(self.priceAdjustment)").message("cannot set both 'price' and 'priceAdjustment'"),
)]
pub struct NodeOverlaySpec {
    /// requirements constrain when this NodeOverlay is applied during scheduling simulations.
    /// These requirements can match:
    /// - Well-known labels (e.g., node.kubernetes.io/instance-type, karpenter.sh/nodepool)
    /// - Custom labels from NodePool's spec.template.labels
    #[schemars(length(max = 100))]
    #[x_kube(
        validation = Rule::new("self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)").message("requirements with operator 'NotIn' must have a value defined"),
        validation = Rule::new("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)").message("requirements with operator 'In' must have a value defined"),
        validation = Rule::new("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)").message("requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"),
    )]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// PriceAdjustment specifies the price change for matching instance types. Accepts either:
    /// - A fixed price modifier (e.g., -0.5, 1.2)
    /// - A percentage modifier (e.g., +10% for increase, -15% for decrease)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PRICE_ADJUSTMENT_PATTERN))]
    pub price_adjustment: Option<String>,
    /// Price specifies amount for an instance types that match the specified labels. Users can
    /// override prices using a signed float representing the price override
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PRICE_PATTERN))]
    pub price: Option<String>,
    /// Capacity adds extended resources only, and does not replace any existing resources.
    /// These extended resources are appended to the node's existing resource list.
    /// Note: This field does not modify or override standard resources like cpu, memory,
    /// ephemeral-storage, or pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new("self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))").message("invalid resource restricted"),
    )]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Weight defines the priority of this NodeOverlay when overriding node attributes.
    /// NodeOverlays with higher numerical weights take precedence over those with lower weights.
    /// If no weight is specified, the NodeOverlay is treated as having a weight of 0.
    /// When multiple NodeOverlays have identical weights, they are merged in alphabetical order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub weight: Option<i32>,
}

/// A node selector requirement (no `minValues`: an overlay selects, it does not ask for
/// flexibility).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// The label key that the selector applies to.
    #[schemars(length(max = 316), regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: String,
    /// Represents a key's relationship to a set of values.
    /// Valid operators are In, NotIn, Exists, DoesNotExist. Gt, Lt, Gte, and Lte.
    pub operator: Operator,
    /// An array of string values. If the operator is In or NotIn,
    /// the values array must be non-empty. If the operator is Exists or DoesNotExist,
    /// the values array must be empty. If the operator is Gt, Lt, Gte, or Lte, the values
    /// array must have a single element, which will be interpreted as an integer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl NodeSelectorRequirement {
    pub fn new(key: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        NodeSelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }
}

/// NodeOverlayStatus defines the observed state of NodeOverlay
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    /// Conditions contains signals for health and readiness
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// NodeOverlay status condition types and the reasons upstream writes with them.
pub mod conditions {
    /// The root: [`VALIDATION_SUCCEEDED`] true.
    pub const READY: &str = "Ready";
    /// The overlay passed the runtime checks and conflicts with no overlay of its weight.
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    /// `ValidationSucceeded=False`: the runtime checks failed.
    pub const REASON_RUNTIME_VALIDATION: &str = "RuntimeValidation";
    /// `ValidationSucceeded=False`: another overlay of the same weight sets the same thing on an
    /// instance type both select.
    pub const REASON_CONFLICT: &str = "Conflict";
}

impl NodeOverlay {
    /// `spec.weight`, 0 when unset.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }

    /// The price change the overlay asks for (`price` wins over `priceAdjustment`, which the
    /// schema forbids together anyway); `None` when it sets neither.
    pub fn price_change(&self) -> Option<Result<PriceChange, PriceChangeError>> {
        match (&self.spec.price, &self.spec.price_adjustment) {
            (Some(price), _) => Some(PriceChange::parse_price(price)),
            (None, Some(adjustment)) => Some(PriceChange::parse_adjustment(adjustment)),
            (None, None) => None,
        }
    }
}

/// What an overlay does to an offering's price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceChange {
    /// `price: "5.00"`: this price, whatever the cloud says.
    Set(f64),
    /// `priceAdjustment: "+0.5"` / `"-0.5"`: added to the cloud's price.
    Add(f64),
    /// `priceAdjustment: "+10%"` / `"-15%"`: that percentage of the cloud's price added.
    Percent(f64),
}

/// A `price` or `priceAdjustment` that does not match the schema's pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value:?} {expected}")]
pub struct PriceChangeError {
    pub field: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// An unsigned decimal as the patterns allow it: digits, at most one dot, digits after a dot.
fn unsigned_decimal(s: &str, leading_digits_required: bool) -> Option<f64> {
    let (whole, fraction) = match s.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (s, None),
    };
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let ok = digits(whole)
        && (!leading_digits_required || !whole.is_empty())
        && fraction.is_none_or(|f| !f.is_empty() && digits(f))
        && !(whole.is_empty() && fraction.is_none());
    if !ok {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

impl PriceChange {
    /// `spec.price` (pattern `^\d+(\.\d+)?$`).
    pub fn parse_price(s: &str) -> Result<PriceChange, PriceChangeError> {
        unsigned_decimal(s, true)
            .map(PriceChange::Set)
            .ok_or_else(|| PriceChangeError {
                field: "price",
                value: s.to_owned(),
                expected: "must be a non-negative decimal (e.g. \"5.00\")",
            })
    }

    /// `spec.priceAdjustment` ([`PRICE_ADJUSTMENT_PATTERN`]): `+N`/`-N`, `+N%`, `-N%` with N
    /// below 100 (two integer digits at most), or `-100%`.
    pub fn parse_adjustment(s: &str) -> Result<PriceChange, PriceChangeError> {
        let error = || PriceChangeError {
            field: "priceAdjustment",
            value: s.to_owned(),
            expected: "must be a signed amount (\"+0.5\", \"-1\") or a signed percentage (\"+10%\", \"-15%\", at least -100%)",
        };
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'+') => (false, &s[1..]),
            Some(b'-') => (true, &s[1..]),
            _ => return Err(error()),
        };
        let sign = if negative { -1.0 } else { 1.0 };
        match rest.strip_suffix('%') {
            Some(number) if negative => {
                if number == "100" {
                    return Ok(PriceChange::Percent(-100.0));
                }
                let whole = number.split('.').next().unwrap_or_default();
                if whole.is_empty() || whole.len() > 2 {
                    return Err(error());
                }
                unsigned_decimal(number, true)
                    .map(|v| PriceChange::Percent(-v))
                    .ok_or_else(error)
            }
            Some(number) => unsigned_decimal(number, false)
                .map(PriceChange::Percent)
                .ok_or_else(error),
            None => unsigned_decimal(rest, false)
                .map(|v| PriceChange::Add(sign * v))
                .ok_or_else(error),
        }
    }

    /// The price after the change, from the cloud's `price`; an adjustment never goes below 0.
    pub fn apply(self, price: f64) -> f64 {
        match self {
            PriceChange::Set(p) => p,
            PriceChange::Add(delta) => (price + delta).max(0.0),
            PriceChange::Percent(pct) => (price * (1.0 + pct / 100.0)).max(0.0),
        }
    }
}

impl fmt::Display for PriceChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriceChange::Set(p) => write!(f, "price {p}"),
            PriceChange::Add(d) => write!(f, "price {d:+}"),
            PriceChange::Percent(p) => write!(f, "price {p:+}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_adjustments_parse_as_upstreams_patterns_allow() {
        assert_eq!(PriceChange::parse_price("5.00"), Ok(PriceChange::Set(5.0)));
        assert_eq!(PriceChange::parse_price("0"), Ok(PriceChange::Set(0.0)));
        for bad in ["-1", "+1", ".5", "5.", "1e3", "", "5%"] {
            assert!(PriceChange::parse_price(bad).is_err(), "price {bad:?}");
        }
        let ok = [
            ("+5.00", PriceChange::Add(5.0)),
            ("-7.50", PriceChange::Add(-7.5)),
            ("-.5", PriceChange::Add(-0.5)),
            ("+15%", PriceChange::Percent(15.0)),
            ("+250%", PriceChange::Percent(250.0)),
            ("-10%", PriceChange::Percent(-10.0)),
            ("-99.9%", PriceChange::Percent(-99.9)),
            ("-100%", PriceChange::Percent(-100.0)),
        ];
        for (text, want) in ok {
            assert_eq!(PriceChange::parse_adjustment(text), Ok(want), "{text}");
        }
        for bad in [
            "5", "10%", "-101%", "-100.5%", "-150%", "+", "-", "+1.", "++1", "-.5%",
        ] {
            assert!(
                PriceChange::parse_adjustment(bad).is_err(),
                "adjustment {bad:?}"
            );
        }
    }

    #[test]
    fn an_adjustment_never_makes_a_price_negative() {
        assert_eq!(PriceChange::Add(-1.0).apply(0.4), 0.0);
        assert_eq!(PriceChange::Percent(-100.0).apply(0.4), 0.0);
        assert!((PriceChange::Percent(-10.0).apply(0.5) - 0.45).abs() < 1e-12);
        assert!((PriceChange::Add(0.25).apply(0.5) - 0.75).abs() < 1e-12);
        assert_eq!(PriceChange::Set(3.0).apply(0.5), 3.0);
    }

    #[test]
    fn price_wins_over_price_adjustment_and_weight_defaults_to_zero() {
        let overlay: NodeOverlay = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "o"},
            "spec": {"requirements": [], "price": "2", "priceAdjustment": "+1"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(overlay.weight(), 0);
        assert_eq!(overlay.price_change(), Some(Ok(PriceChange::Set(2.0))));
    }
}
