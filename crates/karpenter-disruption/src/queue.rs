//! The orchestration queue (upstream `queue.go`) as a pure step machine: what happens to a
//! command between [`crate::decide`] and the deletion of its candidates.
//!
//! - A graceful command (emptiness, consolidation) is held for [`VALIDATION_DELAY`], then
//!   validated again against the cluster as it is then ([`crate::validate`]); drift (and repair) starts at
//!   once.
//! - Starting a command taints its candidates and launches its replacements
//!   ([`Step::Start`]); a command without replacements deletes its candidates at once
//!   ([`Step::Delete`]).
//! - Once every replacement is ready the candidates are deleted ([`Step::Delete`]); a
//!   replacement that is gone, or not ready within the timeout, abandons the command and
//!   untaints the candidates ([`Step::Abandon`]).
//!
//! The queue reads no clock: callers pass `now`, and ask [`Queue::next_validation`] when to
//! come back. The controller drives it on the wall clock against the API server; `simulate
//! --timeline` drives the same code on its virtual clock. The caller executes each [`Step`] and
//! reports back the replacements it launched ([`Queue::launched`]).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::command::{Command, Method};
use crate::reason::{Code, Reason};
use crate::snapshot::Snapshot;
use crate::validation::{Rejection, validate_all};

/// How long a graceful command waits before it is validated again (upstream
/// `commandValidationDelay`).
pub const VALIDATION_DELAY: Duration = Duration::from_secs(15);

/// The shortest time replacements get to become ready (upstream: 80 ms per queued command,
/// clamped to 10 min ..= 1 h).
pub const MIN_REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(3600);
const TIMEOUT_PER_COMMAND: Duration = Duration::from_millis(80);

/// Identifies a started command until it is deleted or abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId(pub u64);

/// What the caller does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Wait: the candidates are held (queued) until the command is validated at `until`.
    Hold { until: DateTime<Utc> },
    /// Taint the candidates `karpenter.sh/disrupted:NoSchedule`, launch the replacements and
    /// report them with [`Queue::launched`].
    Start { id: CommandId, command: Command },
    /// Delete the candidates (their replacements are ready, or none were needed).
    Delete { command: Command },
    /// Untaint the candidates: the command failed and the nodes stay.
    Abandon { command: Command, reason: String },
    /// The command no longer holds; nothing was done to its candidates.
    Drop {
        command: Command,
        rejection: Rejection,
    },
}

/// What became of one replacement, as the caller observes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// Launched, not ready (initialized) yet.
    Pending,
    Ready,
    /// Deleted, failed to launch, or its instance went away.
    Gone,
}

#[derive(Debug, Clone)]
struct Held {
    due: DateTime<Utc>,
    command: Command,
}

/// A started command waiting for its replacements.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub id: CommandId,
    pub command: Command,
    /// Names of the replacements launched (NodeClaims, or nodes in the simulator).
    pub replacements: Vec<String>,
    pub started: DateTime<Utc>,
}

/// Commands between decision and completion.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    held: Vec<Held>,
    in_flight: Vec<InFlight>,
    next_id: u64,
}

impl Queue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a command from a disruption pass: drift starts now, graceful methods are held
    /// for validation. A command with a candidate already in the queue is dropped (upstream
    /// refuses to start it).
    pub fn submit(&mut self, command: Command, now: DateTime<Utc>) -> Step {
        if let Some(node) = command.candidates.iter().find(|c| self.is_queued(&c.node)) {
            let rejection = Rejection::Churn(Reason::new(
                Code::Queued,
                format!("{} is already being disrupted", node.node),
            ));
            return Step::Drop { command, rejection };
        }
        if matches!(
            command.method,
            Method::Drift | Method::StaticDrift | Method::Repair
        ) {
            return self.start(command, now);
        }
        let until = now + chrono::Duration::from_std(VALIDATION_DELAY).unwrap_or_default();
        self.held.push(Held {
            due: until,
            command,
        });
        Step::Hold { until }
    }

    /// Whether a disruption pass may decide now: not while a command waits for validation
    /// (upstream validates inside its pass, so it never decides around a held command, whose
    /// candidates' fate is still open; a command decided then would mostly be dropped at
    /// validation). Started commands do not hold passes back.
    pub fn may_decide(&self) -> bool {
        self.held.is_empty()
    }

    /// When the next held command is due for validation.
    pub fn next_validation(&self) -> Option<DateTime<Utc>> {
        self.held.iter().map(|h| h.due).min()
    }

    /// Takes every held command due at `now` out of the queue, in the order they were
    /// submitted (their candidates are no longer queued), for [`Queue::validate`] against a
    /// snapshot taken after this call.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Vec<Command> {
        let (due, held) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.due <= now);
        self.held = held;
        due.into_iter().map(|h: Held| h.command).collect()
    }

    /// Validates the commands taken with [`Queue::take_due`] together against `snapshot`
    /// ([`crate::validation::validate_all`]: in order, sharing budgets, each consolidation
    /// that holds taken into the next one's re-simulation) and starts each that holds, or
    /// drops it with the rejection.
    pub fn validate(
        &mut self,
        commands: Vec<Command>,
        snapshot: &Snapshot,
        now: DateTime<Utc>,
    ) -> Vec<Step> {
        let verdicts = validate_all(&commands, snapshot, now);
        commands
            .into_iter()
            .zip(verdicts)
            .map(|(command, verdict)| match verdict {
                Ok(validated) => self.start(validated, now),
                Err(rejection) => Step::Drop { command, rejection },
            })
            .collect()
    }

    fn start(&mut self, command: Command, now: DateTime<Utc>) -> Step {
        if command.replacements.is_empty() {
            return Step::Delete { command };
        }
        self.next_id += 1;
        let id = CommandId(self.next_id);
        self.in_flight.push(InFlight {
            id,
            command: command.clone(),
            replacements: Vec::new(),
            started: now,
        });
        Step::Start { id, command }
    }

    /// Records the replacements the caller launched for a started command. Launching none of
    /// them (every launch failed) abandons it at the next [`Queue::poll`].
    pub fn launched(&mut self, id: CommandId, replacements: Vec<String>) {
        if let Some(flight) = self.in_flight.iter_mut().find(|f| f.id == id) {
            flight.replacements = replacements;
        }
    }

    /// Decides the started commands whose replacements are all resolved: ready -> delete the
    /// candidates; one gone, none launched, or not ready within the timeout -> abandon.
    /// Commands still waiting stay, in order.
    pub fn poll(
        &mut self,
        now: DateTime<Utc>,
        mut replacement: impl FnMut(&str) -> Replacement,
    ) -> Vec<Step> {
        let timeout = self.timeout();
        let mut steps = Vec::new();
        let mut waiting = Vec::new();
        for flight in std::mem::take(&mut self.in_flight) {
            let states: Vec<(&str, Replacement)> = flight
                .replacements
                .iter()
                .map(|r| (r.as_str(), replacement(r)))
                .collect();
            let gone: Vec<&str> = states
                .iter()
                .filter(|(_, s)| *s == Replacement::Gone)
                .map(|(name, _)| *name)
                .collect();
            let pending = states.iter().any(|(_, s)| *s == Replacement::Pending);
            let waited = (now - flight.started).to_std().unwrap_or_default();
            let reason = if flight.replacements.is_empty() {
                Some("no replacement could be launched".to_owned())
            } else if !gone.is_empty() {
                Some(format!("replacement {} is gone", gone.join(", ")))
            } else if pending && waited >= timeout {
                Some(format!(
                    "replacements not ready after {}s",
                    timeout.as_secs()
                ))
            } else {
                None
            };
            match reason {
                Some(reason) => steps.push(Step::Abandon {
                    command: flight.command,
                    reason,
                }),
                None if pending => waiting.push(flight),
                None => steps.push(Step::Delete {
                    command: flight.command,
                }),
            }
        }
        self.in_flight = waiting;
        steps
    }

    fn timeout(&self) -> Duration {
        let count = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
        (TIMEOUT_PER_COMMAND * count).clamp(MIN_REPLACEMENT_TIMEOUT, MAX_REPLACEMENT_TIMEOUT)
    }

    /// Commands started and waiting for their replacements.
    pub fn in_flight(&self) -> &[InFlight] {
        &self.in_flight
    }

    /// True when the node is a candidate of a held or started command.
    pub fn is_queued(&self, node: &str) -> bool {
        self.held
            .iter()
            .map(|h| &h.command)
            .chain(self.in_flight.iter().map(|f| &f.command))
            .any(|c| c.candidates.iter().any(|c| c.node == node))
    }

    /// Candidates of held commands (waiting for validation).
    pub fn held_nodes(&self) -> BTreeSet<&str> {
        self.held
            .iter()
            .flat_map(|h| h.command.candidates.iter().map(|c| c.node.as_str()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::CommandCandidate;
    use chrono::TimeZone;
    use karpenter_scheduling::{NewNodeClaim, ResourceList};

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0)
            .single()
            .unwrap_or_default()
    }

    fn replacement() -> NewNodeClaim {
        NewNodeClaim {
            node_pool: "general".into(),
            requirements: Vec::new(),
            instance_type_min_values: None,
            instance_type_options: Vec::new(),
            requests: ResourceList::new(),
            pods: Vec::new(),
            min_values_relaxed: false,
            labels: Default::default(),
        }
    }

    fn command(method: Method, nodes: &[&str], replacements: usize) -> Command {
        Command {
            method,
            reason: method.reason(),
            candidates: nodes
                .iter()
                .map(|n| CommandCandidate {
                    node: (*n).into(),
                    node_claim: (*n).into(),
                    node_pool: "general".into(),
                    instance_type: "m5.large".into(),
                    capacity_type: "on-demand".into(),
                    zone: "us-east-1a".into(),
                    price: 0.096,
                    pods: 0,
                })
                .collect(),
            replacements: (0..replacements).map(|_| replacement()).collect(),
            savings_per_hour: 0.0,
            explanation: "test".into(),
            balanced: Vec::new(),
            repair: None,
            terminate_first: None,
        }
    }

    #[test]
    fn drift_starts_at_once_and_consolidation_is_held_for_validation() {
        let mut queue = Queue::new();
        let step = queue.submit(command(Method::Drift, &["a"], 1), at(0));
        assert!(matches!(step, Step::Start { .. }), "{step:?}");
        let step = queue.submit(command(Method::SingleNodeConsolidation, &["b"], 1), at(0));
        assert_eq!(step, Step::Hold { until: at(15) });
        assert!(!queue.may_decide(), "a held command holds passes back");
        assert_eq!(queue.next_validation(), Some(at(15)));
        assert!(queue.is_queued("b"));
        assert_eq!(queue.held_nodes(), BTreeSet::from(["b"]));
        queue.submit(command(Method::SingleNodeConsolidation, &["c"], 0), at(2));
        assert!(queue.take_due(at(14)).is_empty());
        let due = queue.take_due(at(15));
        let names: Vec<String> = due.iter().map(|c| c.candidate_names().join(",")).collect();
        assert_eq!(names, ["b"], "only what is due");
        assert_eq!(queue.held_nodes(), BTreeSet::from(["c"]));
        let due = queue.take_due(at(17));
        let names: Vec<String> = due.iter().map(|c| c.candidate_names().join(",")).collect();
        assert_eq!(names, ["c"]);
        assert!(
            !queue.is_queued("b"),
            "popped commands no longer hold their nodes"
        );
        assert!(queue.may_decide(), "nothing held: a pass may decide");
    }

    #[test]
    fn a_command_without_replacements_deletes_its_candidates_at_once() {
        let mut queue = Queue::new();
        let step = queue.submit(command(Method::Drift, &["a"], 0), at(0));
        assert!(matches!(step, Step::Delete { .. }), "{step:?}");
        assert!(queue.is_empty());
    }

    #[test]
    fn a_command_whose_candidate_is_already_queued_is_dropped() {
        let mut queue = Queue::new();
        queue.submit(command(Method::Emptiness, &["a"], 0), at(0));
        let step = queue.submit(command(Method::Drift, &["a", "b"], 1), at(1));
        assert!(
            matches!(&step, Step::Drop { rejection: Rejection::Churn(why), .. } if why.code == Code::Queued && why.text.contains("a is already")),
            "{step:?}"
        );
    }

    #[test]
    fn candidates_are_deleted_once_every_replacement_is_ready() {
        let mut queue = Queue::new();
        let Step::Start { id, .. } = queue.submit(command(Method::Drift, &["a"], 2), at(0)) else {
            panic!("drift starts");
        };
        queue.launched(id, vec!["r1".into(), "r2".into()]);
        let ready_r1 = |name: &str| {
            if name == "r1" {
                Replacement::Ready
            } else {
                Replacement::Pending
            }
        };
        assert!(queue.poll(at(30), ready_r1).is_empty());
        assert_eq!(queue.in_flight().len(), 1);
        let steps = queue.poll(at(60), |_| Replacement::Ready);
        assert!(
            matches!(steps.as_slice(), [Step::Delete { .. }]),
            "{steps:?}"
        );
        assert!(queue.is_empty());
    }

    #[test]
    fn a_gone_replacement_abandons_the_command_and_names_it() {
        let mut queue = Queue::new();
        let Step::Start { id, .. } = queue.submit(command(Method::Drift, &["a"], 2), at(0)) else {
            panic!("drift starts");
        };
        queue.launched(id, vec!["r1".into(), "r2".into()]);
        let steps = queue.poll(at(5), |name| {
            if name == "r2" {
                Replacement::Gone
            } else {
                Replacement::Pending
            }
        });
        assert!(
            matches!(steps.as_slice(), [Step::Abandon { reason, .. }] if reason == "replacement r2 is gone"),
            "{steps:?}"
        );
        assert!(!queue.is_queued("a"));
    }

    #[test]
    fn replacements_not_ready_within_ten_minutes_abandon_the_command() {
        let mut queue = Queue::new();
        let Step::Start { id, .. } = queue.submit(command(Method::Drift, &["a"], 1), at(0)) else {
            panic!("drift starts");
        };
        queue.launched(id, vec!["r1".into()]);
        assert!(queue.poll(at(599), |_| Replacement::Pending).is_empty());
        let steps = queue.poll(at(600), |_| Replacement::Pending);
        assert!(
            matches!(steps.as_slice(), [Step::Abandon { reason, .. }] if reason.contains("not ready after 600s")),
            "{steps:?}"
        );
    }

    #[test]
    fn a_started_command_that_launched_nothing_is_abandoned() {
        let mut queue = Queue::new();
        let Step::Start { id, .. } = queue.submit(command(Method::Drift, &["a"], 1), at(0)) else {
            panic!("drift starts");
        };
        queue.launched(id, Vec::new());
        let steps = queue.poll(at(1), |_| Replacement::Ready);
        assert!(
            matches!(steps.as_slice(), [Step::Abandon { reason, .. }] if reason.contains("no replacement")),
            "{steps:?}"
        );
    }
}
