//! Provisioning in batches, as the controller does.
//!
//! The controller solves the pending pods once per batch and creates the NodeClaims; pods the
//! batch could not place stay pending and are solved again in the next batch, where the
//! NodeClaims launched so far are nodes of the cluster: each in its one zone, with its real
//! instance type (so it counts its real capacity against the NodePool's limits, not the
//! largest type it could have become) and the pods placed on it. Plan mode ([`provision`])
//! repeats batches until the pending pods are all placed or a batch places none; those left are
//! unschedulable, with that last batch's reasons. Timeline mode solves one batch at a time
//! over its cluster and retries the pods left pending in the next one.
//!
//! Why a later batch places what an earlier one could not: upstream's solver leaves a NodeClaim
//! of a zone-level anti-affinity group free to land in any zone and blocks all of them, one pod
//! per group per batch (our solver pins such NodeClaims to one zone:
//! `SolveOptions::pin_anti_affinity_domains`); and a batch subtracts, per NodeClaim, the
//! largest instance type the claim could become from the NodePool's limits.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use karpenter_cloud::launch::{Launch as Offer, choose, overlay_prioritized, prioritized};
use karpenter_lifecycle::nodeclaim::{annotate_overlays, node_claim};
use karpenter_scheduling::{
    ExistingNode, InstanceType, NewNodeClaim, ResourceList, Unschedulable, pod_record,
};

use crate::resources::pod_requests;
use crate::scenario::Scenario;
use crate::timeline::NODE_STARTUP;
use crate::timeline::cluster::{Launch, SimCluster};

/// A node to launch for `claim`, named `name`, with `pods` bound to it: its cheapest allowed
/// offering (`None` when there is none), labels, the NodePool's taints and the NodeClaim the
/// controller would create for it.
pub(crate) fn launch_claim<'s>(
    scenario: &'s Scenario,
    claim: &NewNodeClaim,
    name: &str,
    pods: Vec<Pod>,
) -> Option<(Launch, Offer<'s>)> {
    let types = scenario.types_of(&claim.node_pool)?;
    let pool = scenario
        .node_pools
        .iter()
        .find(|p| crate::nodepool::name_of(p) == claim.node_pool)?;
    let mut shaped = node_claim(claim, pool);
    annotate_overlays(&mut shaped, claim, &scenario.overlays);
    // As the providers launch: in the claim's order when an overlay changed a price.
    let offer = if overlay_prioritized(&shaped) {
        prioritized(
            claim.instance_type_options.iter().map(|o| &*o.name),
            &claim.requirements,
            |name| types.info(name),
            |_, _| true,
        )?
    } else {
        choose(claim, types)?
    };
    // The solver's form: with the overlays' capacity and prices.
    let it = types
        .scheduling_type(&offer.info.name)
        .cloned()
        .unwrap_or_else(|| InstanceType::from(offer.info));
    let price_per_hour = it
        .offerings
        .iter()
        .find(|o| {
            o.zone == offer.offering.zone
                && o.capacity_type == offer.offering.capacity_type.as_str()
        })
        .map_or(offer.offering.price_per_hour, |o| o.price);
    let taints = scenario
        .pools
        .iter()
        .find(|p| p.name == claim.node_pool)
        .map(|p| p.taints.clone())
        .unwrap_or_default();
    let mut labels = offer.node_labels(claim);
    labels.insert(
        karpenter_api::labels::HOSTNAME.to_string(),
        name.to_string(),
    );
    let launch = Launch {
        name: name.to_string(),
        claim: shaped,
        labels,
        taints,
        allocatable: it.allocatable(),
        capacity: it.capacity,
        price_per_hour,
        pods,
    };
    Some((launch, offer))
}

/// A node launched by a batch.
#[derive(Debug, Clone)]
pub struct LaunchedNode {
    pub name: String,
    /// The batch that launched it, from 1.
    pub batch: usize,
    pub nodepool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    pub price_per_hour: f64,
    pub price_is_estimate: bool,
    pub labels: BTreeMap<String, String>,
    pub allocatable: ResourceList,
    /// The NodeClaim's requests (pods and DaemonSet overhead) plus the pods later batches
    /// placed on the node.
    pub requests: ResourceList,
    /// `namespace/name` of its pods, in the order they were placed.
    pub pods: Vec<String>,
}

/// What the batches did.
#[derive(Debug, Clone, Default)]
pub struct Batches {
    /// Batches that placed at least one pod.
    pub batches: usize,
    /// Nodes launched, in launch order.
    pub nodes: Vec<LaunchedNode>,
    /// Pods placed on the manifests' nodes.
    pub pods_on_existing_nodes: usize,
    /// Pods no batch could place, with the reasons of the last batch.
    pub unschedulable: Vec<Unschedulable>,
    /// What the simulation could not do, for humans.
    pub notes: Vec<String>,
}

/// Solves `pending` (the scenario's pending pods, moved in) in batches until every pod is
/// placed or a batch places none.
pub fn provision(scenario: &Scenario, mut pending: Vec<Pod>) -> Batches {
    let mut out = Batches::default();
    let mut manifest_nodes: Vec<ExistingNode> = scenario.existing_nodes.clone();
    let mut launched = SimCluster::new();
    while !pending.is_empty() {
        let batch = out.batches + 1;
        let mut existing = manifest_nodes.clone();
        existing.extend(launched.existing());
        // The pods are lent to the solver and come back with its result, then are taken out
        // of that vector by key (no second collection of whole pods). The last batch (nothing left
        // over) keeps no pod for a next solve, so its pods are never moved into the in-flight
        // cluster: a 100,000-pod plan holds its pods once.
        let (result, lent) = scenario.solve_returning(std::mem::take(&mut pending), &existing);
        let last = result.unschedulable.is_empty();
        let mut lent = lent;
        let mut index: HashMap<String, usize> = lent
            .iter()
            .enumerate()
            .map(|(i, p)| (pod_record::key(&p.metadata), i))
            .collect();
        // Each key is taken once (removed from the index), leaving an empty pod in its place.
        let mut take = |key: &str| {
            let i = index.remove(key)?;
            lent.get_mut(i).map(std::mem::take)
        };
        let mut placed = 0;
        for placement in &result.existing_placements {
            let key = placement.pod.to_string();
            let Some(pod) = take(&key) else {
                continue;
            };
            placed += 1;
            if let Some(node) = manifest_nodes.iter_mut().find(|n| n.name == placement.node) {
                if !last {
                    node.pods.push(Arc::new(pod.into()));
                }
                out.pods_on_existing_nodes += 1;
            } else if let Some(node) = out.nodes.iter_mut().find(|n| n.name == placement.node) {
                node.requests.add(&pod_requests(pod.spec.as_ref()));
                node.pods.push(key);
                if !last {
                    launched.bind(&node.name, pod, Duration::ZERO, Duration::ZERO);
                }
            }
        }
        for claim in &result.new_node_claims {
            let pods: Vec<Pod> = if last {
                Vec::new()
            } else {
                claim
                    .pods
                    .iter()
                    .filter_map(|p| take(&p.to_string()))
                    .collect()
            };
            let name = format!("{}-{}", claim.node_pool, out.nodes.len() + 1);
            let Some((launch, offer)) = launch_claim(scenario, claim, &name, pods) else {
                out.notes.push(format!(
                    "a NodeClaim of NodePool {} has no available offering; its {} pod(s) are not counted",
                    claim.node_pool,
                    claim.pods.len()
                ));
                continue;
            };
            placed += claim.pods.len();
            out.nodes.push(LaunchedNode {
                name: name.clone(),
                batch,
                nodepool: claim.node_pool.clone(),
                instance_type: offer.info.name.clone(),
                capacity_type: offer.offering.capacity_type.as_str().to_string(),
                zone: offer.offering.zone.clone(),
                price_per_hour: launch.price_per_hour,
                price_is_estimate: offer.offering.price_is_estimate,
                labels: launch.labels.clone(),
                allocatable: launch.allocatable.clone(),
                requests: claim.requests.clone(),
                pods: claim.pods.iter().map(ToString::to_string).collect(),
            });
            if !last {
                // Launched, never ready: the next batch sees an in-flight NodeClaim.
                launched.launch(launch, Duration::ZERO, NODE_STARTUP);
            }
        }
        if placed == 0 {
            out.unschedulable = result.unschedulable;
            break;
        }
        out.batches = batch;
        // Only the pods the solver reported stay pending (a NodeClaim without an offering
        // loses its pods, as noted).
        // Compacted in place: a batch that leaves most pods pending does not copy them.
        let mut keep = vec![false; lent.len()];
        for unschedulable in &result.unschedulable {
            if let Some(&i) = index.get(&unschedulable.pod.to_string()) {
                keep[i] = true;
            }
        }
        let mut position = 0;
        lent.retain(|_| {
            let kept = keep.get(position).copied().unwrap_or(false);
            position += 1;
            kept
        });
        pending = lent;
    }
    out
}
