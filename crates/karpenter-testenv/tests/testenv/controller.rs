//! The controller on the real control plane with KWOK: provisioning and the NodeClaim
//! lifecycle, end to end.
//!
//! Each test runs its own controller in-process (no leader election, servers on free loopback
//! ports) and is serialized with the other controller tests, since a controller acts on the
//! whole cluster. Its NodePool carries a taint only the test's pods tolerate, so other tests'
//! pending pods are never provisioned for. Cleanup deletes the workload and the NodePool (so
//! nothing provisions again), then the NodeClaims while the controller still runs (it
//! finalizes them), and stops the controller last. The
//! controller's log goes to the test output, so a failure shows what it did.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, Event, Node, Pod, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_controller::cloud::kwok::{KwokOptions, OfferingPattern};
use karpenter_controller::{Clients, Runtime, Settings};
use karpenter_testenv::{KubeEnv, TestScope, manifests, wait_for};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One controller test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const TAINT_KEY: &str = "testenv.karpenter-rs.dev/controller";

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn crd_dir() -> PathBuf {
    karpenter_testenv::paths::repo_root().join("charts/karpenter/crds")
}

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("info,karpenter_controller=debug,kube=warn")
        .try_init();
}

/// A running controller and the test's scope.
struct Harness {
    client: Client,
    scope: TestScope,
    pool: String,
    cancel: CancellationToken,
    task: JoinHandle<Result<(), karpenter_controller::RunError>>,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

async fn start(test: &str, args: &[&str], kwok: KwokOptions) -> Harness {
    let serial = SERIAL.lock().await;
    init_logs();
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    manifests::apply_crds(&env.client(), &crd_dir())
        .await
        .expect("applying charts/karpenter/crds");
    let scope = env.scope(test).await.expect("creating the test scope");
    let mut argv = vec!["karpenter", "--disable-leader-election"];
    argv.extend_from_slice(args);
    let settings = Settings::parse_from(argv, Vec::<(String, String)>::new()).expect("settings");
    let kubeconfig = Kubeconfig::read_from(env.kubeconfig_path()).expect("reading the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("loading the kubeconfig");
    let clients = Clients::from_config(config, &settings).expect("building the clients");
    let bound = Runtime::new(settings, clients)
        .with_lease(None)
        .with_addresses(loopback(), loopback())
        .bind()
        .await
        .expect("binding the servers");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bound.run(cancel.clone(), move |ctx| {
        karpenter_controller::controllers::run_kwok(ctx, kwok)
    }));
    Harness {
        client: env.client(),
        pool: scope.name("pool"),
        scope,
        cancel,
        task,
        _serial: serial,
    }
}

impl Harness {
    /// A NodePool only this test's pods tolerate, whose nodes carry the scope label.
    async fn node_pool(&self, limits: Option<serde_json::Value>, requirements: serde_json::Value) {
        let mut spec = serde_json::json!({
            "template": {
                "metadata": {"labels": self.scope.labels()},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": requirements,
                    "taints": [{"key": TAINT_KEY, "value": self.scope.id(), "effect": "NoSchedule"}],
                    "expireAfter": "720h"
                }
            },
            "disruption": {"consolidateAfter": "Never"}
        });
        if let Some(limits) = limits {
            spec["limits"] = limits;
        }
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": self.pool, "labels": self.scope.labels()},
            "spec": spec,
        }))
        .expect("the test NodePool parses");
        Api::<NodePool>::all(self.client.clone())
            .create(&PostParams::default(), &pool)
            .await
            .expect("creating the NodePool");
    }

    fn deployment(&self, name: &str, replicas: i32, cpu: &str) -> Deployment {
        let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
        Deployment {
            metadata: self.scope.namespaced_meta(name),
            spec: DeploymentSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..LabelSelector::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        node_selector: Some(self.scope.node_selector()),
                        tolerations: Some(vec![Toleration {
                            key: Some(TAINT_KEY.to_owned()),
                            operator: Some("Equal".to_owned()),
                            value: Some(self.scope.id().to_owned()),
                            effect: Some("NoSchedule".to_owned()),
                            ..Toleration::default()
                        }]),
                        containers: vec![Container {
                            name: "app".into(),
                            image: Some("registry.invalid/pause:3.10".into()),
                            resources: Some(ResourceRequirements {
                                requests: Some(BTreeMap::from([
                                    ("cpu".to_owned(), Quantity(cpu.to_owned())),
                                    ("memory".to_owned(), Quantity("256Mi".into())),
                                ])),
                                ..ResourceRequirements::default()
                            }),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            },
            status: None,
        }
    }

    async fn create_deployment(&self, name: &str, replicas: i32, cpu: &str) {
        Api::<Deployment>::namespaced(self.client.clone(), self.scope.namespace())
            .create(
                &PostParams::default(),
                &self.deployment(name, replicas, cpu),
            )
            .await
            .expect("creating the Deployment");
    }

    fn pool_selector(&self) -> ListParams {
        ListParams::default().labels(&format!("karpenter.sh/nodepool={}", self.pool))
    }

    async fn node_claims(&self) -> Vec<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone())
            .list(&self.pool_selector())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    async fn pods(&self) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), self.scope.namespace())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Waits until `count` pods of the namespace are bound and Running.
    async fn wait_running(&self, count: usize, timeout: Duration) {
        wait_for(
            &format!("{count} pods bound and Running"),
            timeout,
            || async {
                let pods = self.pods().await;
                let running = pods
                    .iter()
                    .filter(|p| {
                        p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count();
                Ok((running >= count).then_some(()))
            },
        )
        .await
        .expect("pods run on the launched nodes");
    }

    /// Deletes the workload and the NodePool first (so nothing provisions again), then the
    /// pool's NodeClaims, waits until the controller has finalized them, cleans up the scope
    /// and stops the controller last.
    async fn finish(self) {
        let _ = Api::<Deployment>::namespaced(self.client.clone(), self.scope.namespace())
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let _ = Api::<NodePool>::all(self.client.clone())
            .delete(&self.pool, &DeleteParams::default())
            .await;
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let _ = claims
            .delete_collection(&DeleteParams::default(), &self.pool_selector())
            .await;
        wait_for(
            "the pool's NodeClaims finalized",
            Duration::from_secs(60),
            || async { Ok(self.node_claims().await.is_empty().then_some(())) },
        )
        .await
        .expect("NodeClaims are finalized by the controller");
        self.scope.cleanup().await.expect("cleaning up the scope");
        self.cancel.cancel();
        self.task
            .await
            .expect("the controller task")
            .expect("the controller stops cleanly");
    }
}

fn requirements_general() -> serde_json::Value {
    serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}
    ])
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_deployment_of_fifty_pods_gets_nodes_that_register_initialize_and_run_every_pod() {
    let h = start("provision-50", &[], KwokOptions::default()).await;
    h.node_pool(None, requirements_general()).await;
    h.create_deployment("web", 50, "500m").await;
    h.wait_running(50, Duration::from_secs(180)).await;

    let claims = h.node_claims().await;
    assert!(!claims.is_empty(), "NodeClaims were created");
    for claim in &claims {
        let ready = |type_: &str| {
            claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
        };
        assert!(
            ready("Launched") && ready("Registered") && ready("Initialized"),
            "{:?} is launched, registered and initialized: {:?}",
            claim.metadata.name,
            claim.status
        );
        let owner = claim.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(
            owner.first().map(|o| o.name.as_str()),
            Some(h.pool.as_str())
        );
    }
    let nodes: Vec<Node> = Api::<Node>::all(h.client.clone())
        .list(&h.pool_selector())
        .await
        .expect("listing nodes")
        .items;
    assert_eq!(nodes.len(), claims.len(), "one node per NodeClaim");
    for node in &nodes {
        for key in [
            "karpenter.sh/nodepool",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "karpenter.sh/capacity-type",
        ] {
            assert!(
                label(node, key).is_some(),
                "node has {key}: {:?}",
                node.metadata.labels
            );
        }
        assert_eq!(label(node, "karpenter.sh/registered"), Some("true"));
        assert_eq!(label(node, "karpenter.sh/initialized"), Some("true"));
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            taints.iter().all(|t| t.key != "karpenter.sh/unregistered"),
            "the unregistered taint is gone"
        );
    }
    // The counter writes the pool's usage.
    wait_for("NodePool status.nodes", Duration::from_secs(30), || async {
        let pool = Api::<NodePool>::all(h.client.clone())
            .get(&h.pool)
            .await
            .map_err(|source| karpenter_testenv::Error::Kube {
                action: "reading the NodePool".into(),
                source,
            })?;
        let nodes = pool.status.as_ref().and_then(|s| s.nodes).unwrap_or(0);
        Ok((nodes == i64::try_from(claims.len()).unwrap_or(-1)).then_some(()))
    })
    .await
    .expect("the NodePool counts its nodes");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_nodepool_limit_stops_launches_and_the_pods_left_over_are_told_why() {
    let h = start("provision-limits", &[], KwokOptions::default()).await;
    // At most 4 CPUs: the solver can launch one node of <= 4 vCPUs and no more.
    h.node_pool(
        Some(serde_json::json!({"cpu": "4"})),
        requirements_general(),
    )
    .await;
    h.create_deployment("big", 6, "1500m").await;
    wait_for(
        "a FailedScheduling event naming the limit",
        Duration::from_secs(120),
        || async {
            let events = Api::<Event>::namespaced(h.client.clone(), h.scope.namespace())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            Ok(events
                .iter()
                .find(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.message.as_deref().is_some_and(|m| {
                            m.contains(&format!("nodepool {}", h.pool)) && m.contains("limit")
                        })
                })
                .map(|_| ()))
        },
    )
    .await
    .expect("pods that do not fit under the limit get the reason");
    h.wait_running(2, Duration::from_secs(120)).await;
    let cpu: i64 = h
        .node_claims()
        .await
        .iter()
        .filter_map(|c| c.status.as_ref()?.capacity.as_ref()?.get("cpu").cloned())
        .filter_map(|q| q.0.parse::<i64>().ok())
        .sum();
    assert!(cpu <= 4, "launched {cpu} CPUs under a 4-CPU limit");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn an_offering_out_of_capacity_is_avoided_on_the_next_batch() {
    // The cheapest offering for one small pod is c5.large (on-demand, the first zone); inject
    // insufficient capacity for c5.large everywhere.
    let kwok = KwokOptions {
        insufficient_capacity: vec![OfferingPattern {
            instance_type: "c5.large".into(),
            zone: "*".into(),
            capacity_type: "*".into(),
        }],
        ..KwokOptions::default()
    };
    let h = start("provision-ice", &[], kwok).await;
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "m5.large"]}
        ]),
    )
    .await;
    h.create_deployment("small", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let types: Vec<String> = h
        .node_claims()
        .await
        .iter()
        .filter_map(|c| {
            c.metadata
                .labels
                .as_ref()?
                .get("node.kubernetes.io/instance-type")
                .cloned()
        })
        .collect();
    assert_eq!(types, ["m5.large"], "the pod runs on the next offering");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_claim_whose_node_never_registers_is_deleted_after_the_registration_ttl() {
    let kwok = KwokOptions {
        registration_delay: Duration::from_secs(3600),
        ..KwokOptions::default()
    };
    let h = start("registration-ttl", &["--registration-ttl", "5s"], kwok).await;
    h.node_pool(None, requirements_general()).await;
    h.create_deployment("lonely", 1, "500m").await;
    let first = wait_for("a NodeClaim", Duration::from_secs(60), || async {
        Ok(h.node_claims()
            .await
            .first()
            .and_then(|c| c.metadata.uid.clone()))
    })
    .await
    .expect("a NodeClaim is created");
    wait_for(
        "the first NodeClaim deleted",
        Duration::from_secs(60),
        || async {
            let claims = h.node_claims().await;
            Ok(claims
                .iter()
                .all(|c| c.metadata.uid.as_deref() != Some(first.as_str()))
                .then_some(()))
        },
    )
    .await
    .expect("the NodeClaim that never registered is deleted");
    h.finish().await;
}
