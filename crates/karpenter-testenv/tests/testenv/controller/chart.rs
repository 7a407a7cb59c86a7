//! The chart installed with `helm install` as the README says, on the real control plane, and
//! its RBAC against the real authorizer: two controllers (the chart's `replicas: 2`) run with a
//! token of the ServiceAccount the release created, bound to the roles it created; one leads
//! and acts through a scale-out and a consolidation, the other stands by and acts on nothing;
//! the API server's audit log (scripts/testenv logs what ServiceAccounts do) shows their
//! requests and not one denial.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRole;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, ListParams, PostParams};

use super::{LEASE, only, prepare, spawn_controller};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `scripts/helm ARGS --kubeconfig <testenv>` (helm is built once, cached) and returns
/// its stdout; panics with its stderr when it fails.
fn helm(kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/helm"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("running scripts/helm");
    assert!(
        out.status.success(),
        "helm {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("helm prints UTF-8")
}

/// The sum of `metric`'s samples whose labels include all of `labels`.
async fn scrape(metrics: std::net::SocketAddr, metric: &str, labels: &[&str]) -> f64 {
    crate::leader_election::http_get(metrics, "/metrics")
        .await
        .lines()
        .filter(|l| l.starts_with(metric))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and helm: run scripts/test-integration"]
async fn the_chart_installs_with_helm_and_of_its_two_replicas_one_acts_never_denied() {
    let mut h = prepare("chart-rbac", &[], KwokOptions::default()).await;
    let namespace = h.scope.namespace().to_owned();
    let release = format!("r{}", h.scope.id());
    let kubeconfig = h.env.kubeconfig_path().to_owned();
    // Cluster-scoped objects of the release carry the scope label, so a failed run's cleanup
    // finds them.
    h.scope.track::<ClusterRole>();
    h.scope
        .track::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>();
    let chart = repo_root().join("charts/karpenter").display().to_string();
    let additional_labels = serde_json::json!({ "testenv.karpenter-rs.dev/scope": h.scope.id() });
    // As the README installs it, on the simulated cloud. The chart's own pods select a label no
    // node has: KWOK would only fake them, and they must not land on another test's nodes.
    helm(
        &kubeconfig,
        &[
            "install",
            &release,
            &chart,
            "--namespace",
            &namespace,
            "--set",
            "settings.clusterName=testenv",
            "--set",
            "controller.cloudProvider=kwok",
            "--set-json",
            &format!("additionalLabels={additional_labels}"),
            "--set-json",
            r#"nodeSelector={"testenv.karpenter-rs.dev/chart-pods":"nowhere"}"#,
        ],
    );
    let status = helm(
        &kubeconfig,
        &["status", &release, "--namespace", &namespace, "-o", "json"],
    );
    let status: serde_json::Value = serde_json::from_str(&status).expect("helm status is JSON");
    assert_eq!(status["info"]["status"], "deployed", "{status:#}");
    let deployments = Api::<Deployment>::namespaced(h.client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .expect("listing Deployments");
    let replicas: Vec<Option<i32>> = deployments.items.iter().map(|d| d.spec.replicas).collect();
    assert_eq!(
        replicas,
        [Some(2)],
        "one Deployment, the chart's 2 replicas"
    );

    let accounts = Api::<ServiceAccount>::namespaced(h.client.clone(), &namespace)
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={release}")))
        .await
        .expect("listing ServiceAccounts");
    let service_account = match accounts.items.as_slice() {
        [one] => one.metadata.name.clone().expect("a name"),
        other => panic!("the release has one ServiceAccount, found {}", other.len()),
    };
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
    // Two replicas with leader election: the chart's Role must cover the Lease too.
    for identity in ["chart-a", "chart-b"] {
        let controller = spawn_controller(&h.env, &h.scope, &h.spec, Some(identity)).await;
        h.controllers.push(controller);
    }

    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "5s", "consolidationPolicy": "WhenEmptyOrUnderutilized"}),
        only(&["c5.large"]),
    )
    .await;
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(180)).await;
    h.assert_one_node_per_claim(2, "two replicas, one acting")
        .await;
    let leader = Api::<Lease>::namespaced(h.client.clone(), &namespace)
        .get(LEASE)
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    let (leading, standing_by) = match leader.as_str() {
        "chart-a" => (0, 1),
        "chart-b" => (1, 0),
        other => panic!("the Lease is held by {other:?}, not by a replica"),
    };
    let created = "karpenter_nodeclaims_created_total";
    assert_eq!(
        scrape(h.controllers[leading].metrics, created, &[]).await,
        2.0,
        "the leader launched both nodes"
    );
    assert_eq!(
        scrape(h.controllers[standing_by].metrics, created, &[]).await,
        0.0,
        "the standby launched nothing"
    );
    h.scale("web", 0).await;
    wait_for(
        "both nodes consolidated away",
        Duration::from_secs(180),
        || async { Ok(h.node_claims().await.is_empty().then_some(())) },
    )
    .await
    .expect("emptiness removes the nodes under the chart's RBAC");
    assert_eq!(
        scrape(
            h.controllers[standing_by].metrics,
            "karpenter_nodeclaims_disrupted_total",
            &[]
        )
        .await,
        0.0,
        "the standby disrupted nothing"
    );

    let user = format!("system:serviceaccount:{namespace}:{service_account}");
    let audit = kubeconfig
        .parent()
        .expect("the kubeconfig is in the testenv's state dir")
        .join("logs/audit*.log");
    let text = super::faults::audit_log(&h.env);
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
        "the audit log shows the controllers' requests as {user} ({requests} found in {})",
        audit.display()
    );
    assert!(
        denied.is_empty(),
        "{} requests of {requests} were denied: {denied:#?}",
        denied.len()
    );
    // The release goes with the scope: its namespace and its labelled cluster-scoped objects.
    h.finish().await;
}
