//! Every subcommand's `--help` succeeds and speaks to users: found by walking the command tree
//! that `karpenter --help` prints, so a new subcommand is covered without touching this file.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use common::{karpenter, stdout};

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line starts two spaces in; deeper lines continue a wrapped description.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// What a reader of the code would see, not a user: rustdoc links, internal type names.
fn reads_like_code(line: &str) -> bool {
    line.contains("[`") || line.contains("Construct with") || line.contains("::")
}

/// `karpenter PATH... --help`: exits 0 with a help text whose first line is for users.
fn help_of(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let out = karpenter(&args, None);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "`karpenter {}` exited {:?}: {}{}",
        args.join(" "),
        out.status.code(),
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    let first = text.lines().next().unwrap_or_default();
    assert!(
        !first.trim().is_empty() && !reads_like_code(first),
        "`karpenter {}` starts with {first:?}",
        args.join(" ")
    );
    text
}

#[test]
fn every_subcommand_help_exits_zero_and_starts_with_a_sentence_for_users() {
    let top = help_of(&[]);
    let mut pending: Vec<Vec<String>> = subcommands(&top).into_iter().map(|s| vec![s]).collect();
    assert!(
        pending.len() >= 6,
        "karpenter --help lists {} subcommands: {top}",
        pending.len()
    );
    let mut seen = Vec::new();
    while let Some(path) = pending.pop() {
        let text = help_of(&path);
        for sub in subcommands(&text) {
            let mut deeper = path.clone();
            deeper.push(sub);
            pending.push(deeper);
        }
        seen.push(path.join(" "));
    }
    for expected in [
        "controller",
        "simulate",
        "validate",
        "crds",
        "convert",
        "iam",
    ] {
        assert!(
            seen.iter().any(|s| s == expected),
            "{expected} not reached: {seen:?}"
        );
    }
}

#[test]
fn controller_help_names_each_setting_with_its_environment_variable() {
    let text = help_of(&["controller".to_owned()]);
    for expected in [
        "--batch-max-duration",
        "BATCH_MAX_DURATION",
        "--feature-gates",
        "FEATURE_GATES",
        "--cluster-name",
    ] {
        assert!(text.contains(expected), "{expected} missing: {text}");
    }
}

#[test]
fn controller_help_does_not_show_values_from_the_environment() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(["controller", "--help"])
        .env("CLUSTER_CA_BUNDLE", "c2VjcmV0LWNhLWJ1bmRsZQ==")
        .output()
        .unwrap_or_else(|e| panic!("karpenter runs: {e}"));
    assert!(out.status.success());
    assert!(!stdout(&out).contains("c2VjcmV0LWNhLWJ1bmRsZQ=="));
}

/// `karpenter crds | head -1`: the reader leaves early; the command ends quietly, no panic.
#[test]
fn a_reader_closing_the_pipe_early_is_not_an_error() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .arg("crds")
        .current_dir(common::repo_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the karpenter binary runs");
    // Closed before anything is read: every CRD is far more than a pipe's buffer.
    drop(child.stdout.take());
    let output = child
        .wait_with_output()
        .expect("the karpenter binary exits");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
