//! `karpenter controller` refuses what it cannot honour before it connects to anything: a
//! refused setting value, or a log output it cannot open, ends the process with code 2 and a
//! message naming the setting, with no cluster reachable.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use std::process::{Command, Output};

use common::{repo_root, stderr};

/// `karpenter controller` with `env`, pointed at a kubeconfig that does not exist.
fn controller(env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("controller")
        .current_dir(repo_root())
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("karpenter runs: {e}"))
}

#[test]
fn refused_settings_stop_the_controller_before_it_connects_listing_each() {
    let out = controller(&[
        ("ENABLE_PROFILING", "true"),
        ("AWS_FEATURE_GATES", "DRAEFA=true"),
    ]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("ENABLE_PROFILING=true (--enable-profiling): karpenter-rs serves no Go pprof endpoints; unset it"),
        "{text}"
    );
    assert!(
        text.contains(
            "DRAEFA=true in AWS_FEATURE_GATES (--aws-feature-gates): dynamic resource allocation"
        ),
        "{text}"
    );
    assert!(
        !text.contains("kubeconfig"),
        "it did not get as far as the client: {text}"
    );
}

#[test]
fn a_log_output_that_cannot_be_opened_stops_the_controller_naming_the_setting_and_the_path() {
    let out = controller(&[("LOG_OUTPUT_PATHS", "stdout,/nonexistent/karpenter.log")]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("LOG_OUTPUT_PATHS: cannot open the log file /nonexistent/karpenter.log: "),
        "{text}"
    );
    assert!(
        !text.contains("kubeconfig"),
        "it did not get as far as the client: {text}"
    );
}
