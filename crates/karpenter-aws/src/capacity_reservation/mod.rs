//! Capacity reservations (On-Demand Capacity Reservations and Capacity Blocks) an EC2NodeClass
//! selects, as upstream v1.15.1's `capacityreservation` provider and nodeclass reconciler read
//! them (gate `ReservedCapacity`, on by default):
//!
//! - [`queries`]: `spec.capacityReservationSelectorTerms` into `DescribeCapacityReservations`
//!   calls (an id term by `CapacityReservationIds`, a tag/owner/match-criteria term by
//!   filters; every call filtered on `state=active`);
//! - [`Described`] (what EC2 answered) into the status entry ([`status_of`]: `active`, or
//!   `expiring` for a Capacity Block within 40 minutes of its end), [`resolve`] for the whole
//!   answer (one entry per id, sorted, ended ones left out, unreadable ones reported);
//! - [`availability`]: the free-slot count per reservation between two answers;
//! - [`offerings`]: the reserved offerings of a class's instance types;
//! - [`expiration`]: the NodeClaims to delete before their Capacity Block ends;
//! - [`capacity_type`]: the labels to change on NodeClaims and Nodes whose instance fell back
//!   from its reservation to on-demand.
//!
//! Pure: the provider asks EC2 what these say to ask, and feeds the answers back.

pub mod availability;
pub mod capacity_type;
pub mod expiration;
pub mod offerings;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::v1::ec2nodeclass::{
    CapacityReservationSelectorTerm, CapacityReservationStatus, InstanceMatchCriteria,
};

use crate::nodeclass::selectors::Filter;

pub use availability::Availability;
pub use expiration::EXPIRATION_WINDOW;

/// How often the EC2NodeClass controller reads the reservations again (upstream's
/// `capacityReservationPollPeriod`), sooner when one ends before.
pub const POLL_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// One `DescribeCapacityReservations` call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `CapacityReservationIds` (an id term); empty for a filter query.
    pub ids: Vec<String>,
    /// `Filters`: always `state=active`, then the term's owner, tags and match criteria.
    pub filters: Vec<Filter>,
}

/// The calls for `terms`, in term order: a term with an id asks for it, a term with tags or
/// match criteria (and its owner) asks by filters, as upstream's `QueriesFromSelectorTerms`.
pub fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let active = || Filter::new("state", ["active"]);
    let mut out = Vec::new();
    for term in terms {
        if let Some(id) = term.id.as_ref().filter(|id| !id.is_empty()) {
            out.push(Query {
                ids: vec![id.clone()],
                filters: vec![active()],
            });
        }
        let tags = term.tags.as_ref().filter(|t| !t.is_empty());
        if tags.is_none() && term.instance_match_criteria.is_none() {
            continue;
        }
        let mut filters = vec![active()];
        if let Some(owner) = term.owner_id.as_ref().filter(|o| !o.is_empty()) {
            filters.push(Filter::new("owner-id", [owner.clone()]));
        }
        for (key, value) in tags.into_iter().flatten() {
            filters.push(if value == "*" {
                Filter::new("tag-key", [key.clone()])
            } else {
                Filter::new(format!("tag:{key}"), [value.clone()])
            });
        }
        if let Some(criteria) = term.instance_match_criteria {
            filters.push(Filter::new(
                "instance-match-criteria",
                [match criteria {
                    InstanceMatchCriteria::Open => "open",
                    InstanceMatchCriteria::Targeted => "targeted",
                }],
            ));
        }
        out.push(Query {
            ids: Vec::new(),
            filters,
        });
    }
    out
}

/// One reservation as `DescribeCapacityReservations` answers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Described {
    pub id: String,
    pub owner_id: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub available_instance_count: u32,
    /// `open` or `targeted` (another value is refused, as upstream).
    pub instance_match_criteria: String,
    /// `default` or `capacity-block` (EC2 answers nothing for the former in older accounts).
    pub reservation_type: Option<String>,
    pub interruptible: bool,
    pub end_date: Option<DateTime<Utc>>,
}

/// Why a described reservation is left out of the status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error("capacity reservation {id}: unsupported instance match criteria {criteria:?} from ec2")]
    MatchCriteria { id: String, criteria: String },
    #[error("capacity reservation {id}: unsupported reservation type {kind:?} from ec2")]
    ReservationType { id: String, kind: String },
}

/// The status entry of `reservation` at `now` (upstream's `CapacityReservationFromEC2`).
pub fn status_of(
    reservation: &Described,
    now: DateTime<Utc>,
) -> Result<CapacityReservationStatus, ReservationError> {
    if !matches!(
        reservation.instance_match_criteria.as_str(),
        "open" | "targeted"
    ) {
        return Err(ReservationError::MatchCriteria {
            id: reservation.id.clone(),
            criteria: reservation.instance_match_criteria.clone(),
        });
    }
    let kind = match reservation.reservation_type.as_deref() {
        None | Some("") | Some("default") => "default",
        Some("capacity-block") => "capacity-block",
        Some(other) => {
            return Err(ReservationError::ReservationType {
                id: reservation.id.clone(),
                kind: other.to_owned(),
            });
        }
    };
    let expiring =
        expiration::expiring_from(kind, reservation.end_date).is_some_and(|from| now >= from);
    Ok(CapacityReservationStatus {
        availability_zone: reservation.availability_zone.clone(),
        end_time: reservation.end_date.and_then(|end| {
            k8s_openapi::jiff::Timestamp::from_second(end.timestamp())
                .ok()
                .map(Time)
        }),
        id: reservation.id.clone(),
        instance_match_criteria: Some(reservation.instance_match_criteria.clone()),
        instance_type: reservation.instance_type.clone(),
        owner_id: reservation.owner_id.clone(),
        reservation_type: Some(kind.to_owned()),
        interruptible: Some(reservation.interruptible),
        state: Some(if expiring { "expiring" } else { "active" }.to_owned()),
    })
}

/// What the class's reservations resolved to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// Sorted by id, one per id; empty when none matched.
    pub reservations: Vec<CapacityReservationStatus>,
    /// Reservations EC2 described that cannot be used (logged, as upstream).
    pub errors: Vec<ReservationError>,
}

/// Every query's answers together: one entry per id, those ended at `now` left out (upstream's
/// `filterReservations`), sorted by id.
pub fn resolve(described: &[Described], now: DateTime<Utc>) -> Resolved {
    let mut seen = std::collections::BTreeMap::new();
    for reservation in described {
        if reservation.end_date.is_some_and(|end| end <= now) {
            continue;
        }
        seen.entry(reservation.id.clone()).or_insert(reservation);
    }
    let mut out = Resolved::default();
    for reservation in seen.values() {
        match status_of(reservation, now) {
            Ok(status) => out.reservations.push(status),
            Err(error) => out.errors.push(error),
        }
    }
    out
}

/// When to read the reservations again: [`POLL_PERIOD`], or sooner when one ends before
/// (immediately once an end has passed), as upstream's `requeueAfter`.
pub fn requeue_after(described: &[Described], now: DateTime<Utc>) -> std::time::Duration {
    let Some(next) = described.iter().filter_map(|r| r.end_date).min() else {
        return POLL_PERIOD;
    };
    match (next - now).to_std() {
        Ok(until) => until.min(POLL_PERIOD),
        Err(_) => std::time::Duration::ZERO,
    }
}

#[cfg(test)]
mod tests;
