//! Integration tests against the real control plane and the AWS emulator.
//!
//! One test binary (target `testenv`) so that it links once and so that
//! `scripts/test-integration` can select it across the workspace
//! (`cargo test --workspace --test testenv`), reusing the dependency builds of
//! `cargo test --workspace`. Every test is `#[ignore]`d with the reason; the
//! script runs them with `--include-ignored`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

/// EC2NodeClasses are cluster-scoped and the EC2 provider's controller takes every one it
/// sees (a finalizer, status): tests that create EC2NodeClasses hold this shared, a test that
/// runs the EC2 provider holds it exclusively.
pub(crate) static NODE_CLASSES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

mod aws;
mod controller;
mod crd_differential;
mod crds;
mod kwok;
mod leader_election;
mod rbac;
mod scheduling;
