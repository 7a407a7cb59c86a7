//! When things happened: Kubernetes timestamps as `chrono` times, and when an event was last
//! seen (the listing keeps the newest events by it; the view shows their ages by it).

use chrono::{DateTime, Utc};
use k8s_openapi::api::events::v1::Event;

/// A Kubernetes timestamp as a `chrono` time.
fn time(t: &k8s_openapi::jiff::Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(
        t.as_second(),
        u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    )
}

/// When `event` was last seen: its series' last observation, else its time, else its
/// deprecated last timestamp, else its creation.
pub fn last_seen(event: &Event) -> Option<DateTime<Utc>> {
    event
        .series
        .as_ref()
        .map(|s| &s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| &t.0))
        .or(event.deprecated_last_timestamp.as_ref().map(|t| &t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| &t.0))
        .and_then(time)
}
