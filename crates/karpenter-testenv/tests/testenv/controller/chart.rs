//! The chart's RBAC against the real authorizer: the controller runs with a token of the
//! ServiceAccount `charts/karpenter` renders, bound to the roles it renders, through a
//! scale-out and a consolidation, and the API server's audit log (scripts/testenv logs what
//! ServiceAccounts do) shows its requests and not one denial.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use karpenter_controller::cloud::kwok::KwokOptions;
use karpenter_testenv::wait_for;
use kube::Resource;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;

use super::{only, prepare, spawn_controller};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `helm template` of the chart (scripts/helm builds helm once, cached).
fn render(release: &str, namespace: &str) -> String {
    let root = repo_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/helm"))
        .args(["template", release])
        .arg(root.join("charts/karpenter"))
        .args(["--namespace", namespace])
        .args(["--set", "settings.clusterName=testenv"])
        .args(["--set", "controller.cloudProvider=kwok"])
        .output()
        .expect("running scripts/helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("helm prints UTF-8")
}

/// Creates `doc` as a `K`, labelled with the scope's labels (so cleanup finds it).
async fn create<K>(
    api: Api<K>,
    doc: &serde_json::Value,
    labels: &std::collections::BTreeMap<String, String>,
) -> K
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut object: K = serde_json::from_value(doc.clone()).expect("a rendered object parses");
    object
        .meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .extend(labels.clone());
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", K::kind(&())))
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and helm: run scripts/test-integration"]
async fn the_controller_under_the_charts_service_account_is_never_denied() {
    let mut h = prepare("chart-rbac", &[], KwokOptions::default()).await;
    let namespace = h.scope.namespace().to_owned();
    let release = format!("r{}", h.scope.id());
    h.scope.track::<ClusterRole>();
    h.scope.track::<ClusterRoleBinding>();
    let labels = h.scope.labels();
    let mut service_account = None;
    for doc in karpenter_api::yaml::parse_documents(&render(&release, &namespace))
        .expect("the rendered chart is YAML")
    {
        let client = h.client.clone();
        match doc.get("kind").and_then(|k| k.as_str()) {
            Some("ServiceAccount") => {
                let sa: ServiceAccount =
                    create(Api::namespaced(client, &namespace), &doc, &labels).await;
                service_account = sa.metadata.name;
            }
            Some("ClusterRole") => {
                create::<ClusterRole>(Api::all(client), &doc, &labels).await;
            }
            Some("ClusterRoleBinding") => {
                create::<ClusterRoleBinding>(Api::all(client), &doc, &labels).await;
            }
            Some("Role") => {
                create::<Role>(Api::namespaced(client, &namespace), &doc, &labels).await;
            }
            Some("RoleBinding") => {
                create::<RoleBinding>(Api::namespaced(client, &namespace), &doc, &labels).await;
            }
            _ => {}
        }
    }
    let service_account = service_account.expect("the chart renders a ServiceAccount");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(h.client.clone(), &namespace)
        .create_token_request(&service_account, &PostParams::default(), &request)
        .await
        .expect("requesting a token")
        .status
        .and_then(|s| s.token)
        .expect("a token");
    h.spec.token = Some(token);
    // With leader election: the chart's Role must cover the Lease too.
    let controller = spawn_controller(&h.env, &h.scope, &h.spec, Some("chart-replica")).await;
    h.controllers.push(controller);

    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "5s", "consolidationPolicy": "WhenEmptyOrUnderutilized"}),
        only(&["c5.large"]),
    )
    .await;
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(180)).await;
    h.scale("web", 0).await;
    wait_for(
        "both nodes consolidated away",
        Duration::from_secs(180),
        || async { Ok(h.node_claims().await.is_empty().then_some(())) },
    )
    .await
    .expect("emptiness removes the nodes under the chart's RBAC");

    let user = format!("system:serviceaccount:{namespace}:{service_account}");
    let audit = h
        .env
        .kubeconfig_path()
        .parent()
        .expect("the kubeconfig is in the testenv's state dir")
        .join("logs/audit.log");
    let text = std::fs::read_to_string(&audit)
        .unwrap_or_else(|e| panic!("reading {}: {e}", audit.display()));
    let mut requests = 0usize;
    let mut denied = Vec::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if entry["user"]["username"].as_str() != Some(user.as_str()) {
            continue;
        }
        requests += 1;
        if entry["responseStatus"]["code"].as_i64() == Some(403) {
            denied.push(format!(
                "{} {}",
                entry["verb"].as_str().unwrap_or_default(),
                entry["requestURI"].as_str().unwrap_or_default()
            ));
        }
    }
    assert!(
        requests >= 50,
        "the audit log shows the controller's requests as {user} ({requests} found in {})",
        audit.display()
    );
    assert!(
        denied.is_empty(),
        "{} requests of {requests} were denied: {denied:#?}",
        denied.len()
    );
    h.finish().await;
}
