//! Running the built `karpenter` binary as a user does, shared by the CLI test files.
//!
//! Each test file uses a subset of these helpers.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The repository root; the binary runs there, so relative paths such as `examples/shop` work.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `karpenter ARGS` in the repository root, feeding `stdin` when given.
pub fn karpenter(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the karpenter binary runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input.as_bytes())
            .expect("karpenter reads its stdin");
    }
    drop(child.stdin.take());
    child
        .wait_with_output()
        .expect("the karpenter binary exits")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fixture of the API crate (`crates/karpenter-api/tests/fixtures/REL`).
pub fn api_fixture(rel: &str) -> String {
    repo_root()
        .join("crates/karpenter-api/tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

/// A fixture of the AWS crate (`crates/karpenter-aws/tests/fixtures/NAME`).
pub fn aws_fixture(name: &str) -> String {
    repo_root()
        .join("crates/karpenter-aws/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}
