//! The plan: what Karpenter would launch for the pending pods, and what it costs.
//!
//! The pods are provisioned in batches as the controller does ([`crate::batches`]): the solver
//! decides each batch's NodeClaims, each launched with its cheapest allowed offering
//! (`karpenter_cloud::launch`), and the pods a batch cannot place are solved again in the next
//! one. Per node the plan reports the batch that launched it, pods, CPU and memory utilisation
//! (requests, DaemonSet overhead included, over allocatable) and price; then the batch count,
//! totals ($/h, and $/month at 730 hours), pods no batch could place with the solver's reason
//! per NodePool, and the lower bound ([`crate::lower_bound`]) with our ratio to it. Spot prices
//! are estimates (on-demand x (1 - discount)) and are marked as such.

use karpenter_scheduling::pod_record;
use serde::Serialize;

use crate::batches::provision;
use crate::daemonsets;
use crate::load::Ignored;
use crate::lower_bound::{LowerBound, lower_bound};
use crate::nodegroup::NodeGroupComparison;
use crate::resources::{HOURS_PER_MONTH, cpu_millis, memory_bytes, pod_requests, round_price};
use crate::scenario::Scenario;

/// One node to launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedNode {
    pub nodepool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    /// The provisioning batch that launched the node, from 1.
    pub batch: usize,
    /// Workload pods placed on the node (by its batch and later ones).
    pub pods: usize,
    /// DaemonSet pods that would run on it.
    pub daemonset_pods: usize,
    /// CPU requests (pods and DaemonSets) over allocatable, 0..1.
    pub cpu_utilisation: f64,
    /// Memory requests (pods and DaemonSets) over allocatable, 0..1.
    pub memory_utilisation: f64,
    pub price_per_hour: f64,
    /// True for spot prices derived from the discount.
    pub price_is_estimate: bool,
    /// `namespace/name` of the pods.
    pub pod_names: Vec<String>,
}

/// A pod no batch could place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnschedulablePod {
    /// `namespace/name`.
    pub pod: String,
    /// `NodePool: reason`, one per NodePool (and existing nodes).
    pub reasons: Vec<String>,
}

/// What Karpenter would launch, and what it costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub region: String,
    pub spot_discount: f64,
    /// Provisioning batches that placed pods: the controller solves the pending pods once per
    /// batch, and pods a batch cannot place are solved again in the next one.
    pub batches: usize,
    /// Whether the solver pinned NodeClaims of zone-level anti-affinity groups to one zone.
    pub zone_pinning: bool,
    pub nodes: Vec<PlannedNode>,
    pub unschedulable: Vec<UnschedulablePod>,
    /// Pods the workloads expand to (pending ones).
    pub pods_pending: usize,
    /// Pods placed on new nodes.
    pub pods_on_new_nodes: usize,
    /// Pods placed on existing nodes.
    pub pods_on_existing_nodes: usize,
    pub total_per_hour: f64,
    pub total_per_month: f64,
    /// True when any node's price is a spot estimate.
    pub total_includes_estimates: bool,
    pub lower_bound_per_hour: f64,
    /// `total_per_hour / lower_bound_per_hour` (absent when the bound is 0).
    pub ratio_to_lower_bound: Option<f64>,
    pub lower_bound: LowerBound,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_nodegroup: Option<NodeGroupComparison>,
    /// The NodePools simulated (`default` when the built-in default was used).
    pub nodepools: Vec<String>,
    pub default_nodepool: bool,
    pub ignored: Vec<Ignored>,
    pub notes: Vec<String>,
}

/// Computes the plan for the scenario's pending pods, batch by batch ([`crate::batches`]).
/// The pending pods are moved into the plan's nodes, not copied: afterwards
/// `scenario.pending` is empty (read what you need from it first).
pub fn plan(scenario: &mut Scenario) -> Plan {
    let pending = std::mem::take(&mut scenario.pending);
    let pods_pending = pending.len();
    let requests_by_pod: std::collections::BTreeMap<String, (i64, i64)> = pending
        .iter()
        .map(|pod| {
            let requests = pod_requests(pod.spec.as_ref());
            (
                pod_record::key(&pod.metadata),
                (cpu_millis(&requests), memory_bytes(&requests)),
            )
        })
        .collect();
    let batches = provision(scenario, pending);
    let scenario = &*scenario;
    let mut notes = scenario.notes.clone();
    notes.extend(batches.notes.iter().cloned());
    let mut placed_cpu = 0i64;
    let mut placed_memory = 0i64;
    let mut nodes = Vec::new();
    for node in &batches.nodes {
        let pool_taints = scenario
            .pools
            .iter()
            .find(|p| p.name == node.nodepool)
            .map(|p| p.taints.clone())
            .unwrap_or_default();
        let daemonset_pods = scenario
            .daemonsets
            .iter()
            .filter(|ds| daemonsets::runs_on(ds, &node.labels, &pool_taints))
            .count();
        let ratio = |used: i64, total: i64| {
            if total > 0 {
                ((used as f64 / total as f64) * 1000.0).round() / 1000.0
            } else {
                0.0
            }
        };
        for name in &node.pods {
            if let Some((cpu, memory)) = requests_by_pod.get(name) {
                placed_cpu += cpu;
                placed_memory += memory;
            }
        }
        nodes.push(PlannedNode {
            nodepool: node.nodepool.clone(),
            instance_type: node.instance_type.clone(),
            capacity_type: node.capacity_type.clone(),
            zone: node.zone.clone(),
            batch: node.batch,
            pods: node.pods.len(),
            daemonset_pods,
            cpu_utilisation: ratio(cpu_millis(&node.requests), cpu_millis(&node.allocatable)),
            memory_utilisation: ratio(
                memory_bytes(&node.requests),
                memory_bytes(&node.allocatable),
            ),
            price_per_hour: node.price_per_hour,
            price_is_estimate: node.price_is_estimate,
            pod_names: node.pods.clone(),
        });
    }
    let total_per_hour = round_price(nodes.iter().map(|n| n.price_per_hour).sum());
    let bound = lower_bound(placed_cpu, placed_memory, scenario.pool_types.values());
    let unschedulable = batches
        .unschedulable
        .iter()
        .map(|u| UnschedulablePod {
            pod: u.pod.to_string(),
            reasons: u.reason_lines(),
        })
        .collect();
    Plan {
        region: scenario.pricing.region.clone(),
        spot_discount: scenario.pricing.spot_discount,
        batches: batches.batches,
        zone_pinning: scenario.solve_options.pin_anti_affinity_domains,
        pods_pending,
        pods_on_new_nodes: nodes.iter().map(|n| n.pods).sum(),
        pods_on_existing_nodes: batches.pods_on_existing_nodes,
        total_per_hour,
        total_per_month: round_price(total_per_hour * HOURS_PER_MONTH),
        total_includes_estimates: nodes.iter().any(|n| n.price_is_estimate),
        lower_bound_per_hour: bound.per_hour,
        ratio_to_lower_bound: (bound.per_hour > 0.0)
            .then(|| (total_per_hour / bound.per_hour * 1000.0).round() / 1000.0),
        lower_bound: bound,
        compare_nodegroup: None,
        nodepools: scenario.pools.iter().map(|p| p.name.clone()).collect(),
        default_nodepool: scenario.default_node_pool,
        ignored: scenario.ignored.clone(),
        notes,
        nodes,
        unschedulable,
    }
}
