//! `karpenter validate` gives the verdict of the API server loaded with upstream's CRDs on every
//! object of the differential corpus (`tests/differential/`), except the disagreements listed
//! with their reason in `tests/differential/allowlist.yaml`.
//!
//! The recorded upstream verdicts are checked against a real API server by the integration test
//! `crd_differential` (`scripts/test-integration`); this test runs offline in every `cargo test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

#[path = "differential/corpus.rs"]
mod corpus;

use corpus::{Checker, Verdict};
use karpenter_api::validation::{Outcome, validate_document};

/// The issue asks for at least 150 objects covering every field with a rule.
const MIN_CORPUS_SIZE: usize = 150;

#[test]
fn the_corpus_is_large_enough_and_has_both_verdicts() {
    let cases = corpus::load().expect("loading the corpus");
    assert!(
        cases.len() >= MIN_CORPUS_SIZE,
        "{} cases, at least {MIN_CORPUS_SIZE} expected",
        cases.len()
    );
    for verdict in [Verdict::Accept, Verdict::Reject] {
        assert!(cases.iter().filter(|c| c.upstream == verdict).count() > 20);
    }
}

#[test]
fn validate_agrees_with_upstreams_crds_except_where_allowlisted() {
    let cases = corpus::load().expect("loading the corpus");
    let allowlist = corpus::allowlist().expect("loading the allowlist");
    let verdicts: Vec<_> = cases
        .iter()
        .map(|case| match validate_document(&case.object) {
            Outcome::Valid => (case, Verdict::Accept, String::new()),
            Outcome::Invalid(errors) => (
                case,
                Verdict::Reject,
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Outcome::Skipped { reason } => (case, Verdict::Accept, format!("skipped: {reason}")),
        })
        .collect();
    let failures = corpus::compare(Checker::Validate, &verdicts, &allowlist);
    assert!(
        failures.is_empty(),
        "{} disagreement(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Our types default what the CRDs default: an accepted case read into the typed object and
/// written back contains its `defaulted` expectation (the integration test checks the same
/// expectation against both API servers).
#[test]
fn typed_objects_carry_the_defaults_the_corpus_expects() {
    let cases = corpus::load().expect("loading the corpus");
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases.iter().filter(|c| c.defaulted.is_some()) {
        let typed = match case.object["kind"].as_str() {
            Some("NodePool") => {
                karpenter_api::yaml::from_value::<karpenter_api::v1::NodePool>(&case.object)
                    .map(|o| serde_json::to_value(o).expect("serializes"))
            }
            Some("NodeClaim") => {
                karpenter_api::yaml::from_value::<karpenter_api::v1::NodeClaim>(&case.object)
                    .map(|o| serde_json::to_value(o).expect("serializes"))
            }
            _ => karpenter_api::yaml::from_value::<karpenter_api::v1::EC2NodeClass>(&case.object)
                .map(|o| serde_json::to_value(o).expect("serializes")),
        };
        let typed = typed.unwrap_or_else(|e| panic!("{}: {}", case.id, e.message));
        if let Some(problem) = corpus::missing_from(case.defaulted.as_ref().unwrap(), &typed) {
            failures.push(format!("{}: {problem}", case.id));
        }
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} cases say what is defaulted");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn subset_comparison_names_the_first_missing_value() {
    let actual = serde_json::json!({"spec": {"a": "0s", "b": [{"n": 1}, {"n": 2}]}});
    assert_eq!(
        corpus::missing_from(&serde_json::json!({"spec": {"b": [{}, {"n": 2}]}}), &actual),
        None
    );
    assert_eq!(
        corpus::missing_from(&serde_json::json!({"spec": {"a": "1s"}}), &actual).as_deref(),
        Some(r#".spec.a: expected "1s", found "0s""#)
    );
    assert!(corpus::missing_from(&serde_json::json!({"spec": {"c": 1}}), &actual).is_some());
    assert!(corpus::missing_from(&serde_json::json!({"spec": {"b": [{}]}}), &actual).is_some());
}

#[test]
fn merge_patches_follow_rfc_7386() {
    let mut target = serde_json::json!({"a": {"b": 1, "c": 2}, "d": [1]});
    corpus::merge_patch(
        &mut target,
        &serde_json::json!({"a": {"b": null, "e": 3}, "d": [2]}),
    );
    assert_eq!(target, serde_json::json!({"a": {"c": 2, "e": 3}, "d": [2]}));
}
