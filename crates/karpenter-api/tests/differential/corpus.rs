//! The differential corpus: Karpenter objects, valid and invalid, with the verdict of the API
//! server loaded with upstream's own CRDs.
//!
//! Each `*.yaml` file in this directory (except `allowlist.yaml`) holds one kind:
//!
//! ```yaml
//! base: { apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: base}, spec: {...} }
//! cases:
//!   - name: disruption-without-consolidate-after   # also the object's metadata.name
//!     upstream: reject                              # accept | reject
//!     patch: {spec: {disruption: {consolidateAfter: null}}}   # JSON merge patch (RFC 7386)
//!     defaulted: {spec: {disruption: {consolidateAfter: 0s}}}  # optional, accepted cases only
//! ```
//!
//! `defaulted`, on an accepted case, is what the stored object must contain after the API
//! server applied the CRD's defaults (a subset: objects compare key by key, lists element by
//! element); the integration test checks it on the answers of both API servers.
//!
//! `upstream` is recorded here so that `cargo test -p karpenter-api` compares
//! `karpenter validate` against it offline; the integration test `crd_differential` (run by
//! `scripts/test-integration`) checks every recorded verdict against the real API server with
//! upstream's CRDs, so a wrong record fails CI. `allowlist.yaml` lists the disagreements that are
//! kept on purpose, each with its reason.
//!
//! Shared by `crates/karpenter-api/tests/differential.rs` and the `karpenter-testenv`
//! integration tests (included with `#[path]`), so it depends only on serde_json and
//! serde-saphyr.

#![allow(dead_code)]

use std::fmt;
use std::path::{Path, PathBuf};

/// What the API server decided about an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Reject,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Accept => "accept",
            Verdict::Reject => "reject",
        })
    }
}

/// Which checker an allowlist entry excuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checker {
    /// `karpenter validate` (the `karpenter-api` validation).
    Validate,
    /// The API server loaded with our CRDs (`karpenter crds`).
    OurCrds,
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Checker::Validate => "validate",
            Checker::OurCrds => "our-crds",
        })
    }
}

/// One corpus object.
#[derive(Debug, Clone)]
pub struct Case {
    /// `file-stem/name`, e.g. `nodepool/disruption-without-consolidate-after`.
    pub id: String,
    pub object: serde_json::Value,
    pub upstream: Verdict,
    /// What the defaulted object must contain (see the module docs).
    pub defaulted: Option<serde_json::Value>,
}

/// A disagreement kept on purpose.
#[derive(Debug, Clone)]
pub struct Allowed {
    pub case: String,
    pub checker: Checker,
    pub reason: String,
}

/// This directory, from `karpenter-api`'s tests or from another crate of the workspace.
pub fn dir() -> PathBuf {
    // At run time first: with a target directory shared by several worktrees, the compile-time
    // value may be another checkout's.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let manifest = manifest.as_path();
    let candidates = [
        manifest.join("tests/differential"),
        manifest.join("../karpenter-api/tests/differential"),
    ];
    candidates
        .iter()
        .find(|d| d.join("allowlist.yaml").is_file())
        .cloned()
        .unwrap_or_else(|| candidates[0].clone())
}

fn read_yaml(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// RFC 7386 JSON merge patch: objects merge, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(serde_json::Map::new());
    }
    if let serde_json::Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge_patch(
                    map.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
    }
}

/// Every case of every corpus file, in file and then case order.
pub fn load() -> Result<Vec<Case>, String> {
    let dir = dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "allowlist.yaml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for path in files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = read_yaml(&path)?;
        let base = file
            .get("base")
            .ok_or_else(|| format!("{}: no `base`", path.display()))?;
        let list = file
            .get("cases")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| format!("{}: no `cases` list", path.display()))?;
        for (i, entry) in list.iter().enumerate() {
            let name = entry
                .get("name")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| format!("{}: cases[{i}] has no name", path.display()))?;
            let id = format!("{stem}/{name}");
            if !seen.insert(id.clone()) {
                return Err(format!("{}: duplicate case {name}", path.display()));
            }
            let upstream = match entry.get("upstream").and_then(serde_json::Value::as_str) {
                Some("accept") => Verdict::Accept,
                Some("reject") => Verdict::Reject,
                other => {
                    return Err(format!(
                        "{id}: `upstream` must be accept or reject, found {other:?}"
                    ));
                }
            };
            let mut object = base.clone();
            merge_patch(
                &mut object,
                &serde_json::json!({"metadata": {"name": name}}),
            );
            if let Some(patch) = entry.get("patch") {
                merge_patch(&mut object, patch);
            }
            let defaulted = entry.get("defaulted").cloned();
            if defaulted.is_some() && upstream != Verdict::Accept {
                return Err(format!("{id}: `defaulted` needs `upstream: accept`"));
            }
            cases.push(Case {
                id,
                object,
                upstream,
                defaulted,
            });
        }
    }
    Ok(cases)
}

/// Where `actual` lacks something `expected` has (objects key by key, lists of the same length
/// element by element, anything else equal), as `path: expected X, found Y`; `None` when it
/// contains it all.
pub fn missing_from(expected: &serde_json::Value, actual: &serde_json::Value) -> Option<String> {
    fn walk(
        expected: &serde_json::Value,
        actual: &serde_json::Value,
        path: &str,
    ) -> Option<String> {
        match (expected, actual) {
            (serde_json::Value::Object(want), serde_json::Value::Object(have)) => {
                want.iter().find_map(|(key, value)| {
                    walk(
                        value,
                        have.get(key).unwrap_or(&serde_json::Value::Null),
                        &format!("{path}.{key}"),
                    )
                })
            }
            (serde_json::Value::Array(want), serde_json::Value::Array(have))
                if want.len() == have.len() =>
            {
                want.iter()
                    .zip(have)
                    .enumerate()
                    .find_map(|(i, (w, h))| walk(w, h, &format!("{path}[{i}]")))
            }
            _ if expected == actual => None,
            _ => Some(format!("{path}: expected {expected}, found {actual}")),
        }
    }
    walk(expected, actual, "")
}

/// The allowlist (`allowlist.yaml`): `- {case, checker: validate|our-crds, reason}`.
pub fn allowlist() -> Result<Vec<Allowed>, String> {
    let path = dir().join("allowlist.yaml");
    let value = read_yaml(&path)?;
    let list = value.as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let field = |name: &str| {
            entry
                .get(name)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: entry {i} has no `{name}`", path.display()))
        };
        let checker = match field("checker")?.as_str() {
            "validate" => Checker::Validate,
            "our-crds" => Checker::OurCrds,
            other => {
                return Err(format!(
                    "{}: entry {i}: checker must be validate or our-crds, found {other:?}",
                    path.display()
                ));
            }
        };
        let reason = field("reason")?;
        if reason.trim().len() < 20 {
            return Err(format!(
                "{}: entry {i}: give the reason in a sentence",
                path.display()
            ));
        }
        out.push(Allowed {
            case: field("case")?,
            checker,
            reason,
        });
    }
    Ok(out)
}

/// Compares one checker's verdicts with upstream's: returns the unexplained disagreements and
/// the allowlist entries for this checker that no longer disagree (stale), as messages.
pub fn compare(
    checker: Checker,
    verdicts: &[(&Case, Verdict, String)],
    allowlist: &[Allowed],
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut disagreeing = std::collections::HashSet::new();
    for (case, verdict, detail) in verdicts {
        if *verdict == case.upstream {
            continue;
        }
        disagreeing.insert(case.id.as_str());
        let allowed = allowlist
            .iter()
            .any(|a| a.checker == checker && a.case == case.id);
        if !allowed {
            failures.push(format!(
                "{}: upstream's CRDs {}, {checker} {verdict}s: {detail}",
                case.id, case.upstream
            ));
        }
    }
    for entry in allowlist.iter().filter(|a| a.checker == checker) {
        if !disagreeing.contains(entry.case.as_str()) {
            failures.push(format!(
                "{}: allowlisted for {checker} but agrees with upstream (remove the entry)",
                entry.case
            ));
        }
    }
    failures
}
