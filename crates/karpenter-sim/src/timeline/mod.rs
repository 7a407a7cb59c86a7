//! Timeline mode: provisioning over virtual time.
//!
//! A virtual clock starts at 0 with every workload of the manifests created. Pending pods open a
//! provisioning batch that closes after 1 s without new pending pods or 10 s after it opened
//! (upstream's batch window: the controller's own [`karpenter_lifecycle::Batcher`]); then the solver runs on the pending pods with every node in the
//! cluster, pods go to existing nodes or to new nodes launched with the cheapest offering, and
//! new nodes become ready [`NODE_STARTUP`] later. A pod's pending time runs from the moment it
//! became pending to the moment its node is ready. Pods a batch leaves pending are retried as
//! the controller retries them: a new batch opens at once when that batch placed something,
//! and otherwise once the cluster changes (a launch, a removal, deleted pods, a NodePool
//! change); the launched nodes count their real size against the NodePools' limits
//! ([`crate::batches`]). Nodes cost their price from launch until they
//! go away. Events ([`events`]) scale workloads, delete pods, interrupt spot nodes (their pods
//! are pending again and count as evictions) and add or change NodePools.
//!
//! # The cluster
//!
//! Nodes, NodeClaims and bound pods live in the cluster-state index
//! ([`karpenter_state::Cluster`]), fed as the API server feeds the controller's (`cluster.rs`):
//! readiness, last pod events, nominations and disruption marks are read back from it, and the
//! solver's and disruption's node shapes come from it. The runner keeps only the virtual world's
//! bookkeeping: the clock, the events, the pending pods with their pending-since time, and each
//! node's price and launch and ready times.
//!
//! # Disruption
//!
//! Every [`karpenter_disruption::PASS_INTERVAL`] of virtual time (while the cluster has changed recently) the
//! runner builds a `karpenter_disruption::Snapshot` of the simulated cluster and calls
//! `karpenter_disruption::decide`; commands execute as upstream's do: candidates tainted (no new
//! pods), replacements launched, and once those are ready the candidates deleted, their pods
//! pending again (counted as evictions) and provisioned in the next batch. The simplifications
//! are listed in `disruption.rs`.

pub(crate) mod cluster;
mod disruption;
pub mod events;
mod run;

pub use events::{Action, Event, Timeline, parse};
pub use run::{NODE_STARTUP, Percentiles, Runner, Sample, TimelineReport, check_total_pods, run};
