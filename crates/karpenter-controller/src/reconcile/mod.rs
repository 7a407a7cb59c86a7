//! The reconciler contract every controller loop follows, and the plumbing that carries it
//! out once for all of them.
//!
//! A loop is a [`Reconciler`]: `scan(&Cluster, now) -> Scan<Step>` reads the shared index and
//! says what to do (pure, table-tested), `execute(Step)` does one thing against the API
//! server or the cloud with the loop's [`Context`], and `error_policy(&Error) -> Retry` says
//! what a failure means. [`driver::run`] owns the rest: gating on a synced index, debounce,
//! resync and `requeue_after`, one step per key in flight, a concurrency bound, per-key
//! exponential backoff, the `controller_runtime_reconcile_*` metrics and a graceful stop.
//! [`driver`]'s docs list the guarantees and why kube-runtime's `Controller` is not used.

pub mod backoff;
pub mod catalogs;
pub mod cloud;
pub mod context;
pub mod driver;

pub use cloud::MeteredCloud;
pub use context::Context;
pub use driver::{Action, Busy, Reconciler, Retry, Scan, Shape, run};
