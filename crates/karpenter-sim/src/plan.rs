//! The plan: what Karpenter would launch for the pending pods, and what it costs.
//!
//! The solver decides the NodeClaims; each is launched with its cheapest allowed offering
//! ([`crate::launch`]). Per node the plan reports pods, CPU and memory utilisation (requests,
//! DaemonSet overhead included, over allocatable) and price; then totals ($/h, and $/month at
//! 730 hours), unschedulable pods with the solver's reason per NodePool, and the lower bound
//! ([`crate::lower_bound`]) with our ratio to it. Spot prices are estimates
//! (on-demand x (1 - discount)) and are marked as such.

use serde::Serialize;

use crate::daemonsets;
use crate::load::Ignored;
use crate::lower_bound::{LowerBound, lower_bound};
use crate::nodegroup::NodeGroupComparison;
use crate::resources::{HOURS_PER_MONTH, cpu_millis, memory_bytes, pod_requests, round_price};
use crate::scenario::Scenario;
use karpenter_cloud::launch::choose;

/// One node to launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedNode {
    pub nodepool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    /// Workload pods placed on the node.
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

/// A pod the solver could not place.
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

/// Computes the plan for the scenario's pending pods (lent to the solver, not copied).
pub fn plan(scenario: &mut Scenario) -> Plan {
    let pending = std::mem::take(&mut scenario.pending);
    let (result, pending) = scenario.solve_returning(pending, &scenario.existing_nodes);
    scenario.pending = pending;
    let scenario = &*scenario;
    let mut nodes = Vec::new();
    let mut notes = scenario.notes.clone();
    let mut placed_cpu = 0i64;
    let mut placed_memory = 0i64;
    let requests_by_pod: std::collections::BTreeMap<String, (i64, i64)> = scenario
        .pending
        .iter()
        .map(|pod| {
            let requests = pod_requests(pod);
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            (
                format!("{ns}/{name}"),
                (cpu_millis(&requests), memory_bytes(&requests)),
            )
        })
        .collect();
    for claim in &result.new_node_claims {
        let Some(types) = scenario.types_of(&claim.node_pool) else {
            continue;
        };
        let Some(launch) = choose(claim, types) else {
            notes.push(format!(
                "a NodeClaim of NodePool {} has no available offering; its {} pod(s) are not counted",
                claim.node_pool,
                claim.pods.len()
            ));
            continue;
        };
        let pool_taints = scenario
            .pools
            .iter()
            .find(|p| p.name == claim.node_pool)
            .map(|p| p.taints.clone())
            .unwrap_or_default();
        let labels = launch.node_labels(claim);
        let daemonset_pods = scenario
            .daemonsets
            .iter()
            .filter(|ds| daemonsets::runs_on(ds, &labels, &pool_taints))
            .count();
        let allocatable = launch.info.allocatable();
        let ratio = |used: i64, total: i64| {
            if total > 0 {
                ((used as f64 / total as f64) * 1000.0).round() / 1000.0
            } else {
                0.0
            }
        };
        let pod_names: Vec<String> = claim.pods.iter().map(ToString::to_string).collect();
        for name in &pod_names {
            if let Some((cpu, memory)) = requests_by_pod.get(name) {
                placed_cpu += cpu;
                placed_memory += memory;
            }
        }
        nodes.push(PlannedNode {
            nodepool: claim.node_pool.clone(),
            instance_type: launch.info.name.clone(),
            capacity_type: launch.offering.capacity_type.as_str().to_string(),
            zone: launch.offering.zone.clone(),
            pods: claim.pods.len(),
            daemonset_pods,
            cpu_utilisation: ratio(cpu_millis(&claim.requests), allocatable.cpu_millis),
            memory_utilisation: ratio(memory_bytes(&claim.requests), allocatable.memory_bytes),
            price_per_hour: launch.offering.price_per_hour,
            price_is_estimate: launch.offering.price_is_estimate,
            pod_names,
        });
    }
    let total_per_hour = round_price(nodes.iter().map(|n| n.price_per_hour).sum());
    let bound = lower_bound(placed_cpu, placed_memory, scenario.pool_types.values());
    let unschedulable = result
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
        pods_pending: scenario.pending.len(),
        pods_on_new_nodes: nodes.iter().map(|n| n.pods).sum(),
        pods_on_existing_nodes: result.existing_placements.len(),
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
