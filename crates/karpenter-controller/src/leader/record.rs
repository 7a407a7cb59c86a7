//! The leader-election rules, as a pure function of what the Lease says and
//! when we first saw it say that (client-go's `tryAcquireOrRenew` logic).
//!
//! Expiry is judged on the local monotonic clock from the moment the record
//! last changed, never by comparing the record's `renewTime` with our wall
//! clock: clocks of different nodes may disagree, monotonic durations do not.
//! No I/O here: the elector fetches and writes.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What to do with the Lease this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The Lease does not exist: create it holding it.
    Create,
    /// We hold it: write a fresh `renewTime`.
    Renew,
    /// Free, released or expired: take it over.
    Take,
    /// Someone else holds it and has renewed within its duration.
    Wait {
        /// The current holder.
        holder: String,
    },
}

/// Decides the step. `unchanged_for` is how long the record has been exactly
/// as it is now, on our monotonic clock (zero when it just changed).
pub fn step(identity: &str, current: Option<&LeaseSpec>, unchanged_for: Duration) -> Step {
    let Some(spec) = current else {
        return Step::Create;
    };
    match spec.holder_identity.as_deref() {
        None | Some("") => Step::Take,
        Some(holder) if holder == identity => Step::Renew,
        Some(holder) => {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            if unchanged_for >= duration {
                Step::Take
            } else {
                Step::Wait {
                    holder: holder.to_string(),
                }
            }
        }
    }
}

/// The record to write for `step` (not called for [`Step::Wait`]).
pub fn next_spec(
    identity: &str,
    current: Option<&LeaseSpec>,
    lease_duration: Duration,
    now: Timestamp,
) -> LeaseSpec {
    let now = MicroTime(now);
    let duration_seconds = i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX);
    let transitions = current.and_then(|s| s.lease_transitions).unwrap_or(0);
    let held_by_us = current.and_then(|s| s.holder_identity.as_deref()) == Some(identity);
    let (acquire_time, lease_transitions) = match current {
        Some(spec) if held_by_us => (spec.acquire_time.clone().or(Some(now.clone())), transitions),
        // A takeover of an existing Lease is a transition; creating one is not.
        Some(_) => (Some(now.clone()), transitions.saturating_add(1)),
        None => (Some(now.clone()), 0),
    };
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(duration_seconds),
        acquire_time,
        renew_time: Some(now),
        lease_transitions: Some(lease_transitions),
        ..LeaseSpec::default()
    }
}

/// The record that releases a Lease we hold: no holder, a 1 s duration
/// (client-go's release), the transition count kept.
pub fn released_spec(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    let now = MicroTime(now);
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: current.lease_transitions,
        ..LeaseSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: Option<&str>, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(3),
            acquire_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn the_step_follows_who_holds_the_lease_and_for_how_long_it_has_not_changed() {
        let secs = Duration::from_secs;
        let cases: &[(Option<LeaseSpec>, Duration, Step)] = &[
            (None, secs(0), Step::Create),
            (Some(held_by(Some("me"), 15)), secs(0), Step::Renew),
            (Some(held_by(Some("me"), 15)), secs(60), Step::Renew),
            (
                Some(held_by(Some("other"), 15)),
                secs(0),
                Step::Wait {
                    holder: "other".into(),
                },
            ),
            (
                Some(held_by(Some("other"), 15)),
                secs(14),
                Step::Wait {
                    holder: "other".into(),
                },
            ),
            (Some(held_by(Some("other"), 15)), secs(15), Step::Take),
            (Some(held_by(Some("other"), 1)), secs(1), Step::Take),
            (Some(held_by(Some(""), 15)), secs(0), Step::Take),
            (Some(held_by(None, 15)), secs(0), Step::Take),
            (Some(held_by(Some("other"), 0)), secs(0), Step::Take),
        ];
        for (spec, unchanged_for, expected) in cases {
            assert_eq!(
                &step("me", spec.as_ref(), *unchanged_for),
                expected,
                "{spec:?} unchanged for {unchanged_for:?}"
            );
        }
    }

    #[test]
    fn taking_over_counts_a_transition_and_restarts_the_acquire_time() {
        let now = Timestamp::from_second(1_000).expect("valid time");
        let next = next_spec(
            "me",
            Some(&held_by(Some("other"), 15)),
            Duration::from_secs(15),
            now,
        );
        assert_eq!(next.holder_identity.as_deref(), Some("me"));
        assert_eq!(next.lease_transitions, Some(4));
        assert_eq!(next.acquire_time, Some(MicroTime(now)));
        assert_eq!(next.renew_time, Some(MicroTime(now)));
        assert_eq!(next.lease_duration_seconds, Some(15));
    }

    #[test]
    fn renewing_keeps_the_acquire_time_and_the_transition_count() {
        let now = Timestamp::from_second(1_000).expect("valid time");
        let next = next_spec(
            "me",
            Some(&held_by(Some("me"), 15)),
            Duration::from_secs(15),
            now,
        );
        assert_eq!(next.lease_transitions, Some(3));
        assert_eq!(next.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(next.renew_time, Some(MicroTime(now)));
    }

    #[test]
    fn creating_starts_at_zero_transitions() {
        let now = Timestamp::from_second(1_000).expect("valid time");
        let next = next_spec("me", None, Duration::from_secs(15), now);
        assert_eq!(next.lease_transitions, Some(0));
        assert_eq!(next.holder_identity.as_deref(), Some("me"));
    }

    #[test]
    fn a_released_lease_has_no_holder_so_a_standby_takes_it_at_once() {
        let now = Timestamp::from_second(1_000).expect("valid time");
        let released = released_spec(&held_by(Some("me"), 15), now);
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, Some(3));
        assert_eq!(step("other", Some(&released), Duration::ZERO), Step::Take);
    }
}
