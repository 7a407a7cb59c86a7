//! The list-price rule: on-demand prices for us-east-1, Linux, USD per hour (issue 5).
//!
//! This file is the one place the rates live. The catalog generator (`cargo xtask catalog`)
//! applies [`list_price`] to every shape and writes the result into the committed catalog; types
//! the rule does not price are left out of it.
//!
//! The rule:
//! - Within a listed family, price is linear in vCPUs relative to the `.large` (2 vCPU) rate:
//!   `rate x vCPUs / 2`. Bare metal is priced the same way by its own vCPU count, which equals
//!   that of the family's largest size.
//! - The burstable families t3, t3a and t4g are linear in memory: `rate per GiB x GiB`
//!   (t3.medium = 4 GiB x 0.0104 = 0.0416).
//! - A few accelerated types have a price of their own.
//!
//! Results are rounded to a millionth of a dollar.

use crate::shape::InstanceShape;

/// The price region the rates are for.
pub const LIST_PRICE_REGION: &str = "us-east-1";

/// A short description of the rule, recorded in catalog headers and price sources.
pub const LIST_PRICE_SOURCE: &str = "list-price rule (karpenter-cloud src/pricing/list_prices.rs): on-demand, us-east-1, Linux, USD/hour";

/// On-demand USD/hour of the `.large` (2 vCPU) size, per family.
pub const LARGE_SIZE_RATES: &[(&str, f64)] = &[
    ("m5", 0.096),
    ("m5a", 0.086),
    ("m5d", 0.113),
    ("m5n", 0.119),
    ("m6i", 0.096),
    ("m6id", 0.1187),
    ("m6a", 0.0864),
    ("m6g", 0.077),
    ("m6gd", 0.0904),
    ("m7i", 0.1008),
    ("m7i-flex", 0.09576),
    ("m7a", 0.11592),
    ("m7g", 0.0816),
    ("m7gd", 0.1068),
    ("m8g", 0.08976),
    ("c5", 0.085),
    ("c5a", 0.077),
    ("c5d", 0.096),
    ("c5n", 0.108),
    ("c6i", 0.085),
    ("c6id", 0.1008),
    ("c6a", 0.0765),
    ("c6g", 0.068),
    ("c6gd", 0.0768),
    ("c6gn", 0.0864),
    ("c7i", 0.08925),
    ("c7a", 0.10264),
    ("c7g", 0.0725),
    ("c7gd", 0.0907),
    ("c8g", 0.07976),
    ("r5", 0.126),
    ("r5a", 0.113),
    ("r5d", 0.144),
    ("r5n", 0.149),
    ("r6i", 0.126),
    ("r6id", 0.1512),
    ("r6a", 0.1134),
    ("r6g", 0.1008),
    ("r6gd", 0.1152),
    ("r7i", 0.1323),
    ("r7a", 0.15215),
    ("r7g", 0.1071),
    ("r7gd", 0.1361),
    ("r8g", 0.11782),
    ("i3", 0.156),
    ("i3en", 0.226),
    ("i4i", 0.172),
    ("z1d", 0.186),
];

/// On-demand USD/hour per GiB of memory, for the burstable families.
pub const BURSTABLE_RATES_PER_GIB: &[(&str, f64)] =
    &[("t3", 0.0104), ("t3a", 0.0094), ("t4g", 0.0084)];

/// On-demand USD/hour of single accelerated types.
pub const TYPE_PRICES: &[(&str, f64)] = &[
    ("g4dn.xlarge", 0.526),
    ("g4dn.2xlarge", 0.752),
    ("g5.xlarge", 1.006),
    ("g5.2xlarge", 1.212),
    ("p3.2xlarge", 3.06),
    ("inf1.xlarge", 0.228),
];

/// The on-demand list price of a shape, or `None` when the rule does not price it.
pub fn list_price(shape: &InstanceShape) -> Option<f64> {
    if let Some((_, price)) = TYPE_PRICES.iter().find(|(name, _)| *name == shape.name) {
        return Some(*price);
    }
    let family = shape.family();
    if let Some((_, rate)) = LARGE_SIZE_RATES.iter().find(|(f, _)| *f == family) {
        return Some(round_price(rate * f64::from(shape.vcpus) / 2.0));
    }
    if let Some((_, rate)) = BURSTABLE_RATES_PER_GIB.iter().find(|(f, _)| *f == family) {
        return Some(round_price(rate * shape.memory_mib as f64 / 1024.0));
    }
    None
}

/// Rounds a price to a millionth of a dollar, which hides floating-point noise
/// (`0.096 x 0.4 = 0.038400000000000004`) without changing any real price.
pub fn round_price(price: f64) -> f64 {
    (price * 1_000_000.0).round() / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::tests::m5_large;

    fn shape(name: &str, vcpus: u32, memory_mib: u64) -> InstanceShape {
        InstanceShape {
            name: name.into(),
            vcpus,
            memory_mib,
            ..m5_large()
        }
    }

    #[test]
    fn list_prices_follow_the_rule() {
        for (name, vcpus, memory_mib, expected) in [
            // .large is the family rate itself.
            ("m5.large", 2, 8192, Some(0.096)),
            // 0.096 x 96 / 2 = 4.608
            ("m5.24xlarge", 96, 393_216, Some(4.608)),
            // metal has the largest size's vCPUs: same price as m5.24xlarge.
            ("m5.metal", 96, 393_216, Some(4.608)),
            // A 1 vCPU medium is half the .large: 0.077 / 2 = 0.0385
            ("m6g.medium", 1, 4096, Some(0.0385)),
            // 0.09576 x 8 / 2 = 0.38304
            ("m7i-flex.2xlarge", 8, 32_768, Some(0.38304)),
            // 0.085 x 36 / 2 = 1.53
            ("c5.9xlarge", 36, 73_728, Some(1.53)),
            // Burstable, per GiB: 0.0104 x 4 = 0.0416
            ("t3.medium", 2, 4096, Some(0.0416)),
            // 0.0104 x 0.5 = 0.0052
            ("t3.nano", 2, 512, Some(0.0052)),
            // 0.0084 x 32 = 0.2688
            ("t4g.2xlarge", 8, 32_768, Some(0.2688)),
            // Accelerated types are priced one by one.
            ("g4dn.xlarge", 4, 16_384, Some(0.526)),
            ("inf1.xlarge", 4, 8192, Some(0.228)),
            ("g4dn.4xlarge", 16, 65_536, None),
            ("x2idn.large", 2, 8192, None),
        ] {
            assert_eq!(
                list_price(&shape(name, vcpus, memory_mib)),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn every_rate_is_listed_once() {
        let mut names: Vec<&str> = LARGE_SIZE_RATES
            .iter()
            .chain(BURSTABLE_RATES_PER_GIB)
            .chain(TYPE_PRICES)
            .map(|(name, _)| *name)
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
