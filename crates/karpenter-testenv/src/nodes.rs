//! Simulated nodes: Node objects without a kubelet.
//!
//! [`SimulatedNodes::create`] registers a Node with labels, taints, a
//! `providerID`, capacity, allocatable and nodeInfo, and returns it once it is
//! `Ready=True`. Who plays its kubelet is [`NodeAgent`]:
//!
//! * [`NodeAgent::Kwok`] (the default): the Node carries the annotation
//!   `kwok.x-k8s.io/node: fake`, and KWOK (started by `scripts/testenv up`)
//!   sets its conditions and addresses, holds its Lease, and plays the pods
//!   bound to it (Running with a pod IP, deletion completed) through the Stage
//!   objects in `testenv/kwok/stages/`;
//! * [`NodeAgent::Builtin`]: this module sets the conditions itself, creates
//!   the Lease and renews it from a tokio task, and a small pod agent (see
//!   the crate's `pod_agent` module) plays the pods. Kept for what KWOK cannot do per
//!   node: [`SimulatedNodes::stop_heartbeat`] (a dead kubelet) and a lease
//!   renewal interval of a test's choosing.
//!
//! Either way the node lifecycle controller in kube-controller-manager treats
//! the node as healthy and the real kube-scheduler binds pods to it. (The
//! controller's simulated cloud, `--cloud-provider kwok`, makes the Nodes of
//! its instances itself, annotated for KWOK the same way.)
//!
//! Builtin tasks run on the tokio runtime that called `create`, and stop when
//! the [`SimulatedNodes`] is dropped or the node is deleted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec as K8sNodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tokio::task::JoinHandle;

use crate::error::{Error, Result, ignore_not_found, kube_err};
use crate::scope::TestScope;

/// The namespace of node heartbeat leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Label put on every simulated node.
pub const SIMULATED_LABEL: &str = "testenv.karpenter-rs.dev/simulated";
/// The address every simulated node reports (nothing listens there; it keeps
/// any accidental kubelet call on loopback). `scripts/testenv` gives KWOK the
/// same `--node-ip`.
pub const NODE_ADDRESS: &str = "127.0.0.1";
/// The annotation KWOK selects the Nodes it manages by (`scripts/testenv` runs it
/// with `--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake`).
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// The value of [`KWOK_NODE_ANNOTATION`] on managed Nodes.
pub const KWOK_NODE_ANNOTATION_VALUE: &str = "fake";

/// Who plays the kubelet of simulated nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeAgent {
    /// KWOK, started by `scripts/testenv up`: conditions, addresses, Lease, and
    /// the pods bound to the node, as its Stage objects say.
    #[default]
    Kwok,
    /// This crate: conditions set once, a Lease renewed by a tokio task every
    /// [`SimulatedNodesConfig::renew_interval`], and the pod agent when
    /// [`SimulatedNodesConfig::run_pods`]. Needed for
    /// [`SimulatedNodes::stop_heartbeat`].
    Builtin,
}

/// What to register: the parts of a Node a cloud provider or a test decides.
#[derive(Clone, Debug, Default)]
pub struct NodeSpec {
    /// Node name (a DNS-1123 subdomain).
    pub name: String,
    /// Labels; `kubernetes.io/hostname`, `kubernetes.io/os` and `kubernetes.io/arch`
    /// are filled in when missing.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// `status.capacity`.
    pub capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable`; `None` means equal to capacity.
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.providerID`, e.g. `aws:///us-west-2a/i-0123456789abcdef0`.
    pub provider_id: Option<String>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
}

impl NodeSpec {
    /// A node with 4 CPUs, 16Gi memory, 100Gi ephemeral storage and 110 pods.
    pub fn new(name: impl Into<String>) -> Self {
        let capacity = [
            ("cpu", "4"),
            ("memory", "16Gi"),
            ("ephemeral-storage", "100Gi"),
            ("pods", "110"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
        Self {
            name: name.into(),
            capacity,
            ..Self::default()
        }
    }

    /// A node named `<scope id>-<base>` carrying the scope label, so that
    /// [`TestScope::node_selector`] matches it and cleanup removes it.
    pub fn in_scope(scope: &TestScope, base: &str) -> Self {
        let mut spec = Self::new(scope.name(base));
        spec.labels.extend(scope.labels());
        spec
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Sets one capacity entry (and the same allocatable entry unless allocatable is set).
    pub fn capacity(mut self, resource: impl Into<String>, quantity: impl Into<String>) -> Self {
        self.capacity
            .insert(resource.into(), Quantity(quantity.into()));
        self
    }

    /// Sets one allocatable entry (starting from capacity).
    pub fn allocatable(mut self, resource: impl Into<String>, quantity: impl Into<String>) -> Self {
        let capacity = self.capacity.clone();
        self.allocatable
            .get_or_insert(capacity)
            .insert(resource.into(), Quantity(quantity.into()));
        self
    }

    /// Adds a taint.
    pub fn taint(mut self, key: impl Into<String>, value: Option<&str>, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: value.map(str::to_string),
            effect: effect.to_string(),
            time_added: None,
        });
        self
    }

    /// Sets `spec.providerID`.
    pub fn provider_id(mut self, id: impl Into<String>) -> Self {
        self.provider_id = Some(id.into());
        self
    }
}

/// Tuning of the simulated kubelet.
#[derive(Clone, Debug)]
pub struct SimulatedNodesConfig {
    /// Who plays the kubelet (default: KWOK).
    pub agent: NodeAgent,
    /// How long `create` waits for KWOK to report the node Ready.
    pub ready_timeout: Duration,
    /// Builtin only: `spec.leaseDurationSeconds` of node leases (kubelet default
    /// 40; KWOK's is `scripts/testenv`'s `--node-lease-duration-seconds=40`).
    pub lease_duration_seconds: i32,
    /// Builtin only: how often leases are renewed (kubelet default 10 s; KWOK
    /// renews every lease duration / 4).
    pub renew_interval: Duration,
    /// Builtin only: run the pod agent (mark bound pods Running/Ready and
    /// finish their deletion). KWOK always plays the pods of its nodes.
    pub run_pods: bool,
    /// `status.nodeInfo.kubeletVersion` (KWOK keeps the one we set).
    pub kubelet_version: String,
}

impl Default for SimulatedNodesConfig {
    fn default() -> Self {
        Self {
            agent: NodeAgent::Kwok,
            ready_timeout: Duration::from_secs(30),
            lease_duration_seconds: 40,
            renew_interval: Duration::from_secs(10),
            run_pods: true,
            kubelet_version: "v1.36.3".to_string(),
        }
    }
}

impl SimulatedNodesConfig {
    /// The builtin agent (own lease renewal and pod agent) with default tuning.
    pub fn builtin() -> Self {
        Self {
            agent: NodeAgent::Builtin,
            ..Self::default()
        }
    }
}

#[derive(Default)]
struct State {
    leases: HashMap<String, JoinHandle<()>>,
    agent: Option<JoinHandle<()>>,
}

/// A set of simulated nodes and the tasks that keep them alive.
pub struct SimulatedNodes {
    client: Client,
    config: SimulatedNodesConfig,
    names: Arc<Mutex<HashSet<String>>>,
    state: Mutex<State>,
}

impl std::fmt::Debug for SimulatedNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedNodes")
            .field("config", &self.config)
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

impl SimulatedNodes {
    /// Simulated nodes with the default configuration.
    pub fn new(client: Client) -> Self {
        Self::with_config(client, SimulatedNodesConfig::default())
    }

    /// Simulated nodes with an explicit configuration.
    pub fn with_config(client: Client, config: SimulatedNodesConfig) -> Self {
        Self {
            client,
            config,
            names: Arc::new(Mutex::new(HashSet::new())),
            state: Mutex::new(State::default()),
        }
    }

    /// Names of the nodes this set manages.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.names).iter().cloned().collect();
        names.sort();
        names
    }

    /// Registers a node and returns it once it is Ready: with KWOK, once KWOK
    /// initialized it; builtin, with its Lease created and renewed from now on.
    pub async fn create(&self, spec: NodeSpec) -> Result<Node> {
        match self.config.agent {
            NodeAgent::Kwok => self.create_kwok(spec).await,
            NodeAgent::Builtin => self.create_builtin(spec).await,
        }
    }

    /// The Node is created with the KWOK annotation (KWOK takes a node on only
    /// when it first sees it: an annotation added later is ignored), KWOK makes
    /// it Ready, and only then are capacity, allocatable and nodeInfo set: KWOK's
    /// node-initialize renders a status with 1k CPUs for a node without one, from
    /// its own cache, and would overwrite a status written before it ran. Once
    /// the node is Ready no stage rewrites them.
    async fn create_kwok(&self, spec: NodeSpec) -> Result<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut node = node_object(&spec);
        node.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                KWOK_NODE_ANNOTATION.into(),
                KWOK_NODE_ANNOTATION_VALUE.into(),
            );
        nodes
            .create(&PostParams::default(), &node)
            .await
            .map_err(kube_err(format!("creating Node {}", spec.name)))?;
        lock(&self.names).insert(spec.name.clone());
        let what = format!("KWOK to report Node {} Ready", spec.name);
        crate::wait_for(&what, self.config.ready_timeout, || async {
            let node = nodes
                .get(&spec.name)
                .await
                .map_err(kube_err(format!("reading Node {}", spec.name)))?;
            Ok(is_ready(&node).then_some(()))
        })
        .await?;
        let mut status = node_status(&spec, &self.config, now());
        status.conditions = None;
        status.addresses = None;
        nodes
            .patch_status(
                &spec.name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "status": status })),
            )
            .await
            .map_err(kube_err(format!(
                "setting the status of Node {}",
                spec.name
            )))
    }

    async fn create_builtin(&self, spec: NodeSpec) -> Result<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .create(&PostParams::default(), &node_object(&spec))
            .await
            .map_err(kube_err(format!("creating Node {}", spec.name)))?;
        let status = serde_json::json!({ "status": node_status(&spec, &self.config, now()) });
        let node = nodes
            .patch_status(&spec.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(kube_err(format!(
                "setting the status of Node {}",
                spec.name
            )))?;

        let lease = lease_object(&node, &self.config, now());
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NODE_LEASE_NAMESPACE);
        match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {
                leases
                    .replace(&spec.name, &PostParams::default(), &lease)
                    .await
                    .map_err(kube_err(format!("replacing Lease {}", spec.name)))?;
            }
            Err(e) => return Err(kube_err(format!("creating Lease {}", spec.name))(e)),
        }

        lock(&self.names).insert(spec.name.clone());
        let renewer = tokio::spawn(renew_lease(
            self.client.clone(),
            spec.name.clone(),
            self.config.renew_interval,
        ));
        let mut state = lock(&self.state);
        if let Some(old) = state.leases.insert(spec.name.clone(), renewer) {
            old.abort();
        }
        if self.config.run_pods && state.agent.is_none() {
            state.agent = Some(tokio::spawn(crate::pod_agent::run(
                self.client.clone(),
                Arc::clone(&self.names),
                NODE_ADDRESS,
            )));
        }
        Ok(node)
    }

    /// Deletes the Node and its Lease (builtin: stops renewing it first; KWOK
    /// stops when it sees the Node go, and the Lease is owned by the Node).
    pub async fn delete(&self, name: &str) -> Result<()> {
        if let Some(task) = lock(&self.state).leases.remove(name) {
            task.abort();
        }
        lock(&self.names).remove(name);
        ignore_not_found(
            Api::<Node>::all(self.client.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )
        .map_err(kube_err(format!("deleting Node {name}")))?;
        ignore_not_found(
            Api::<Lease>::namespaced(self.client.clone(), NODE_LEASE_NAMESPACE)
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )
        .map_err(kube_err(format!("deleting Lease {name}")))
    }

    /// Stops the heartbeat of a node without deleting it: the node lifecycle
    /// controller marks it `Unknown` after its grace period, as for a dead kubelet.
    ///
    /// Builtin agent only: KWOK keeps renewing the Lease of a Node it once
    /// managed even after its annotation is removed (its selector filters
    /// events client-side), so a KWOK node cannot be made to die alone.
    pub fn stop_heartbeat(&self, name: &str) -> Result<()> {
        if self.config.agent == NodeAgent::Kwok {
            return Err(Error::Unsupported {
                what: format!("stopping the heartbeat of Node {name}"),
                why: "for KWOK nodes: use SimulatedNodesConfig::builtin()".into(),
            });
        }
        if let Some(task) = lock(&self.state).leases.remove(name) {
            task.abort();
        }
        Ok(())
    }

    /// Deletes every node of this set.
    pub async fn delete_all(&self) -> Result<()> {
        for name in self.names() {
            self.delete(&name).await?;
        }
        Ok(())
    }
}

impl Drop for SimulatedNodes {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        for (_, task) in state.leases.drain() {
            task.abort();
        }
        if let Some(agent) = state.agent.take() {
            agent.abort();
        }
    }
}

/// `Ready=True` among the node's conditions.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now() -> Timestamp {
    Timestamp::now()
}

fn node_object(spec: &NodeSpec) -> Node {
    let mut labels = spec.labels.clone();
    labels
        .entry("kubernetes.io/hostname".into())
        .or_insert_with(|| spec.name.clone());
    labels
        .entry("kubernetes.io/os".into())
        .or_insert_with(|| "linux".into());
    labels
        .entry("kubernetes.io/arch".into())
        .or_insert_with(|| "amd64".into());
    labels.insert(SIMULATED_LABEL.into(), "true".into());
    Node {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            labels: Some(labels),
            annotations: (!spec.annotations.is_empty()).then(|| spec.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(K8sNodeSpec {
            provider_id: spec.provider_id.clone(),
            taints: (!spec.taints.is_empty()).then(|| spec.taints.clone()),
            unschedulable: spec.unschedulable.then_some(true),
            ..K8sNodeSpec::default()
        }),
        status: None,
    }
}

fn node_status(spec: &NodeSpec, config: &SimulatedNodesConfig, at: Timestamp) -> NodeStatus {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(at)),
        last_transition_time: Some(Time(at)),
    };
    let arch = spec
        .labels
        .get("kubernetes.io/arch")
        .cloned()
        .unwrap_or_else(|| "amd64".into());
    let os = spec
        .labels
        .get("kubernetes.io/os")
        .cloned()
        .unwrap_or_else(|| "linux".into());
    NodeStatus {
        capacity: Some(spec.capacity.clone()),
        allocatable: Some(
            spec.allocatable
                .clone()
                .unwrap_or_else(|| spec.capacity.clone()),
        ),
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "simulated",
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "simulated",
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "simulated",
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "simulated kubelet is posting ready status",
            ),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: NODE_ADDRESS.into(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: spec.name.clone(),
            },
        ]),
        node_info: Some(NodeSystemInfo {
            architecture: arch,
            operating_system: os,
            kubelet_version: config.kubelet_version.clone(),
            kube_proxy_version: String::new(),
            container_runtime_version: "simulated://1.0".into(),
            kernel_version: "simulated".into(),
            os_image: "karpenter-testenv simulated node".into(),
            machine_id: spec.name.clone(),
            system_uuid: spec.name.clone(),
            boot_id: spec.name.clone(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

fn lease_object(node: &Node, config: &SimulatedNodesConfig, at: Timestamp) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NODE_LEASE_NAMESPACE.into()),
            // As the kubelet does: the lease goes away with its node.
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference {
                    api_version: <Node as k8s_openapi::Resource>::API_VERSION.into(),
                    kind: <Node as k8s_openapi::Resource>::KIND.into(),
                    name: name.clone(),
                    uid,
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name),
            lease_duration_seconds: Some(config.lease_duration_seconds),
            renew_time: Some(MicroTime(at)),
            ..LeaseSpec::default()
        }),
    }
}

/// Renews a node lease until the node is gone or the task is aborted.
async fn renew_lease(client: Client, name: String, interval: Duration) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let nodes: Api<Node> = Api::all(client);
    loop {
        tokio::time::sleep(interval).await;
        let patch = serde_json::json!({ "spec": { "renewTime": MicroTime(now()) } });
        match leases
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {
                if matches!(nodes.get_opt(&name).await, Ok(None)) {
                    tracing::debug!(node = %name, "node deleted; lease renewal stops");
                    return;
                }
                tracing::warn!(node = %name, "node lease disappeared");
            }
            Err(e) => tracing::warn!(node = %name, error = %e, "renewing node lease failed"),
        }
    }
}
