//! Pod deletion cost (upstream `pod.deletioncost`, feature gate `PodDeletionCostManagement`):
//! which `controller.kubernetes.io/pod-deletion-cost` each ReplicaSet pod should carry so that a
//! ReplicaSet scale-down deletes first the pods of the nodes consolidation would remove first,
//! emptying them instead of leaving consolidation pods to evict.
//!
//! [`plan`] ranks the managed nodes of a [`Snapshot`] as upstream v1.15 does:
//!
//! 1. every managed node is ordered by savings ratio (price / rescheduling disruption cost,
//!    the consolidation order), highest first, ties by name;
//! 2. it falls into one group: **disrupting** (marked for deletion, being deleted, or tainted
//!    `karpenter.sh/disrupted:NoSchedule`) gets [`DISRUPTING`] (`i32::MIN`); **drifted** and
//!    **consolidatable** nodes are ranked; every other node is **unranked** and its pods'
//!    annotation is removed: a node-level block (not initialized, nominated, `do-not-disrupt`,
//!    ...), a pod-level block (`do-not-disrupt` pod, PDB allowing no eviction), a pod nothing
//!    would recreate elsewhere (outside `kube-system`, not controlled by a ReplicaSet, Job or
//!    DaemonSet), an instance type its NodePool no longer offers (no price to rank it by), or
//!    `consolidateAfter: Never` (drift is checked first: a drifted node there is still ranked;
//!    static NodePools never count as drifted here);
//! 3. each NodePool's drift and underutilized budgets bound how many of its drifted and
//!    consolidatable nodes are ranked (in ratio order); the rest are unranked;
//! 4. ranked nodes are drifted ones then consolidatable ones, and the `i`-th of `n` gets
//!    `-n + i` (the lowest goes first, and a pod with no annotation, 0, goes after all of them).
//!
//! Only pods controlled by a ReplicaSet are written (the one in-tree reader of the annotation),
//! and only nodes where some such pod differs from its planned value count; disrupting nodes are
//! all written, then at most [`MAX_NODES_PER_CYCLE`] ranked and unranked nodes together, ranked
//! first. A value a user set is overwritten, as upstream does: turning the gate on hands the
//! annotation to Karpenter, and `karpenter.sh/disruption-cost` is the user's way to steer
//! consolidation (with the gate on, [`crate::pods::cost_input`] stops reading
//! `pod-deletion-cost`).

use std::cmp::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::DisruptionReason;
use karpenter_scheduling::PodRecord;

use crate::budgets::BudgetMap;
use crate::candidate::{node_block, pod_block};
use crate::cost::{self, PodCostInput};
use crate::drift_detect;
use crate::pods::{self, POD_DELETION_COST};
use crate::pool;
use crate::snapshot::{NodeState, Snapshot};

/// Ranked and unranked nodes written in one cycle, at most (upstream's alpha cap: at ~30 pods
/// a node, about 1,500 pod writes).
pub const MAX_NODES_PER_CYCLE: usize = 50;

/// The cost of the pods of nodes already going away: below every rank.
pub const DISRUPTING: i32 = i32::MIN;

/// The namespace whose pods never pin their node.
const KUBE_SYSTEM: &str = "kube-system";

/// Controllers that recreate a deleted pod elsewhere (a pod under any other, or under none,
/// pins its node).
const RECREATING: [(&str, &str); 3] = [
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("apps/v1", "DaemonSet"),
];

/// Which group a node falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// Already going away: its pods get [`DISRUPTING`].
    Disrupting,
    /// Drifted, within its pool's drift budget: ranked first.
    Drifted,
    /// Consolidatable, within its pool's underutilized budget: ranked after the drifted ones.
    Consolidatable,
    /// Nothing to gain from emptying it: its pods' annotation is removed.
    Unranked,
}

/// What a node's ReplicaSet pods should carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desired {
    /// `controller.kubernetes.io/pod-deletion-cost` set to this.
    Cost(i32),
    /// No `controller.kubernetes.io/pod-deletion-cost`.
    Cleared,
}

impl Desired {
    /// The annotation's value (`None`: removed).
    pub fn value(self) -> Option<String> {
        match self {
            Desired::Cost(cost) => Some(cost.to_string()),
            Desired::Cleared => None,
        }
    }

    /// `pod` already carries it (the value compared as written, as upstream does).
    pub fn holds_for(self, pod: &PodRecord) -> bool {
        pod.annotation(POD_DELETION_COST) == self.value().as_deref()
    }
}

/// One managed node as ranked.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode {
    /// Index into `Snapshot::nodes`.
    pub index: usize,
    pub name: String,
    pub node_pool: String,
    pub group: Group,
    pub desired: Desired,
    /// Price / rescheduling disruption cost: the order within a group.
    pub savings_ratio: f64,
}

/// The writes for one node: its ReplicaSet pods and what they should carry.
#[derive(Debug, Clone)]
pub struct NodeWrites {
    pub node: String,
    pub node_pool: String,
    pub group: Group,
    pub desired: Desired,
    /// Every pod of the node controlled by a ReplicaSet (at least one differs from `desired`).
    pub pods: Vec<Arc<PodRecord>>,
}

/// One cycle's decision.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Every managed node: disrupting, then ranked (lowest rank first), then unranked.
    pub ranking: Vec<RankedNode>,
    /// The nodes to write this cycle, in that order, within [`MAX_NODES_PER_CYCLE`].
    pub writes: Vec<NodeWrites>,
}

/// Ranks the managed nodes of `snapshot` at `now` and says which pods to annotate.
pub fn plan(snapshot: &Snapshot, now: DateTime<Utc>) -> Plan {
    let mut order: Vec<(usize, f64)> = snapshot
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.managed())
        .map(|(index, node)| (index, savings_ratio(snapshot, node)))
        .collect();
    order.sort_by(|(a, ra), (b, rb)| {
        rb.partial_cmp(ra)
            .unwrap_or(Ordering::Equal)
            .then_with(|| snapshot.nodes[*a].name.cmp(&snapshot.nodes[*b].name))
    });
    let mut drift_budget = BudgetMap::build(snapshot, DisruptionReason::Drifted, now);
    let mut consolidation_budget = BudgetMap::build(snapshot, DisruptionReason::Underutilized, now);
    let (mut disrupting, mut drifted, mut consolidatable, mut unranked) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (index, ratio) in order {
        let node = &snapshot.nodes[index];
        let pool = node.node_pool().unwrap_or_default();
        let entry = (index, ratio);
        match classify(snapshot, node, now) {
            Group::Disrupting => disrupting.push(entry),
            Group::Drifted if drift_budget.take(pool) => drifted.push(entry),
            Group::Consolidatable if consolidation_budget.take(pool) => consolidatable.push(entry),
            _ => unranked.push(entry),
        }
    }
    let n = drifted.len() + consolidatable.len();
    let mut ranking = Vec::with_capacity(snapshot.nodes.len());
    let mut push = |(index, ratio): (usize, f64), group: Group, desired: Desired| {
        let node: &NodeState = &snapshot.nodes[index];
        ranking.push(RankedNode {
            index,
            name: node.name.clone(),
            node_pool: node.node_pool().unwrap_or_default().to_owned(),
            group,
            desired,
            savings_ratio: ratio,
        });
    };
    for entry in disrupting {
        push(entry, Group::Disrupting, Desired::Cost(DISRUPTING));
    }
    let ranked = drifted.into_iter().map(|e| (e, Group::Drifted)).chain(
        consolidatable
            .into_iter()
            .map(|e| (e, Group::Consolidatable)),
    );
    for (i, (entry, group)) in ranked.enumerate() {
        push(entry, group, Desired::Cost(rank(i, n)));
    }
    for entry in unranked {
        push(entry, Group::Unranked, Desired::Cleared);
    }
    let writes = writes(snapshot, &ranking);
    Plan { ranking, writes }
}

/// The rank of the `i`-th of `n` ranked nodes: `-n` for the first, `-1` for the last.
pub fn rank(i: usize, n: usize) -> i32 {
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    let i = i32::try_from(i).unwrap_or(i32::MAX);
    i.saturating_sub(n)
}

/// The nodes whose ReplicaSet pods need a write, within the cap.
fn writes(snapshot: &Snapshot, ranking: &[RankedNode]) -> Vec<NodeWrites> {
    let mut out = Vec::new();
    let mut capped = 0;
    for ranked in ranking {
        let uncapped = ranked.group == Group::Disrupting;
        if !uncapped && capped >= MAX_NODES_PER_CYCLE {
            break;
        }
        let pods: Vec<Arc<PodRecord>> = snapshot.nodes[ranked.index]
            .pods
            .iter()
            .filter(|p| p.controlled_by("apps/v1", "ReplicaSet"))
            .cloned()
            .collect();
        if pods.iter().all(|p| ranked.desired.holds_for(p)) {
            continue;
        }
        if !uncapped {
            capped += 1;
        }
        out.push(NodeWrites {
            node: ranked.name.clone(),
            node_pool: ranked.node_pool.clone(),
            group: ranked.group,
            desired: ranked.desired,
            pods,
        });
    }
    out
}

/// The group of a managed node, before budgets.
fn classify(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Group {
    if going_away(node) {
        return Group::Disrupting;
    }
    if node_block(snapshot, node, now).is_some()
        || pod_block(snapshot, node, now).is_some()
        || pinned(node)
        || unpriceable(snapshot, node)
    {
        return Group::Unranked;
    }
    let pool = node.node_pool().and_then(|p| snapshot.node_pool(p));
    let static_pool = pool.is_some_and(pool::is_static);
    if !static_pool && drift_detect::drift(snapshot, node, now).is_some() {
        return Group::Drifted;
    }
    if pool.is_some_and(|p| pool::consolidate_after(p).is_none()) {
        return Group::Unranked;
    }
    Group::Consolidatable
}

/// Marked for deletion, being deleted, or tainted `karpenter.sh/disrupted:NoSchedule`.
fn going_away(node: &NodeState) -> bool {
    node.marked_for_deletion
        || node.deleting
        || node
            .taints
            .iter()
            .any(|t| t.key == labels::DISRUPTED_TAINT_KEY && t.effect == "NoSchedule")
}

/// A pod nothing would recreate elsewhere holds the node: emptying the rest gains nothing.
fn pinned(node: &NodeState) -> bool {
    node.pods.iter().any(|pod| {
        pod.metadata.namespace.as_deref() != Some(KUBE_SYSTEM)
            && !RECREATING
                .iter()
                .any(|(api_version, kind)| pod.controlled_by(api_version, kind))
    })
}

/// The node's NodePool does not offer its instance type: it has no price to be ranked by. When
/// nothing was priced at all (no catalog, no labels to look it up by) no node is.
fn unpriceable(snapshot: &Snapshot, node: &NodeState) -> bool {
    if node.price.is_some() || snapshot.instance_types.is_empty() {
        return false;
    }
    match (node.node_pool(), node.instance_type()) {
        (Some(pool), Some(it)) => snapshot.instance_type(pool, it).is_none(),
        _ => false,
    }
}

/// Price over the cost of rescheduling the node's pods (consolidation's order).
fn savings_ratio(snapshot: &Snapshot, node: &NodeState) -> f64 {
    let moving: Vec<PodCostInput> = node
        .pods
        .iter()
        .filter(|p| p.is_reschedulable())
        .map(|p| pods::cost_input(p, snapshot.features))
        .collect();
    cost::savings_ratio(
        snapshot.node_price(node),
        cost::reschedule_disruption_cost(&moving),
    )
}

#[cfg(test)]
#[path = "deletion_cost_tests.rs"]
mod tests;
