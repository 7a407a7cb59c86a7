//! Timeline mode: provisioning over virtual time.
//!
//! A virtual clock starts at 0 with every workload of the manifests created. Pending pods open a
//! provisioning batch that closes after 1 s without new pending pods or 10 s after it opened
//! (upstream's batch window); then the solver runs on the pending pods with every node in the
//! cluster, pods go to existing nodes or to new nodes launched with the cheapest offering, and
//! new nodes become ready [`NODE_STARTUP`] later. A pod's pending time runs from the moment it
//! became pending to the moment its node is ready. Nodes cost their price from launch until they
//! go away. Events ([`events`]) scale workloads, delete pods, interrupt spot nodes (their pods
//! are pending again and count as evictions) and add or change NodePools.
//!
//! # Disruption
//!
//! [`Runner::disruption_pass`] is called every [`DISRUPTION_INTERVAL`] of virtual time. It is
//! the hook for `karpenter_disruption::decide`: build a `Snapshot` from [`Runner::nodes`]
//! (NodePools with their disruption settings and budgets, nodes with their pods and prices),
//! call `decide(snapshot, now)`, then execute the command (launch replacements, move the pods,
//! remove the candidates, count evictions). That wiring is not done yet, so timelines run with
//! provisioning and interruptions only: nodes emptied by a scale-down keep running and keep
//! costing, which overstates the cost after scale-downs. The report says so.

pub mod events;
mod run;

pub use events::{Action, Event, Timeline, parse};
pub use run::{NODE_STARTUP, Percentiles, Runner, Sample, SimNode, TimelineReport, run};

use std::time::Duration;

/// Upstream's batch idle duration.
pub const BATCH_IDLE: Duration = Duration::from_secs(1);
/// Upstream's batch max duration.
pub const BATCH_MAX: Duration = Duration::from_secs(10);
/// How often the disruption hook runs (upstream polls disruption every 10 s).
pub const DISRUPTION_INTERVAL: Duration = Duration::from_secs(10);
