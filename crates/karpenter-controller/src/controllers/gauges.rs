//! Upstream's `metrics.node` and `metrics.pod` controllers: gauges of every node's allocatable,
//! system overhead (capacity minus allocatable), the requests and limits of its pods and of its
//! DaemonSet pods (`karpenter_nodes_allocatable`, `karpenter_nodes_system_overhead`,
//! `karpenter_nodes_total_pod_requests`, `karpenter_nodes_total_pod_limits`,
//! `karpenter_nodes_total_daemon_requests`, `karpenter_nodes_total_daemon_limits`) and age
//! (`karpenter_nodes_current_lifetime_seconds`), of the cluster's utilization (pod requests as a
//! percentage of allocatable, `karpenter_cluster_utilization_percent`) and of every pod's state
//! (`karpenter_pods_state`), rebuilt from the cluster-state index every 5 s (upstream's
//! `metrics.node` interval) by the loops [`NodeMetrics`] and [`PodMetrics`], and
//! `karpenter_pods_startup_duration_seconds`.
//!
//! Labels are upstream's: a node's series carry `node_name`, `phase`, `managed`, one label per
//! well-known node label ([`NODE_LABELS`]) and `resource_type`; a pod's carry `name`,
//! `namespace`, `owner`, `node`, `scheduled`, `nodepool`, `zone`, `arch`, `capacity_type`,
//! `instance_type`, `phase`, `ready` and `managed`. A series whose node or pod is gone (or
//! whose labels changed) is removed. Requests are summed as upstream's cluster state sums them:
//! every pod bound to the node that is not finished (`Succeeded`/`Failed`), each with
//! `pods: 1`; limits as Kubernetes' `PodLimits` sums them, also with `pods: 1`; the daemon
//! figures only over DaemonSet pods. A node without such pods has no request series, as
//! upstream.
//!
//! Startup: like upstream, a pod counts once, when it is Ready after having been seen Pending
//! (or created since this loop started: a pod that went from Pending to Ready between two
//! passes was Pending while watched); the duration is its `Ready` condition's transition time
//! minus its creation time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::{Quantity, ResourceList};
use karpenter_state::Cluster;
use karpenter_state::conditions::from_api_time;

use crate::cluster::index::ClusterCache;
use crate::reconcile::context::PodTimes;
use crate::reconcile::{Action, Busy, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::{ControllerMetrics, Labels, NodeSeriesLabels};
use crate::report::pod_state::{Interner, PodStateLabels};

/// How often the gauges are rebuilt (upstream's `metrics.node` and `metrics.pod` interval).
pub const INTERVAL: Duration = Duration::from_secs(5);

/// The gauges' memory, shared by [`NodeMetrics`] and [`PodMetrics`].
#[derive(Debug, Clone)]
pub struct SharedState {
    state: Arc<Mutex<StateMetrics>>,
    cache: ClusterCache,
}

impl SharedState {
    pub fn new(
        metrics: ControllerMetrics,
        cache: ClusterCache,
        started: DateTime<Utc>,
        pod_times: PodTimes,
    ) -> Self {
        let mut state = StateMetrics::new(metrics, started);
        state.pod_times = pod_times;
        SharedState {
            state: Arc::new(Mutex::new(state)),
            cache,
        }
    }

    fn lock(&self) -> MutexGuard<'_, StateMetrics> {
        match self.state.lock() {
            Ok(state) => state,
            // Gauges only: a panicked holder leaves at worst a stale series.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The one step of a gauge loop: rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuild;

fn rebuild_scan(name: &'static str, busy: Busy<'_>) -> Scan<Rebuild> {
    let mut scan = Scan::new();
    if !busy.contains(name) {
        scan.step(name, Rebuild);
    }
    scan
}

/// Upstream's `metrics.node`: every node's allocatable and requests.
#[derive(Debug, Clone)]
pub struct NodeMetrics(pub SharedState);

impl Reconciler for NodeMetrics {
    type Step = Rebuild;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "metrics.node";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Rebuild> {
        rebuild_scan(Self::NAME, busy)
    }

    async fn execute(&self, _: Rebuild) -> Result<Action, std::convert::Infallible> {
        let nodes = collect_nodes(&self.0.cache.lock(), Utc::now());
        self.0.lock().apply_nodes(nodes);
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Rebuild) -> &'static str {
        "rebuild"
    }
}

/// Upstream's `metrics.pod`: every pod's state, and startup durations.
#[derive(Debug, Clone)]
pub struct PodMetrics(pub SharedState);

impl Reconciler for PodMetrics {
    type Step = Rebuild;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "metrics.pod";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Rebuild> {
        rebuild_scan(Self::NAME, busy)
    }

    async fn execute(&self, _: Rebuild) -> Result<Action, std::convert::Infallible> {
        let cluster = self.0.cache.lock();
        self.0.lock().update_pod_states(&cluster);
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Rebuild) -> &'static str {
        "rebuild"
    }
}

/// The node labels upstream turns into metric labels (core's `v1.WellKnownLabels` with the AWS
/// provider's additions), each with its metric label: the part after `/`, lowercased, `-` as
/// `_`.
pub const NODE_LABELS: &[(&str, &str)] = &[
    (labels::NODEPOOL, "nodepool"),
    (labels::ZONE, "zone"),
    (labels::REGION, "region"),
    (labels::INSTANCE_TYPE, "instance_type"),
    (labels::ARCH, "arch"),
    (labels::OS, "os"),
    (labels::CAPACITY_TYPE, "capacity_type"),
    (labels::WINDOWS_BUILD, "windows_build"),
    (labels::CAPACITY_RESERVATION_ID, "capacity_reservation_id"),
    (
        labels::CAPACITY_RESERVATION_TYPE,
        "capacity_reservation_type",
    ),
    (
        labels::CAPACITY_RESERVATION_INTERRUPTIBLE,
        "capacity_reservation_interruptible",
    ),
    (labels::INSTANCE_HYPERVISOR, "instance_hypervisor"),
    (
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        "instance_encryption_in_transit_supported",
    ),
    ("karpenter.k8s.aws/nitro-sandbox", "nitro_sandbox"),
    (labels::INSTANCE_CATEGORY, "instance_category"),
    (labels::INSTANCE_CAPABILITY_FLEX, "instance_capability_flex"),
    (labels::INSTANCE_FAMILY, "instance_family"),
    (labels::INSTANCE_GENERATION, "instance_generation"),
    (labels::INSTANCE_SIZE, "instance_size"),
    (labels::INSTANCE_LOCAL_NVME, "instance_local_nvme"),
    (labels::INSTANCE_CPU, "instance_cpu"),
    (
        labels::INSTANCE_CPU_MANUFACTURER,
        "instance_cpu_manufacturer",
    ),
    (
        labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        "instance_cpu_sustained_clock_speed_mhz",
    ),
    (labels::INSTANCE_MEMORY, "instance_memory"),
    (labels::INSTANCE_EBS_BANDWIDTH, "instance_ebs_bandwidth"),
    (
        labels::INSTANCE_NETWORK_BANDWIDTH,
        "instance_network_bandwidth",
    ),
    (labels::INSTANCE_GPU_NAME, "instance_gpu_name"),
    (
        labels::INSTANCE_GPU_MANUFACTURER,
        "instance_gpu_manufacturer",
    ),
    (labels::INSTANCE_GPU_COUNT, "instance_gpu_count"),
    (labels::INSTANCE_GPU_MEMORY, "instance_gpu_memory"),
    (
        labels::INSTANCE_ACCELERATOR_NAME,
        "instance_accelerator_name",
    ),
    (
        labels::INSTANCE_ACCELERATOR_MANUFACTURER,
        "instance_accelerator_manufacturer",
    ),
    (
        labels::INSTANCE_ACCELERATOR_COUNT,
        "instance_accelerator_count",
    ),
    (labels::ZONE_ID, "zone_id"),
    ("karpenter.k8s.aws/instance-tenancy", "instance_tenancy"),
    ("karpenter.k8s.aws/placement-group-id", "placement_group_id"),
    (
        "karpenter.k8s.aws/placement-group-partition",
        "placement_group_partition",
    ),
];

/// A resource name as upstream's `resource_type` label writes it (`ephemeral-storage` ->
/// `ephemeral_storage`).
pub fn resource_type(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// A quantity as upstream's gauges write it: cores for cpu, whole units (rounded up) otherwise.
pub fn resource_value(name: &str, quantity: Quantity) -> f64 {
    if name == "cpu" {
        quantity.millis() as f64 / 1000.0
    } else {
        quantity.value() as f64
    }
}

/// The gauges `metrics.node` keeps: per node and resource, per node (its age), and per
/// resource over the cluster (utilization).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum NodeGauge {
    Allocatable,
    PodRequests,
    PodLimits,
    DaemonRequests,
    DaemonLimits,
    SystemOverhead,
    Lifetime,
    ClusterUtilization,
}

const NODE_GAUGES: [NodeGauge; 8] = [
    NodeGauge::Allocatable,
    NodeGauge::PodRequests,
    NodeGauge::PodLimits,
    NodeGauge::DaemonRequests,
    NodeGauge::DaemonLimits,
    NodeGauge::SystemOverhead,
    NodeGauge::Lifetime,
    NodeGauge::ClusterUtilization,
];

/// The node series one pass wants, by gauge.
type NodeSeries = HashMap<NodeGauge, HashMap<NodeSeriesLabels, f64>>;

fn text(value: Option<&String>) -> String {
    value.cloned().unwrap_or_default()
}

/// The pod's `PodScheduled` condition: whether it is True, and since when.
fn scheduled_condition(pod: &PodRecord) -> Option<(bool, Option<DateTime<Utc>>)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            (
                c.status == "True",
                c.last_transition_time.as_ref().and_then(from_api_time),
            )
        })
}

/// Which of a pod's timing gauges are set (upstream's `metrics.pod` per-pod gauges).
#[derive(Debug, Clone, Default)]
struct PodTimings {
    unstarted: bool,
    provisioning_unstarted: bool,
    /// `dynamic_resources` of the unbound gauges that are set.
    unbound: Option<bool>,
    provisioning_unbound: Option<bool>,
    undecided: bool,
}

impl PodTimings {
    fn is_set(&self) -> bool {
        self.unstarted
            || self.provisioning_unstarted
            || self.unbound.is_some()
            || self.provisioning_unbound.is_some()
            || self.undecided
    }
}

/// When the pod's `Ready` condition turned True, if it is True.
fn ready_since(pod: &PodRecord) -> Option<Option<DateTime<Utc>>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().and_then(from_api_time))
}

/// A node's labels without `resource_type`.
fn node_labels(node: &Node, managed: bool) -> Labels {
    let mut out: Labels = Vec::with_capacity(NODE_LABELS.len() + 4);
    out.push(("node_name", text(node.metadata.name.as_ref())));
    out.push((
        "phase",
        text(node.status.as_ref().and_then(|s| s.phase.as_ref())),
    ));
    out.push(("managed", managed.to_string()));
    let node_labels = node.metadata.labels.as_ref();
    for (key, label) in NODE_LABELS {
        out.push((label, text(node_labels.and_then(|l| l.get(*key)))));
    }
    out
}

/// Upstream's self link of the pod's first owner.
fn owner(pod: &PodRecord) -> String {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod.metadata
        .owner_references
        .as_ref()
        .and_then(|owners| owners.first())
        .map(|o| {
            format!(
                "/apis/{}/namespaces/{namespace}/{}s/{}",
                o.api_version,
                o.kind.to_lowercase(),
                o.name
            )
        })
        .unwrap_or_default()
}

/// A pod's `karpenter_pods_state` labels; `node` the label values of the Node it is bound to,
/// if the index has it.
fn pod_labels(pod: &PodRecord, node: Option<&NodeValues>, values: &mut Interner) -> PodStateLabels {
    let node_name = pod.node_name().unwrap_or_default();
    let empty = values.get("");
    let of = |pick: fn(&NodeValues) -> &Arc<str>| {
        node.map_or_else(|| Arc::clone(&empty), |n| Arc::clone(pick(n)))
    };
    let nodepool = of(|n| &n.nodepool);
    PodStateLabels {
        name: values.get(pod.metadata.name.as_deref().unwrap_or_default()),
        namespace: values.get(pod.metadata.namespace.as_deref().unwrap_or_default()),
        owner: values.get(&owner(pod)),
        scheduled: !node_name.is_empty(),
        node: values.get(node_name),
        zone: of(|n| &n.zone),
        arch: of(|n| &n.arch),
        capacity_type: of(|n| &n.capacity_type),
        instance_type: of(|n| &n.instance_type),
        managed: !nodepool.is_empty(),
        nodepool,
        phase: values.get(pod.phase()),
        ready: ready_since(pod).is_some(),
    }
}

/// A resource list of the Node's status (`capacity` or `allocatable`).
fn node_resources(node: &Node, allocatable: bool) -> ResourceList {
    node.status
        .as_ref()
        .and_then(|s| {
            if allocatable {
                s.allocatable.as_ref()
            } else {
                s.capacity.as_ref()
            }
        })
        .and_then(|a| ResourceList::from_k8s(a).ok())
        .unwrap_or_default()
}

/// Per node with a Node object, each resource a series: its allocatable, its system overhead
/// (capacity minus allocatable, per resource of the capacity), and the requests and limits of
/// its pods and of its DaemonSet pods; its age at `now`; and over every such node, pod requests
/// as a percentage of allocatable (upstream's `metrics.node`).
fn collect_nodes(cluster: &Cluster, now: DateTime<Utc>) -> NodeSeries {
    let mut out: NodeSeries = NODE_GAUGES.iter().map(|g| (*g, HashMap::new())).collect();
    let mut cluster_allocatable = ResourceList::new();
    let mut cluster_requests = ResourceList::new();
    for state in cluster.state_nodes() {
        let Some(node) = state.node else { continue };
        let base = Arc::new(node_labels(node, state.managed()));
        let allocatable = node_resources(node, true);
        let capacity = node_resources(node, false);
        let mut overhead = ResourceList::new();
        for (resource, quantity) in capacity.iter() {
            overhead.set(resource, *quantity - allocatable.get(resource));
        }
        let mut pods = ResourceList::new();
        let mut pod_limits = ResourceList::new();
        let mut daemons = ResourceList::new();
        let mut daemon_limits = ResourceList::new();
        for pod in state.pods.iter().filter(|p| !p.is_terminal()) {
            let spec = pod.spec.as_deref();
            let Ok(requests) = karpenter_scheduling::pod::pod_requests(spec) else {
                continue;
            };
            let limits = karpenter_scheduling::pod::pod_limits(spec).unwrap_or_default();
            pods.add(&requests);
            pod_limits.add(&limits);
            if pod.is_daemonset() {
                daemons.add(&requests);
                daemon_limits.add(&limits);
            }
        }
        cluster_allocatable.add(&state.allocatable());
        cluster_requests.add(&pods);
        let lists = [
            (NodeGauge::Allocatable, allocatable),
            (NodeGauge::SystemOverhead, overhead),
            (NodeGauge::PodRequests, pods),
            (NodeGauge::PodLimits, pod_limits),
            (NodeGauge::DaemonRequests, daemons),
            (NodeGauge::DaemonLimits, daemon_limits),
        ];
        for (gauge, list) in lists {
            let series = out.entry(gauge).or_default();
            for (resource, quantity) in list.iter() {
                series.insert(
                    NodeSeriesLabels::new(&base, Some(resource_type(resource))),
                    resource_value(resource, *quantity),
                );
            }
        }
        if let Some(created) = node
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(from_api_time)
        {
            out.entry(NodeGauge::Lifetime).or_default().insert(
                NodeSeriesLabels::new(&base, None),
                (now - created).as_seconds_f64(),
            );
        }
    }
    let utilization = out.entry(NodeGauge::ClusterUtilization).or_default();
    let none = Arc::new(Labels::new());
    for (resource, allocatable) in cluster_allocatable.iter() {
        if allocatable.value() == 0 {
            continue;
        }
        let used = cluster_requests.get(resource);
        let fraction = if resource == "cpu" {
            used.millis() as f64 / allocatable.millis() as f64
        } else {
            used.value() as f64 / allocatable.value() as f64
        };
        utilization.insert(
            NodeSeriesLabels::new(&none, Some(resource_type(resource))),
            100.0 * fraction,
        );
    }
    out
}

/// A pod's series and what it was built from.
#[derive(Debug)]
struct PodSeries {
    /// The record the labels were built from (held, so its address is not reused).
    record: Arc<PodRecord>,
    /// Its node's label values then.
    node: Option<NodeValues>,
    labels: PodStateLabels,
    /// The last pass that saw the pod.
    pass: u64,
}

/// The label values a pod's series takes from its node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeValues {
    zone: Arc<str>,
    arch: Arc<str>,
    capacity_type: Arc<str>,
    instance_type: Arc<str>,
    nodepool: Arc<str>,
}

impl NodeValues {
    fn of(node: &Node, values: &mut Interner) -> Self {
        let label = |key: &str| -> &str {
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .map_or("", String::as_str)
        };
        NodeValues {
            zone: values.get(label(labels::ZONE)),
            arch: values.get(label(labels::ARCH)),
            capacity_type: values.get(label(labels::CAPACITY_TYPE)),
            instance_type: values.get(label(labels::INSTANCE_TYPE)),
            nodepool: values.get(label(labels::NODEPOOL)),
        }
    }
}

/// Keeps the node and pod gauges of the cluster-state index, and observes pod startups.
#[derive(Debug)]
pub struct StateMetrics {
    metrics: ControllerMetrics,
    /// Pods created at or after this (whole seconds, as creation timestamps are) were Pending
    /// while watched.
    started: DateTime<Utc>,
    /// Pods (by uid) seen Pending whose start is not observed yet.
    pending: HashSet<String>,
    /// Pods whose start was observed, or that finished without starting.
    done: HashSet<String>,
    node_series: HashMap<NodeGauge, HashSet<NodeSeriesLabels>>,
    /// Each pod's `karpenter_pods_state` series, by uid (or `namespace/name`), so a pass
    /// compares rather than rebuilds; label values shared with the family's copy through
    /// `values`.
    pod_series: HashMap<String, PodSeries>,
    values: Interner,
    /// Passes so far (a series not seen in the current one is gone).
    pass: u64,
    /// When the provisioner saw and decided about pending pods.
    pub(crate) pod_times: PodTimes,
    /// Pods (by `namespace/name`) seen Pending, and seen Pending unbound (upstream's
    /// `pendingPods`, `unscheduledPods`).
    seen_pending: HashSet<String>,
    seen_unbound: HashSet<String>,
    /// Each pod's timing gauges, by `namespace/name`.
    timings: HashMap<String, PodTimings>,
}

impl StateMetrics {
    /// Starts watching at `started`.
    pub fn new(metrics: ControllerMetrics, started: DateTime<Utc>) -> Self {
        StateMetrics {
            metrics,
            started: started
                .duration_trunc(TimeDelta::seconds(1))
                .unwrap_or(started),
            pending: HashSet::new(),
            done: HashSet::new(),
            node_series: HashMap::new(),
            pod_series: HashMap::new(),
            values: Interner::default(),
            pass: 0,
            pod_times: PodTimes::default(),
            seen_pending: HashSet::new(),
            seen_unbound: HashSet::new(),
            timings: HashMap::new(),
        }
    }

    /// One pass of `metrics.node` and `metrics.pod` over the index.
    #[cfg(test)]
    pub(crate) fn update(&mut self, cache: &ClusterCache) {
        let cluster = cache.lock();
        let nodes = collect_nodes(&cluster, Utc::now());
        self.apply_nodes(nodes);
        self.update_pod_states(&cluster);
    }

    /// One pass of upstream's `metrics.pod` over the index.
    fn update_pod_states(&mut self, cluster: &Cluster) {
        let startups = self.update_pods(cluster);
        for seconds in startups {
            self.metrics.pod_startup_duration(seconds);
        }
        self.update_pod_timings(cluster, Utc::now());
    }

    /// Upstream's per-pod timing gauges and the bound and provisioning durations
    /// (`recordPodSchedulingUndecidedMetric`, `recordPodStartupMetric`, `recordPodBoundMetric`):
    /// how long each pending pod has waited since it was created and since the provisioner
    /// first found it a place, to start and to be bound; how long since the provisioner first
    /// saw it without deciding about it; when it binds or becomes ready, those durations.
    fn update_pod_timings(&mut self, cluster: &Cluster, now: DateTime<Utc>) {
        let m = self.metrics.clone();
        let mut present = HashSet::new();
        for pod in cluster.pods() {
            let key = pod.key();
            // A bound pod that is not pending and was never watched pending has no timing to
            // set or clear (nearly every pod, once a scale-out settles).
            if pod.phase() != "Pending"
                && pod.node_name().is_some()
                && !self.timings.contains_key(&key)
                && !self.seen_pending.contains(&key)
                && !self.seen_unbound.contains(&key)
            {
                present.insert(key);
                continue;
            }
            let names = vec![
                ("name", text(pod.metadata.name.as_ref())),
                ("namespace", text(pod.metadata.namespace.as_ref())),
            ];
            let with_dra = |dra: bool| {
                let mut labels = names.clone();
                labels.push(("dynamic_resources", dra.to_string()));
                labels
            };
            let times = self.pod_times.get(&key);
            let created = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .and_then(from_api_time);
            let since = |t: Option<DateTime<Utc>>| t.map_or(0.0, |t| (now - t).as_seconds_f64());
            let scheduled = scheduled_condition(pod);
            let bound = scheduled.is_some_and(|(ok, _)| ok);
            let pending = pod.phase() == "Pending";
            let dra = pod.has_dra_requirements();
            // A pod with no gauge set has no entry (most pods, running for long).
            let mut timing = self.timings.remove(&key).unwrap_or_default();
            let timing = &mut timing;
            // Not decided yet: since the provisioner first saw it.
            if times.decided.is_some() || bound || pod.node_name().is_some() || pod.is_terminal() {
                if std::mem::take(&mut timing.undecided) {
                    m.pods_undecided_time.remove(&names);
                }
            } else if let Some(acked) = times.acked {
                m.pods_undecided_time
                    .get_or_create(&names)
                    .set(since(Some(acked)));
                timing.undecided = true;
            }
            // Not started yet.
            let set_unstarted = |timing: &mut PodTimings| {
                m.pods_unstarted_time
                    .get_or_create(&names)
                    .set(since(created));
                timing.unstarted = true;
                match times.schedulable {
                    Some(at) => {
                        m.pods_provisioning_unstarted_time
                            .get_or_create(&names)
                            .set(since(Some(at)));
                        timing.provisioning_unstarted = true;
                    }
                    None => {
                        if std::mem::take(&mut timing.provisioning_unstarted) {
                            m.pods_provisioning_unstarted_time.remove(&names);
                        }
                    }
                }
            };
            let clear_unstarted = |timing: &mut PodTimings| {
                if std::mem::take(&mut timing.unstarted) {
                    m.pods_unstarted_time.remove(&names);
                }
                if std::mem::take(&mut timing.provisioning_unstarted) {
                    m.pods_provisioning_unstarted_time.remove(&names);
                }
            };
            if pending {
                set_unstarted(timing);
                self.seen_pending.insert(key.clone());
            } else if self.seen_pending.contains(&key) {
                if let Some(ready_at) = ready_since(pod) {
                    clear_unstarted(timing);
                    if let (Some(ready_at), Some(at)) = (ready_at, times.schedulable) {
                        m.pod_provisioning_startup((ready_at - at).as_seconds_f64());
                    }
                    self.seen_pending.remove(&key);
                    self.pod_times.clear(&key);
                } else if pod.is_terminal() {
                    clear_unstarted(timing);
                    self.seen_pending.remove(&key);
                    self.pod_times.clear(&key);
                } else {
                    set_unstarted(timing);
                }
            }
            // Not bound yet.
            if pending {
                if !bound {
                    if timing.unbound.is_some_and(|old| old != dra) {
                        m.pods_unbound_time.remove(&with_dra(!dra));
                    }
                    m.pods_unbound_time
                        .get_or_create(&with_dra(dra))
                        .set(since(created));
                    timing.unbound = Some(dra);
                    match times.schedulable {
                        Some(at) => {
                            if timing.provisioning_unbound.is_some_and(|old| old != dra) {
                                m.pods_provisioning_unbound_time.remove(&with_dra(!dra));
                            }
                            m.pods_provisioning_unbound_time
                                .get_or_create(&with_dra(dra))
                                .set(since(Some(at)));
                            timing.provisioning_unbound = Some(dra);
                        }
                        None => {
                            if let Some(old) = timing.provisioning_unbound.take() {
                                m.pods_provisioning_unbound_time.remove(&with_dra(old));
                            }
                        }
                    }
                }
                self.seen_unbound.insert(key.clone());
            } else if bound && self.seen_unbound.contains(&key) {
                if let Some(old) = timing.unbound.take() {
                    m.pods_unbound_time.remove(&with_dra(old));
                }
                if let Some(old) = timing.provisioning_unbound.take() {
                    m.pods_provisioning_unbound_time.remove(&with_dra(old));
                }
                let at = scheduled.and_then(|(_, at)| at);
                if let (Some(at), Some(created)) = (at, created) {
                    m.pod_bound(
                        dra,
                        (at - created).as_seconds_f64(),
                        times.schedulable.map(|s| (at - s).as_seconds_f64()),
                    );
                }
                self.seen_unbound.remove(&key);
            }
            if timing.is_set() {
                self.timings.insert(key.clone(), std::mem::take(timing));
            }
            present.insert(key);
        }
        // Pods that are gone lose their gauges.
        self.timings.retain(|key, timing| {
            if present.contains(key) {
                return true;
            }
            let (namespace, name) = key.split_once('/').unwrap_or_default();
            let names = vec![
                ("name", name.to_owned()),
                ("namespace", namespace.to_owned()),
            ];
            m.pods_unstarted_time.remove(&names);
            m.pods_provisioning_unstarted_time.remove(&names);
            m.pods_undecided_time.remove(&names);
            for dra in [timing.unbound, timing.provisioning_unbound]
                .into_iter()
                .flatten()
            {
                let mut labels = names.clone();
                labels.push(("dynamic_resources", dra.to_string()));
                m.pods_unbound_time.remove(&labels);
                m.pods_provisioning_unbound_time.remove(&labels);
            }
            false
        });
        self.seen_pending.retain(|k| present.contains(k));
        self.seen_unbound.retain(|k| present.contains(k));
    }

    fn apply_nodes(&mut self, wanted: NodeSeries) {
        for gauge in NODE_GAUGES {
            let family = match gauge {
                NodeGauge::Allocatable => &self.metrics.nodes_allocatable,
                NodeGauge::PodRequests => &self.metrics.nodes_total_pod_requests,
                NodeGauge::PodLimits => &self.metrics.nodes_total_pod_limits,
                NodeGauge::DaemonRequests => &self.metrics.nodes_total_daemon_requests,
                NodeGauge::DaemonLimits => &self.metrics.nodes_total_daemon_limits,
                NodeGauge::SystemOverhead => &self.metrics.nodes_system_overhead,
                NodeGauge::Lifetime => &self.metrics.nodes_current_lifetime_seconds,
                NodeGauge::ClusterUtilization => &self.metrics.cluster_utilization_percent,
            };
            let series = wanted.get(&gauge);
            let previous = self.node_series.entry(gauge).or_default();
            let mut kept = HashSet::with_capacity(series.map_or(0, HashMap::len));
            for old in previous.drain() {
                if series.is_some_and(|s| s.contains_key(&old)) {
                    kept.insert(old);
                } else {
                    family.remove(&old);
                }
            }
            for (labels, value) in series.into_iter().flatten() {
                // A series kept from an earlier pass keeps its labels (the family holds the
                // same ones): this pass's copy is let go.
                let labels = match kept.get(labels) {
                    Some(old) => old.clone(),
                    None => labels.clone(),
                };
                family.get_or_create(&labels).set(*value);
                kept.insert(labels);
            }
            *previous = kept;
        }
    }

    /// Sets every pod's state series (a series whose labels changed is replaced, one whose pod
    /// is gone removed) and returns the startup durations observed this pass.
    fn update_pods(&mut self, cluster: &Cluster) -> Vec<f64> {
        let family = self.metrics.pods_state.clone();
        let mut startups = Vec::new();
        self.pass = self.pass.wrapping_add(1);
        let pass = self.pass;
        // Each node's label values, once per pass (a node's pods share them).
        let mut node_values: HashMap<&str, NodeValues> = HashMap::new();
        for pod in cluster.pod_records() {
            let node = pod.node_name().and_then(|n| cluster.node(n));
            let values = node.map(|n| {
                node_values
                    .entry(n.metadata.name.as_deref().unwrap_or_default())
                    .or_insert_with(|| NodeValues::of(n, &mut self.values))
                    .clone()
            });
            let key = pod.uid_or_key();
            // The same record on a node with the same labels: nothing to compare or redo
            // (most pods, most passes: 20,000 label sets built and compared every 5 s were a
            // fifth of the CPU of a 20,000-pod scale-out).
            if let Some(entry) = self.pod_series.get_mut(&key)
                && Arc::ptr_eq(&entry.record, pod)
                && entry.node == values
            {
                entry.pass = pass;
                continue;
            }
            let labels = pod_labels(pod, values.as_ref(), &mut self.values);
            match self.pod_series.get_mut(&key) {
                Some(entry) => {
                    if entry.labels != labels {
                        family.remove(&entry.labels);
                        family.get_or_create(&labels).set(1);
                        entry.labels = labels;
                    }
                    entry.record = Arc::clone(pod);
                    entry.node = values;
                    entry.pass = pass;
                }
                None => {
                    family.get_or_create(&labels).set(1);
                    self.pod_series.insert(
                        key.clone(),
                        PodSeries {
                            record: Arc::clone(pod),
                            node: values,
                            labels,
                            pass,
                        },
                    );
                }
            }
            if let Some(seconds) = self.startup(pod, &key) {
                startups.push(seconds);
            }
        }
        self.pod_series.retain(|_, entry| {
            let keep = entry.pass == pass;
            if !keep {
                family.remove(&entry.labels);
            }
            keep
        });
        self.values.forget_unused();
        let series = &self.pod_series;
        self.pending.retain(|k| series.contains_key(k));
        self.done.retain(|k| series.contains_key(k));
        startups
    }

    /// The pod's startup duration, if it just started (see the module's documentation).
    fn startup(&mut self, pod: &PodRecord, key: &str) -> Option<f64> {
        if self.done.contains(key) {
            return None;
        }
        if pod.phase() == "Pending" {
            self.pending.insert(key.to_owned());
            return None;
        }
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(from_api_time);
        let watched =
            self.pending.contains(key) || created.is_some_and(|created| created >= self.started);
        if !watched {
            return None;
        }
        if let Some(ready_at) = ready_since(pod) {
            self.pending.remove(key);
            self.done.insert(key.to_owned());
            let (Some(ready_at), Some(created)) = (ready_at, created) else {
                return None;
            };
            return Some((ready_at - created).as_seconds_f64().max(0.0));
        }
        if pod.is_terminal() {
            self.pending.remove(key);
            self.done.insert(key.to_owned());
        } else {
            self.pending.insert(key.to_owned());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use karpenter_state::Object;
    use serde_json::json;

    use super::*;
    use crate::http::Metrics;
    use k8s_openapi::api::core::v1::Pod;

    fn node(name: &str, pool: Option<&str>) -> Node {
        let mut labels = json!({
            "topology.kubernetes.io/zone": "us-east-1a",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "c5.large",
            "karpenter.sh/capacity-type": "spot",
        });
        if let Some(pool) = pool {
            labels["karpenter.sh/nodepool"] = json!(pool);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": format!("kwok://{name}")},
            "status": {"allocatable": {"cpu": "1930m", "memory": "3Gi", "pods": "29", "ephemeral-storage": "20Gi"}}
        }))
        .expect("a node")
    }

    fn claim(name: &str) -> karpenter_api::v1::NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("kwok://{name}")}
        }))
        .expect("a NodeClaim")
    }

    fn pod(name: &str, node: Option<&str>, phase: &str, daemon: bool, cpu: &str) -> Pod {
        let owner = if daemon {
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d", "controller": true}])
        } else {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r", "controller": true}])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                         "creationTimestamp": "2026-01-01T00:00:00Z", "ownerReferences": owner},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
            "status": {"phase": phase}
        }))
        .expect("a pod")
    }

    fn ready(mut pod: Pod, at: &str) -> Pod {
        pod.status = serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": at}]
        }))
        .expect("a status");
        pod
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("a time")
            .with_timezone(&Utc)
    }

    fn value(series: &HashMap<NodeSeriesLabels, f64>, node: &str, resource: &str) -> Option<f64> {
        series
            .iter()
            .find(|(labels, _)| {
                labels.node.contains(&("node_name", node.to_owned()))
                    && labels.resource_type.as_deref() == Some(resource)
            })
            .map(|(_, v)| *v)
    }

    #[test]
    fn node_label_names_follow_upstreams_rule_and_cover_core_well_known_labels() {
        for (key, label) in NODE_LABELS {
            let suffix = key.rsplit('/').next().unwrap_or(key);
            assert_eq!(*label, suffix.to_lowercase().replace('-', "_"), "{key}");
        }
        for key in labels::WELL_KNOWN_LABELS {
            assert!(NODE_LABELS.iter().any(|(k, _)| k == key), "{key} missing");
        }
        let names: HashSet<&str> = NODE_LABELS.iter().map(|(_, l)| *l).collect();
        assert_eq!(names.len(), NODE_LABELS.len(), "no two keys share a label");
    }

    #[test]
    fn resources_are_named_and_valued_as_upstream_writes_them() {
        assert_eq!(resource_type("ephemeral-storage"), "ephemeral_storage");
        assert_eq!(resource_type("nvidia.com/gpu"), "nvidia.com/gpu");
        let q = |s: &str| s.parse::<Quantity>().expect("a quantity");
        assert_eq!(resource_value("cpu", q("1930m")), 1.93);
        assert_eq!(resource_value("memory", q("3Gi")), 3_221_225_472.0);
        assert_eq!(resource_value("memory", q("1500m")), 2.0, "rounded up");
    }

    #[test]
    fn a_node_reports_its_allocatable_and_the_requests_of_its_running_and_daemon_pods() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::Node(node("n1", Some("general"))));
        cluster.apply(Object::NodeClaim(claim("n1")));
        cluster.apply(Object::Node(node("bare", None)));
        cluster.apply(Object::Pod(pod("web", Some("n1"), "Running", false, "1")));
        cluster.apply(Object::Pod(pod(
            "agent",
            Some("n1"),
            "Running",
            true,
            "100m",
        )));
        cluster.apply(Object::Pod(pod(
            "done",
            Some("n1"),
            "Succeeded",
            false,
            "5",
        )));
        let series = collect_nodes(&cluster, Utc::now());
        let allocatable = &series[&NodeGauge::Allocatable];
        assert_eq!(value(allocatable, "n1", "cpu"), Some(1.93));
        assert_eq!(
            value(allocatable, "n1", "ephemeral_storage"),
            Some(21_474_836_480.0)
        );
        assert_eq!(value(allocatable, "bare", "pods"), Some(29.0));
        let requests = &series[&NodeGauge::PodRequests];
        assert_eq!(
            value(requests, "n1", "cpu"),
            Some(1.1),
            "the finished pod is not counted"
        );
        assert_eq!(value(requests, "n1", "pods"), Some(2.0));
        assert_eq!(value(requests, "n1", "memory"), Some(536_870_912.0));
        assert_eq!(value(requests, "bare", "cpu"), None, "no pods, no series");
        let daemons = &series[&NodeGauge::DaemonRequests];
        assert_eq!(value(daemons, "n1", "cpu"), Some(0.1));
        assert_eq!(value(daemons, "n1", "pods"), Some(1.0));
        let (labels, _) = allocatable
            .iter()
            .find(|(l, _)| l.node.contains(&("node_name", "n1".to_owned())))
            .expect("n1's series");
        for want in [
            ("managed", "true"),
            ("nodepool", "general"),
            ("zone", "us-east-1a"),
            ("arch", "amd64"),
            ("instance_type", "c5.large"),
            ("capacity_type", "spot"),
            ("instance_gpu_name", ""),
        ] {
            assert!(
                labels.node.contains(&(want.0, want.1.to_owned())),
                "{want:?} in {labels:?}"
            );
        }
        let (bare, _) = allocatable
            .iter()
            .find(|(l, _)| l.node.contains(&("node_name", "bare".to_owned())))
            .expect("bare's series");
        assert!(
            bare.node.contains(&("managed", "false".to_owned())),
            "{bare:?}"
        );
    }

    #[test]
    fn a_pods_state_names_its_owner_node_and_the_nodes_labels() {
        let n = node("n1", Some("general"));
        let mut values = Interner::default();
        let node_values = NodeValues::of(&n, &mut values);
        let labels = pod_labels(
            &ready(
                pod("web-x", Some("n1"), "Running", false, "1"),
                "2026-01-01T00:00:05Z",
            )
            .into(),
            Some(&node_values),
            &mut values,
        )
        .pairs()
        .map(|(k, v)| (k, v.to_owned()));
        for want in [
            ("name", "web-x"),
            ("namespace", "shop"),
            ("owner", "/apis/apps/v1/namespaces/shop/replicasets/web-1"),
            ("node", "n1"),
            ("scheduled", "true"),
            ("nodepool", "general"),
            ("zone", "us-east-1a"),
            ("arch", "amd64"),
            ("capacity_type", "spot"),
            ("instance_type", "c5.large"),
            ("phase", "Running"),
            ("ready", "true"),
            ("managed", "true"),
        ] {
            assert!(
                labels.contains(&(want.0, want.1.to_owned())),
                "{want:?} in {labels:?}"
            );
        }
        let pending = pod_labels(
            &pod("p", None, "Pending", false, "1").into(),
            None,
            &mut values,
        );
        let pending = pending.pairs();
        assert!(pending.contains(&("scheduled", "false")));
        assert!(pending.contains(&("managed", "false")));
        assert!(pending.contains(&("ready", "false")));
    }

    #[test]
    fn a_pod_seen_pending_counts_its_startup_once_when_it_is_ready() {
        let metrics = ControllerMetrics::register(&Metrics::new());
        let mut state = StateMetrics::new(metrics, at("2026-06-01T00:00:00Z"));
        let mut cluster = Cluster::new();
        cluster.apply(Object::Pod(pod("web", None, "Pending", false, "1")));
        assert!(state.update_pods(&cluster).is_empty());
        cluster.apply(Object::Pod(ready(
            pod("web", Some("n1"), "Running", false, "1"),
            "2026-01-01T00:00:42Z",
        )));
        assert_eq!(state.update_pods(&cluster), vec![42.0]);
        assert!(state.update_pods(&cluster).is_empty(), "counted once");
    }

    #[test]
    fn a_pod_running_before_the_loop_started_and_never_seen_pending_is_not_counted() {
        let metrics = ControllerMetrics::register(&Metrics::new());
        let mut state = StateMetrics::new(metrics, at("2026-06-01T00:00:00Z"));
        let mut cluster = Cluster::new();
        cluster.apply(Object::Pod(ready(
            pod("old", Some("n1"), "Running", false, "1"),
            "2026-01-01T00:00:42Z",
        )));
        assert!(state.update_pods(&cluster).is_empty());
    }

    #[test]
    fn a_pod_created_since_the_loop_started_counts_even_if_never_seen_pending() {
        let metrics = ControllerMetrics::register(&Metrics::new());
        let mut state = StateMetrics::new(metrics, at("2025-12-31T23:59:59.500Z"));
        let mut cluster = Cluster::new();
        cluster.apply(Object::Pod(ready(
            pod("fast", Some("n1"), "Running", false, "1"),
            "2026-01-01T00:00:03Z",
        )));
        assert_eq!(state.update_pods(&cluster), vec![3.0]);
    }

    /// A registry, its state metrics started now, and an index holding node `n1`.
    fn watching_node_n1() -> (Metrics, StateMetrics, ClusterCache) {
        let registry = Metrics::new();
        let state = StateMetrics::new(ControllerMetrics::register(&registry), Utc::now());
        let cache = ClusterCache::new();
        cache.apply(Object::Node(node("n1", Some("general"))));
        (registry, state, cache)
    }

    #[test]
    fn a_node_reports_its_overhead_limits_and_age_and_the_cluster_its_utilization() {
        let mut with_capacity = node("n1", Some("general"));
        with_capacity.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().expect("a time"),
            ));
        with_capacity.status = serde_json::from_value(json!({
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "3Gi", "pods": "29"}
        }))
        .expect("a status");
        let mut limited = pod("web", Some("n1"), "Running", false, "1");
        limited.spec.as_mut().expect("a spec").containers[0]
            .resources
            .as_mut()
            .expect("resources")
            .limits = Some(
            [(
                "cpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1500m".to_owned()),
            )]
            .into(),
        );
        let mut cluster = Cluster::new();
        cluster.apply(Object::Node(with_capacity));
        cluster.apply(Object::NodeClaim(claim("n1")));
        cluster.apply(Object::Pod(limited));
        cluster.apply(Object::Pod(pod(
            "agent",
            Some("n1"),
            "Running",
            true,
            "100m",
        )));
        let series = collect_nodes(&cluster, at("2026-01-01T01:00:00Z"));
        let overhead = &series[&NodeGauge::SystemOverhead];
        assert_eq!(value(overhead, "n1", "cpu"), Some(0.07));
        assert_eq!(value(overhead, "n1", "memory"), Some(1_073_741_824.0));
        assert_eq!(value(overhead, "n1", "pods"), Some(0.0));
        let limits = &series[&NodeGauge::PodLimits];
        assert_eq!(
            value(limits, "n1", "cpu"),
            Some(1.5),
            "the agent has no limit"
        );
        assert_eq!(
            value(limits, "n1", "pods"),
            Some(2.0),
            "each pod counts one"
        );
        let daemon_limits = &series[&NodeGauge::DaemonLimits];
        assert_eq!(value(daemon_limits, "n1", "cpu"), None);
        assert_eq!(value(daemon_limits, "n1", "pods"), Some(1.0));
        let lifetime = &series[&NodeGauge::Lifetime];
        assert_eq!(lifetime.len(), 1);
        assert!(
            lifetime
                .iter()
                .all(|(labels, age)| { *age == 3600.0 && labels.resource_type.is_none() })
        );
        let utilization = &series[&NodeGauge::ClusterUtilization];
        let percent = |resource: &str| {
            utilization
                .iter()
                .find(|(l, _)| l.node.is_empty() && l.resource_type.as_deref() == Some(resource))
                .map(|(_, v)| *v)
        };
        assert_eq!(percent("cpu"), Some(100.0 * 1100.0 / 1930.0));
        assert_eq!(percent("pods"), Some(100.0 * 2.0 / 29.0));
    }

    #[test]
    fn a_nodes_series_share_one_copy_of_its_labels_from_pass_to_pass() {
        let (_registry, mut state, cache) = watching_node_n1();
        cache.apply(Object::Pod(pod("web", Some("n1"), "Running", false, "1")));
        state.update(&cache);
        state.update(&cache);
        let bases: Vec<&Arc<Labels>> = state
            .node_series
            .iter()
            .filter(|(gauge, _)| **gauge != NodeGauge::ClusterUtilization)
            .flat_map(|(_, series)| series.iter().map(|l| &l.node))
            .collect();
        assert!(bases.len() > 5, "{}", bases.len());
        assert!(
            bases.iter().all(|b| Arc::ptr_eq(b, bases[0])),
            "every series of n1 holds the same labels"
        );
    }

    #[test]
    fn a_pending_pod_reports_how_long_it_waits_then_how_long_it_took_to_bind_and_start() {
        let registry = Metrics::new();
        let mut state = StateMetrics::new(ControllerMetrics::register(&registry), Utc::now());
        let times = state.pod_times.clone();
        let mut cluster = Cluster::new();
        let mut waiting = pod("web", None, "Pending", false, "1");
        waiting.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().expect("a time"),
            ));
        cluster.apply(Object::Pod(waiting));
        times.ack("shop/web", at("2026-01-01T00:00:01Z"));
        state.update_pod_timings(&cluster, at("2026-01-01T00:00:05Z"));
        let text = registry.encode().expect("encodes");
        for line in [
            "karpenter_pods_unstarted_time_seconds{name=\"web\",namespace=\"shop\"} 5.0",
            "karpenter_pods_unbound_time_seconds{name=\"web\",namespace=\"shop\",dynamic_resources=\"false\"} 5.0",
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds{name=\"web\",namespace=\"shop\"} 4.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(
            !text.contains("karpenter_pods_provisioning_unbound_time_seconds{"),
            "{text}"
        );
        let first = times.decided(["shop/web"], [], at("2026-01-01T00:00:03Z"));
        assert_eq!(first, vec![2.0], "decided 2 s after it was first seen");
        state.update_pod_timings(&cluster, at("2026-01-01T00:00:06Z"));
        let text = registry.encode().expect("encodes");
        assert!(!text.contains("undecided_time_seconds{"), "{text}");
        assert!(text.contains("karpenter_pods_provisioning_unbound_time_seconds{name=\"web\",namespace=\"shop\",dynamic_resources=\"false\"} 3.0"), "{text}");
        let mut running: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:20Z"}]}
        }))
        .expect("a pod");
        running.metadata.labels = None;
        cluster.apply(Object::Pod(running));
        state.update_pod_timings(&cluster, at("2026-01-01T00:00:30Z"));
        let text = registry.encode().expect("encodes");
        for line in [
            "karpenter_pods_bound_duration_seconds_sum{dynamic_resources=\"false\"} 10.0",
            "karpenter_pods_provisioning_bound_duration_seconds_sum{dynamic_resources=\"false\"} 7.0",
            "karpenter_pods_provisioning_startup_duration_seconds_sum 17.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        for gone in ["unstarted_time_seconds{", "unbound_time_seconds{"] {
            assert!(!text.contains(gone), "{gone} in\n{text}");
        }
        assert_eq!(
            times.get("shop/web"),
            Default::default(),
            "forgotten once started"
        );
        assert!(state.timings.is_empty());
    }

    #[test]
    fn gone_pods_and_nodes_lose_their_series() {
        let (registry, mut state, cache) = watching_node_n1();
        cache.apply(Object::Pod(pod("web", Some("n1"), "Running", false, "1")));
        state.update(&cache);
        let text = registry.encode().expect("encodes");
        assert!(text.contains("karpenter_pods_state{name=\"web\""), "{text}");
        assert!(
            text.contains("karpenter_nodes_allocatable{node_name=\"n1\""),
            "{text}"
        );
        assert!(
            text.contains("karpenter_nodes_total_pod_requests{node_name=\"n1\""),
            "{text}"
        );
        cache.delete(&karpenter_state::ObjectRef::new(
            karpenter_state::Kind::Pod,
            Some("shop"),
            "web",
        ));
        cache.delete(&karpenter_state::ObjectRef::new(
            karpenter_state::Kind::Node,
            None,
            "n1",
        ));
        state.update(&cache);
        let text = registry.encode().expect("encodes");
        assert!(!text.contains("karpenter_pods_state{"), "{text}");
        assert!(!text.contains("karpenter_nodes_allocatable{"), "{text}");
        assert!(
            !text.contains("karpenter_nodes_total_pod_requests{"),
            "{text}"
        );
    }

    #[test]
    fn pods_on_one_node_share_its_label_values_and_gone_values_are_forgotten() {
        let (registry, mut state, cache) = watching_node_n1();
        cache.apply(Object::Pod(pod("web-a", Some("n1"), "Running", false, "1")));
        cache.apply(Object::Pod(pod("web-b", Some("n1"), "Running", false, "1")));
        state.update(&cache);
        let a = state.pod_series["uid-web-a"].labels.clone();
        let b = state.pod_series["uid-web-b"].labels.clone();
        for (x, y) in [
            (&a.namespace, &b.namespace),
            (&a.node, &b.node),
            (&a.nodepool, &b.nodepool),
            (&a.zone, &b.zone),
            (&a.phase, &b.phase),
        ] {
            assert!(std::sync::Arc::ptr_eq(x, y), "{x} is one copy");
        }
        let values = state.values.len();
        drop((a, b));
        cache.delete(&karpenter_state::ObjectRef::new(
            karpenter_state::Kind::Pod,
            Some("shop"),
            "web-b",
        ));
        state.update(&cache);
        assert_eq!(
            state.values.len(),
            values - 1,
            "web-b's name is forgotten, the shared values stay"
        );
        let text = registry.encode().expect("encodes");
        assert!(
            text.contains("karpenter_pods_state{name=\"web-a\""),
            "{text}"
        );
        assert!(!text.contains("name=\"web-b\""), "{text}");
    }

    #[test]
    fn an_unchanged_pod_follows_a_change_of_its_nodes_labels() {
        let registry = Metrics::new();
        let mut state = StateMetrics::new(ControllerMetrics::register(&registry), Utc::now());
        let cache = ClusterCache::new();
        cache.apply(Object::Node(node("n1", None)));
        cache.apply(Object::Pod(pod("web", Some("n1"), "Running", false, "1")));
        state.update(&cache);
        let series = |registry: &Metrics| -> Vec<String> {
            let text = registry.encode().expect("encodes");
            text.lines()
                .filter(|l| l.starts_with("karpenter_pods_state{"))
                .map(str::to_owned)
                .collect()
        };
        let before = series(&registry);
        assert_eq!(before.len(), 1, "{before:?}");
        assert!(before[0].contains("managed=\"false\""), "{before:?}");
        // The pod's record stays the same; its node joins a NodePool.
        cache.apply(Object::Node(node("n1", Some("general"))));
        state.update(&cache);
        let after = series(&registry);
        assert_eq!(after.len(), 1, "{after:?}");
        assert!(after[0].contains("nodepool=\"general\""), "{after:?}");
        assert!(after[0].contains("managed=\"true\""), "{after:?}");
    }

    #[test]
    fn a_pod_whose_labels_change_has_one_series_with_the_new_labels() {
        let (registry, mut state, cache) = watching_node_n1();
        cache.apply(Object::Pod(pod("web", None, "Pending", false, "1")));
        state.update(&cache);
        cache.apply(Object::Pod(pod("web", Some("n1"), "Running", false, "1")));
        state.update(&cache);
        state.update(&cache);
        let text = registry.encode().expect("encodes");
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("karpenter_pods_state{"))
            .collect();
        assert_eq!(series.len(), 1, "{text}");
        assert!(series[0].contains("node=\"n1\""), "{text}");
        assert!(series[0].contains("phase=\"Running\""), "{text}");
        assert!(series[0].ends_with(" 1"), "{text}");
    }
}
