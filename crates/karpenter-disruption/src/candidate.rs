//! Disruption candidates (upstream `NewCandidate`, `ValidateNodeDisruptable`,
//! `ValidatePodsDisruptable`): which nodes may be disrupted at all, and for every other node a
//! reason a human can read.
//!
//! Node rules, in order: managed (NodeClaim + nodepool label), not already queued, initialized,
//! not deleting, not marked for deletion, not nominated, no node `do-not-disrupt=true`, the
//! NodePool exists. Pod rules (graceful methods; the eventual class ignores them when the
//! NodeClaim has a `terminationGracePeriod`): no active pod with `do-not-disrupt`, no pod that
//! a PDB protects. Terminal, terminating and mirror pods never block; DaemonSet pods do.

use chrono::{DateTime, Utc};

use crate::cost::{self, PodCostInput};
use crate::do_not_disrupt::{self, PodProtection};
use crate::pdb;
use crate::pods;
use crate::snapshot::{NodeState, Snapshot};
use crate::time_fmt::hms;

/// How a method disrupts: graceful methods respect pod-level blocks; eventual ones (drift)
/// ignore them when a termination grace period bounds the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Graceful,
    Eventual,
}

/// A node that may be disrupted, with its costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Index into `Snapshot::nodes`.
    pub index: usize,
    pub name: String,
    pub node_claim: String,
    pub node_pool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    pub price: f64,
    /// Indexes into the node's pods of the pods that need a new home.
    pub reschedulable: Vec<usize>,
    pub disruption_cost: f64,
    pub reschedule_disruption_cost: f64,
}

impl Candidate {
    pub fn is_empty(&self) -> bool {
        cost::is_empty(self.reschedule_disruption_cost)
    }

    pub fn savings_ratio(&self) -> f64 {
        cost::savings_ratio(self.price, self.reschedule_disruption_cost)
    }
}

/// A node left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    pub index: usize,
    pub reason: String,
}

/// Why the node itself (not its pods) cannot be disrupted at `now`.
pub fn node_block(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Option<String> {
    if node.node_claim.is_none() {
        return Some("not managed by Karpenter (no NodeClaim)".to_owned());
    }
    let Some(pool) = node.node_pool() else {
        return Some("node has no karpenter.sh/nodepool label".to_owned());
    };
    if node.queued {
        return Some("already being disrupted (in the orchestration queue)".to_owned());
    }
    if !node.initialized {
        return Some("node is not initialized".to_owned());
    }
    if node.deleting {
        return Some("node is being deleted".to_owned());
    }
    if node.marked_for_deletion {
        return Some("node is already marked for deletion".to_owned());
    }
    if let Some(until) = node.nominated_until.filter(|u| *u > now) {
        return Some(format!("nominated for pending pods until {}", hms(until)));
    }
    if do_not_disrupt::node_protected(
        node.annotations
            .get(karpenter_api::labels::DO_NOT_DISRUPT)
            .map(String::as_str),
    ) {
        return Some("node has karpenter.sh/do-not-disrupt=true".to_owned());
    }
    if snapshot.node_pool(pool).is_none() {
        return Some(format!("nodepool {pool} does not exist"));
    }
    None
}

/// Why one of the node's pods blocks graceful disruption at `now`.
pub fn pod_block(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Option<String> {
    for pod in &node.pods {
        if !pods::is_active(pod) || pods::is_mirror(pod) {
            continue;
        }
        let value = pods::annotation(pod, karpenter_api::labels::DO_NOT_DISRUPT);
        if let PodProtection::Protected(why) =
            do_not_disrupt::pod_protection(value, pods::started(pod), now)
        {
            return Some(format!(
                "pod {} {}",
                pods::key(pod),
                why.trim_start_matches("pod ")
            ));
        }
        if let Some(why) = pdb::eviction_block(&snapshot.pdbs, pod) {
            return Some(why);
        }
    }
    None
}

/// Builds the candidate for an eligible node (no checks).
pub fn build(snapshot: &Snapshot, index: usize, now: DateTime<Utc>) -> Option<Candidate> {
    let node = snapshot.nodes.get(index)?;
    let reschedulable: Vec<usize> = node
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| pods::is_reschedulable(p) && !pdb::fully_blocked(&snapshot.pdbs, p))
        .map(|(i, _)| i)
        .collect();
    let all: Vec<PodCostInput> = node.pods.iter().map(pods::cost_input).collect();
    let moving: Vec<PodCostInput> = reschedulable
        .iter()
        .filter_map(|&i| node.pods.get(i))
        .map(pods::cost_input)
        .collect();
    let age = (now - node.created).to_std().unwrap_or_default();
    let lifetime = cost::lifetime_remaining(node.expire_after, age);
    Some(Candidate {
        index,
        name: node.name.clone(),
        node_claim: node.node_claim.clone().unwrap_or_default(),
        node_pool: node.node_pool().unwrap_or_default().to_owned(),
        instance_type: node.instance_type().unwrap_or_default().to_owned(),
        capacity_type: node.capacity_type().unwrap_or_default().to_owned(),
        zone: node.zone().unwrap_or_default().to_owned(),
        price: snapshot.node_price(node),
        reschedulable,
        disruption_cost: cost::disruption_cost(&all, lifetime),
        reschedule_disruption_cost: cost::reschedule_disruption_cost(&moving),
    })
}

/// All candidates for `class`, and every other node with the reason it was left out.
pub fn candidates(
    snapshot: &Snapshot,
    class: Class,
    now: DateTime<Utc>,
) -> (Vec<Candidate>, Vec<Excluded>) {
    let mut out = Vec::new();
    let mut excluded = Vec::new();
    for (index, node) in snapshot.nodes.iter().enumerate() {
        let block = node_block(snapshot, node, now).or_else(|| {
            let ignore_pods = class == Class::Eventual && node.termination_grace_period.is_some();
            if ignore_pods {
                None
            } else {
                pod_block(snapshot, node, now)
            }
        });
        match block {
            Some(reason) => excluded.push(Excluded { index, reason }),
            None => out.extend(build(snapshot, index, now)),
        }
    }
    (out, excluded)
}
