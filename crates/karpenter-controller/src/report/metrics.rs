//! The controllers' metrics, with upstream's names and labels (`reference/karpenter-core.md`
//! section 5.4). prometheus-client appends `_total` to counters itself, so counters are
//! registered without it. Summaries, which prometheus-client lacks, are [`Summary`]s
//! (`crate::http::Summary`). The gauges of every node and pod (upstream's `metrics.node` and
//! `metrics.pod` controllers) are kept by [`crate::controllers::gauges`].

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};

use karpenter_api::v1::{ConsolidationPolicy, NodeClaim};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Metric;

use super::pod_state::PodStateLabels;
use super::runtime::RuntimeMetrics;
pub use super::series::{DEFAULT_BUCKETS, DURATION_BUCKETS, FloatGauge, Labels};
use super::status::ConditionMetrics;
use crate::http::{Metrics, Summary};

/// The labels of a node series: the node's (shared by all its series, and between the family
/// and this loop's memory of them) and the resource's. With one label per well-known node label
/// a node's labels are ~2 KB; a node has ~25 series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeSeriesLabels {
    pub(crate) node: Arc<Labels>,
    pub(crate) resource_type: Option<String>,
}

impl NodeSeriesLabels {
    pub(crate) fn new(node: &Arc<Labels>, resource_type: Option<String>) -> Self {
        NodeSeriesLabels {
            node: Arc::clone(node),
            resource_type,
        }
    }
}

impl EncodeLabelSet for NodeSeriesLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.node.as_slice().encode(encoder)?;
        if let Some(resource) = &self.resource_type {
            [("resource_type", resource.as_str())].encode(encoder)?;
        }
        Ok(())
    }
}

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// How one reconciliation ended: the `result` label of `controller_runtime_reconcile_total`
/// (controller-runtime's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconciled {
    /// Done; the next one waits for a change.
    Success,
    /// Failed; retried.
    Error,
    /// Done for now; runs again after an interval (what a periodic loop's pass is).
    RequeueAfter,
}

impl Reconciled {
    pub fn as_str(self) -> &'static str {
        match self {
            Reconciled::Success => "success",
            Reconciled::Error => "error",
            Reconciled::RequeueAfter => "requeue_after",
        }
    }

    /// `Success` for `Ok`, `Error` for `Err`.
    pub fn of<T, E>(result: &Result<T, E>) -> Self {
        if result.is_ok() {
            Reconciled::Success
        } else {
            Reconciled::Error
        }
    }
}

/// The labels of a disruption (`karpenter_nodeclaims_disrupted_total`,
/// `karpenter_pods_disruption_initiated_total`).
#[derive(Debug, Clone, Copy)]
pub struct Disrupted<'a> {
    /// Upstream's reason (`underutilized`, `expired`, `garbage_collected`, a message kind...).
    pub reason: &'a str,
    pub nodepool: &'a str,
    pub capacity_type: &'a str,
    /// The NodePool's policy in snake case for a consolidation, empty otherwise.
    pub consolidation_policy: &'a str,
    /// `graceful`, `eventual` or `forceful` ([`termination_mode`]).
    pub termination_mode: &'static str,
}

impl<'a> Disrupted<'a> {
    /// A disruption of `claim` for `reason` outside consolidation (no policy), its pool and
    /// capacity type from the NodeClaim's labels, as upstream reads them.
    pub fn of(reason: &'a str, claim: Option<&'a NodeClaim>) -> Self {
        let label = |key: &str| {
            claim
                .and_then(|c| c.metadata.labels.as_ref())
                .and_then(|l| l.get(key))
                .map_or("", String::as_str)
        };
        Disrupted {
            reason,
            nodepool: label(karpenter_api::labels::NODEPOOL),
            capacity_type: label(karpenter_api::labels::CAPACITY_TYPE),
            consolidation_policy: "",
            termination_mode: termination_mode(claim),
        }
    }

    fn labels(&self) -> Labels {
        vec![
            ("reason", self.reason.to_owned()),
            ("nodepool", self.nodepool.to_owned()),
            ("capacity_type", self.capacity_type.to_owned()),
            ("consolidation_policy", self.consolidation_policy.to_owned()),
            ("termination_mode", self.termination_mode.to_owned()),
        ]
    }
}

/// Upstream's `DisruptionTerminationMode`: `graceful` without a `terminationGracePeriod`,
/// `forceful` with a zero one, `eventual` otherwise.
pub fn termination_mode(claim: Option<&NodeClaim>) -> &'static str {
    match claim.and_then(|c| c.spec.termination_grace_period.as_ref()) {
        None => "graceful",
        Some(period) if period.as_duration().is_zero() => "forceful",
        Some(_) => "eventual",
    }
}

/// `AcceleratedHardwareReady` -> `accelerated_hardware_ready` (upstream's `pretty.ToSnakeCase`).
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A consolidation policy as upstream's `consolidation_policy` label writes it (snake case).
pub fn consolidation_policy(policy: ConsolidationPolicy) -> &'static str {
    match policy {
        ConsolidationPolicy::WhenEmpty => "when_empty",
        ConsolidationPolicy::WhenEmptyOrUnderutilized => "when_empty_or_underutilized",
        ConsolidationPolicy::Balanced => "balanced",
    }
}

/// Handles to every metric the controllers update.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    nodeclaims_created: Family<Labels, Counter>,
    nodeclaims_terminated: Family<Labels, Counter>,
    nodeclaims_disrupted: Family<Labels, Counter>,
    nodeclaims_unhealthy_disrupted: Family<Labels, Counter>,
    nodes_created: Family<Labels, Counter>,
    nodes_drained: Family<Labels, Counter>,
    nodes_terminated: Family<Labels, Counter>,
    eviction_requests: Family<Labels, Counter>,
    scheduling_duration: Family<Labels, Histogram, fn() -> Histogram>,
    unschedulable_pods: Family<Labels, Gauge>,
    pub(crate) nodepool_usage: Family<Labels, FloatGauge>,
    pub(crate) nodepool_limit: Family<Labels, FloatGauge>,
    pub(crate) nodepools_cost: Family<Labels, FloatGauge>,
    pub(crate) nodepools_cost_tracker_errors: Family<Labels, Counter>,
    pub cluster_state_synced: Gauge,
    pub cluster_state_node_count: Gauge,
    disruption_evaluation: Family<Labels, Histogram, fn() -> Histogram>,
    disruption_decisions: Family<Labels, Counter>,
    disruption_failed_validations: Family<Labels, Counter>,
    disruption_queue_failures: Family<Labels, Counter>,
    allowed_disruptions: Family<Labels, Gauge>,
    nodes_consuming_budgets: Family<Labels, Gauge>,
    pods_disruption_initiated: Family<Labels, Counter>,
    pods_drained: Family<Labels, Counter>,
    reboots: Family<Labels, Counter>,
    reboot_duration: Family<Labels, Histogram, fn() -> Histogram>,
    reboot_recovery_duration: Histogram,
    node_termination_duration: Summary,
    pod_startup_duration: Summary,
    eligible_nodes: Family<Labels, Gauge>,
    consolidation_moves: Family<Labels, Counter>,
    consolidation_score: Family<Labels, Histogram, fn() -> Histogram>,
    reconcile_time: Family<Labels, Histogram, fn() -> Histogram>,
    reconcile_total: Family<Labels, Counter>,
    reconcile_errors: Family<Labels, Counter>,
    active_workers: Family<Labels, Gauge>,
    max_concurrent_reconciles: Family<Labels, Gauge>,
    pub(crate) nodes_allocatable: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) nodes_total_pod_requests: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) nodes_total_daemon_requests: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) pods_state: Family<PodStateLabels, Gauge>,
    pub(crate) nodes_total_pod_limits: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) nodes_total_daemon_limits: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) nodes_system_overhead: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) nodes_current_lifetime_seconds: Family<NodeSeriesLabels, FloatGauge>,
    pub(crate) cluster_utilization_percent: Family<NodeSeriesLabels, FloatGauge>,
    nodes_lifetime_duration: Family<Labels, Histogram, fn() -> Histogram>,
    nodeclaims_termination_duration: Family<Labels, Histogram, fn() -> Histogram>,
    nodeclaims_instance_termination_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// How long the cluster state has not been synced (0 while it is).
    pub cluster_state_unsynced_time_seconds: FloatGauge,
    cloudprovider_duration: Family<Labels, Histogram, fn() -> Histogram>,
    cloudprovider_errors: Family<Labels, Counter>,
    pub(crate) instance_type_offering_available: Family<Labels, FloatGauge>,
    pub(crate) instance_type_offering_price: Family<Labels, FloatGauge>,
    pub(crate) instance_type_cpu_cores: Family<Labels, FloatGauge>,
    pub(crate) instance_type_memory_bytes: Family<Labels, FloatGauge>,
    /// The driver's queue and the other controller-runtime counters.
    pub(crate) runtime: RuntimeMetrics,
    /// operatorpkg's status-condition metrics.
    pub(crate) conditions: ConditionMetrics,
    disruption_decisions_by_nodepool: Family<Labels, Counter>,
    disruption_terminate_first_decisions: Family<Labels, Counter>,
    consolidation_timeouts: Family<Labels, Counter>,
    ignored_pods: Gauge,
    pod_decision_duration: Histogram,
    solving: Solving,
    scheduler: super::scheduler::SchedulerGauges,
    pub(crate) pods_unstarted_time: Family<Labels, FloatGauge>,
    pub(crate) pods_provisioning_unstarted_time: Family<Labels, FloatGauge>,
    pub(crate) pods_unbound_time: Family<Labels, FloatGauge>,
    pub(crate) pods_provisioning_unbound_time: Family<Labels, FloatGauge>,
    pub(crate) pods_undecided_time: Family<Labels, FloatGauge>,
    pods_bound_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pods_provisioning_bound_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pods_provisioning_startup_duration: Histogram,
}

/// The scheduling simulations running now, per controller: their id and start.
#[derive(Debug, Clone, Default)]
struct Solving(
    Arc<std::sync::Mutex<std::collections::BTreeMap<String, (String, std::time::Instant)>>>,
);

impl Solving {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, (String, std::time::Instant)>>
    {
        // Start times only: a panicked holder leaves them usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `karpenter_scheduler_unfinished_work_seconds{controller,scheduling_id}`: per simulation in
/// progress, the seconds since it started, computed when the registry is encoded (upstream sets
/// it at each step of the simulation and removes it once done).
#[derive(Debug)]
struct SolvingCollector(Solving);

impl Collector for SolvingCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let family = Family::<Labels, FloatGauge>::default();
        for (controller, (id, started)) in self.0.lock().iter() {
            family
                .get_or_create(&vec![
                    ("controller", controller.clone()),
                    ("scheduling_id", id.clone()),
                ])
                .set(started.elapsed().as_secs_f64());
        }
        family.encode(encoder.encode_descriptor(
            "karpenter_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by scheduling_duration_seconds.",
            None,
            family.metric_type(),
        )?)
    }
}

/// A scheduling simulation in progress ([`ControllerMetrics::solving`]): it is done, and
/// timed, when dropped.
#[derive(Debug)]
pub struct SolveTimer {
    metrics: ControllerMetrics,
    controller: String,
    scheduling_id: String,
    started: std::time::Instant,
}

impl SolveTimer {
    /// The simulation ended having observed `stats` (the scheduler's queue depth and pending
    /// pods by effective zone gauges); it is timed as it is dropped.
    pub fn finished(self, stats: &karpenter_scheduling::SolveStats) {
        self.metrics
            .scheduler
            .observed(&self.controller, &self.scheduling_id, stats);
    }
}

impl Drop for SolveTimer {
    fn drop(&mut self) {
        self.metrics.solving.lock().remove(&self.controller);
        self.metrics
            .scheduling_duration(&self.controller, self.started.elapsed().as_secs_f64());
    }
}

/// A random UUID (version 4), for a simulation's `scheduling_id` (upstream's a fresh UUID per
/// simulation).
fn random_uuid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        hasher.finish()
    };
    let bits =
        (u128::from(half()) << 64 | u128::from(half())) & !(0xF000u128 << 64) | (0x4000u128 << 64);
    let bits = bits & !(0xC000u128 << 48) | (0x8000u128 << 48);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

/// Registers `metric` under `name` and returns it.
fn add<M: Metric + Clone>(registry: &Metrics, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Upstream's `karpenter_nodes_lifetime_duration_seconds` buckets: 15 minutes to 30 days.
const LIFETIME_BUCKETS: [f64; 21] = [
    900.0,
    1800.0,
    2700.0,
    3600.0,
    7200.0,
    14_400.0,
    21_600.0,
    28_800.0,
    36_000.0,
    43_200.0,
    57_600.0,
    72_000.0,
    86_400.0,
    172_800.0,
    259_200.0,
    432_000.0,
    864_000.0,
    1_296_000.0,
    1_728_000.0,
    2_160_000.0,
    2_592_000.0,
];

fn lifetime_histogram() -> Histogram {
    Histogram::new(LIFETIME_BUCKETS)
}

/// `prometheus.ExponentialBuckets(1, 2, 12)`: 1 s to 2048 s.
fn nodeclaim_termination_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

/// `prometheus.ExponentialBuckets(1, 2, 11)`: 1 s to 1024 s.
fn instance_termination_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

/// Upstream's reboot buckets, `prometheus.ExponentialBuckets(10, 2, 8)`: 10 s to 1280 s.
fn reboot_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10.0, 2.0, 8))
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Upstream's `karpenter_consolidation_score` buckets.
fn score_histogram() -> Histogram {
    Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
}

impl ControllerMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Metrics) -> Self {
        let metrics = ControllerMetrics {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodeclaims_unhealthy_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_drained: Family::default(),
            nodes_terminated: Family::default(),
            eviction_requests: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_histogram),
            unschedulable_pods: Family::default(),
            nodepool_usage: Family::default(),
            nodepool_limit: Family::default(),
            nodepools_cost: add(
                registry,
                "karpenter_nodepools_cost_total",
                "Total cost of the nodepool from Karpenter's perspective. Units are determined by the cloud provider. Not an authoritative source for billing. Includes modifications due to NodeOverlays",
                Family::default(),
            ),
            nodepools_cost_tracker_errors: add(
                registry,
                "karpenter_nodepools_cost_tracker_errors",
                "Number of errors encountered during cost tracking operations. Labeled by nodepool.",
                Family::default(),
            ),
            cluster_state_synced: Gauge::default(),
            cluster_state_node_count: Gauge::default(),
            disruption_evaluation: Family::new_with_constructor(duration_histogram),
            disruption_decisions: Family::default(),
            disruption_failed_validations: Family::default(),
            disruption_queue_failures: Family::default(),
            allowed_disruptions: Family::default(),
            nodes_consuming_budgets: Family::default(),
            pods_disruption_initiated: Family::default(),
            pods_drained: Family::default(),
            reboots: Family::default(),
            reboot_duration: Family::new_with_constructor(reboot_histogram),
            reboot_recovery_duration: reboot_histogram(),
            node_termination_duration: Summary::default(),
            pod_startup_duration: Summary::default(),
            eligible_nodes: Family::default(),
            consolidation_moves: Family::default(),
            consolidation_score: Family::new_with_constructor(score_histogram),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            active_workers: Family::default(),
            max_concurrent_reconciles: Family::default(),
            nodes_allocatable: Family::default(),
            nodes_total_pod_requests: Family::default(),
            nodes_total_daemon_requests: Family::default(),
            pods_state: Family::default(),
            nodes_total_pod_limits: add(
                registry,
                "karpenter_nodes_total_pod_limits",
                "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
                Family::default(),
            ),
            nodes_total_daemon_limits: add(
                registry,
                "karpenter_nodes_total_daemon_limits",
                "Node total daemon limits are the resources specified by DaemonSet pod limits.",
                Family::default(),
            ),
            nodes_system_overhead: add(
                registry,
                "karpenter_nodes_system_overhead",
                "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.",
                Family::default(),
            ),
            nodes_current_lifetime_seconds: add(
                registry,
                "karpenter_nodes_current_lifetime_seconds",
                "Node age in seconds",
                Family::default(),
            ),
            cluster_utilization_percent: add(
                registry,
                "karpenter_cluster_utilization_percent",
                "Utilization of allocatable resources by pod requests",
                Family::default(),
            ),
            nodes_lifetime_duration: add(
                registry,
                "karpenter_nodes_lifetime_duration_seconds",
                "The lifetime duration of the nodes since creation.",
                Family::new_with_constructor(lifetime_histogram),
            ),
            nodeclaims_termination_duration: add(
                registry,
                "karpenter_nodeclaims_termination_duration_seconds",
                "Duration of NodeClaim termination in seconds.",
                Family::new_with_constructor(nodeclaim_termination_histogram),
            ),
            nodeclaims_instance_termination_duration: add(
                registry,
                "karpenter_nodeclaims_instance_termination_duration_seconds",
                "Duration of CloudProvider Instance termination in seconds.",
                Family::new_with_constructor(instance_termination_histogram),
            ),
            cluster_state_unsynced_time_seconds: add(
                registry,
                "karpenter_cluster_state_unsynced_time_seconds",
                "The time for which cluster state is not synced",
                FloatGauge::default(),
            ),
            cloudprovider_duration: add(
                registry,
                "karpenter_cloudprovider_duration_seconds",
                "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
                Family::new_with_constructor(default_histogram),
            ),
            cloudprovider_errors: add(
                registry,
                "karpenter_cloudprovider_errors",
                "Total number of errors returned from CloudProvider calls.",
                Family::default(),
            ),
            instance_type_offering_available: add(
                registry,
                "karpenter_cloudprovider_instance_type_offering_available",
                "Instance type offering availability, based on instance type, capacity type, and zone",
                Family::default(),
            ),
            instance_type_offering_price: add(
                registry,
                "karpenter_cloudprovider_instance_type_offering_price_estimate",
                "Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
                Family::default(),
            ),
            instance_type_cpu_cores: add(
                registry,
                "karpenter_cloudprovider_instance_type_cpu_cores",
                "VCPUs cores for a given instance type.",
                Family::default(),
            ),
            runtime: RuntimeMetrics::register(registry),
            conditions: ConditionMetrics::register(registry),
            ignored_pods: add(
                registry,
                "karpenter_scheduler_ignored_pods_count",
                "Number of pods ignored during scheduling by Karpenter",
                Gauge::default(),
            ),
            pod_decision_duration: add(
                registry,
                "karpenter_pods_scheduling_decision_duration_seconds",
                "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
                Histogram::new(DURATION_BUCKETS),
            ),
            solving: Solving::default(),
            scheduler: super::scheduler::SchedulerGauges::default(),
            pods_unstarted_time: add(
                registry,
                "karpenter_pods_unstarted_time_seconds",
                "The time from pod creation until the pod is running.",
                Family::default(),
            ),
            pods_provisioning_unstarted_time: add(
                registry,
                "karpenter_pods_provisioning_unstarted_time_seconds",
                "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
                Family::default(),
            ),
            pods_unbound_time: add(
                registry,
                "karpenter_pods_unbound_time_seconds",
                "The time from pod creation until the pod is bound.",
                Family::default(),
            ),
            pods_provisioning_unbound_time: add(
                registry,
                "karpenter_pods_provisioning_unbound_time_seconds",
                "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
                Family::default(),
            ),
            pods_undecided_time: add(
                registry,
                "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
                "The time from when Karpenter has seen a pod without making a scheduling decision for the pod. Note: this calculated from a point in memory, not by the pod creation timestamp.",
                Family::default(),
            ),
            pods_bound_duration: add(
                registry,
                "karpenter_pods_bound_duration_seconds",
                "The time from pod creation until the pod is bound.",
                Family::new_with_constructor(duration_histogram),
            ),
            pods_provisioning_bound_duration: add(
                registry,
                "karpenter_pods_provisioning_bound_duration_seconds",
                "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
                Family::new_with_constructor(duration_histogram),
            ),
            pods_provisioning_startup_duration: add(
                registry,
                "karpenter_pods_provisioning_startup_duration_seconds",
                "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
                Histogram::new(DURATION_BUCKETS),
            ),
            disruption_decisions_by_nodepool: add(
                registry,
                "karpenter_voluntary_disruption_decisions_by_nodepool",
                "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
                Family::default(),
            ),
            disruption_terminate_first_decisions: add(
                registry,
                "karpenter_voluntary_disruption_terminate_first_decisions",
                "Number of terminate-first disruption decisions performed. Labeled by nodepool name, reason, and why the replacement couldn't be staged first.",
                Family::default(),
            ),
            consolidation_timeouts: add(
                registry,
                "karpenter_voluntary_disruption_consolidation_timeouts",
                "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
                Family::default(),
            ),
            instance_type_memory_bytes: add(
                registry,
                "karpenter_cloudprovider_instance_type_memory_bytes",
                "Memory, in bytes, for a given instance type.",
                Family::default(),
            ),
        };
        registry.register(
            "karpenter_nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created and the owning nodepool.",
            metrics.nodeclaims_created.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
            metrics.nodeclaims_terminated.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
            metrics.nodeclaims_disrupted.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_unhealthy_disrupted",
            "Number of unhealthy nodeclaims disrupted in total by node repair. Labeled by the condition the node was disrupted on, the owning nodepool, the capacity type, the image ID, and the termination mode.",
            metrics.nodeclaims_unhealthy_disrupted.clone(),
        );
        registry.register(
            "karpenter_nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            metrics.nodes_created.clone(),
        );
        registry.register(
            "karpenter_nodes_drained",
            "The number of nodes drained by Karpenter",
            metrics.nodes_drained.clone(),
        );
        registry.register(
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
            metrics.nodes_terminated.clone(),
        );
        registry.register(
            "karpenter_pods_eviction_requests",
            "The number of eviction requests made by Karpenter. Labeled by the response code.",
            metrics.eviction_requests.clone(),
        );
        registry.register(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            metrics.scheduling_duration.clone(),
        );
        registry.register(
            "karpenter_scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            metrics.unschedulable_pods.clone(),
        );
        registry.register(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
            metrics.nodepool_usage.clone(),
        );
        registry.register(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
            metrics.nodepool_limit.clone(),
        );
        registry.register(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
            metrics.cluster_state_synced.clone(),
        );
        registry.register(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state",
            metrics.cluster_state_node_count.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
            metrics.disruption_evaluation.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
            metrics.disruption_decisions.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_failed_validations",
            "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
            metrics.disruption_failed_validations.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_queue_failures",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
            metrics.disruption_queue_failures.clone(),
        );
        registry.register(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
            metrics.allowed_disruptions.clone(),
        );
        registry.register(
            "karpenter_pods_drained",
            "Number of pods drained by Karpenter. Labeled by the reason the node was disrupted.",
            metrics.pods_drained.clone(),
        );
        registry.register(
            "karpenter_nodes_reboots",
            "Number of node reboots carried out by Karpenter, labeled by terminal result (succeeded, provider_error, recovery_timeout).",
            metrics.reboots.clone(),
        );
        registry.register(
            "karpenter_nodes_reboot_duration_seconds",
            "Duration of the full reboot action from request to terminal outcome, labeled by result.",
            metrics.reboot_duration.clone(),
        );
        registry.register(
            "karpenter_nodes_reboot_recovery_duration_seconds",
            "Time from issuing a reboot until the node proved a new boot and rejoined (bootID changed + Ready). Recorded on successful reboots only.",
            metrics.reboot_recovery_duration.clone(),
        );
        registry.register_summary(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            metrics.node_termination_duration.clone(),
        );
        registry.register_summary(
            "karpenter_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
            metrics.pod_startup_duration.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            metrics.eligible_nodes.clone(),
        );
        registry.register(
            "karpenter_consolidation_moves",
            "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            metrics.consolidation_moves.clone(),
        );
        registry.register(
            "karpenter_consolidation_score",
            "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            metrics.consolidation_score.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            metrics.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            metrics.max_concurrent_reconciles.clone(),
        );
        registry.register(
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            metrics.nodes_allocatable.clone(),
        );
        registry.register(
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
            metrics.nodes_total_pod_requests.clone(),
        );
        registry.register(
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
            metrics.nodes_total_daemon_requests.clone(),
        );
        registry.register(
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.",
            metrics.pods_state.clone(),
        );
        registry.register(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes for a given NodePool that are consuming disruption budgets (NotReady or being disrupted). Labeled by NodePool and reason.",
            metrics.nodes_consuming_budgets.clone(),
        );
        registry.register(
            "karpenter_pods_disruption_initiated",
            "Number of pod disruptions initiated in total by Karpenter, incremented by the reschedulable pod count whenever the underlying nodeclaim is disrupted. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode. Pods owned by DaemonSets and mirror pods are excluded.",
            metrics.pods_disruption_initiated.clone(),
        );
        registry.with_registry(|r| {
            r.register_collector(Box::new(SolvingCollector(metrics.solving.clone())));
            r.register_collector(metrics.scheduler.collector());
        });
        // Multi- and single-node consolidation have no time limit here (upstream's stop after 1
        // and 3 minutes): never timed out, the series exist at 0 as upstream creates them.
        for kind in ["multi", "single"] {
            let _ = metrics
                .consolidation_timeouts
                .get_or_create(&vec![("consolidation_type", kind.to_owned())]);
        }
        // The EC2 provider's (SDK requests, launch and termination failures, user data sizes):
        // process-wide, recorded by the provider's clients.
        registry.with_registry(|r| karpenter_aws_provider::metrics::metrics().register(r));
        metrics
    }

    /// One disruption method (its `reason`, lowercased, and `consolidation_type`) took
    /// `seconds` to evaluate.
    pub fn disruption_evaluated(&self, reason: &str, consolidation_type: &str, seconds: f64) {
        self.disruption_evaluation
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .observe(seconds);
    }

    /// A scheduling simulation of `controller` starts; it is in progress
    /// (`karpenter_scheduler_unfinished_work_seconds`) until the returned timer is dropped, and
    /// then timed (`karpenter_scheduler_scheduling_duration_seconds`).
    pub fn solving(&self, controller: &str) -> SolveTimer {
        let started = std::time::Instant::now();
        let scheduling_id = random_uuid();
        self.solving
            .lock()
            .insert(controller.to_owned(), (scheduling_id.clone(), started));
        SolveTimer {
            metrics: self.clone(),
            controller: controller.to_owned(),
            scheduling_id,
            started,
        }
    }

    /// `pods` were left out of the last provisioning simulation (upstream's "ignored": they
    /// failed validation, or ask for DRA devices while those are ignored).
    pub fn ignored_pods(&self, pods: usize) {
        self.ignored_pods
            .set(i64::try_from(pods).unwrap_or(i64::MAX));
    }

    /// A pod was first decided about `seconds` after the provisioner first saw it.
    pub fn pod_scheduling_decision(&self, seconds: f64) {
        self.pod_decision_duration.observe(seconds);
    }

    /// A pod seen unbound bound `seconds` after its creation, `provisioning` seconds after the
    /// provisioner first found it a place (if it did).
    pub fn pod_bound(&self, dynamic_resources: bool, seconds: f64, provisioning: Option<f64>) {
        let labels = vec![("dynamic_resources", dynamic_resources.to_string())];
        self.pods_bound_duration
            .get_or_create(&labels)
            .observe(seconds);
        if let Some(seconds) = provisioning {
            self.pods_provisioning_bound_duration
                .get_or_create(&labels)
                .observe(seconds);
        }
    }

    /// A pod became ready `seconds` after the provisioner first found it a place.
    pub fn pod_provisioning_startup(&self, seconds: f64) {
        self.pods_provisioning_startup_duration.observe(seconds);
    }

    /// A scheduling simulation of `controller` took `seconds`.
    pub fn scheduling_duration(&self, controller: &str, seconds: f64) {
        self.scheduling_duration
            .get_or_create(&vec![("controller", controller.to_owned())])
            .observe(seconds);
    }

    /// The last scheduling simulation of `controller` left `pods` unschedulable.
    pub fn unschedulable_pods(&self, controller: &str, pods: usize) {
        self.unschedulable_pods
            .get_or_create(&vec![("controller", controller.to_owned())])
            .set(i64::try_from(pods).unwrap_or(i64::MAX));
    }

    /// A disruption command started (`decision`: `delete`, `replace` or `terminate-first`)
    /// for candidates of `nodepools` (each counted once); a terminate-first command also
    /// counts per pool with why it could not replace first (`terminate_first`).
    pub fn disruption_decision<'a>(
        &self,
        decision: &str,
        reason: &str,
        consolidation_type: &str,
        terminate_first: Option<&str>,
        nodepools: impl IntoIterator<Item = &'a str>,
    ) {
        self.disruption_decisions
            .get_or_create(&vec![
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
        let pools: std::collections::BTreeSet<&str> = nodepools.into_iter().collect();
        for pool in pools {
            self.disruption_decisions_by_nodepool
                .get_or_create(&vec![
                    ("nodepool", pool.to_owned()),
                    ("decision", decision.to_owned()),
                    ("reason", reason.to_owned()),
                    ("consolidation_type", consolidation_type.to_owned()),
                ])
                .inc();
            if let Some(why) = terminate_first {
                self.disruption_terminate_first_decisions
                    .get_or_create(&vec![
                        ("nodepool", pool.to_owned()),
                        ("reason", reason.to_owned()),
                        ("terminate_first_reason", why.to_owned()),
                    ])
                    .inc();
            }
        }
    }

    pub fn disruption_failed_validation(&self, consolidation_type: &str) {
        self.disruption_failed_validations
            .get_or_create(&vec![("consolidation_type", consolidation_type.to_owned())])
            .inc();
    }

    pub fn disruption_queue_failure(&self, decision: &str, reason: &str, consolidation_type: &str) {
        self.disruption_queue_failures
            .get_or_create(&vec![
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
    }

    /// The budget (before nodes already disrupting) and the nodes consuming it.
    pub fn allowed_disruptions(&self, nodepool: &str, reason: &str, allowed: u32, consuming: u32) {
        let labels = vec![
            ("nodepool", nodepool.to_owned()),
            ("reason", reason.to_owned()),
        ];
        self.allowed_disruptions
            .get_or_create(&labels)
            .set(i64::from(allowed));
        self.nodes_consuming_budgets
            .get_or_create(&labels)
            .set(i64::from(consuming));
    }

    /// A NodeClaim was disrupted (`karpenter_nodeclaims_disrupted_total`) with `pods`
    /// reschedulable pods on its node (`karpenter_pods_disruption_initiated_total`).
    pub fn disrupted(&self, labels: &Disrupted<'_>, pods: usize) {
        let labels = labels.labels();
        self.nodeclaims_disrupted.get_or_create(&labels).inc();
        self.pods_disruption_initiated
            .get_or_create(&labels)
            .inc_by(u64::try_from(pods).unwrap_or(u64::MAX));
    }

    pub fn nodeclaim_created(&self, reason: &str, nodepool: &str, min_values_relaxed: bool) {
        self.nodeclaims_created
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("min_values_relaxed", min_values_relaxed.to_string()),
            ])
            .inc();
    }

    pub fn nodeclaim_terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.nodeclaims_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    /// Node repair disrupted a NodeClaim for `condition` (upstream's
    /// `karpenter_nodeclaims_unhealthy_disrupted_total`; the condition in snake case).
    pub fn unhealthy_disrupted(
        &self,
        condition: &str,
        nodepool: &str,
        capacity_type: &str,
        image_id: &str,
        termination_mode: &str,
    ) {
        self.nodeclaims_unhealthy_disrupted
            .get_or_create(&vec![
                ("condition", snake_case(condition)),
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("image_id", image_id.to_owned()),
                ("termination_mode", termination_mode.to_owned()),
            ])
            .inc();
    }

    /// A NodeClaim was disrupted where upstream counts no pods (a failed launch, a liveness
    /// timeout): `karpenter_nodeclaims_disrupted_total` only.
    pub fn nodeclaim_disrupted(&self, labels: &Disrupted<'_>) {
        self.nodeclaims_disrupted
            .get_or_create(&labels.labels())
            .inc();
    }

    /// A NodeClaim registered its Node (`zone`: the NodeClaim's zone label).
    pub fn node_created(&self, nodepool: &str, zone: &str) {
        self.nodes_created
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    pub fn node_drained(&self, nodepool: &str) {
        self.nodes_drained
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc();
    }

    /// A Node's finalizer was removed (`zone`: the Node's zone label).
    pub fn node_terminated(&self, nodepool: &str, zone: &str) {
        self.nodes_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    /// A reboot ended with `result` `seconds` after it was requested (upstream's
    /// `karpenter_nodes_reboots_total` and `karpenter_nodes_reboot_duration_seconds`).
    pub fn reboot_ended(&self, result: &str, seconds: f64) {
        let labels = vec![("result", result.to_owned())];
        self.reboots.get_or_create(&labels).inc();
        self.reboot_duration.get_or_create(&labels).observe(seconds);
    }

    /// A reboot succeeded `seconds` after it was issued.
    pub fn reboot_recovered(&self, seconds: f64) {
        self.reboot_recovery_duration.observe(seconds);
    }

    /// A pod evicted by a drain; `reason` is the node's disruption reason.
    pub fn pod_drained(&self, reason: &str) {
        self.pods_drained
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// A node's finalizer was removed `seconds` after its deletion was requested.
    pub fn node_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.node_termination_duration
            .observe(vec![("nodepool", nodepool.to_owned())], seconds);
    }

    /// A node's finalizer was removed `seconds` after it was created.
    pub fn node_lifetime(&self, nodepool: &str, seconds: f64) {
        self.nodes_lifetime_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    /// A NodeClaim's finalizer was removed `seconds` after its deletion was requested.
    pub fn nodeclaim_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.nodeclaims_termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    /// A call of the cloud provider's `method` (upstream's name) by `controller` took `seconds`.
    pub fn cloudprovider_call(&self, controller: &str, method: &str, provider: &str, seconds: f64) {
        self.cloudprovider_duration
            .get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("method", method.to_owned()),
                ("provider", provider.to_owned()),
            ])
            .observe(seconds);
    }

    /// That call failed with `error` (upstream's category) for `nodepool`.
    pub fn cloudprovider_error(
        &self,
        controller: &str,
        method: &str,
        provider: &str,
        error: &str,
        nodepool: &str,
    ) {
        self.cloudprovider_errors
            .get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("method", method.to_owned()),
                ("provider", provider.to_owned()),
                ("error", error.to_owned()),
                ("nodepool", nodepool.to_owned()),
            ])
            .inc();
    }

    /// A NodeClaim's instance termination took `seconds`.
    pub fn instance_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.nodeclaims_instance_termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    /// A pod became ready `seconds` after it was created.
    pub fn pod_startup_duration(&self, seconds: f64) {
        self.pod_startup_duration.observe(Vec::new(), seconds);
    }

    /// A disruption method (its `reason`: `empty`, `drifted`, `underutilized`) found `count`
    /// candidates it could disrupt.
    /// A consolidation move was decided or rejected (`karpenter_consolidation_moves_total`),
    /// with its Balanced pool's score (`karpenter_consolidation_score`, labelled by the pool's
    /// own verdict, as upstream).
    pub fn consolidation_move(&self, mv: &karpenter_disruption::ConsolidationMove) {
        let labels = |decision: bool| {
            vec![
                ("decision", approval(decision).to_owned()),
                ("nodepool", mv.node_pool.clone()),
                ("policy", mv.policy.as_str().to_owned()),
            ]
        };
        self.consolidation_moves
            .get_or_create(&labels(mv.approved))
            .inc();
        if let Some(score) = &mv.score {
            self.consolidation_score
                .get_or_create(&labels(score.approved()))
                .observe(score.score);
        }
    }

    pub fn eligible_nodes(&self, reason: &str, count: usize) {
        self.eligible_nodes
            .get_or_create(&vec![("reason", reason.to_owned())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// One reconciliation of `controller` (upstream's controller names: `provisioner`,
    /// `node.termination`, ...) took `seconds` and ended as `result`.
    pub fn reconciled(&self, controller: &str, result: Reconciled, seconds: f64) {
        let name = vec![("controller", controller.to_owned())];
        self.reconcile_time.get_or_create(&name).observe(seconds);
        self.reconcile_total
            .get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("result", result.as_str().to_owned()),
            ])
            .inc();
        if result == Reconciled::Error {
            self.reconcile_errors.get_or_create(&name).inc();
        }
    }

    /// A loop starts on the driver: its reconcile and queue series at 0, as controller-runtime
    /// creates a controller's.
    pub fn loop_started(&self, controller: &'static str) {
        for result in ["error", "requeue_after", "requeue", "success"] {
            let _ = self.reconcile_total.get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("result", result.to_owned()),
            ]);
        }
        let _ = self
            .reconcile_errors
            .get_or_create(&vec![("controller", controller.to_owned())]);
        self.runtime.queue_started(controller);
    }

    /// `controller`'s steps in flight now.
    pub fn active_workers(&self, controller: &str, workers: usize) {
        self.active_workers
            .get_or_create(&vec![("controller", controller.to_owned())])
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }

    /// How many steps `controller` runs at once at most.
    pub fn max_concurrent_reconciles(&self, controller: &str, workers: usize) {
        self.max_concurrent_reconciles
            .get_or_create(&vec![("controller", controller.to_owned())])
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }

    /// One Eviction API call answered with `code`.
    pub fn eviction_request(&self, code: u16) {
        self.eviction_requests
            .get_or_create(&vec![("code", code.to_string())])
            .inc();
    }
}

/// Upstream's `decision` label of the consolidation move metrics.
fn approval(approved: bool) -> &'static str {
    if approved { "approved" } else { "rejected" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, starts: &str, contains: &[&str]) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(starts) && contains.iter().all(|c| l.contains(c)))
            .unwrap_or_else(|| panic!("no {starts} with {contains:?} in:\n{text}"))
    }

    #[test]
    fn the_dashboards_metrics_are_exported_with_upstreams_names_labels_and_help() {
        let registry = Metrics::new();
        let metrics = ControllerMetrics::register(&registry);
        metrics.eligible_nodes("underutilized", 3);
        metrics.reconciled("provisioner", Reconciled::Error, 0.02);
        metrics.reconciled("disruption", Reconciled::RequeueAfter, 0.5);
        metrics.node_termination_duration("general", 12.0);
        metrics.pod_startup_duration(4.0);
        let text = registry.encode().expect("encodes");
        assert!(
            line(
                &text,
                "karpenter_voluntary_disruption_eligible_nodes{",
                &["reason=\"underutilized\""]
            )
            .ends_with(" 3")
        );
        assert!(text.contains(
            "# HELP karpenter_voluntary_disruption_eligible_nodes Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason."
        ));
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_total{",
                &["controller=\"provisioner\"", "result=\"error\""]
            )
            .ends_with(" 1")
        );
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_total{",
                &["controller=\"disruption\"", "result=\"requeue_after\""]
            )
            .ends_with(" 1")
        );
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_errors_total{",
                &["controller=\"provisioner\""]
            )
            .ends_with(" 1")
        );
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_time_seconds_bucket{",
                &["controller=\"provisioner\"", "le=\"0.025\""]
            )
            .ends_with(" 1")
        );
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_time_seconds_bucket{",
                &["controller=\"provisioner\"", "le=\"0.01\""]
            )
            .ends_with(" 0")
        );
        assert!(text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram"));
        assert!(text.contains(
            "karpenter_nodes_termination_duration_seconds{nodepool=\"general\",quantile=\"0.5\"} 12\n"
        ));
        assert!(text.contains("# TYPE karpenter_nodes_termination_duration_seconds summary"));
        assert!(text.contains("karpenter_pods_startup_duration_seconds{quantile=\"1\"} 4\n"));
        assert!(text.contains("karpenter_pods_startup_duration_seconds_count 1\n"));
    }

    #[test]
    fn a_result_is_success_or_error_as_the_reconciliation_returned() {
        assert_eq!(Reconciled::of(&Ok::<(), ()>(())), Reconciled::Success);
        assert_eq!(Reconciled::of(&Err::<(), ()>(())).as_str(), "error");
        assert_eq!(Reconciled::RequeueAfter.as_str(), "requeue_after");
    }
}
