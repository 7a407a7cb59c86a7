//! Times as reasons print them (always UTC).

use chrono::{DateTime, Utc};

/// `17:04:05 UTC`.
pub fn hms(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S UTC").to_string()
}

/// `17:00 UTC` when `t` falls on the same day as `now`, else `2026-11-24 17:00 UTC`.
pub fn hm_relative(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    if now.date_naive() == t.date_naive() {
        t.format("%H:%M UTC").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M UTC").to_string()
    }
}
