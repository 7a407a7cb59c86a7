//! Go-style durations (`time.ParseDuration`): `10s`, `1m30s`, `1.5h`, `300ms`, `0`.
//!
//! Owns parsing and formatting only. Negative durations are refused: no
//! setting of the controller means anything with a negative duration.

use std::time::Duration;

/// Parses a Go duration string with the workspace's one parser
/// ([`karpenter_api::duration::parse_go_duration`]); the error says what is wrong and what is
/// allowed.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let allowed = "a Go duration such as 10s, 1m30s, 1.5h or 300ms (units ns, us, ms, s, m, h)";
    karpenter_api::duration::parse_go_duration(input.strip_prefix('+').unwrap_or(input))
        .map_err(|e| format!("{e}; expected {allowed}"))
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
