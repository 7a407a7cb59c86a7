//! Karpenter's disruption decisions, as pure functions of values.
//!
//! This crate owns *deciding* what to disrupt and why: disruption budgets, candidate eligibility
//! (node- and pod-level blocks), the eviction- and disruption-cost formulas, and the methods:
//! node repair (gate `NodeRepair`), emptiness, static drift, drift, multi- and single-node consolidation (with the Balanced policy), plus
//! validation of a command after its delay and the (forceful, budget-free) expiration list.
//! Every decision carries a [`Reason`]: a stable [`Code`] for events and metric labels, and a
//! sentence a human reads (`karpenter explain`, `simulate --timeline`).
//!
//! [`Queue`] is the orchestration queue as a step machine (validation delay, replacements,
//! deletion or abandonment), driven by the controller on the wall clock and by `simulate
//! --timeline` on a virtual one.
//!
//! The entry point is [`decide`]: a [`Snapshot`] and `now` in, a [`Decision`] out (commands,
//! and for every other node why it stays). Consolidation re-runs the scheduling solver
//! (`karpenter_scheduling::solve`) with the candidates removed to see where their pods go.
//!
//! It must not do I/O, read a clock, or link an async runtime, a Kubernetes client or an AWS SDK:
//! `now` and the cluster snapshot come in as values, and commands go out as values for the
//! controller (or the simulator) to execute.
//!
//! # Layout
//!
//! A pass, in the order it reads the files:
//!
//! - the input: [`snapshot`] (the cluster as values), `pool.rs` (NodePool settings), [`pdb`],
//!   [`pods`] (a pod's cost inputs and start time);
//! - who may go: `candidate.rs` (eligibility and the blocks a human reads, with
//!   `do_not_disrupt.rs` and the `cost.rs` formulas), `drift_detect.rs`, `consolidatable.rs`;
//! - how many may go: `budgets/` (one budget, its window, the per-NodePool allowances);
//! - what goes: [`decide`] runs the `methods/` in upstream order over the pass (`pass.rs`),
//!   which simulates rescheduling with the solver (`simulate.rs`); each decision a [`Command`]
//!   ([`command`]) or a [`Reason`] ([`reason`]);
//! - beside the passes: [`static_pool`] counts a static NodePool's nodes and says what its
//!   replica count asks for (launches, or removals in upstream's scale-down order; static drift
//!   reads the same counts); [`deletion_cost`] ranks the nodes for the ReplicaSet controller
//!   (`controller.kubernetes.io/pod-deletion-cost`, gate `PodDeletionCostManagement`) in the
//!   order consolidation would take them; `terminate_first.rs` says when a node whose
//!   replacement cannot be staged first (full reservations, a static pool at its node limit)
//!   goes first (gates `TerminateFirstDrift`, `TerminateFirstRepair`);
//! - beside the decision: [`removal`] simulates removing one named node (`explain consolidation
//!   --node`), with the same rules single-node consolidation applies;
//! - after the decision: [`validation`] re-checks a command after its delay and [`queue`]
//!   carries it through replacement and deletion; [`settle`] says when the pods a deletion
//!   moves have landed, for the next pass; [`pass_timing`] says when that pass runs (every
//!   10 s, or early once what it decides from has changed and stood still); `conditions.rs` is what the NodeClaims'
//!   `Drifted` and `Consolidatable` conditions should say.

pub(crate) mod budgets;
pub(crate) mod candidate;
pub mod command;
pub(crate) mod conditions;
pub(crate) mod consolidatable;
pub(crate) mod cost;
pub(crate) mod decide;
pub mod deletion_cost;
pub mod do_not_disrupt;
pub(crate) mod drift_detect;
/// The consolidation benchmark cluster; with the `test-support` feature.
#[cfg(feature = "test-support")]
pub mod fixtures;
pub(crate) mod methods;
pub(crate) mod pass;
pub mod pass_timing;
pub mod pdb;
pub mod pods;
pub(crate) mod pool;
pub mod queue;
pub mod reason;
pub mod reboot_history;
pub mod removal;
pub(crate) mod repair_settings;
pub(crate) mod scores;
pub mod settle;
pub(crate) mod simulate;
pub mod snapshot;
pub mod static_pool;
pub(crate) mod terminate_first;
#[cfg(test)]
mod testing;
pub(crate) mod time_fmt;
pub mod validation;

pub use budgets::{BudgetMap, PoolAllowance};
pub use command::{
    Command, CommandCandidate, Considered, Decision, Method, RepairCommand, TerminateFirst,
};
pub use conditions::{ClaimConditions, claim_conditions};
pub use consolidatable::consolidatable;
pub use decide::{PASS_INTERVAL, decide};
pub use drift_detect::drift as detect_drift;
pub use methods::balanced::{BalancedScore, ConsolidationMove};
pub use methods::expiration::{Expired, expired};
pub use methods::repair::{DO_NOT_REPAIR, RepairSettings, UnhealthyThreshold, unhealthy_counts};
pub use pdb::{Pdb, Pdbs};
pub use queue::{CommandId, Queue, Replacement, Step};
pub use reason::{Code, Lifts, Reason, Reasons};
pub use snapshot::{DriftMark, Features, NodeState, ObservedCondition, Snapshot};
pub use validation::{Rejection, validate};
