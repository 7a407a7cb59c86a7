//! The simulated cloud's knobs, from `KWOK_*` environment variables.

use std::time::Duration;

use karpenter_cloud::OfferingRef;

use crate::reservations::KwokReservation;

/// The annotation and label KWOK selects the Nodes it manages by.
pub const KWOK_NODE: &str = "kwok.x-k8s.io/node";

/// Knobs of the simulated cloud.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KwokOptions {
    /// Delay between a launch and its Node appearing.
    pub registration_delay: Duration,
    /// Offerings that always fail with insufficient capacity.
    pub insufficient_capacity: Vec<OfferingPattern>,
    /// `KWOK_REPAIR_TOLERATION`: replaces the toleration of every repair policy
    /// ([`crate::repair::policies`]).
    pub repair_toleration: Option<Duration>,
    /// `KWOK_CAPACITY_RESERVATIONS`: the simulated cloud's capacity reservations
    /// ([`crate::reservations`]).
    pub reservations: Vec<KwokReservation>,
}

/// `instance-type:zone:capacity-type`, `*` matching anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingPattern {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

impl OfferingPattern {
    pub(crate) fn matches(&self, offering: &OfferingRef) -> bool {
        let field = |pattern: &str, value: &str| pattern == "*" || pattern == value;
        field(&self.instance_type, &offering.instance_type)
            && field(&self.zone, &offering.zone)
            && field(&self.capacity_type, offering.capacity_type.as_str())
    }
}

/// A malformed `KWOK_*` setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KwokOptionsError {
    #[error("{name}={value:?}: {message} (a Go duration such as 0s, 5s, 1m)")]
    Delay {
        name: &'static str,
        value: String,
        message: String,
    },
    #[error(
        "KWOK_INSUFFICIENT_CAPACITY: {entry:?} is not instance-type:zone:capacity-type (use * for any)"
    )]
    Pattern { entry: String },
    #[error(
        "KWOK_CAPACITY_RESERVATIONS: {entry:?}: {message} (id=instance-type:zone:count[:capacity-block][:interruptible])"
    )]
    Reservation { entry: String, message: String },
}

impl KwokOptions {
    /// Reads `KWOK_REGISTRATION_DELAY`, `KWOK_REPAIR_TOLERATION`, `KWOK_INSUFFICIENT_CAPACITY`
    /// and `KWOK_CAPACITY_RESERVATIONS` from `env`.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<KwokOptions, KwokOptionsError> {
        let mut options = KwokOptions::default();
        if let Some(value) = env("KWOK_REGISTRATION_DELAY").filter(|v| !v.is_empty()) {
            options.registration_delay = karpenter_api::duration::parse_go_duration(&value)
                .map_err(|e| KwokOptionsError::Delay {
                    name: "KWOK_REGISTRATION_DELAY",
                    value: value.clone(),
                    message: e.to_string(),
                })?;
        }
        if let Some(value) = env("KWOK_REPAIR_TOLERATION").filter(|v| !v.is_empty()) {
            options.repair_toleration = Some(
                karpenter_api::duration::parse_go_duration(&value).map_err(|e| {
                    KwokOptionsError::Delay {
                        name: "KWOK_REPAIR_TOLERATION",
                        value: value.clone(),
                        message: e.to_string(),
                    }
                })?,
            );
        }
        if let Some(value) = env("KWOK_INSUFFICIENT_CAPACITY") {
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let parts: Vec<&str> = entry.split(':').collect();
                let [instance_type, zone, capacity_type] = parts.as_slice() else {
                    return Err(KwokOptionsError::Pattern {
                        entry: entry.to_owned(),
                    });
                };
                options.insufficient_capacity.push(OfferingPattern {
                    instance_type: (*instance_type).to_owned(),
                    zone: (*zone).to_owned(),
                    capacity_type: (*capacity_type).to_owned(),
                });
            }
        }
        if let Some(value) = env("KWOK_CAPACITY_RESERVATIONS") {
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let reservation = KwokReservation::parse(entry).map_err(|message| {
                    KwokOptionsError::Reservation {
                        entry: entry.to_owned(),
                        message,
                    }
                })?;
                if options.reservations.iter().any(|r| r.id == reservation.id) {
                    return Err(KwokOptionsError::Reservation {
                        entry: entry.to_owned(),
                        message: "a second reservation with this id".into(),
                    });
                }
                options.reservations.push(reservation);
            }
        }
        Ok(options)
    }
}
