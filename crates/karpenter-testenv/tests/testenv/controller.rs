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

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, Event, Node, Pod, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_controller::{Clients, LeaseConfig, LeaseTimings, Runtime, Settings};
use karpenter_kwok_provider::{KwokOptions, OfferingPattern};
use karpenter_testenv::{KubeEnv, TestScope, manifests, wait_for};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;

mod aws;
mod capacity_buffers;
mod chart;
mod dashboards;
mod deletion_cost;
mod disruption;
mod explain;
mod faults;
mod interruption;
mod overlay;
mod repair;
mod reservations;
mod static_pools;
mod top;

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
        .with_env_filter(
            std::env::var("TESTENV_LOG")
                .unwrap_or_else(|_| "info,karpenter_controller=debug,kube=warn".to_owned()),
        )
        .try_init();
}

/// One controller "process": its own thread and tokio runtime, so a crash can stop every task
/// it spawned at once (elector, watchers, controllers) without any of them cleaning up.
struct Controller {
    cancel: CancellationToken,
    /// Stops the controller when a failed test unwinds past it: left running, it would act
    /// on the next test's objects.
    _stop_on_drop: tokio_util::sync::DropGuard,
    crash: tokio::sync::oneshot::Sender<()>,
    /// `Some(result)` when the run loop returned, `None` after a crash.
    done: tokio::sync::oneshot::Receiver<Option<Result<(), karpenter_controller::RunError>>>,
    health: SocketAddr,
    metrics: SocketAddr,
    /// The controller's runtime, to freeze it ([`Controller::freeze`]).
    runtime: tokio::runtime::Handle,
}

/// Worker threads of each controller's runtime.
const WORKERS: usize = 2;

/// A frozen controller; dropping it (or [`Frozen::thaw`]) lets it run again.
struct Frozen(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Frozen {
    fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let (lock, wake) = &*self.0;
        if let Ok(mut frozen) = lock.lock() {
            *frozen = false;
        }
        wake.notify_all();
    }
}

impl Controller {
    /// Stops the controller in its tracks as SIGSTOP stops a process: every worker thread of
    /// its runtime is blocked (so no task runs and no timer or socket is serviced) until the
    /// returned guard is dropped; its monotonic clock runs on meanwhile, as a stopped
    /// process's does. Returns once every worker is blocked.
    fn freeze(&self) -> Frozen {
        let state = Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
        let blocked = Arc::new(std::sync::Barrier::new(WORKERS + 1));
        for _ in 0..WORKERS {
            let (state, blocked) = (Arc::clone(&state), Arc::clone(&blocked));
            self.runtime.spawn(async move {
                blocked.wait();
                let (lock, wake) = &*state;
                let mut frozen = lock.lock().unwrap_or_else(|p| p.into_inner());
                while *frozen {
                    frozen = wake.wait(frozen).unwrap_or_else(|p| p.into_inner());
                }
            });
        }
        blocked.wait();
        Frozen(state)
    }
}

/// How a test's controllers run.
#[derive(Clone)]
struct ControllerSpec {
    args: Vec<String>,
    kwok: KwokOptions,
    /// A bearer token to run as (a ServiceAccount's) instead of the admin.
    token: Option<String>,
    /// The SQS client of interruption handling (the AWS emulator's).
    sqs: Option<aws_sdk_sqs::Client>,
    /// Run on EC2 (the AWS emulator) with these clients instead of the simulated cloud.
    aws: Option<karpenter_aws_provider::AwsClients>,
}

/// The running controllers and the test's scope.
struct Harness {
    env: KubeEnv,
    client: Client,
    scope: TestScope,
    pool: String,
    /// Every NodePool the test made (the first is `pool`).
    pools: std::sync::Mutex<Vec<String>>,
    spec: ControllerSpec,
    /// The EC2NodeClass the test's NodePools name.
    node_class: String,
    controllers: Vec<Controller>,
    /// Dropped after the controllers and before the serial lock: a failed test's workloads
    /// are deleted before the next controller test starts.
    _quarantine: Quarantine,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

/// Deletes a failed test's workloads (Deployments, ReplicaSets, StatefulSets, Jobs, pods) when
/// the test panics. Its scope stays for inspection, but its pods must not stay pending: every
/// later test's controller would see them (the provisioner takes pending pods cluster-wide),
/// and one failure would fail the tests after it.
///
/// It also appends how long the test held the serial lock to the file named by
/// `TESTENV_TIMINGS` (`scripts/test-integration` prints the slowest): controller tests run
/// one at a time, so their sum is most of the integration tier's time.
struct Quarantine {
    kubeconfig: PathBuf,
    namespace: String,
    test: String,
    started: std::time::Instant,
}

impl Quarantine {
    fn record_time(&self, outcome: &str) {
        let Some(path) = std::env::var_os("TESTENV_TIMINGS") else {
            return;
        };
        let line = format!(
            "{:.1}\t{}\t{outcome}\n",
            self.started.elapsed().as_secs_f64(),
            self.test
        );
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = appended {
            eprintln!(
                "karpenter-testenv: recording the test's time in {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
}

impl Drop for Quarantine {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.record_time("passed");
            return;
        }
        self.record_time("failed");
        let (kubeconfig, namespace) = (self.kubeconfig.clone(), self.namespace.clone());
        // The test's runtime is unwinding on this thread: a client of its own, on a runtime of
        // its own, on a thread of its own.
        let deleted = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let work = async {
                    let config = kube::Config::from_custom_kubeconfig(
                        Kubeconfig::read_from(&kubeconfig).map_err(|e| e.to_string())?,
                        &KubeConfigOptions::default(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                    let client = Client::try_from(config).map_err(|e| e.to_string())?;
                    let all = ListParams::default();
                    let background = DeleteParams::background();
                    macro_rules! delete_all {
                        ($kind:ty, $params:expr) => {
                            Api::<$kind>::namespaced(client.clone(), &namespace)
                                .delete_collection(&$params, &all)
                                .await
                                .map(|_| ())
                                .map_err(|e| format!("deleting {}: {e}", stringify!($kind)))?
                        };
                    }
                    delete_all!(Deployment, background);
                    delete_all!(k8s_openapi::api::apps::v1::ReplicaSet, background);
                    delete_all!(k8s_openapi::api::apps::v1::StatefulSet, background);
                    delete_all!(k8s_openapi::api::batch::v1::Job, background);
                    delete_all!(
                        Pod,
                        DeleteParams {
                            grace_period_seconds: Some(0),
                            ..DeleteParams::default()
                        }
                    );
                    Ok::<(), String>(())
                };
                tokio::time::timeout(Duration::from_secs(30), work)
                    .await
                    .map_err(|_| "timed out after 30 s".to_owned())?
            })
        })
        .join()
        .unwrap_or_else(|_| Err("the cleanup thread panicked".to_owned()));
        match deleted {
            Ok(()) => eprintln!(
                "karpenter-testenv: the failed test's workloads in namespace {} were deleted so \
                 that its pending pods do not reach the next test's controller",
                self.namespace
            ),
            Err(e) => eprintln!(
                "karpenter-testenv: deleting the failed test's workloads in namespace {} failed \
                 ({e}); later controller tests may see its pending pods",
                self.namespace
            ),
        }
    }
}

/// Starts a controller: unelected when `identity` is `None`, else electing on a Lease in the
/// scope's namespace under that identity (upstream's timings: 15 s duration, 2 s retry).
async fn spawn_controller(
    env: &KubeEnv,
    scope: &TestScope,
    spec: &ControllerSpec,
    identity: Option<&str>,
) -> Controller {
    let mut argv = vec!["karpenter".to_owned()];
    if identity.is_none() {
        argv.push("--disable-leader-election".to_owned());
    }
    argv.extend(spec.args.iter().cloned());
    let settings = Settings::parse_from(argv, Vec::<(String, String)>::new()).expect("settings");
    let kubeconfig = Kubeconfig::read_from(env.kubeconfig_path()).expect("reading the kubeconfig");
    let lease = identity.map(|identity| LeaseConfig {
        namespace: scope.namespace().to_owned(),
        name: LEASE.to_owned(),
        identity: identity.to_owned(),
        timings: LeaseTimings::default(),
    });
    let kwok = spec.kwok.clone();
    let bearer = spec.token.clone();
    let sqs = spec.sqs.clone();
    let aws = spec.aws.clone();
    let cancel = CancellationToken::new();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let (crash, crashed) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done) = tokio::sync::oneshot::channel();
    let token = cancel.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_all()
            .build()
            .expect("a runtime for the controller");
        let outcome = runtime.block_on(async move {
            let mut config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .expect("loading the kubeconfig");
            if let Some(bearer) = bearer {
                // AuthInfo keeps its token in a SecretString; build it through serde.
                config.auth_info = serde_json::from_value(serde_json::json!({ "token": bearer }))
                    .expect("token credentials");
            }
            let clients = Clients::from_config(config, &settings).expect("building the clients");
            let bound = Runtime::new(settings, clients)
                .with_lease(lease)
                .with_addresses(loopback(), loopback())
                .bind()
                .await
                .expect("binding the servers");
            let _ = bound_tx.send((
                bound.health_addr().expect("health address"),
                bound.metrics_addr().expect("metrics address"),
                tokio::runtime::Handle::current(),
            ));
            tokio::select! {
                result = bound.run(token, move |ctx| async move {
                    match aws {
                        Some(clients) => {
                            karpenter_controller::controllers::run_aws(ctx, clients, sqs).await
                        }
                        None => karpenter_controller::controllers::run_kwok_with(ctx, kwok, sqs).await,
                    }
                }) => Some(result),
                _ = crashed => None,
            }
        });
        // A controller that stopped on its own says why in the test's output (a binary would
        // print it as it exits).
        if let Some(Err(error)) = &outcome {
            let mut why = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(cause) = source {
                why.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            tracing::error!("the controller stopped with an error: {why}");
        }
        // A crash: every task of this "process" is dropped where it stands.
        runtime.shutdown_background();
        let _ = done_tx.send(outcome);
    });
    let (health, metrics, runtime) = bound_rx.await.expect("the controller binds its servers");
    Controller {
        _stop_on_drop: cancel.clone().drop_guard(),
        cancel,
        crash,
        done,
        health,
        metrics,
        runtime,
    }
}

/// The Lease the replicas of a test elect on (in the test's namespace).
pub(crate) const LEASE: &str = "karpenter-leader-election";

async fn start(test: &str, args: &[&str], kwok: KwokOptions) -> Harness {
    let h = prepare(test, args, kwok).await;
    let controller = spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    Harness {
        controllers: vec![controller],
        ..h
    }
}

/// The scope, CRDs and settings, no controller yet.
async fn prepare(test: &str, args: &[&str], kwok: KwokOptions) -> Harness {
    let serial = SERIAL.lock().await;
    init_logs();
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    manifests::apply_crds(&env.client(), &crd_dir())
        .await
        .expect("applying charts/karpenter/crds");
    let scope = env.scope(test).await.expect("creating the test scope");
    let pool = scope.name("pool");
    let quarantine = Quarantine {
        kubeconfig: env.kubeconfig_path().to_owned(),
        namespace: scope.namespace().to_owned(),
        test: test.to_owned(),
        started: std::time::Instant::now(),
    };
    Harness {
        client: env.client(),
        env,
        pools: std::sync::Mutex::new(vec![pool.clone()]),
        pool,
        scope,
        spec: ControllerSpec {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            kwok,
            token: None,
            sqs: None,
            aws: None,
        },
        node_class: "default".to_owned(),
        controllers: Vec::new(),
        _quarantine: quarantine,
        _serial: serial,
    }
}

impl Harness {
    /// A NodePool only this test's pods tolerate, whose nodes carry the scope label.
    async fn node_pool(&self, limits: Option<serde_json::Value>, requirements: serde_json::Value) {
        self.create_node_pool(&self.pool, None, limits, requirements, None)
            .await;
    }

    /// The test's NodePool with this `spec.disruption` (the default pool never consolidates).
    async fn node_pool_disrupting(
        &self,
        disruption: serde_json::Value,
        requirements: serde_json::Value,
    ) {
        self.create_node_pool(&self.pool, None, None, requirements, Some(disruption))
            .await;
    }

    /// Another NodePool of the test, with a weight.
    async fn weighted_node_pool(
        &self,
        base: &str,
        weight: i32,
        requirements: serde_json::Value,
    ) -> String {
        let name = self.scope.name(base);
        if let Ok(mut pools) = self.pools.lock() {
            pools.push(name.clone());
        }
        self.create_node_pool(&name, Some(weight), None, requirements, None)
            .await;
        name
    }

    async fn create_node_pool(
        &self,
        name: &str,
        weight: Option<i32>,
        limits: Option<serde_json::Value>,
        requirements: serde_json::Value,
        disruption: Option<serde_json::Value>,
    ) {
        let mut spec = self.node_pool_spec(requirements, disruption);
        if let Some(limits) = limits {
            spec["limits"] = limits;
        }
        if let Some(weight) = weight {
            spec["weight"] = serde_json::json!(weight);
        }
        self.create_node_pool_with(name, spec).await;
    }

    /// The `spec` of the test's NodePools: the scope's labels and taint, `requirements`, and
    /// `disruption` (default: never consolidate).
    fn node_pool_spec(
        &self,
        requirements: serde_json::Value,
        disruption: Option<serde_json::Value>,
    ) -> serde_json::Value {
        serde_json::json!({
            "template": {
                "metadata": {"labels": self.scope.labels()},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": self.node_class},
                    "requirements": requirements,
                    "taints": [{"key": TAINT_KEY, "value": self.scope.id(), "effect": "NoSchedule"}],
                    "expireAfter": "720h"
                }
            },
            "disruption": disruption.unwrap_or_else(|| serde_json::json!({"consolidateAfter": "Never"}))
        })
    }

    /// Creates NodePool `name` with `spec`.
    async fn create_node_pool_with(&self, name: &str, spec: serde_json::Value) {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name, "labels": self.scope.labels()},
            "spec": spec,
        }))
        .expect("the test NodePool parses");
        Api::<NodePool>::all(self.client.clone())
            .create(&PostParams::default(), &pool)
            .await
            .expect("creating the NodePool");
    }

    fn toleration(&self) -> Toleration {
        Toleration {
            key: Some(TAINT_KEY.to_owned()),
            operator: Some("Equal".to_owned()),
            value: Some(self.scope.id().to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        }
    }

    /// Stops a controller as a crash would: every task it runs dropped mid-flight, nothing
    /// released or cleaned up.
    async fn crash(&mut self, index: usize) {
        let controller = self.controllers.remove(index);
        let _ = controller.crash.send(());
        let outcome = controller.done.await.expect("the controller thread ends");
        assert!(outcome.is_none(), "crashed, not stopped: {outcome:?}");
    }

    /// Pods labelled `app: <app>` requesting `cpu` and 256Mi, on this test's nodes only: the
    /// selector and the template of a Deployment or a DaemonSet.
    fn workload(&self, app: &str, cpu: &str) -> (LabelSelector, PodTemplateSpec) {
        let labels = BTreeMap::from([("app".to_owned(), app.to_owned())]);
        let selector = LabelSelector {
            match_labels: Some(labels.clone()),
            ..LabelSelector::default()
        };
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                node_selector: Some(self.scope.node_selector()),
                tolerations: Some(vec![self.toleration()]),
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
        };
        (selector, template)
    }

    fn deployment(&self, name: &str, replicas: i32, cpu: &str) -> Deployment {
        let (selector, template) = self.workload(name, cpu);
        Deployment {
            metadata: self.scope.namespaced_meta(name),
            spec: DeploymentSpec {
                replicas: Some(replicas),
                selector,
                template,
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

    /// Objects of any of the test's NodePools.
    fn pool_selector(&self) -> ListParams {
        let pools = self.pools.lock().map(|p| p.join(",")).unwrap_or_default();
        ListParams::default().labels(&format!("karpenter.sh/nodepool in ({pools})"))
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

    /// Waits until condition `type_` of NodePool `pool` has `status` (and `reason`, when
    /// given); the condition.
    async fn wait_pool_condition(
        &self,
        pool: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        let api = Api::<NodePool>::all(self.client.clone());
        let what = format!("NodePool {pool}: {type_}={status} ({reason:?})");
        wait_for(&what, Duration::from_secs(60), || async {
            let found = api
                .get(pool)
                .await
                .map_err(|e| karpenter_testenv::Error::Kube {
                    action: "reading the NodePool".to_owned(),
                    source: e,
                })?;
            let condition = found
                .status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == type_);
            Ok(condition.filter(|c| c.status == status && reason.is_none_or(|r| c.reason == r)))
        })
        .await
        .expect("the NodePool's condition")
    }

    /// Waits for an event of the test's namespace with `reason` whose message has every one
    /// of `parts`; its message.
    async fn wait_pod_event(&self, reason: &str, parts: &[&str]) -> String {
        let what = format!("a {reason} event saying {parts:?}");
        wait_for(&what, Duration::from_secs(60), || async {
            let events = Api::<Event>::namespaced(self.client.clone(), self.scope.namespace())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            Ok(events.into_iter().find_map(|e| {
                let message = e.message?;
                (e.reason.as_deref() == Some(reason) && parts.iter().all(|p| message.contains(p)))
                    .then_some(message)
            }))
        })
        .await
        .expect("the event")
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
        let pools = self.pools.lock().map(|p| p.clone()).unwrap_or_default();
        for pool in &pools {
            let _ = Api::<NodePool>::all(self.client.clone())
                .delete(pool, &DeleteParams::default())
                .await;
        }
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
        for controller in self.controllers {
            controller.cancel.cancel();
            let outcome = controller.done.await.expect("the controller thread ends");
            assert!(
                matches!(outcome, Some(Ok(()))),
                "the controller stops cleanly: {outcome:?}"
            );
        }
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

    // Pods run once a node is registered; initialization is the next step.
    let initialized = |claim: &NodeClaim| {
        claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Initialized" && c.status == "True")
            })
    };
    wait_for(
        "every NodeClaim initialized",
        Duration::from_secs(60),
        || async {
            let claims = h.node_claims().await;
            Ok((!claims.is_empty() && claims.iter().all(initialized)).then_some(()))
        },
    )
    .await
    .expect("the NodeClaims initialize");
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
async fn a_nodepool_goes_ready_and_registration_healthy_and_an_invalid_one_launches_nothing() {
    let h = start("nodepool-conditions", &[], KwokOptions::default()).await;
    // A requirement value that is no label value: the CRD admits it, upstream's runtime
    // validation refuses the pool. Otherwise the pool could hold the test's pods.
    let invalid = h.scope.name("invalid");
    if let Ok(mut pools) = h.pools.lock() {
        pools.push(invalid.clone());
    }
    let mut requirements = requirements_general();
    if let Some(list) = requirements.as_array_mut() {
        list.push(serde_json::json!({"key": "example.com/team", "operator": "In", "values": ["not valid!"]}));
    }
    let pool: NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": invalid, "labels": h.scope.labels()},
        "spec": {
            "template": {
                "metadata": {"labels": h.scope.labels()},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": requirements,
                    "taints": [{"key": TAINT_KEY, "value": h.scope.id(), "effect": "NoSchedule"}],
                    "expireAfter": "720h"
                }
            },
            "disruption": {"consolidateAfter": "Never"}
        }
    }))
    .expect("the invalid NodePool parses");
    Api::<NodePool>::all(h.client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .expect("the API server admits the NodePool");
    let validation = h
        .wait_pool_condition(
            &invalid,
            "ValidationSucceeded",
            "False",
            Some("NodePoolValidationFailed"),
        )
        .await;
    assert!(
        validation.message.contains("\"not valid!\""),
        "{validation:?}"
    );
    let ready = h
        .wait_pool_condition(&invalid, "Ready", "False", Some("UnhealthyDependents"))
        .await;
    assert_eq!(ready.message, "ValidationSucceeded=False");

    // Pods only the invalid pool could hold: told why, and nothing launches.
    h.create_deployment("web", 1, "500m").await;
    let message = h
        .wait_pod_event(
            "FailedScheduling",
            &[
                &format!("nodepool {invalid}: not ready"),
                "NodePoolValidationFailed",
            ],
        )
        .await;
    assert!(message.contains("\"not valid!\""), "{message}");
    assert!(
        h.node_claims().await.is_empty(),
        "no NodeClaim for a pool that is not Ready"
    );

    // A valid pool goes Ready, takes the pod, and its registration makes it healthy.
    h.node_pool(None, requirements_general()).await;
    let ready = h
        .wait_pool_condition(&h.pool, "Ready", "True", Some("Ready"))
        .await;
    assert_eq!(ready.observed_generation, Some(1));
    for type_ in ["ValidationSucceeded", "NodeClassReady"] {
        h.wait_pool_condition(&h.pool, type_, "True", Some(type_))
            .await;
    }
    h.wait_running(1, Duration::from_secs(90)).await;
    h.wait_pool_condition(&h.pool, "NodeRegistrationHealthy", "True", None)
        .await;
    let claims = h.node_claims().await;
    assert!(
        claims
            .iter()
            .all(|c| claim_label(c, "karpenter.sh/nodepool") == h.pool),
        "every NodeClaim is of the valid pool: {:?}",
        claims
            .iter()
            .map(|c| claim_label(c, "karpenter.sh/nodepool"))
            .collect::<Vec<_>>()
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_pod_with_a_dra_resource_claim_is_told_why_and_gets_no_node_claim() {
    let h = start("provision-dra", &[], KwokOptions::default()).await;
    h.node_pool(None, requirements_general()).await;
    h.wait_pool_condition(&h.pool, "Ready", "True", None).await;
    // A claim for a device class no driver serves: the kube-scheduler finds it unschedulable.
    let claim: k8s_openapi::api::resource::v1::ResourceClaim =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu-claim"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.testenv.karpenter-rs.dev"}}
            ]}}
        }))
        .expect("the ResourceClaim parses");
    Api::<k8s_openapi::api::resource::v1::ResourceClaim>::namespaced(
        h.client.clone(),
        h.scope.namespace(),
    )
    .create(&PostParams::default(), &claim)
    .await
    .expect("creating the ResourceClaim");
    let mut deployment = h.deployment("dra", 1, "500m");
    if let Some(spec) = deployment.spec.template.spec.as_mut() {
        spec.resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
            name: "gpu".to_owned(),
            resource_claim_name: Some("gpu-claim".to_owned()),
            ..Default::default()
        }]);
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &deployment)
        .await
        .expect("creating the Deployment");
    h.wait_pod_event(
        "FailedScheduling",
        &["Dynamic Resource Allocation requirements that are not yet supported"],
    )
    .await;
    let pods = h.pods().await;
    assert!(
        !pods.is_empty()
            && pods
                .iter()
                .all(|p| p.spec.as_ref().is_some_and(|s| s.resource_claims.is_some())),
        "the API server keeps the pod's resourceClaims (DRA enabled)"
    );
    // A plain pod of the same namespace is still provisioned for: the batch was not dropped.
    h.create_deployment("plain", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(90)).await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "one NodeClaim, for the plain pod only");
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
async fn the_scheduler_gauges_show_pods_stuck_in_the_queue_and_their_effective_zone() {
    let h = start("provision-scheduler-gauges", &[], KwokOptions::default()).await;
    h.node_pool(None, requirements_general()).await;
    // Two pods selecting a zone no instance type is offered in (named after the scope, so that
    // no other test's pod shares its gauge): every simulation leaves them in its queue, with
    // that zone as their effective zone.
    let zone = format!("nowhere-{}", h.scope.id());
    let mut stuck = h.deployment("stuck", 2, "100m");
    if let Some(spec) = stuck.spec.template.spec.as_mut() {
        spec.node_selector =
            Some([("topology.kubernetes.io/zone".to_owned(), zone.clone())].into());
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &stuck)
        .await
        .expect("creating the Deployment");
    let by_zone = format!(
        r#"karpenter_scheduler_pending_pods_by_effective_zone_count{{controller="provisioner",zone="{zone}"}} 2"#
    );
    // The queue is the whole cluster's: a pod another test is placing may share it.
    let queue_depth = |scraped: &str| -> Option<u64> {
        scraped
            .lines()
            .find(|l| {
                l.starts_with(
                    r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""#,
                )
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    wait_for(
        &format!(
            "the provisioner's last simulation reporting 2 pods with effective zone {zone}, left in its queue"
        ),
        Duration::from_secs(120),
        || async {
            let scraped =
                super::leader_election::http_get(h.controllers[0].metrics, "/metrics").await;
            let ready = queue_depth(&scraped).is_some_and(|d| d >= 2)
                && scraped.lines().any(|l| l == by_zone);
            Ok(ready.then_some(()))
        },
    )
    .await
    .expect("the scheduler gauges name the stuck pods");
    assert!(
        h.node_claims().await.is_empty(),
        "nothing can be launched for them"
    );
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
async fn an_instance_type_file_in_upstreams_kwok_format_is_what_the_kwok_cloud_launches() {
    // Two of upstream's KWOK types, in its file format (kwok/cloudprovider/instance_types.json).
    let entry = |cpu: u32, price: f64| {
        serde_json::json!({
            "name": format!("c-{cpu}x-amd64-linux"),
            "offerings": [{"Price": price, "Available": true, "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]}
            ]}],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {"cpu": cpu.to_string(), "memory": format!("{}Gi", cpu * 2), "ephemeral-storage": "20Gi"}
        })
    };
    let path = std::env::temp_dir().join(format!(
        "karpenter-upstream-kwok-types-{}.json",
        std::process::id()
    ));
    std::fs::write(
        &path,
        serde_json::json!([entry(2, 0.054), entry(4, 0.108)]).to_string(),
    )
    .expect("writing the instance-type file");
    let path_arg = path.display().to_string();
    let h = start(
        "provision-upstream-kwok-types",
        &["--instance-types-file-path", &path_arg],
        KwokOptions::default(),
    )
    .await;
    h.node_pool(None, only(&["c-2x-amd64-linux", "c-4x-amd64-linux"]))
        .await;
    // 2 CPUs less upstream's 100m kube-reserved leave 1.9: a 1500m pod fits the smaller type.
    h.create_deployment("kwok-types", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let nodes = h.nodes().await;
    let [node] = nodes.as_slice() else {
        panic!("one node expected, got {}", nodes.len());
    };
    assert_eq!(
        label(node, "node.kubernetes.io/instance-type"),
        Some("c-2x-amd64-linux")
    );
    assert_eq!(
        label(node, "topology.kubernetes.io/zone"),
        Some("test-zone-a")
    );
    assert_eq!(label(node, "karpenter.kwok.sh/instance-family"), Some("c"));
    assert_eq!(
        label(node, "karpenter.kwok.sh/instance-memory"),
        Some("4Gi")
    );
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("cpu"))
        .map(|q| q.0.clone());
    assert_eq!(
        allocatable.as_deref(),
        Some("1900m"),
        "upstream's kube-reserved"
    );
    h.finish().await;
    std::fs::remove_file(&path).ok();
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

/// On-demand instances of one type only, so node counts are known in advance.
fn only(instance_types: &[&str]) -> serde_json::Value {
    serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}
    ])
}

fn claim_label(claim: &NodeClaim, key: &str) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

impl Harness {
    async fn nodes(&self) -> Vec<Node> {
        Api::<Node>::all(self.client.clone())
            .list(&self.pool_selector())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Exactly `expected` NodeClaims, each with its one Node, and no Node without a NodeClaim.
    async fn assert_one_node_per_claim(&self, expected: usize, why: &str) {
        let claims = self.node_claims().await;
        let names: Vec<_> = claims.iter().map(|c| c.metadata.name.clone()).collect();
        assert_eq!(claims.len(), expected, "{why}: NodeClaims {names:?}");
        let ids: BTreeSet<String> = claims
            .iter()
            .filter_map(|c| c.status.as_ref()?.provider_id.clone())
            .collect();
        let nodes = self.nodes().await;
        assert_eq!(nodes.len(), expected, "{why}: one Node per NodeClaim");
        for node in &nodes {
            let id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
            assert!(
                id.as_ref().is_some_and(|id| ids.contains(id)),
                "{why}: node {:?} ({id:?}) belongs to a NodeClaim of {ids:?}",
                node.metadata.name
            );
        }
    }

    async fn scale(&self, name: &str, replicas: i32) {
        Api::<Deployment>::namespaced(self.client.clone(), self.scope.namespace())
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scaling the Deployment");
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn the_heavier_nodepool_is_used_even_when_a_lighter_one_is_cheaper() {
    let h = start("provision-weights", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    let heavy = h
        .weighted_node_pool("heavy", 50, only(&["m5.xlarge"]))
        .await;
    h.create_deployment("weighted", 2, "500m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    assert!(!claims.is_empty(), "NodeClaims were created");
    for claim in &claims {
        assert_eq!(claim_label(claim, "karpenter.sh/nodepool"), heavy);
        assert_eq!(
            claim_label(claim, "node.kubernetes.io/instance-type"),
            "m5.xlarge"
        );
    }
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn daemonset_overhead_is_counted_when_the_instance_type_is_chosen() {
    use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
    let h = start("provision-daemonset", &[], KwokOptions::default()).await;
    // c5.large has 1930m allocatable: the pod (1 CPU) fits alone, not beside the agent (1 CPU).
    h.node_pool(None, only(&["c5.large", "c5.xlarge"])).await;
    let (selector, template) = h.workload("agent", "1");
    let agent = DaemonSet {
        metadata: h.scope.namespaced_meta("agent"),
        spec: DaemonSetSpec {
            selector,
            template,
            ..DaemonSetSpec::default()
        },
        status: None,
    };
    Api::<DaemonSet>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &agent)
        .await
        .expect("creating the DaemonSet");
    h.create_deployment("app", 1, "1").await;
    // The app pod and the agent's pod on the new node.
    h.wait_running(2, Duration::from_secs(120)).await;
    let types: Vec<String> = h
        .node_claims()
        .await
        .iter()
        .map(|c| claim_label(c, "node.kubernetes.io/instance-type"))
        .collect();
    assert_eq!(types, ["c5.xlarge"], "room for the pod and the agent");
    let _ = Api::<DaemonSet>::namespaced(h.client.clone(), h.scope.namespace())
        .delete("agent", &DeleteParams::default())
        .await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_controller_crashed_mid_provisioning_and_restarted_makes_no_duplicate_and_leaks_no_node()
{
    let mut h = start("provision-restart", &[], KwokOptions::default()).await;
    // Two 1.5-CPU pods per c5.xlarge (3920m allocatable): 10 pods need exactly 5 nodes.
    h.node_pool(None, only(&["c5.xlarge"])).await;
    h.create_deployment("restart", 10, "1500m").await;
    wait_for("a first NodeClaim", Duration::from_secs(60), || async {
        Ok((!h.node_claims().await.is_empty()).then_some(()))
    })
    .await
    .expect("provisioning starts");
    h.crash(0).await;
    let at_crash = h.node_claims().await;
    let launched = at_crash
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some()
        })
        .count();
    tracing::info!(
        nodeclaims = at_crash.len(),
        launched,
        "the controller crashed; starting another"
    );
    let controller = spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    h.controllers.push(controller);
    h.wait_running(10, Duration::from_secs(180)).await;
    h.assert_one_node_per_claim(5, "after a restart mid-provisioning")
        .await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn of_two_replicas_one_leads_the_standby_is_ready_and_takes_over_when_the_leader_crashes() {
    let mut h = prepare("replicas", &[], KwokOptions::default()).await;
    for identity in ["replica-a", "replica-b"] {
        let controller = spawn_controller(&h.env, &h.scope, &h.spec, Some(identity)).await;
        h.controllers.push(controller);
    }
    for controller in &h.controllers {
        let health = controller.health;
        wait_for(
            "both replicas ready",
            Duration::from_secs(60),
            || async move {
                let status = super::leader_election::http_status(health, "/readyz").await;
                Ok((status == 200).then_some(()))
            },
        )
        .await
        .expect("the leader and the warm standby are ready");
    }
    h.node_pool(None, only(&["c5.xlarge"])).await;
    h.create_deployment("replicated", 6, "1500m").await;
    h.wait_running(6, Duration::from_secs(180)).await;
    h.assert_one_node_per_claim(3, "two replicas, one acting")
        .await;

    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(h.client.clone(), h.scope.namespace());
    let holder = |lease: k8s_openapi::api::coordination::v1::Lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    };
    let leader = holder(leases.get(LEASE).await.expect("the Lease"));
    let (index, standby) = match leader.as_str() {
        "replica-a" => (0, "replica-b"),
        "replica-b" => (1, "replica-a"),
        other => panic!("the Lease is held by {other:?}, not by a replica"),
    };
    h.crash(index).await;
    h.scale("replicated", 10).await;
    // The standby leads once the crashed leader's Lease expires (15 s), then provisions.
    h.wait_running(10, Duration::from_secs(180)).await;
    assert_eq!(holder(leases.get(LEASE).await.expect("the Lease")), standby);
    h.assert_one_node_per_claim(5, "after the takeover").await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn scheduler_config_default_spread_constraints_spread_pods_without_their_own() {
    let config = r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]}}"#;
    let h = start(
        "provision-default-spread",
        &["--scheduler-config", config],
        KwokOptions::default(),
    )
    .await;
    // Three 500m pods fit one c5.large: only the default zone spread (its selector deduced
    // from the pods' ReplicaSet) makes three NodeClaims, one per zone.
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("spread", 3, "500m").await;
    h.wait_running(3, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    let zones: BTreeSet<String> = claims
        .iter()
        .map(|c| claim_label(c, "topology.kubernetes.io/zone"))
        .collect();
    assert_eq!(claims.len(), 3, "one NodeClaim per zone: {zones:?}");
    assert_eq!(zones.len(), 3, "spread over three zones: {zones:?}");
    let pods = h.pods().await;
    assert!(
        pods.iter().all(|p| p
            .spec
            .as_ref()
            .is_some_and(|s| s.topology_spread_constraints.is_none())),
        "the constraints exist only in the simulation, never on the pods"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_zone_anti_affinity_group_gets_one_node_per_zone_in_one_batch() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity};
    let h = start("provision-zones", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    let mut deployment = h.deployment("zonal", 3, "500m");
    if let Some(spec) = deployment.spec.template.spec.as_mut() {
        spec.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "app".to_owned(),
                            "zonal".to_owned(),
                        )])),
                        ..LabelSelector::default()
                    }),
                    topology_key: "topology.kubernetes.io/zone".into(),
                    ..PodAffinityTerm::default()
                }]),
                ..PodAntiAffinity::default()
            }),
            ..Affinity::default()
        });
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &deployment)
        .await
        .expect("creating the Deployment");
    h.wait_running(3, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    let zones: BTreeSet<String> = claims
        .iter()
        .map(|c| claim_label(c, "topology.kubernetes.io/zone"))
        .collect();
    assert_eq!(claims.len(), 3, "one NodeClaim per pod");
    assert_eq!(zones.len(), 3, "each in its own zone: {zones:?}");
    // One batch: created within a second (unpinned, upstream's way, takes three batches, at
    // least one idle second apart each).
    let created: Vec<i64> = claims
        .iter()
        .filter_map(|c| c.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_second())
        .collect();
    let spread = created
        .iter()
        .max()
        .zip(created.iter().min())
        .map(|(a, b)| a - b);
    assert!(
        spread.is_some_and(|s| s < 2),
        "created at {created:?}: one batch"
    );
    h.finish().await;
}

/// Pods of the namespace that count for a PodDisruptionBudget: bound, Running, Ready and not
/// terminating.
fn healthy(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_deleted_node_claim_is_drained_through_evictions_that_never_break_a_pdb() {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    let h = start("drain-pdb", &[], KwokOptions::default()).await;
    // c5.xlarge: 3 pods of 1 CPU on one node.
    h.node_pool(None, only(&["c5.xlarge"])).await;
    let (selector, _) = h.workload("web", "1");
    Api::<PodDisruptionBudget>::namespaced(h.client.clone(), h.scope.namespace())
        .create(
            &PostParams::default(),
            &PodDisruptionBudget {
                metadata: h.scope.namespaced_meta("web"),
                spec: Some(PodDisruptionBudgetSpec {
                    min_available: Some(IntOrString::Int(2)),
                    selector: Some(selector),
                    ..PodDisruptionBudgetSpec::default()
                }),
                status: None,
            },
        )
        .await
        .expect("creating the PDB");
    h.create_deployment("web", 3, "1").await;
    h.wait_running(3, Duration::from_secs(120)).await;
    wait_for("3 healthy pods", Duration::from_secs(60), || async {
        Ok((healthy(&h.pods().await) >= 3).then_some(()))
    })
    .await
    .expect("the pods become Ready");
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "one node holds the 3 pods: {claims:?}");
    let old_claim = claims[0].metadata.name.clone().unwrap_or_default();
    let old_node = claims[0]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim is registered");
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&old_claim, &DeleteParams::default())
        .await
        .expect("deleting the NodeClaim");

    // Checked on every poll until the end: at least 2 of the 3 pods are healthy at any time
    // (deleting the node's pods at once would leave none), the old node is tainted while it
    // drains, and finally it is gone with its NodeClaim and the 3 pods run elsewhere.
    let lowest = std::cell::Cell::new(usize::MAX);
    let saw_taint = std::cell::Cell::new(false);
    wait_for(
        "the old node drained and gone, 3 pods running elsewhere",
        Duration::from_secs(180),
        || {
            let h = &h;
            let (old_claim, old_node) = (&old_claim, &old_node);
            let (lowest, saw_taint) = (&lowest, &saw_taint);
            async move {
                let pods = h.pods().await;
                let now = healthy(&pods);
                lowest.set(lowest.get().min(now));
                assert!(now >= 2, "the PDB allows 1 of 3 pods down; {now} healthy");
                let nodes = h.nodes().await;
                let old = nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(old_node.as_str()));
                if let Some(node) = old {
                    let tainted = node
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/disrupted"));
                    saw_taint.set(saw_taint.get() || tainted);
                }
                let claim_gone = h
                    .node_claims()
                    .await
                    .iter()
                    .all(|c| c.metadata.name.as_deref() != Some(old_claim.as_str()));
                let elsewhere = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        p.spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_deref())
                            .is_some_and(|n| n != old_node.as_str())
                    })
                    .count();
                Ok((old.is_none() && claim_gone && elsewhere == 3 && now == 3).then_some(()))
            }
        },
    )
    .await
    .expect("the node is drained within the PDB and removed");
    // What the drain reports: 3 evictions answered 200, the node drained and terminated.
    let scraped = super::leader_election::http_get(h.controllers[0].metrics, "/metrics").await;
    let value = |metric: &str| -> f64 {
        scraped
            .lines()
            .find(|l| l.starts_with(metric))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{metric} is not in /metrics:\n{scraped}"))
    };
    assert!(value("karpenter_pods_eviction_requests_total{code=\"200\"}") >= 3.0);
    assert!(
        value("karpenter_pods_drained_total{reason=\"Forceful Termination\"}") >= 3.0,
        "a NodeClaim deleted by hand drains as a forceful termination"
    );
    assert_eq!(
        value("karpenter_nodes_termination_duration_seconds_count"),
        1.0
    );
    // The node's pool (and, for the terminations, its zone: upstream labels them by both).
    let pool = format!("{{nodepool=\"{}\"", h.pool);
    assert_eq!(value(&format!("karpenter_nodes_drained_total{pool}")), 1.0);
    assert_eq!(
        value(&format!("karpenter_nodes_terminated_total{pool}")),
        1.0
    );
    assert!(
        saw_taint.get(),
        "the draining node carried karpenter.sh/disrupted:NoSchedule"
    );
    assert_eq!(
        lowest.get(),
        2,
        "pods left one at a time, as the PDB allows"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_do_not_disrupt_duration_holds_the_drain_until_it_has_passed_since_the_pod_started() {
    let h = start("drain-dnd-duration", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    let mut deployment = h.deployment("guarded", 1, "500m");
    if let Some(template) = deployment.spec.template.metadata.as_mut() {
        template.annotations = Some(BTreeMap::from([(
            "karpenter.sh/do-not-disrupt".to_owned(),
            "25s".to_owned(),
        )]));
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &deployment)
        .await
        .expect("creating the Deployment");
    h.wait_running(1, Duration::from_secs(120)).await;
    let pod = h.pods().await.into_iter().next().expect("the pod");
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .expect("the running pod has a start time")
        .0
        .as_second();
    let until = started + 25;
    let claims = h.node_claims().await;
    let claim_name = claims[0].metadata.name.clone().unwrap_or_default();
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&claim_name, &DeleteParams::default())
        .await
        .expect("deleting the NodeClaim");
    let told = h
        .wait_pod_event(
            "DoNotDisruptUntil",
            &["The karpenter.sh/do-not-disrupt grace period will elapse at"],
        )
        .await;
    let elapse_at = k8s_openapi::jiff::Timestamp::from_second(until)
        .expect("a timestamp")
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    assert!(
        told.ends_with(&elapse_at),
        "{told} (pod started at {started})"
    );
    let claims_api: Api<NodeClaim> = Api::all(h.client.clone());
    wait_for(
        "the pod evicted once its do-not-disrupt duration passed, then the NodeClaim gone",
        Duration::from_secs(90),
        || async {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let original = h
                .pods()
                .await
                .into_iter()
                .find(|p| p.metadata.uid.as_deref() == Some(uid.as_str()));
            if now < until - 1 {
                assert!(
                    original
                        .as_ref()
                        .is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
                    "the pod was evicted {}s before its do-not-disrupt duration passed",
                    until - now
                );
            }
            let gone = matches!(claims_api.get_opt(&claim_name).await, Ok(None));
            Ok((gone && original.is_none()).then_some(()))
        },
    )
    .await
    .expect("the drain goes on once the duration has passed");
    h.wait_pod_event(
        "DoNotDisruptGracePeriodElapsed",
        &["pod is now disruptable"],
    )
    .await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_do_not_disrupt_pod_holds_the_drain_until_the_termination_grace_period_forces_it() {
    let h = start("drain-tgp", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    Api::<NodePool>::all(h.client.clone())
        .patch(
            &h.pool,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!(
                {"spec": {"template": {"spec": {"terminationGracePeriod": "20s"}}}}
            )),
        )
        .await
        .expect("giving the NodePool a termination grace period");
    let mut deployment = h.deployment("guarded", 1, "500m");
    if let Some(template) = deployment.spec.template.metadata.as_mut() {
        template.annotations = Some(BTreeMap::from([(
            "karpenter.sh/do-not-disrupt".to_owned(),
            "true".to_owned(),
        )]));
    }
    if let Some(spec) = deployment.spec.template.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(5);
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &deployment)
        .await
        .expect("creating the Deployment");
    h.wait_running(1, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claim_name = claims[0].metadata.name.clone().unwrap_or_default();
    assert_eq!(
        claims[0]
            .spec
            .termination_grace_period
            .as_ref()
            .map(|d| d.as_duration()),
        Some(Duration::from_secs(20)),
        "the NodeClaim carries the pool's terminationGracePeriod"
    );
    let guarded = h.pods().await[0].metadata.uid.clone().unwrap_or_default();
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&claim_name, &DeleteParams::default())
        .await
        .expect("deleting the NodeClaim");

    let claims_api: Api<NodeClaim> = Api::all(h.client.clone());
    let (deleted, deadline) = wait_for(
        "the termination deadline annotated",
        Duration::from_secs(30),
        || async {
            let Ok(claim) = claims_api.get(&claim_name).await else {
                return Ok(None);
            };
            let deleted = claim.metadata.deletion_timestamp.clone();
            let deadline = claim.metadata.annotations.and_then(|a| {
                a.get("karpenter.sh/nodeclaim-termination-timestamp")
                    .cloned()
            });
            Ok(deleted.zip(deadline))
        },
    )
    .await
    .expect("the finalizer writes karpenter.sh/nodeclaim-termination-timestamp");
    let deleted = deleted.0.as_second();
    let deadline = deadline
        .parse::<k8s_openapi::jiff::Timestamp>()
        .expect("an RFC 3339 deadline")
        .as_second();
    assert_eq!(deadline, deleted + 20, "deletion + terminationGracePeriod");
    let expiring = wait_for(
        "a TerminationGracePeriodExpiring event on the NodeClaim",
        Duration::from_secs(30),
        || async {
            let events = Api::<Event>::namespaced(h.client.clone(), "default")
                .list(&ListParams::default().fields(&format!(
                    "involvedObject.kind=NodeClaim,involvedObject.name={claim_name}"
                )))
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            Ok(events.into_iter().find_map(|e| {
                (e.reason.as_deref() == Some("TerminationGracePeriodExpiring"))
                    .then_some(e.message.unwrap_or_default())
            }))
        },
    )
    .await
    .expect("the NodeClaim is told when its pods will be deleted");
    assert!(
        expiring.starts_with("All pods will be deleted by "),
        "{expiring}"
    );

    // Until 5 s (the pod's grace period) before the deadline the pod stays: do-not-disrupt
    // holds the drain. Then it is deleted and the node goes.
    let hold_until = deadline - 5;
    wait_for(
        "the node gone after the deadline forced the pod",
        Duration::from_secs(90),
        || async {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let pods = h.pods().await;
            let original = pods
                .iter()
                .find(|p| p.metadata.uid.as_deref() == Some(guarded.as_str()));
            if now < hold_until - 1 {
                assert!(
                    original.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
                    "the do-not-disrupt pod was removed {}s before the deadline",
                    deadline - now
                );
            }
            let gone = matches!(claims_api.get_opt(&claim_name).await, Ok(None));
            Ok((gone && original.is_none()).then_some(now))
        },
    )
    .await
    .expect("the deadline ends the drain");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_deleted_node_takes_its_node_claim_with_it_after_the_drain() {
    let h = start("delete-node", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("moving", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let nodes = h.nodes().await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let old_node = nodes[0].metadata.name.clone().unwrap_or_default();
    Api::<Node>::all(h.client.clone())
        .delete(&old_node, &DeleteParams::default())
        .await
        .expect("deleting the Node");
    wait_for(
        "the Node and its NodeClaim gone, the pod running on a new node",
        Duration::from_secs(120),
        || async {
            let nodes = h.nodes().await;
            let claims = h.node_claims().await;
            let old_gone = nodes
                .iter()
                .all(|n| n.metadata.name.as_deref() != Some(old_node.as_str()));
            let claim_gone = claims.iter().all(|c| {
                c.status.as_ref().and_then(|s| s.node_name.as_deref()) != Some(old_node.as_str())
            });
            let moved = h.pods().await.iter().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| n != old_node.as_str())
            });
            Ok((old_gone && claim_gone && moved).then_some(()))
        },
    )
    .await
    .expect("deleting a Node drains it and removes its NodeClaim");
    h.assert_one_node_per_claim(1, "one replacement").await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_drained_node_waits_for_its_volume_attachments_before_it_goes() {
    use k8s_openapi::api::storage::v1::VolumeAttachment;

    let h = start("drain-volumes", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("stateful", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    let claim_name = claims[0].metadata.name.clone().unwrap_or_default();
    let node = claims[0]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim is registered");
    // An attachment the test holds with its own finalizer, as a CSI attacher would until the
    // volume is detached.
    let attachments: Api<VolumeAttachment> = Api::all(h.client.clone());
    let va_name = h.scope.name("va");
    let attachment: VolumeAttachment = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"name": va_name, "labels": h.scope.labels(),
                     "finalizers": ["test.karpenter.sh/attached"]},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                 "source": {"persistentVolumeName": h.scope.name("pv")}}
    }))
    .expect("the test VolumeAttachment parses");
    attachments
        .create(&PostParams::default(), &attachment)
        .await
        .expect("creating the VolumeAttachment");
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&claim_name, &DeleteParams::default())
        .await
        .expect("deleting the NodeClaim");
    let nodes: Api<Node> = Api::all(h.client.clone());
    wait_for("the node drained", Duration::from_secs(60), || async {
        let on_node = h
            .pods()
            .await
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()))
            .count();
        Ok((on_node == 0).then_some(()))
    })
    .await
    .expect("the pod leaves the node");
    // Drained, but the attachment is still there: the node stays for as long as it is
    // (observed over 3 s, 15 polls, while the controller looks every second).
    for _ in 0..15 {
        assert!(
            nodes
                .get_opt(&node)
                .await
                .expect("reading the node")
                .is_some(),
            "the node went while a volume was still attached"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The NodeClaim says where termination stands, as upstream's conditions do.
    let claims_api: Api<NodeClaim> = Api::all(h.client.clone());
    wait_for(
        "Drained=True and VolumesDetached=Unknown on the NodeClaim",
        Duration::from_secs(30),
        || async {
            let Ok(claim) = claims_api.get(&claim_name).await else {
                return Ok(None);
            };
            let conditions = claim.status.and_then(|s| s.conditions).unwrap_or_default();
            let is = |type_: &str, status: &str, reason: &str| {
                conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == status && c.reason == reason)
            };
            Ok((is("Drained", "True", "Drained")
                && is("VolumesDetached", "Unknown", "AwaitingVolumeDetachment"))
            .then_some(()))
        },
    )
    .await
    .expect("the termination conditions are written");
    attachments
        .patch(
            &va_name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("releasing the VolumeAttachment");
    attachments
        .delete(&va_name, &DeleteParams::default())
        .await
        .expect("detaching the volume");
    wait_for("the node gone", Duration::from_secs(60), || async {
        Ok(matches!(nodes.get_opt(&node).await, Ok(None)).then_some(()))
    })
    .await
    .expect("the node goes once its volume is detached");
    h.finish().await;
}
