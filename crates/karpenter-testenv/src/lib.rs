//! Dev-only helpers for karpenter-rs integration tests (tiers 2 and 3 of the
//! design: a real control plane and an AWS emulator, both on loopback).
//!
//! This crate owns:
//! * [`KubeEnv`] / [`test_client`]: a `kube::Client` for the shared control
//!   plane started by `scripts/testenv up` (or `scripts/test-integration`);
//! * [`TestScope`]: per-test isolation (unique ids and names, a namespace, a
//!   scope label, cleanup of cluster-scoped objects);
//! * [`SimulatedNodes`]: Nodes without a kubelet, made Ready and kept alive by
//!   KWOK (started by `scripts/testenv up`), which also plays their pods; or,
//!   for tests that need one node's heartbeat to stop, by this crate's own
//!   lease renewal and pod agent ([`NodeAgent::Builtin`]);
//! * [`manifests`]: applying CRDs and creating YAML fixtures as dynamic objects;
//! * [`AwsEnv`]: aws-sdk-rust clients (EC2, SQS, SSM, IAM, EKS) for the moto
//!   emulator started by `scripts/moto up`, its reset and IAM switch;
//! * [`CallRecorder`]: an SDK interceptor that records the calls a client
//!   makes, for `karpenter_aws::iam::recorded::check` (every call inside the
//!   IAM contract and granted by the generated policy).
//!
//! It must not start or stop the environments itself (the scripts own their
//! processes), and nothing here is for production code: `publish = false`.
//!
//! Integration tests that need the environments are `#[ignore]`d with a
//! reason, so plain `cargo test --workspace` skips them;
//! `scripts/test-integration` runs them with `--include-ignored`.
//! See `testenv/README.md`.

pub mod aws;
pub mod aws_calls;
pub mod error;
mod http;
mod kube_env;
pub mod manifests;
pub mod nodes;
pub mod paths;
mod pod_agent;
mod scope;

pub use aws::{AwsEnv, MotoState};
pub use aws_calls::CallRecorder;
pub use error::{Error, Result};
pub use kube_env::{ALLOW_ANY_CLUSTER_ENV, CONTEXT, KubeEnv, test_client};
pub use nodes::{NodeAgent, NodeSpec, SimulatedNodes, SimulatedNodesConfig};
pub use scope::{SCOPE_LABEL, TestScope, dns_name};

/// Polls `check` every 200 ms until it returns `Ok(Some(value))`, an error,
/// or `timeout` passes.
pub async fn wait_for<T, F, Fut>(
    what: &str,
    timeout: std::time::Duration,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
