//! Kubernetes resource quantities with exact integer arithmetic.
//!
//! A [`Quantity`] holds its value in thousandths of the base unit (millicores for `cpu`,
//! millibytes for `memory`), like Kubernetes' `MilliValue`, rounding finer fractions up. Every
//! suffix Kubernetes accepts is understood: decimal SI (`n`, `u`, `m`, ``, `k`, `M`, `G`, `T`,
//! `P`, `E`), binary SI (`Ki` .. `Ei`) and decimal exponents (`1e3`, `2E-1`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity is empty")]
    Empty,
    #[error("quantity {0:?} has no digits")]
    NoDigits(String),
    #[error("quantity {0:?} has an unknown suffix {1:?}")]
    UnknownSuffix(String, String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// An exact resource amount, stored as thousandths of the base unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    millis: i128,
}

impl Quantity {
    /// The zero quantity.
    pub const ZERO: Quantity = Quantity { millis: 0 };

    /// A quantity of `millis` thousandths of the base unit.
    pub const fn from_millis(millis: i128) -> Self {
        Quantity { millis }
    }

    /// A quantity of `units` whole base units (cores, bytes, pods).
    pub const fn from_units(units: i128) -> Self {
        Quantity {
            millis: units * 1000,
        }
    }

    /// Parses a Kubernetes quantity string (`"500m"`, `"1.5Gi"`, `"2e3"`).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        parse_quantity(input)
    }

    /// Thousandths of the base unit (millicores for cpu).
    pub const fn millis(self) -> i128 {
        self.millis
    }

    /// Whole base units, rounded up (bytes for memory, pods for pods).
    pub fn value(self) -> i128 {
        self.millis.div_euclid(1000) + i128::from(self.millis.rem_euclid(1000) != 0)
    }

    /// The value in thousandths, clamped into an `i64` (solver arithmetic uses `i64`).
    pub fn millis_i64(self) -> i64 {
        i64::try_from(self.millis).unwrap_or(if self.millis < 0 {
            i64::MIN / 4
        } else {
            i64::MAX / 4
        })
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.millis
            .checked_add(other.millis)
            .map(Quantity::from_millis)
    }

    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity::from_millis(self.millis.saturating_sub(other.millis))
    }

    pub fn is_zero(self) -> bool {
        self.millis == 0
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity::from_millis(self.millis.saturating_add(rhs.millis))
    }
}

impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity::from_millis(self.millis.saturating_sub(rhs.millis))
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

/// Formats the quantity compactly: whole binary multiples as `Ki`..`Ei` when at least 1Ki, whole
/// units as plain integers, otherwise millis with an `m` suffix.
pub fn format_millis(millis: i128) -> String {
    if millis % 1000 != 0 {
        return format!("{millis}m");
    }
    let units = millis / 1000;
    const BINARY: [(&str, i128); 6] = [
        ("Ei", 1 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, factor) in BINARY {
        if units != 0 && units.abs() >= factor && units % factor == 0 {
            return format!("{}{suffix}", units / factor);
        }
    }
    units.to_string()
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_millis(self.millis))
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Str(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Int(i) => Ok(Quantity::from_units(i128::from(i))),
            Raw::Float(f) => parse_quantity(&f.to_string()).map_err(serde::de::Error::custom),
            Raw::Str(s) => parse_quantity(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl TryFrom<&k8s_openapi::apimachinery::pkg::api::resource::Quantity> for Quantity {
    type Error = QuantityError;
    fn try_from(
        q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    ) -> Result<Self, Self::Error> {
        parse_quantity(&q.0)
    }
}

fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let overflow = || QuantityError::Overflow(input.to_string());
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    // Mantissa: digits with an optional fraction.
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return Err(QuantityError::NoDigits(input.to_string()));
    }
    let mut mantissa: i128 = 0;
    for digit in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or_else(overflow)?;
    }
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| overflow())?;
    let (binary_shift, decimal_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        other => {
            let exp = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .and_then(|e| e.parse::<i32>().ok())
                .filter(|e| e.abs() <= 40)
                .ok_or_else(|| {
                    QuantityError::UnknownSuffix(input.to_string(), other.to_string())
                })?;
            (0, exp)
        }
    };
    let mut value = mantissa
        .checked_mul(1i128 << binary_shift)
        .ok_or_else(overflow)?;
    // Scale to thousandths: value * 10^(decimal_exp + 3 - frac_len), rounding up.
    let exp = decimal_exp + 3 - frac_len;
    if exp >= 0 {
        let factor = 10i128
            .checked_pow(u32::try_from(exp).map_err(|_| overflow())?)
            .ok_or_else(overflow)?;
        value = value.checked_mul(factor).ok_or_else(overflow)?;
    } else {
        let divisor = 10i128
            .checked_pow(u32::try_from(-exp).map_err(|_| overflow())?)
            .ok_or_else(overflow)?;
        value = value / divisor + i128::from(value % divisor != 0);
    }
    Ok(Quantity::from_millis(if negative { -value } else { value }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> i128 {
        Quantity::parse(s)
            .map(Quantity::millis)
            .unwrap_or(i128::MIN)
    }

    #[test]
    fn every_suffix_scales_to_thousandths() {
        for (input, millis) in [
            ("1", 1000),
            ("500m", 500),
            ("1.5", 1500),
            ("0.1", 100),
            ("100n", 1),
            ("1u", 1),
            ("1k", 1_000_000),
            ("1M", 1_000_000_000),
            ("1G", 1_000_000_000_000),
            ("1Ki", 1_024_000),
            ("1Mi", 1_048_576_000),
            ("2Gi", 2_147_483_648_000),
            ("1Ti", 1_099_511_627_776_000),
            ("1e3", 1_000_000),
            ("1E-1", 100),
            ("-2", -2000),
            ("+3", 3000),
            (".5", 500),
            ("1.5Gi", 1_610_612_736_000),
        ] {
            assert_eq!(q(input), millis, "{input}");
        }
    }

    #[test]
    fn malformed_quantities_are_typed_errors_not_panics() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert!(matches!(
            Quantity::parse("abc"),
            Err(QuantityError::NoDigits(_))
        ));
        assert!(matches!(
            Quantity::parse("1Qi"),
            Err(QuantityError::UnknownSuffix(..))
        ));
        assert!(matches!(
            Quantity::parse("1.2.3"),
            Err(QuantityError::NoDigits(_))
        ));
        assert!(matches!(
            Quantity::parse("99999999999999999999999999999999999999999E"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(Quantity::parse("1e999").is_err());
    }

    #[test]
    fn value_rounds_fractional_units_up() {
        assert_eq!(Quantity::from_millis(1500).value(), 2);
        assert_eq!(Quantity::from_millis(2000).value(), 2);
    }

    #[test]
    fn display_prefers_binary_suffixes_for_whole_multiples() {
        assert_eq!(
            Quantity::parse("4Gi").map(|q| q.to_string()),
            Ok("4Gi".into())
        );
        assert_eq!(
            Quantity::parse("250m").map(|q| q.to_string()),
            Ok("250m".into())
        );
        assert_eq!(
            Quantity::parse("96").map(|q| q.to_string()),
            Ok("96".into())
        );
    }
}
