//! Whether a NodePool's recent NodeClaims registered (upstream `state/nodepoolhealth`): the
//! last [`BUFFER`] outcomes per NodePool (by uid); a pool is unhealthy when at least half of
//! [`BUFFER`] of them failed, healthy when fewer did, unknown with none. A launch that failed
//! for good or a registration that timed out is a failure; a Node that registered, a success.
//! The `NodeRegistrationHealthy` condition ([`crate::nodepool_status`]) follows it.
//!
//! The outcomes live in memory: after a restart a pool's condition seeds it ([`Health::of`]).

use std::collections::{HashMap, VecDeque};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Outcomes kept per NodePool (upstream `BufferSize`).
pub const BUFFER: usize = 4;
/// Failures among the last [`BUFFER`] that make a pool unhealthy (upstream: 50% of 4).
pub const UNHEALTHY_AT: usize = BUFFER / 2;

/// What became of one NodeClaim of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its Node registered.
    Registered,
    /// It never became a node: its launch failed for good, or its registration timed out.
    /// `reason`/`message` are what the NodePool's condition says (upstream: the NodeClaim's
    /// `Launched` condition when the launch failed, else `RegistrationFailed`).
    Failed { reason: String, message: String },
}

impl Outcome {
    /// The failure of a NodeClaim whose registration timed out after it launched.
    pub fn registration_failed() -> Outcome {
        Outcome::Failed {
            reason: "RegistrationFailed".to_owned(),
            message: "Failed to register node".to_owned(),
        }
    }
}

/// A pool's registration health.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Health {
    /// Nothing recorded since the pool (or its class) last changed.
    #[default]
    Unknown,
    Healthy,
    /// With the reason and message of the latest failure.
    Unhealthy {
        reason: String,
        message: String,
    },
}

impl Health {
    /// What a `NodeRegistrationHealthy` condition says (after a restart): `Unknown` for none.
    pub fn of(condition: Option<&Condition>) -> Health {
        match condition {
            Some(c) if c.status == "True" => Health::Healthy,
            Some(c) if c.status == "False" => Health::Unhealthy {
                reason: c.reason.clone(),
                message: c.message.clone(),
            },
            _ => Health::Unknown,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Tracker {
    /// `true`: registered. Oldest first, at most [`BUFFER`].
    outcomes: VecDeque<bool>,
    last_failure: Option<(String, String)>,
}

impl Tracker {
    fn push(&mut self, registered: bool) {
        if self.outcomes.len() == BUFFER {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(registered);
    }

    fn health(&self) -> Health {
        if self.outcomes.is_empty() {
            return Health::Unknown;
        }
        let failed = self.outcomes.iter().filter(|ok| !**ok).count();
        if failed >= UNHEALTHY_AT {
            let (reason, message) = self.last_failure.clone().unwrap_or_else(|| {
                (
                    "RegistrationFailed".to_owned(),
                    "Failed to register node".to_owned(),
                )
            });
            Health::Unhealthy { reason, message }
        } else {
            Health::Healthy
        }
    }
}

/// Every NodePool's recent outcomes, by NodePool uid.
#[derive(Debug, Clone, Default)]
pub struct RegistrationHealth {
    pools: HashMap<String, Tracker>,
}

impl RegistrationHealth {
    /// Records what became of one NodeClaim of pool `uid`.
    pub fn record(&mut self, uid: &str, outcome: Outcome) {
        let tracker = self.pools.entry(uid.to_owned()).or_default();
        match outcome {
            Outcome::Registered => tracker.push(true),
            Outcome::Failed { reason, message } => {
                tracker.push(false);
                tracker.last_failure = Some((reason, message));
            }
        }
    }

    /// Pool `uid`'s health now.
    pub fn health(&self, uid: &str) -> Health {
        self.pools.get(uid).map(Tracker::health).unwrap_or_default()
    }

    /// Replaces pool `uid`'s outcomes by the fewest that give `health` (upstream `SetStatus`):
    /// none for `Unknown`, one success for `Healthy`, [`UNHEALTHY_AT`] failures for `Unhealthy`.
    pub fn set(&mut self, uid: &str, health: &Health) {
        let mut tracker = Tracker::default();
        match health {
            Health::Unknown => {}
            Health::Healthy => tracker.push(true),
            Health::Unhealthy { reason, message } => {
                for _ in 0..UNHEALTHY_AT {
                    tracker.push(false);
                }
                tracker.last_failure = Some((reason.clone(), message.clone()));
            }
        }
        self.pools.insert(uid.to_owned(), tracker);
    }

    /// Forgets pools not in `live` (deleted NodePools).
    pub fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.pools.retain(|uid, _| live(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(reason: &str) -> Outcome {
        Outcome::Failed {
            reason: reason.to_owned(),
            message: format!("{reason} happened"),
        }
    }

    #[test]
    fn a_pool_with_no_outcomes_is_unknown() {
        assert_eq!(RegistrationHealth::default().health("p"), Health::Unknown);
    }

    #[test]
    fn one_registration_makes_a_pool_healthy_and_two_failures_of_four_unhealthy() {
        let mut health = RegistrationHealth::default();
        health.record("p", Outcome::Registered);
        assert_eq!(health.health("p"), Health::Healthy);
        health.record("p", failed("InsufficientCapacity"));
        assert_eq!(health.health("p"), Health::Healthy, "1 failure of 2");
        health.record("p", Outcome::registration_failed());
        assert_eq!(
            health.health("p"),
            Health::Unhealthy {
                reason: "RegistrationFailed".to_owned(),
                message: "Failed to register node".to_owned()
            },
            "2 failures of 3: the latest one's reason"
        );
    }

    #[test]
    fn only_the_last_four_outcomes_count() {
        let mut health = RegistrationHealth::default();
        health.record("p", failed("A"));
        health.record("p", failed("B"));
        assert!(matches!(health.health("p"), Health::Unhealthy { .. }));
        health.record("p", Outcome::Registered);
        health.record("p", Outcome::Registered);
        assert!(
            matches!(health.health("p"), Health::Unhealthy { .. }),
            "2 of the last 4 still failed"
        );
        health.record("p", Outcome::Registered);
        assert_eq!(
            health.health("p"),
            Health::Healthy,
            "the first failure fell out"
        );
    }

    #[test]
    fn set_seeds_the_fewest_outcomes_that_give_the_health() {
        let mut health = RegistrationHealth::default();
        let unhealthy = Health::Unhealthy {
            reason: "R".to_owned(),
            message: "m".to_owned(),
        };
        health.set("p", &unhealthy);
        assert_eq!(health.health("p"), unhealthy);
        // Two successes after a seeded unhealthy pool: 2 of 4 failed, still unhealthy; a
        // third success tips it (upstream's buffer behaves the same).
        health.record("p", Outcome::Registered);
        health.record("p", Outcome::Registered);
        assert_eq!(health.health("p"), unhealthy);
        health.record("p", Outcome::Registered);
        assert_eq!(health.health("p"), Health::Healthy);
        health.set("p", &Health::Unknown);
        assert_eq!(health.health("p"), Health::Unknown);
        health.set("q", &Health::Healthy);
        health.retain(|uid| uid == "p");
        assert_eq!(health.health("q"), Health::Unknown);
    }

    fn empty_condition() -> Condition {
        Condition {
            type_: String::new(),
            status: String::new(),
            reason: String::new(),
            message: String::new(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    #[test]
    fn a_condition_reads_back_as_the_health_it_reports() {
        let mut c = empty_condition();
        c.status = "False".to_owned();
        c.reason = "RegistrationFailed".to_owned();
        assert!(
            matches!(Health::of(Some(&c)), Health::Unhealthy { reason, .. } if reason == "RegistrationFailed")
        );
        c.status = "True".to_owned();
        assert_eq!(Health::of(Some(&c)), Health::Healthy);
        c.status = "Unknown".to_owned();
        assert_eq!(Health::of(Some(&c)), Health::Unknown);
        assert_eq!(Health::of(None), Health::Unknown);
    }
}
