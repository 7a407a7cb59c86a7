//! The controllers' metrics, with upstream's names and labels (`reference/karpenter-core.md`
//! section 5.4). prometheus-client appends `_total` to counters itself, so counters are
//! registered without it.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::http::Metrics;

type Labels = Vec<(&'static str, String)>;

/// Handles to every metric the controllers update.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    nodeclaims_created: Family<Labels, Counter>,
    nodeclaims_terminated: Family<Labels, Counter>,
    nodeclaims_disrupted: Family<Labels, Counter>,
    nodes_created: Family<Labels, Counter>,
    nodes_drained: Family<Labels, Counter>,
    nodes_terminated: Family<Labels, Counter>,
    eviction_requests: Family<Labels, Counter>,
    pub scheduling_duration: Histogram,
    pub unschedulable_pods: Gauge,
    nodepool_usage: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    nodepool_limit: Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>,
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
    node_termination_duration: Histogram,
}

fn evaluation_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 12))
}

impl ControllerMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Metrics) -> Self {
        let metrics = ControllerMetrics {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_drained: Family::default(),
            nodes_terminated: Family::default(),
            eviction_requests: Family::default(),
            scheduling_duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            unschedulable_pods: Gauge::default(),
            nodepool_usage: Family::default(),
            nodepool_limit: Family::default(),
            cluster_state_synced: Gauge::default(),
            cluster_state_node_count: Gauge::default(),
            disruption_evaluation: Family::new_with_constructor(evaluation_histogram),
            disruption_decisions: Family::default(),
            disruption_failed_validations: Family::default(),
            disruption_queue_failures: Family::default(),
            allowed_disruptions: Family::default(),
            nodes_consuming_budgets: Family::default(),
            pods_disruption_initiated: Family::default(),
            pods_drained: Family::default(),
            node_termination_duration: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
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
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool.",
            metrics.nodeclaims_disrupted.clone(),
        );
        registry.register(
            "karpenter_nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool.",
            metrics.nodes_created.clone(),
        );
        registry.register(
            "karpenter_nodes_drained",
            "The number of nodes drained by Karpenter",
            metrics.nodes_drained.clone(),
        );
        registry.register(
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool.",
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
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer.",
            metrics.node_termination_duration.clone(),
        );
        registry.register(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes for a given NodePool that are consuming disruption budgets (NotReady or being disrupted). Labeled by NodePool and reason.",
            metrics.nodes_consuming_budgets.clone(),
        );
        registry.register(
            "karpenter_pods_disruption_initiated",
            "The number of pods whose disruption was initiated by Karpenter's disruption (the pods of a node whose deletion a disruption command started).",
            metrics.pods_disruption_initiated.clone(),
        );
        metrics
    }

    /// One disruption pass took `seconds`; `method` is the method whose command it produced
    /// (`none` when it produced none).
    pub fn disruption_evaluated(&self, method: &str, consolidation_type: &str, seconds: f64) {
        self.disruption_evaluation
            .get_or_create(&vec![
                ("method", method.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .observe(seconds);
    }

    pub fn disruption_decision(&self, decision: &str, reason: &str, consolidation_type: &str) {
        self.disruption_decisions
            .get_or_create(&vec![
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
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

    pub fn pods_disruption_initiated(&self, nodepool: &str, reason: &str, pods: usize) {
        self.pods_disruption_initiated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("reason", reason.to_owned()),
            ])
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

    pub fn nodeclaim_disrupted(&self, reason: &str, nodepool: &str, capacity_type: &str) {
        self.nodeclaims_disrupted
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
            ])
            .inc();
    }

    pub fn node_created(&self, nodepool: &str) {
        self.nodes_created
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc();
    }

    pub fn node_drained(&self, nodepool: &str) {
        self.nodes_drained
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc();
    }

    pub fn node_terminated(&self, nodepool: &str) {
        self.nodes_terminated
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc();
    }

    /// A pod evicted by a drain; `reason` is the node's disruption reason.
    pub fn pod_drained(&self, reason: &str) {
        self.pods_drained
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    pub fn node_termination_duration(&self, seconds: f64) {
        self.node_termination_duration.observe(seconds);
    }

    /// One Eviction API call answered with `code`.
    pub fn eviction_request(&self, code: u16) {
        self.eviction_requests
            .get_or_create(&vec![("code", code.to_string())])
            .inc();
    }

    pub fn nodepool_usage(&self, nodepool: &str, resource: &str, value: f64) {
        self.nodepool_usage
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("resource_type", resource.to_owned()),
            ])
            .set(value);
    }

    pub fn nodepool_limit(&self, nodepool: &str, resource: &str, value: f64) {
        self.nodepool_limit
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("resource_type", resource.to_owned()),
            ])
            .set(value);
    }
}
