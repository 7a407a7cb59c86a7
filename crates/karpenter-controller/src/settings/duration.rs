//! Go-style durations (`time.ParseDuration`): `10s`, `1m30s`, `1.5h`, `300ms`, `0`.
//!
//! Owns parsing and formatting only. Negative durations are refused: no
//! setting of the controller means anything with a negative duration.

use std::time::Duration;

/// Units accepted by Go's `time.ParseDuration`, in nanoseconds.
/// Longer spellings first so that `ms` is not read as `m` + `s`.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration string. The error says what is wrong and what is allowed.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let allowed = "a Go duration such as 10s, 1m30s, 1.5h or 300ms (units ns, us, ms, s, m, h)";
    let text = input.strip_prefix('+').unwrap_or(input);
    if text.starts_with('-') {
        return Err(format!(
            "a negative duration is not allowed; expected {allowed}"
        ));
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(format!("empty; expected {allowed}"));
    }
    let mut rest = text;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(format!("{input:?} is not {allowed}"));
        }
        let Some(&(unit, scale)) = UNITS.iter().find(|(unit, _)| after.starts_with(unit)) else {
            return Err(format!(
                "{input:?} has a missing or unknown unit; expected {allowed}"
            ));
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole
                .parse()
                .map_err(|_| format!("{input:?} is out of range"))?
        };
        let mut nanos = whole
            .checked_mul(scale)
            .ok_or_else(|| format!("{input:?} is out of range"))?;
        // Fractions: keep at most the digits that can still matter at nanosecond scale.
        let mut divisor: u128 = 1;
        let mut fraction_value: u128 = 0;
        for digit in fraction.chars().take(20) {
            let d = u128::from(digit.to_digit(10).unwrap_or(0));
            fraction_value = fraction_value * 10 + d;
            divisor *= 10;
        }
        nanos += fraction_value * scale / divisor;
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| format!("{input:?} is out of range"))?;
        rest = &after[unit.len()..];
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000)
        .map_err(|_| format!("{input:?} is out of range"))?;
    let sub = u32::try_from(total_nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, sub))
}

/// Formats a duration the way Go prints it for whole units (`10s`, `1m30s`, `15m0s`, `500ms`).
pub fn format_go_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_string();
    }
    if duration < Duration::from_secs(1) {
        let nanos = duration.subsec_nanos();
        return if nanos.is_multiple_of(1_000_000) {
            format!("{}ms", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1_000) {
            format!("{}µs", nanos / 1_000)
        } else {
            format!("{nanos}ns")
        };
    }
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, (total % 3600) / 60, total % 60);
    let fraction = match duration.subsec_nanos() {
        0 => String::new(),
        nanos => format!(".{nanos:09}").trim_end_matches('0').to_string(),
    };
    match (hours, minutes) {
        (0, 0) => format!("{seconds}{fraction}s"),
        (0, m) => format!("{m}m{seconds}{fraction}s"),
        (h, m) => format!("{h}h{m}m{seconds}{fraction}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_time_parse_duration() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("+10s", Duration::from_secs(10)),
            ("1m30s", Duration::from_secs(90)),
            ("15m", Duration::from_secs(900)),
            ("1h", Duration::from_secs(3600)),
            ("1.5h", Duration::from_secs(5400)),
            ("300ms", Duration::from_millis(300)),
            (".5s", Duration::from_millis(500)),
            ("1h2m3s4ms", Duration::from_millis(3_723_004)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("0s", Duration::ZERO),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_go_duration(input).as_ref(), Ok(expected), "{input}");
        }
    }

    #[test]
    fn malformed_or_negative_durations_are_refused_with_the_expected_form() {
        for input in ["", "10", "s", "1x", "1..5s", "-1s", "1s2", "abc", "1 s"] {
            let err = parse_go_duration(input).expect_err(input);
            assert!(err.contains("Go duration"), "{input}: {err}");
        }
    }

    #[test]
    fn durations_format_back_in_go_notation() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(900), "15m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(300), "300ms"),
        ];
        for (duration, expected) in cases {
            assert_eq!(format_go_duration(*duration), *expected);
            assert_eq!(parse_go_duration(expected).as_ref(), Ok(duration));
        }
    }
}
