//! The generated CRDs enforce their validation rules in a real API server.

use std::path::PathBuf;

use karpenter_testenv::manifests::{self, DynamicManifest};
use karpenter_testenv::{KubeEnv, paths};
use kube::api::PostParams;

fn crd_dir() -> PathBuf {
    paths::repo_root().join("charts/karpenter/crds")
}

fn fixture_dir(kind: &str) -> PathBuf {
    paths::repo_root()
        .join("crates/karpenter-api/tests/fixtures")
        .join(kind)
}

async fn env_with_crds() -> KubeEnv {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let names = manifests::apply_crds(&env.client(), &crd_dir())
        .await
        .expect("applying charts/karpenter/crds");
    assert!(
        !names.is_empty(),
        "no CRDs found in {}",
        crd_dir().display()
    );
    env
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn every_valid_fixture_is_accepted_by_the_api_server() {
    let _classes = crate::NODE_CLASSES.read().await;
    let env = env_with_crds().await;
    let client = env.client();
    let scope = env
        .scope("valid-fixtures")
        .await
        .expect("creating a test scope");
    let mut failures = Vec::new();
    let mut created = 0;
    for path in manifests::yaml_files(&fixture_dir("valid")).expect("listing valid fixtures") {
        for doc in manifests::load_documents(&path).expect("parsing a valid fixture") {
            let mut manifest = DynamicManifest::resolve(&client, &path, doc)
                .await
                .expect("resolving the fixture's kind");
            let original = manifest.object.metadata.name.clone().unwrap_or_default();
            manifest.object.metadata.name = Some(scope.name(&original));
            scope.label(&mut manifest.object.metadata);
            if !manifest.namespaced {
                scope.track_kind(manifest.resource.clone());
            }
            let api = manifest.api(&client, scope.namespace());
            match api.create(&PostParams::default(), &manifest.object).await {
                Ok(_) => created += 1,
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "valid fixtures rejected:\n{}",
        failures.join("\n")
    );
    assert!(
        created > 0,
        "no valid fixtures found in {}",
        fixture_dir("valid").display()
    );
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn every_invalid_fixture_with_an_apiserver_expectation_is_rejected_with_that_message() {
    let _classes = crate::NODE_CLASSES.read().await;
    let env = env_with_crds().await;
    let client = env.client();
    let scope = env
        .scope("invalid-fixtures")
        .await
        .expect("creating a test scope");
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut skipped = Vec::new();
    for path in manifests::yaml_files(&fixture_dir("invalid")).expect("listing invalid fixtures") {
        let text = manifests::read(&path).expect("reading an invalid fixture");
        let expected = manifests::comment_directives(&text, "apiserver-expect");
        if expected.is_empty() {
            // Rules only `karpenter validate` checks (no CEL/OpenAPI equivalent).
            skipped.push(
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            continue;
        }
        for doc in manifests::load_documents(&path).expect("parsing an invalid fixture") {
            let mut manifest = DynamicManifest::resolve(&client, &path, doc)
                .await
                .expect("resolving the fixture's kind");
            let original = manifest.object.metadata.name.clone().unwrap_or_default();
            manifest.object.metadata.name = Some(scope.name(&original));
            scope.label(&mut manifest.object.metadata);
            if !manifest.namespaced {
                scope.track_kind(manifest.resource.clone());
            }
            let api = manifest.api(&client, scope.namespace());
            checked += 1;
            match api.create(&PostParams::default(), &manifest.object).await {
                Ok(_) => failures.push(format!(
                    "{}: accepted, expected {expected:?}",
                    path.display()
                )),
                Err(kube::Error::Api(status)) => {
                    let missing: Vec<&String> = expected
                        .iter()
                        .filter(|e| !status.message.contains(e.as_str()))
                        .collect();
                    if status.code != 422 && status.code != 400 {
                        failures.push(format!(
                            "{}: HTTP {} {}",
                            path.display(),
                            status.code,
                            status.message
                        ));
                    } else if !missing.is_empty() {
                        failures.push(format!(
                            "{}: message lacks {missing:?}:\n    {}",
                            path.display(),
                            status.message
                        ));
                    }
                }
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
    }
    eprintln!("checked {checked} invalid fixtures; skipped (no apiserver-expect): {skipped:?}");
    assert!(
        checked > 0,
        "no invalid fixture carries an `# apiserver-expect:` line"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} invalid fixtures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    scope.cleanup().await.expect("cleaning up");
}
