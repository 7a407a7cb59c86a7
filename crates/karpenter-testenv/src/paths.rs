//! Where the scripts keep their state, as seen from the tests.

use std::path::PathBuf;

/// The repository root (this crate lives in `crates/karpenter-testenv`).
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(|crates| crates.parent())
        .map(PathBuf::from)
        .unwrap_or(manifest)
}

/// `.testenv/` in the repository, or `$TESTENV_STATE_DIR` (the scripts honour the same variable).
pub fn state_dir() -> PathBuf {
    match std::env::var_os("TESTENV_STATE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => repo_root().join(".testenv"),
    }
}

/// The kubeconfig written by `scripts/testenv up`.
pub fn default_kubeconfig() -> PathBuf {
    state_dir().join("kube").join("kubeconfig")
}

/// The state file written by `scripts/moto up`.
pub fn default_moto_state() -> PathBuf {
    state_dir().join("moto").join("state.json")
}
