//! The differential CRD test: every object of the corpus
//! (`crates/karpenter-api/tests/differential/`) gets the same verdict from
//!
//! 1. the API server loaded with **upstream's own CRDs** (from the Go module
//!    `github.com/aws/karpenter-provider-aws` at a pinned version, fetched by
//!    `scripts/upstream-crds`, never committed): it must match the verdict
//!    recorded in the corpus, so the offline comparison in
//!    `karpenter-api/tests/differential.rs` cannot drift from the real thing;
//! 2. `karpenter validate` (the same `validate_document` the CLI runs);
//! 3. the API server loaded with our CRDs (`charts/karpenter/crds`),
//!
//! except the disagreements listed with their reason in `allowlist.yaml`.
//!
//! CRDs with the same name cannot coexist in one API server, so upstream's are
//! loaded into a second control plane that `scripts/test-integration` starts
//! with `TESTENV_STATE_DIR=<state>/upstream` and names through
//! `KARPENTER_TESTENV_UPSTREAM_KUBECONFIG` and `KARPENTER_UPSTREAM_CRDS_DIR`.
//! Every create is a server-side dry run with `fieldValidation=Strict` (what
//! kubectl sends), so nothing is stored and the test needs no cleanup. A case
//! with `defaulted` is also checked against the object each API server answers
//! with, i.e. after its CRD's defaults were applied.

#[path = "../../../karpenter-api/tests/differential/corpus.rs"]
mod corpus;

use std::path::PathBuf;

use corpus::{Case, Checker, Verdict};
use karpenter_api::validation::{Outcome, validate_document};
use karpenter_testenv::{KubeEnv, manifests, paths};
use kube::Client;

const UPSTREAM_KUBECONFIG_ENV: &str = "KARPENTER_TESTENV_UPSTREAM_KUBECONFIG";
const UPSTREAM_CRDS_ENV: &str = "KARPENTER_UPSTREAM_CRDS_DIR";

fn required_path(var: &str, fallback: PathBuf) -> PathBuf {
    match std::env::var_os(var) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => fallback,
    }
}

/// The repository root, from the run-time `CARGO_MANIFEST_DIR` that cargo sets for tests:
/// `paths::repo_root()` is compiled in, and a target directory shared by several worktrees may
/// hold another checkout's build of it.
fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|m| m.parent()?.parent().map(PathBuf::from))
        .unwrap_or_else(paths::repo_root)
}

/// `/apis/<group>/<version>/<plural>` of a corpus kind.
fn collection_path(object: &serde_json::Value) -> Result<String, String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let plural = match object["kind"].as_str().unwrap_or_default() {
        "NodePool" => "nodepools",
        "NodeClaim" => "nodeclaims",
        "EC2NodeClass" => "ec2nodeclasses",
        "NodeOverlay" => "nodeoverlays",
        other => return Err(format!("no plural known for kind {other:?}")),
    };
    Ok(format!("/apis/{api_version}/{plural}"))
}

/// A strict, dry-run create: the API server's verdict and its message (on acceptance, the
/// object as it would be stored, defaults applied).
async fn dry_run_create(
    client: &Client,
    case: &Case,
) -> Result<(Verdict, String, Option<serde_json::Value>), String> {
    let path = collection_path(&case.object)?;
    let body = serde_json::to_vec(&case.object).map_err(|e| e.to_string())?;
    let request = kube::core::Request::new(path)
        .create(&kube::api::PostParams::default(), body)
        .map_err(|e| format!("{}: building the request: {e}", case.id))?;
    let mut request = request;
    let uri = format!("{}?dryRun=All&fieldValidation=Strict", request.uri().path());
    *request.uri_mut() = uri
        .parse()
        .map_err(|e| format!("{}: request URI {uri}: {e}", case.id))?;
    match client.request::<serde_json::Value>(request).await {
        Ok(stored) => Ok((Verdict::Accept, String::new(), Some(stored))),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => {
            Ok((Verdict::Reject, status.message, None))
        }
        Err(e) => Err(format!("{}: {e}", case.id)),
    }
}

/// The verdicts, and the `defaulted` expectations the accepted objects do not meet.
async fn verdicts_of<'a>(
    client: &Client,
    cases: &'a [Case],
) -> (Vec<(&'a Case, Verdict, String)>, Vec<String>) {
    let mut out = Vec::new();
    let mut defaults = Vec::new();
    for case in cases {
        match dry_run_create(client, case).await {
            Ok((verdict, message, stored)) => {
                if let (Some(expected), Some(stored)) = (&case.defaulted, &stored)
                    && let Some(problem) = corpus::missing_from(expected, stored)
                {
                    defaults.push(format!("{}: defaulted object {problem}", case.id));
                }
                out.push((case, verdict, message));
            }
            Err(e) => panic!("the API server did not answer: {e}"),
        }
    }
    (out, defaults)
}

#[tokio::test]
#[ignore = "needs two Kubernetes test environments: run scripts/test-integration"]
async fn validate_and_our_crds_give_upstream_crds_verdicts_on_the_whole_corpus() {
    let cases = corpus::load().expect("loading the corpus");
    let allowlist = corpus::allowlist().expect("loading the allowlist");

    // 1. Upstream's CRDs, in their own control plane.
    let upstream_kubeconfig = required_path(
        UPSTREAM_KUBECONFIG_ENV,
        paths::state_dir().join("upstream/kube/kubeconfig"),
    );
    let upstream_crds = required_path(UPSTREAM_CRDS_ENV, PathBuf::new());
    assert!(
        upstream_crds.is_dir(),
        "{UPSTREAM_CRDS_ENV} must name the directory of upstream's CRDs \
         (export {UPSTREAM_CRDS_ENV}=\"$(scripts/upstream-crds)\", or run scripts/test-integration)"
    );
    let upstream = KubeEnv::from_kubeconfig(&upstream_kubeconfig)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connecting to the upstream-CRD environment {} ({e}); \
                 start it with TESTENV_STATE_DIR=.testenv/upstream scripts/testenv up",
                upstream_kubeconfig.display()
            )
        });
    let names = manifests::apply_crds(&upstream.client(), &upstream_crds)
        .await
        .expect("applying upstream's CRDs");
    assert_eq!(names.len(), 4, "upstream CRDs applied: {names:?}");
    let (upstream_verdicts, upstream_defaults) = verdicts_of(&upstream.client(), &cases).await;
    let wrong_records: Vec<String> = upstream_verdicts
        .iter()
        .filter(|(case, verdict, _)| *verdict != case.upstream)
        .map(|(case, verdict, message)| {
            format!(
                "{}: recorded upstream: {}, the API server with upstream's CRDs {verdict}s {message}",
                case.id, case.upstream
            )
        })
        .collect();

    // 2. karpenter validate.
    let validate_verdicts: Vec<_> = cases
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
            Outcome::Skipped { reason } => (case, Verdict::Accept, reason),
        })
        .collect();
    let validate_failures = corpus::compare(Checker::Validate, &validate_verdicts, &allowlist);

    // 3. Our CRDs, in the shared control plane.
    let ours = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    manifests::apply_crds(&ours.client(), &repo_root().join("charts/karpenter/crds"))
        .await
        .expect("applying charts/karpenter/crds");
    // An updated CRD is Established at once, but the API server swaps in its new schema a
    // moment later: ask again until the verdicts agree or the deadline passes.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let (our_failures, our_defaults) = loop {
        let (our_verdicts, defaults) = verdicts_of(&ours.client(), &cases).await;
        let failures = corpus::compare(Checker::OurCrds, &our_verdicts, &allowlist);
        if (failures.is_empty() && defaults.is_empty()) || tokio::time::Instant::now() >= deadline {
            break (failures, defaults);
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    };

    let mut report = Vec::new();
    for (title, lines) in [
        (
            "corpus records that upstream's API server contradicts",
            &wrong_records,
        ),
        (
            "corpus defaults that upstream's API server does not apply",
            &upstream_defaults,
        ),
        ("karpenter validate disagrees", &validate_failures),
        ("our CRDs disagree", &our_failures),
        ("corpus defaults that our CRDs do not apply", &our_defaults),
    ] {
        if !lines.is_empty() {
            report.push(format!(
                "{title} ({}):\n  {}",
                lines.len(),
                lines.join("\n  ")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} corpus objects; {}",
        cases.len(),
        report.join("\n")
    );
}
