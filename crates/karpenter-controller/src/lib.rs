//! karpenter-controller: the controller's async shell, on kube-rs.
//!
//! # What this crate owns
//!
//! * [`controllers`]: the loops, one file each (provisioner, NodeClaim lifecycle, Node
//!   termination, disruption, garbage collection, NodePool status and gauges, NodeClaim
//!   disruption facts, interruption; on AWS the EC2NodeClass, tagging, launch-template and
//!   instance-type loops), each a [`reconcile::Reconciler`] executing what the pure crates
//!   decide, and [`controllers::run`], which starts them once this replica leads;
//! * [`reconcile`]: the one contract every loop follows and the one driver that runs them
//!   (dedupe per key, a concurrency bound, per-key backoff, debounce, `requeue_after`, the
//!   `controller_runtime_reconcile_*` metrics), and the [`reconcile::Context`] they share;
//! * [`cluster`]: the watches that feed the one shared, slimmed cluster-state index, and the one
//!   write path to the API server;
//! * [`report`]: events and metrics with upstream's names;
//! * the process around them: [`settings`] (every upstream flag and environment variable with
//!   its default), [`telemetry`] (JSON logs), [`http`] (`/healthz`, `/readyz`, `/metrics`),
//!   [`leader`] (leader election on a Lease, released on shutdown), [`client`] (the rate-limited
//!   client and the eviction client without retries), [`shutdown`] (signals) and [`run()`].
//!
//! # What it must not do
//!
//! Decide. Scheduling, disruption, lifecycle and termination rules live in the pure crates
//! (`karpenter-scheduling`, `karpenter-disruption`, `karpenter-lifecycle`, `karpenter-state`);
//! a loop's `scan` calls them and its `execute` performs the steps they return. AWS calls live
//! in `karpenter-aws-provider` and the simulated cloud in `karpenter-kwok-provider`; this crate
//! links no AWS SDK crate of its own.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let settings = karpenter_controller::Settings::from_process()?;
//! karpenter_controller::run(settings, karpenter_controller::controllers::run).await?;
//! # Ok(())
//! # }
//! ```

pub mod client;
pub mod cluster;
pub mod controllers;
pub mod explain;
pub mod http;
pub mod leader;
pub mod reconcile;
pub mod report;
mod run;
pub mod settings;
pub mod shutdown;
pub mod telemetry;

pub use client::{ClientError, Clients};
pub use http::{Metrics, Readiness};
pub use leader::{LeaderError, LeaderMetrics, LeaderState, Leadership, LeaseConfig, LeaseTimings};
pub use run::{
    BoundRuntime, ControllerContext, ControllerError, DRAIN_TIMEOUT, Leading, RunError, Runtime,
    run,
};
pub use settings::{Settings, SettingsError};
