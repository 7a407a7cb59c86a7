//! One condition test (`operator`, `key`, `values`) and how it evaluates against a request.
//!
//! Semantics (IAM user guide, "Condition element" and "multivalued context keys"):
//! * several values for one key are ORed; a negated operator (`StringNotEquals`, `ArnNotLike`,
//!   `NotIpAddress`, ...) is true when the request value matches **none** of them;
//! * a key absent from the request makes a positive operator false and a negated operator true;
//!   `...IfExists` makes any operator true when the key is absent; `Null: true` means "absent";
//! * `ForAnyValue:` is true when at least one request value satisfies the operator (false when the
//!   key is absent or empty); `ForAllValues:` when every request value does (true when absent);
//! * an unqualified operator on a multivalued key: a positive operator needs one request value to
//!   match, a negated operator needs all of them not to (the conservative reading; IAM advises
//!   always qualifying multivalued keys).

use std::net::IpAddr;

use super::operator::{Base, Operator, SetQualifier};
use super::request::Context;
use super::variables::expand;
use super::wildcard::Pattern;

/// A validated condition test.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionTest {
    pub operator: Operator,
    pub key: String,
    pub values: Vec<String>,
}

impl ConditionTest {
    /// Validates the values for the operator's type. The error is a message without location.
    pub fn new(operator: Operator, key: &str, values: Vec<String>) -> Result<Self, String> {
        for v in &values {
            let ok = match operator.base.positive() {
                Base::Null | Base::Bool => {
                    v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false")
                }
                Base::NumericEquals
                | Base::NumericLessThan
                | Base::NumericLessThanEquals
                | Base::NumericGreaterThan
                | Base::NumericGreaterThanEquals => v.trim().parse::<f64>().is_ok(),
                Base::DateEquals
                | Base::DateLessThan
                | Base::DateLessThanEquals
                | Base::DateGreaterThan
                | Base::DateGreaterThanEquals => parse_date(v).is_some(),
                Base::IpAddress => parse_cidr(v).is_some(),
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "{v:?} is not a valid value for {}",
                    operator.base.name()
                ));
            }
        }
        Ok(ConditionTest {
            operator,
            key: key.to_string(),
            values,
        })
    }

    /// Evaluates against the request context. `variables` enables policy-variable substitution.
    pub fn evaluate(&self, context: &Context, variables: bool) -> bool {
        let op = self.operator;
        let request_values: &[String] = context.get(&self.key).map(|v| v.values()).unwrap_or(&[]);
        let absent = request_values.is_empty();
        if op.base == Base::Null {
            return self
                .values
                .iter()
                .any(|want| want.eq_ignore_ascii_case("true") == absent);
        }
        let satisfied = |v: &str| {
            let hit = self
                .values
                .iter()
                .any(|p| compare(op.base.positive(), v, p, context, variables));
            hit != op.base.negated()
        };
        match op.set {
            SetQualifier::Single => {
                if absent {
                    op.if_exists || op.base.negated()
                } else if op.base.negated() {
                    request_values.iter().all(|v| satisfied(v))
                } else {
                    request_values.iter().any(|v| satisfied(v))
                }
            }
            SetQualifier::ForAnyValue => {
                if absent {
                    op.if_exists
                } else {
                    request_values.iter().any(|v| satisfied(v))
                }
            }
            SetQualifier::ForAllValues => request_values.iter().all(|v| satisfied(v)),
        }
    }
}

/// Does request value `v` match policy value `p` under the (positive) operator?
fn compare(base: Base, v: &str, p: &str, context: &Context, variables: bool) -> bool {
    let pattern = || expand(p, context, variables && base.takes_variables());
    match base {
        Base::StringEquals => pattern().is_some_and(|pat| pat.text() == v),
        Base::StringEqualsIgnoreCase => {
            pattern().is_some_and(|pat| pat.text().to_lowercase() == v.to_lowercase())
        }
        Base::StringLike => pattern().is_some_and(|pat| pat.matches(v, false)),
        Base::ArnEquals | Base::ArnLike => pattern().is_some_and(|pat| arn_like(&pat, v)),
        Base::Bool => v.eq_ignore_ascii_case(p),
        Base::BinaryEquals => v == p,
        Base::NumericEquals => numeric(v, p, |a, b| a == b),
        Base::NumericLessThan => numeric(v, p, |a, b| a < b),
        Base::NumericLessThanEquals => numeric(v, p, |a, b| a <= b),
        Base::NumericGreaterThan => numeric(v, p, |a, b| a > b),
        Base::NumericGreaterThanEquals => numeric(v, p, |a, b| a >= b),
        Base::DateEquals => date(v, p, |a, b| a == b),
        Base::DateLessThan => date(v, p, |a, b| a < b),
        Base::DateLessThanEquals => date(v, p, |a, b| a <= b),
        Base::DateGreaterThan => date(v, p, |a, b| a > b),
        Base::DateGreaterThanEquals => date(v, p, |a, b| a >= b),
        Base::IpAddress => ip_in(v, p),
        // Negated operators are evaluated through their positive form; Null is handled above.
        _ => false,
    }
}

/// `ArnLike`/`ArnEquals`: the six colon-separated parts are matched separately, so a wildcard
/// never spans a `:` before the resource part. A pattern without any `:` (e.g. `*`) is matched
/// against the whole value; one with 2-5 parts is not an ARN and matches nothing.
pub fn arn_like(pattern: &Pattern, value: &str) -> bool {
    let pparts = pattern.splitn(6, ':');
    if pparts.len() == 1 {
        return pattern.matches(value, false);
    }
    if pparts.len() < 6 {
        return false;
    }
    let vparts: Vec<&str> = value.splitn(6, ':').collect();
    vparts.len() == 6 && pparts.iter().zip(vparts).all(|(p, v)| p.matches(v, false))
}

fn numeric(v: &str, p: &str, cmp: impl Fn(f64, f64) -> bool) -> bool {
    match (v.trim().parse::<f64>(), p.trim().parse::<f64>()) {
        (Ok(a), Ok(b)) => cmp(a, b),
        _ => false,
    }
}

fn date(v: &str, p: &str, cmp: impl Fn(i64, i64) -> bool) -> bool {
    match (parse_date(v), parse_date(p)) {
        (Some(a), Some(b)) => cmp(a, b),
        _ => false,
    }
}

/// Seconds since the epoch from an epoch number or ISO 8601 (`2024-05-01`,
/// `2024-05-01T12:00:00Z`, `2024-05-01T12:00:00.5+02:00`).
pub fn parse_date(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(epoch) = s.parse::<i64>() {
        return Some(epoch);
    }
    let num = |t: &str| -> Option<i64> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut d = date.split('-');
    let (y, m, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut secs = days_from_civil(y, m, day) * 86_400;
    if let Some(t) = time {
        let (clock, offset) = if let Some(c) = t.strip_suffix('Z') {
            (c, 0)
        } else if let Some(pos) = t.rfind(['+', '-']) {
            let (c, off) = t.split_at(pos);
            let sign = if off.starts_with('-') { -1 } else { 1 };
            let (oh, om) = off[1..].split_once(':').unwrap_or((&off[1..], "0"));
            (c, sign * (num(oh)? * 3600 + num(om)? * 60))
        } else {
            (t, 0)
        };
        let clock = clock.split('.').next()?;
        let mut parts = clock.split(':');
        let h = num(parts.next()?)?;
        let mi = parts.next().map(num).unwrap_or(Some(0))?;
        let se = parts.next().map(num).unwrap_or(Some(0))?;
        if h > 23 || mi > 59 || se > 60 {
            return None;
        }
        secs += h * 3600 + mi * 60 + se - offset;
    }
    Some(secs)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `10.0.0.0/8`, `2001:db8::/32` or a bare address.
fn parse_cidr(s: &str) -> Option<(IpAddr, u32)> {
    let (addr, len) = match s.trim().split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u32>().ok()?)),
        None => (s.trim(), None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((ip, len))
}

fn ip_in(v: &str, p: &str) -> bool {
    let (Ok(ip), Some((net, len))) = (v.trim().parse::<IpAddr>(), parse_cidr(p)) else {
        return false;
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_from_iso_8601_and_epoch_seconds() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-01-01T00:00:00Z"), Some(1_704_067_200));
        assert_eq!(parse_date("2024-01-01T02:00:00+02:00"), Some(1_704_067_200));
        assert_eq!(parse_date("2024-01-01T00:00:00.250Z"), Some(1_704_067_200));
        assert_eq!(parse_date("1704067200"), Some(1_704_067_200));
        assert_eq!(parse_date("yesterday"), None);
        assert_eq!(parse_date("2024-13-01"), None);
    }

    #[test]
    fn ip_ranges_contain_their_addresses() {
        assert!(ip_in("10.1.2.3", "10.0.0.0/8"));
        assert!(!ip_in("11.1.2.3", "10.0.0.0/8"));
        assert!(ip_in("203.0.113.7", "203.0.113.7"));
        assert!(ip_in("2001:db8::1", "2001:db8::/32"));
        assert!(!ip_in("2001:db9::1", "2001:db8::/32"));
        assert!(ip_in("1.2.3.4", "0.0.0.0/0"));
        assert!(!ip_in("10.0.0.1", "2001:db8::/32"));
    }

    #[test]
    fn arn_wildcards_do_not_cross_colons_before_the_resource_part() {
        let like = |p: &str, v: &str| arn_like(&Pattern::glob(p), v);
        assert!(like(
            "arn:aws:eks:*:*:cluster/c",
            "arn:aws:eks:us-west-2:1:cluster/c"
        ));
        assert!(!like(
            "arn:aws:eks:*:cluster/c",
            "arn:aws:eks:us-west-2:1:cluster/c"
        ));
        assert!(like(
            "arn:aws:logs:r:1:log-group:*",
            "arn:aws:logs:r:1:log-group:g:x"
        ));
        assert!(like("*", "arn:aws:eks:us-west-2:1:cluster/c"));
    }
}
