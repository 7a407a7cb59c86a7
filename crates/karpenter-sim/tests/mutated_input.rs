//! Untrusted input never panics: every example manifest and every legacy fixture, mutated line
//! by line (truncated, a line dropped, a scalar replaced by a hostile value), goes through the
//! loader, validation, planning and `convert`, which must return a value or an error.
//!
//! The mutants are deterministic (no RNG), so a failure names the exact input to reproduce.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use karpenter_api::convert::{self, Input, Options, Target};
use karpenter_cloud::Catalog;
use karpenter_sim::{Manifests, PricingOptions, Scenario};

/// Values that have broken parsers elsewhere: empty, negative, huge, non-numbers where numbers
/// go, structures where scalars go, and unusual YAML scalars.
const HOSTILE: [&str; 10] = [
    "\"\"",
    "-1",
    "99999999999999999999999",
    "1e400",
    ".nan",
    "[]",
    "{}",
    "~",
    "\"9999999999Ei\"",
    "\"0.000000001m\"",
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect(),
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    files.sort();
    files
}

fn read(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => panic!("reading {}: {e}", path.display()),
    }
}

/// How a mutant differs from its original.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Truncated or a line dropped: mostly broken YAML or missing fields.
    Structure,
    /// One scalar replaced by a hostile value: well-formed YAML with a bad value.
    Value,
}

/// Mutants of `text`: truncated after every third line; and for the first line of each key
/// (`seen` carries the keys across files, so a key repeated a hundred times costs one round),
/// the text without that line and with its scalar replaced by every hostile value.
fn mutants(text: &str, seen: &mut BTreeSet<String>) -> Vec<(Kind, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for i in 0..lines.len() {
        if i % 3 == 0 {
            out.push((
                Kind::Structure,
                format!("truncated after line {i}"),
                lines[..i].join("\n"),
            ));
        }
        let line = lines[i];
        if line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(": ") else {
            continue;
        };
        let name = key.trim_start().trim_start_matches("- ").to_owned();
        if !seen.insert(name) {
            continue;
        }
        let mut without = lines.clone();
        without.remove(i);
        out.push((
            Kind::Structure,
            format!("line {} dropped", i + 1),
            without.join("\n"),
        ));
        if value.trim().is_empty() || value.trim_start().starts_with(['{', '[', '|', '>']) {
            continue;
        }
        for hostile in HOSTILE {
            let mut changed = lines.clone();
            let replaced = format!("{key}: {hostile}");
            changed[i] = &replaced;
            out.push((
                Kind::Value,
                format!("line {} value -> {hostile}", i + 1),
                changed.join("\n"),
            ));
        }
    }
    out
}

#[test]
fn mutated_example_manifests_load_validate_and_plan_or_fail_cleanly() {
    let catalog = match Catalog::embedded() {
        Ok(c) => c,
        Err(e) => panic!("catalog: {e}"),
    };
    let pricing = PricingOptions::default();
    let mut accepted = 0usize;
    let mut rejected = 0usize;
    let mut seen = BTreeSet::new();
    for file in yaml_files(&repo_root().join("examples/shop")) {
        let text = read(&file);
        for (kind, what, mutant) in mutants(&text, &mut seen) {
            let outcome = std::panic::catch_unwind(|| {
                let Ok(manifests) = Manifests::load_text("mutant.yaml", &mutant) else {
                    return false;
                };
                // Planning is the slow part (tens of milliseconds in a debug build): bad values
                // reach it through well-formed YAML, so structural mutants stop at loading.
                if kind == Kind::Structure {
                    return true;
                }
                match Scenario::prepare(&manifests, &catalog, &pricing) {
                    Ok(mut scenario) => {
                        let _ = karpenter_sim::plan(&mut scenario);
                        true
                    }
                    Err(_) => false,
                }
            });
            match outcome {
                Ok(true) => accepted += 1,
                Ok(false) => rejected += 1,
                Err(_) => panic!("{} ({what}) panicked:\n{mutant}", file.display()),
            }
        }
    }
    eprintln!("example mutants: {accepted} accepted (value mutants planned), {rejected} rejected");
    // Both paths were exercised: mutants that load (and plan), and mutants rejected with errors.
    assert!(accepted > 100, "accepted {accepted}");
    assert!(rejected > 100, "rejected {rejected}");
}

#[test]
fn mutated_legacy_manifests_convert_or_fail_cleanly() {
    let fixtures = repo_root().join("crates/karpenter-api/tests/fixtures/legacy");
    let mut converted = 0usize;
    let mut rejected = 0usize;
    let mut seen = BTreeSet::new();
    for file in yaml_files(&fixtures) {
        let text = read(&file);
        for (_, what, mutant) in mutants(&text, &mut seen) {
            let outcome = std::panic::catch_unwind(|| {
                let Ok(documents) = karpenter_api::yaml::parse_documents(&mutant) else {
                    return false;
                };
                let inputs: Vec<Input> = documents
                    .into_iter()
                    .enumerate()
                    .map(|(i, value)| Input {
                        file: "mutant.yaml".to_owned(),
                        document: i + 1,
                        position: None,
                        value,
                    })
                    .collect();
                [Target::V1, Target::V1beta1].iter().all(|&target| {
                    let options = Options {
                        target,
                        node_role: None,
                    };
                    convert::convert(&inputs, &options).is_ok()
                })
            });
            match outcome {
                Ok(true) => converted += 1,
                Ok(false) => rejected += 1,
                Err(_) => panic!("{} ({what}) panicked:\n{mutant}", file.display()),
            }
        }
    }
    eprintln!("legacy mutants: {converted} converted, {rejected} rejected");
    assert!(converted > 50, "converted {converted}");
    assert!(rejected > 50, "rejected {rejected}");
}
