//! Batching of EC2 calls across NodeClaims, as values (upstream's `pkg/batcher`): which
//! requests share one call, how long a batcher gathers them, and how one combined answer is
//! split back among its callers. The async batcher that gathers, calls and replies is the
//! provider's (`karpenter_aws_provider::batcher`); it decides nothing this module does not.
//!
//! Three batchers, each with upstream's window ([`BatchOptions`]):
//!
//! - **`create_fleet`** ([`CREATE_FLEET`]): launches whose `CreateFleet` requests are equal in
//!   everything but the target capacity (always one per caller) become one request for as many
//!   instances as callers; each caller gets one instance of the answer and the answer's
//!   errors, a caller left without an instance gets the errors alone (or
//!   [`TOO_FEW_INSTANCES`] when the answer has none) ([`split_fleet`]).
//! - **`describe_instances`** ([`DESCRIBE_INSTANCES`]): the instances described by id (all
//!   with the same filter) become one call for every id; each caller gets the instance with
//!   its id; ids the answer lacks (or all, when the call failed) are described one by one,
//!   as upstream does: one unknown id fails EC2's whole call ([`split_by_id`]).
//! - **`terminate_instances`** ([`TERMINATE_INSTANCES`]): every termination becomes one call;
//!   each caller gets its instance's state change when it is shutting down or terminated
//!   ([`terminating`]); the others are terminated one by one, so one protected instance does
//!   not fail the rest.
//!
//! The metrics (`karpenter_cloudprovider_batcher_batch_time_seconds` and `_batch_size`, label
//! `batcher`) use [`SIZE_BUCKETS`] and the controller's duration buckets.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::launch::fleet::FleetError;

#[cfg(test)]
mod tests;

/// How a batcher gathers requests: a window opens with the first request and closes after
/// `idle` without another, after `max_wait` in all, or at `max_items` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// The `batcher` label of the metrics.
    pub name: &'static str,
    pub idle: Duration,
    pub max_wait: Duration,
    pub max_items: usize,
}

/// Upstream's `CreateFleet` batcher: 35 ms idle, 1 s at most, 1,000 launches.
pub const CREATE_FLEET: BatchOptions = BatchOptions {
    name: "create_fleet",
    idle: Duration::from_millis(35),
    max_wait: Duration::from_secs(1),
    max_items: 1_000,
};

/// Upstream's `DescribeInstances` batcher: 100 ms idle, 1 s at most, 500 ids.
pub const DESCRIBE_INSTANCES: BatchOptions = BatchOptions {
    name: "describe_instances",
    idle: Duration::from_millis(100),
    max_wait: Duration::from_secs(1),
    max_items: 500,
};

/// Upstream's `TerminateInstances` batcher: 100 ms idle, 1 s at most, 500 ids.
pub const TERMINATE_INSTANCES: BatchOptions = BatchOptions {
    name: "terminate_instances",
    idle: Duration::from_millis(100),
    max_wait: Duration::from_secs(1),
    max_items: 500,
};

/// Upstream's `SizeBuckets()`: the buckets of `karpenter_cloudprovider_batcher_batch_size`.
pub const SIZE_BUCKETS: [f64; 34] = [
    1.0, 2.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0,
    125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0, 400.0, 450.0, 500.0, 550.0,
    600.0, 700.0, 800.0, 900.0, 1000.0,
];

/// The requests of one window grouped by key, in order of arrival: each distinct key with the
/// positions of its requests. Requests with equal keys share one call.
pub fn group<K: PartialEq>(keys: impl IntoIterator<Item = K>) -> Vec<(K, Vec<usize>)> {
    let mut groups: Vec<(K, Vec<usize>)> = Vec::new();
    for (at, key) in keys.into_iter().enumerate() {
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, positions)) => positions.push(at),
            None => groups.push((key, vec![at])),
        }
    }
    groups
}

/// The error code a caller of a combined `CreateFleet` gets when the answer has fewer
/// instances than callers and no error of its own (upstream's).
pub const TOO_FEW_INSTANCES: &str = "too few instances returned";

/// One caller's part of a combined `CreateFleet` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetShare<T> {
    /// Its instance; `None` when the fleet launched fewer instances than it had callers.
    pub instance: Option<T>,
    /// The answer's errors (every caller sees them all, as upstream: the offerings they name
    /// are unavailable to each).
    pub errors: Vec<FleetError>,
}

/// A combined `CreateFleet` answer split among its callers.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSplit<T> {
    /// One per caller, in the callers' order.
    pub shares: Vec<FleetShare<T>>,
    /// Instances beyond one per caller (EC2 launched more than asked): nobody's; the garbage
    /// collector terminates them as leaked.
    pub surplus: Vec<T>,
}

/// Splits the `instances` and `errors` of a `CreateFleet` for `callers` instances (each
/// instance id of the answer one instance, in the answer's order): one instance per caller
/// while they last, the errors to everyone, and [`TOO_FEW_INSTANCES`] to those left without
/// an instance when the answer names no error.
pub fn split_fleet<T>(callers: usize, instances: Vec<T>, errors: &[FleetError]) -> FleetSplit<T> {
    let mut instances = instances.into_iter();
    let mut shares = Vec::with_capacity(callers);
    for _ in 0..callers {
        let instance = instances.next();
        let errors = if instance.is_none() && errors.is_empty() {
            vec![FleetError {
                code: TOO_FEW_INSTANCES.to_owned(),
                message: format!(
                    "CreateFleet launched fewer instances than the {callers} launches it was asked for"
                ),
                instance_type: None,
                zone: None,
            }]
        } else {
            errors.to_vec()
        };
        shares.push(FleetShare { instance, errors });
    }
    FleetSplit {
        shares,
        surplus: instances.collect(),
    }
}

/// For each id `asked`, the first of `found` with that id; and the ids asked that nothing was
/// found for (each once, in the order asked), to be asked again one by one.
pub fn split_by_id<T: Clone>(
    asked: &[String],
    found: &[(String, T)],
) -> (Vec<Option<T>>, Vec<String>) {
    let parts: Vec<Option<T>> = asked
        .iter()
        .map(|id| {
            found
                .iter()
                .find(|(found, _)| found == id)
                .map(|(_, t)| t.clone())
        })
        .collect();
    let mut seen = BTreeSet::new();
    let missing = asked
        .iter()
        .zip(&parts)
        .filter(|(_, part)| part.is_none())
        .filter(|(id, _)| seen.insert(id.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    (parts, missing)
}

/// The states a `TerminateInstances` answer reports for an instance whose termination took.
pub const TERMINATING_STATES: &[&str] = &["shutting-down", "terminated"];

/// The instance ids whose state change says their termination took, from a
/// `TerminateInstances` answer's `(instance id, current state)` pairs.
pub fn terminating(changes: &[(String, String)]) -> Vec<(String, ())> {
    changes
        .iter()
        .filter(|(_, state)| TERMINATING_STATES.contains(&state.as_str()))
        .map(|(id, _)| (id.clone(), ()))
        .collect()
}
