//! karpenter-controller: the kube-rs I/O shell of the controller.
//!
//! This crate owns the operational side of the running controller:
//! * [`settings`]: every upstream flag/env (`METRICS_PORT`, `FEATURE_GATES`, ...)
//!   with upstream's defaults, typed and validated;
//! * [`telemetry`]: JSON logs on stdout at `LOG_LEVEL`;
//! * [`http`]: `/healthz`, `/readyz` and `/metrics` (prometheus-client registry
//!   with `karpenter_build_info`);
//! * [`leader`]: leader election on a Lease (client-go semantics, released on shutdown);
//! * [`client`]: the Kubernetes clients (rate-limited main client; eviction client without retries);
//! * [`shutdown`]: SIGTERM/SIGINT -> a cancellation token;
//! * [`run()`]: the entry point that ties them together and runs the caller's
//!   controllers only while leading.
//!
//! * [`controllers`]: the controllers themselves (watches into the cluster-state index,
//!   provisioner, NodeClaim lifecycle, NodePool counter), executing the pure crates' decisions;
//! * [`cloud`]: the simulated (KWOK) cloud provider.
//!
//! It must not make decisions: scheduling, disruption and lifecycle rules
//! live in the pure crates (`karpenter-scheduling`, `karpenter-disruption`) and
//! are plugged in as the controller future given to [`run()`]. Anything here
//! that talks to the API server does so only to keep the process itself
//! running (the Lease).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let settings = karpenter_controller::Settings::from_process()?;
//! karpenter_controller::run(settings, |ctx| async move {
//!     // start informers and reconcilers with ctx.clients; return when ctx.cancel trips
//!     ctx.cancel.cancelled().await;
//!     Ok(())
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```

pub mod client;
pub mod cloud;
pub mod controllers;
pub mod http;
pub mod leader;
pub mod reconcile;
mod run;
pub mod settings;
pub mod shutdown;
pub mod telemetry;

pub use client::{ClientError, Clients};
pub use http::{Metrics, Readiness};
pub use leader::{LeaderError, LeaderState, Leadership, LeaseConfig, LeaseTimings};
pub use run::{
    BoundRuntime, ControllerContext, ControllerError, DRAIN_TIMEOUT, Leading, RunError, Runtime,
    run,
};
pub use settings::{Settings, SettingsError};
