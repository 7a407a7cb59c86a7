//! Every fixture under `tests/fixtures/valid` validates clean and round-trips through the
//! types; every fixture under `tests/fixtures/invalid` produces each problem its
//! `# validate-expect:` lines name. Each file and check is its own test, named by the file's path
//! and what it checks (`cargo test -p karpenter-api --test fixtures -- --list`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::{Path, PathBuf};

use karpenter_api::validation::{Outcome, validate_document};
use libtest_mimic::{Arguments, Failed, Trial};

fn fixtures(kind: &str) -> Result<Vec<PathBuf>, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(format!("no fixtures in {}", dir.display()));
    }
    Ok(files)
}

/// A check run on each fixture of a directory: (directory, what it checks, the check).
type Check = (&'static str, &'static str, fn(&Path));

/// One test per fixture file and check, named `<path from the crate root> <what it checks>`; a
/// fixture directory that cannot be read or holds no fixture is a failing test of its own.
fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let checks: [Check; 3] = [
        (
            "valid",
            "validates without problems",
            validates_without_problems,
        ),
        (
            "valid",
            "round-trips through the types without losing fields",
            round_trips_through_the_types_without_losing_fields,
        ),
        (
            "invalid",
            "reports the problems it declares",
            reports_the_problems_it_declares,
        ),
    ];
    let mut trials = Vec::new();
    for (kind, what, check) in checks {
        match fixtures(kind) {
            Ok(files) => {
                for path in files {
                    let name = path.strip_prefix(root).unwrap_or(&path).display();
                    trials.push(Trial::test(format!("{name} {what}"), move || {
                        check(&path);
                        Ok(())
                    }));
                }
            }
            Err(e) => trials.push(Trial::test(
                format!("tests/fixtures/{kind} holds fixtures that {what}"),
                move || Err(Failed::from(e)),
            )),
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

fn problems_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let docs = karpenter_api::yaml::parse_documents(&text).expect("fixture is YAML");
    docs.iter()
        .flat_map(|doc| match validate_document(doc) {
            Outcome::Invalid(errors) => errors.iter().map(ToString::to_string).collect(),
            Outcome::Valid => vec![],
            Outcome::Skipped { reason } => vec![format!("skipped: {reason}")],
        })
        .collect()
}

fn validates_without_problems(path: &Path) {
    let problems = problems_of(path);
    assert!(problems.is_empty(), "{}: {problems:#?}", path.display());
}

fn reports_the_problems_it_declares(path: &Path) {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let expected: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# validate-expect: "))
        .collect();
    assert!(
        !expected.is_empty(),
        "{} declares no validate-expect line",
        path.display()
    );
    let problems = problems_of(path);
    for want in expected {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{}: expected a problem containing {want:?}, got {problems:#?}",
            path.display()
        );
    }
}

fn round_trips_through_the_types_without_losing_fields(path: &Path) {
    use karpenter_api::v1::{EC2NodeClass, NodePool};
    let text = std::fs::read_to_string(path).expect("fixture readable");
    for doc in karpenter_api::yaml::parse_documents(&text).expect("yaml") {
        let reserialized = match doc["kind"].as_str() {
            Some("NodePool") => serde_json::to_value(
                karpenter_api::yaml::from_value::<NodePool>(&doc).expect("typed"),
            ),
            Some("EC2NodeClass") => serde_json::to_value(
                karpenter_api::yaml::from_value::<EC2NodeClass>(&doc).expect("typed"),
            ),
            other => panic!("unexpected kind {other:?} in {}", path.display()),
        }
        .expect("serializes");
        // Every field the user wrote survives (defaults may be added, nothing is lost).
        assert_subset(&doc, &reserialized, "", path);
        // And the typed value is a fixed point: YAML -> types -> YAML -> types is stable.
        let yaml = karpenter_api::yaml::to_yaml(&reserialized).expect("to yaml");
        let again = karpenter_api::yaml::parse_documents(&yaml).expect("reparse");
        assert_eq!(again[0], reserialized, "{}", path.display());
    }
}

fn assert_subset(want: &serde_json::Value, got: &serde_json::Value, at: &str, file: &Path) {
    match (want, got) {
        (serde_json::Value::Object(w), serde_json::Value::Object(g)) => {
            for (k, v) in w {
                let child = format!("{at}.{k}");
                let other = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{}: {child} lost", file.display()));
                assert_subset(v, other, &child, file);
            }
        }
        (serde_json::Value::Array(w), serde_json::Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{}: {at} length", file.display());
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                assert_subset(a, b, &format!("{at}[{i}]"), file);
            }
        }
        // Quantities and numbers may be written as numbers or strings.
        (serde_json::Value::Number(n), serde_json::Value::String(s)) => {
            assert_eq!(n.to_string(), *s, "{}: {at}", file.display());
        }
        _ => assert_eq!(want, got, "{}: {at}", file.display()),
    }
}
