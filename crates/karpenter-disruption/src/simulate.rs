//! Rescheduling simulations (upstream `SimulateScheduling`): would the candidates' pods fit
//! elsewhere, and what would have to be launched for them?
//!
//! The [`Simulator`] converts the snapshot into a solver input once; each simulation takes the
//! candidates out of the existing nodes, adds their reschedulable pods to the pending pods and
//! the pods of nodes already being deleted, runs the solver, and puts the nodes back. A
//! candidate pod that fits nowhere, or only on a node that is not initialized yet, makes the
//! simulation fail with that pod's reason.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use karpenter_scheduling::{ExistingNode, NewNodeClaim, SolveInput, SolveResult};

use crate::candidate::Candidate;
use crate::pods;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::snapshot::{NodeState, Snapshot};

/// What a simulation found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every candidate pod fits on existing nodes.
    Fits,
    /// Every candidate pod fits, with these new NodeClaims.
    NeedsNew(Vec<NewNodeClaim>),
    /// Some candidate pod cannot be placed; the reason names it.
    Unschedulable(Reason),
}

/// Reusable solver input for one snapshot.
#[derive(Debug)]
pub struct Simulator {
    input: SolveInput,
    /// Pods waiting (pending pods and pods of nodes being deleted).
    base_pods: Vec<Arc<Pod>>,
    initialized: BTreeMap<String, bool>,
    /// Number of solver runs so far.
    pub runs: usize,
    /// NodePools the solver could not take (pool name, why): they launch no replacements.
    pub unconverted: Vec<(String, String)>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_else(|| pods::key(pod))
}

/// The pod as if it were pending: unbound, with a uid (shared, not copied, when it already is).
fn as_pending(pod: &Arc<Pod>) -> Arc<Pod> {
    let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    if pod.metadata.uid.is_some() && !bound {
        return Arc::clone(pod);
    }
    let mut p = Pod::clone(pod);
    if p.metadata.uid.is_none() {
        p.metadata.uid = Some(pods::key(pod));
    }
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = None;
    }
    Arc::new(p)
}

/// Upstream `IsUnderConsolidateAfter`: the node's NodePool has a non-zero `consolidateAfter`
/// and the node had a pod event (or, without one, was initialized) less than that long ago.
fn under_consolidate_after(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> bool {
    let Some(pool) = node.node_pool().and_then(|p| snapshot.node_pool(p)) else {
        return false;
    };
    let Some(after) = pool::consolidate_after(pool).filter(|d| !d.is_zero()) else {
        return false;
    };
    if !node.initialized {
        return false;
    }
    let Some(since) = node.last_pod_event.or(node.initialized_at) else {
        return false;
    };
    chrono::Duration::from_std(after).is_ok_and(|after| now - since < after)
}

fn existing(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> ExistingNode {
    ExistingNode {
        name: node.name.clone(),
        labels: node.labels.clone(),
        taints: node.taints.clone(),
        capacity: node.capacity.clone(),
        allocatable: node.allocatable.clone(),
        pods: node
            .pods
            .iter()
            .filter(|p| !pods::is_terminal(p))
            .cloned()
            .collect(),
        initialized: node.initialized,
        deleting: node.deleting || node.marked_for_deletion,
        volume_limits: BTreeMap::new(),
        refuses_relocated_pods: under_consolidate_after(snapshot, node, now),
    }
}

impl Simulator {
    pub fn new(snapshot: &Snapshot, now: DateTime<Utc>) -> Self {
        let mut base_pods: Vec<Arc<Pod>> = snapshot.pending_pods.iter().map(as_pending).collect();
        for node in snapshot
            .nodes
            .iter()
            .filter(|n| n.deleting || n.marked_for_deletion)
        {
            base_pods.extend(
                node.pods
                    .iter()
                    .filter(|p| pods::is_reschedulable(p))
                    .map(as_pending),
            );
        }
        let mut node_pools = Vec::with_capacity(snapshot.node_pools.len());
        let mut unconverted = Vec::new();
        for pool in &snapshot.node_pools {
            match karpenter_scheduling::v1::node_pool(pool) {
                Ok(converted) => node_pools.push(converted),
                Err(error) => unconverted.push((pool::name(pool).to_owned(), error.to_string())),
            }
        }
        let input = SolveInput {
            node_pools,
            instance_types: snapshot.instance_types.clone(),
            default_instance_types: Vec::new(),
            existing_nodes: snapshot
                .nodes
                .iter()
                .map(|n| existing(snapshot, n, now))
                .collect(),
            daemonsets: snapshot.daemonsets.clone(),
            pods: Vec::new(),
            options: snapshot.solve_options.clone(),
            ..Default::default()
        };
        Simulator {
            input,
            base_pods,
            initialized: snapshot
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.initialized))
                .collect(),
            runs: 0,
            unconverted,
        }
    }

    /// Simulates removing `candidates` (all from `snapshot`, which built this simulator). In a
    /// `consolidation` simulation (upstream `IsConsolidationSimulation`) the candidates' pods may
    /// not move onto nodes still within their NodePool's `consolidateAfter`; drift's may.
    pub fn simulate(
        &mut self,
        snapshot: &Snapshot,
        candidates: &[&Candidate],
        consolidation: bool,
    ) -> (Outcome, SolveResult) {
        let mut indexes: Vec<usize> = candidates.iter().map(|c| c.index).collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut moving: Vec<Arc<Pod>> = Vec::new();
        for c in candidates {
            if let Some(node) = snapshot.nodes.get(c.index) {
                moving.extend(
                    c.reschedulable
                        .iter()
                        .filter_map(|&i| node.pods.get(i))
                        .map(as_pending),
                );
            }
        }
        let watched: BTreeSet<String> = moving.iter().map(|p| uid(p)).collect();
        let mut removed: Vec<(usize, ExistingNode)> = Vec::with_capacity(indexes.len());
        for &i in indexes.iter().rev() {
            if i < self.input.existing_nodes.len() {
                removed.push((i, self.input.existing_nodes.remove(i)));
            }
        }
        let mut pods = self.base_pods.clone();
        pods.extend(moving);
        self.input.pods = pods;
        if consolidation {
            self.input.relocating = watched.clone();
        }
        let result = karpenter_scheduling::solve(&self.input);
        self.runs += 1;
        self.input.pods = Vec::new();
        self.input.relocating.clear();
        for (i, node) in removed.into_iter().rev() {
            self.input.existing_nodes.insert(i, node);
        }
        (self.classify(&watched, &result), result)
    }

    fn classify(&self, watched: &BTreeSet<String>, result: &SolveResult) -> Outcome {
        if let Some(u) = result
            .unschedulable
            .iter()
            .find(|u| watched.contains(&u.pod.uid))
        {
            return Outcome::Unschedulable(Reason::new(
                Code::Unschedulable,
                format!("pod {} cannot be rescheduled: {}", u.pod, u.reason),
            ));
        }
        if let Some(p) = result.existing_placements.iter().find(|p| {
            watched.contains(&p.pod.uid) && !self.initialized.get(&p.node).copied().unwrap_or(true)
        }) {
            return Outcome::Unschedulable(Reason::new(
                Code::UninitializedDestination,
                format!(
                    "pod {} would only fit on node {}, which is not initialized",
                    p.pod, p.node
                ),
            ));
        }
        if result.new_node_claims.is_empty() {
            Outcome::Fits
        } else {
            Outcome::NeedsNew(result.new_node_claims.clone())
        }
    }
}
