//! Go-style durations (`720h`, `1h30m`, `90s`, `1.5h`, `300ms`) as Kubernetes and Karpenter
//! write them, and the `Never` form Karpenter accepts where a duration may be disabled.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Go duration string failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal numbers, each with an
/// optional fraction and a unit suffix (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`). A leading `-` is
/// rejected: Karpenter durations are never negative.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_owned(),
        reason,
    };
    let mut rest = input.strip_prefix('+').unwrap_or(input);
    if rest.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let unit_nanos: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit (one of ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (expected one of ns, us, ms, s, m, h)")),
        };
        rest = &rest[unit_len..];
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err("number too large"))?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| err("duration too large"))?;
        if !frac_part.is_empty() {
            // Keep at most 18 fractional digits; beyond that is below a nanosecond for every unit.
            let digits = &frac_part[..frac_part.len().min(18)];
            let frac: u128 = digits.parse().map_err(|_| err("bad fraction"))?;
            let scale = 10u128.pow(digits.len() as u32);
            nanos += frac * unit_nanos / scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| err("duration too large"))?;
    }
    if total_nanos > i64::MAX as u128 {
        return Err(err("duration too large"));
    }
    Ok(Duration::from_nanos(total_nanos as u64))
}

/// Formats a duration the way Go prints whole-second durations, without zero components:
/// `720h`, `1h30m`, `90s` -> `1m30s`, zero -> `0s`.
pub fn format_go_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    let sub_nanos = d.subsec_nanos();
    if secs == 0 && sub_nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let hours = secs / 3600;
    secs %= 3600;
    let minutes = secs / 60;
    secs %= 60;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if sub_nanos > 0 {
        let frac = format!("{:09}", sub_nanos);
        out.push_str(&format!("{secs}.{}s", frac.trim_end_matches('0')));
    } else if secs > 0 {
        out.push_str(&format!("{secs}s"));
    }
    out
}

/// A duration as written in a manifest: the text is kept so that round trips are exact.
#[derive(Clone, PartialEq, Eq)]
pub struct GoDuration {
    raw: String,
    value: Duration,
}

impl GoDuration {
    pub fn parse(raw: &str) -> Result<Self, DurationError> {
        Ok(Self {
            raw: raw.to_owned(),
            value: parse_go_duration(raw)?,
        })
    }

    pub fn from_duration(value: Duration) -> Self {
        Self {
            raw: format_go_duration(value),
            value,
        }
    }

    pub fn as_duration(&self) -> Duration {
        self.value
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Debug for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.raw)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        GoDuration::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }

    fn inline_schema() -> bool {
        true
    }
}

/// The literal that disables a [`NillableDuration`].
pub const NEVER: &str = "Never";

/// A duration that may be `Never` (upstream `NillableDuration`): `expireAfter`,
/// `consolidateAfter`.
#[derive(Clone, PartialEq, Eq)]
pub struct NillableDuration {
    raw: String,
    value: Option<Duration>,
}

impl NillableDuration {
    pub fn parse(raw: &str) -> Result<Self, DurationError> {
        let value = if raw == NEVER {
            None
        } else {
            Some(parse_go_duration(raw)?)
        };
        Ok(Self {
            raw: raw.to_owned(),
            value,
        })
    }

    pub fn never() -> Self {
        Self {
            raw: NEVER.to_owned(),
            value: None,
        }
    }

    pub fn from_duration(value: Duration) -> Self {
        Self {
            raw: format_go_duration(value),
            value: Some(value),
        }
    }

    /// `None` means `Never`.
    pub fn duration(&self) -> Option<Duration> {
        self.value
    }

    pub fn is_never(&self) -> bool {
        self.value.is_none()
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Debug for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.raw)
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        NillableDuration::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for NillableDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NillableDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^(([0-9]+(s|m|h))+|Never)$" })
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_time_parse_duration() {
        for (input, secs, nanos) in [
            ("720h", 2_592_000, 0),
            ("1h30m", 5400, 0),
            ("0s", 0, 0),
            ("0", 0, 0),
            ("1.5h", 5400, 0),
            ("300ms", 0, 300_000_000),
            ("2m3s", 123, 0),
            ("1h0m0s", 3600, 0),
        ] {
            assert_eq!(
                parse_go_duration(input),
                Ok(Duration::new(secs, nanos)),
                "{input}"
            );
        }
    }

    #[test]
    fn malformed_durations_are_errors_not_panics() {
        for input in [
            "",
            "h",
            "10",
            "-1s",
            "1x",
            "1..5s",
            "99999999999999999999h",
            "1h-",
        ] {
            assert!(parse_go_duration(input).is_err(), "{input}");
        }
    }

    #[test]
    fn durations_format_without_zero_components() {
        assert_eq!(format_go_duration(Duration::from_secs(2_592_000)), "720h");
        assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn never_is_a_nillable_duration_without_value() {
        let never = NillableDuration::parse("Never").expect("Never parses");
        assert!(never.is_never());
        assert_eq!(never.as_str(), "Never");
        let d = NillableDuration::parse("1m").expect("1m parses");
        assert_eq!(d.duration(), Some(Duration::from_secs(60)));
    }
}
