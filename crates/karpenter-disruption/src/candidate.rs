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
use crate::reason::{Code, Reason};
use crate::snapshot::{NodeState, Snapshot};
use crate::time_fmt::hms;

/// How a method disrupts: graceful methods respect pod-level blocks; eventual ones (drift)
/// ignore them when a termination grace period bounds the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Graceful,
    Eventual,
    /// Node repair: not discretionary, so an uninitialized node and the node-level
    /// `do-not-disrupt` do not stop it (its own veto is `karpenter.sh/do-not-repair`).
    Repair,
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
    pub reason: Reason,
}

/// Why the node itself (not its pods) cannot be disrupted at `now`.
pub fn node_block(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Option<Reason> {
    node_block_for(snapshot, node, now, Class::Graceful)
}

/// [`node_block`] for a class of disruption.
pub fn node_block_for(
    snapshot: &Snapshot,
    node: &NodeState,
    now: DateTime<Utc>,
    class: Class,
) -> Option<Reason> {
    let repair = class == Class::Repair;
    if node.node_claim.is_none() {
        return Some(Reason::new(
            Code::Unmanaged,
            "not managed by Karpenter (no NodeClaim)",
        ));
    }
    let Some(pool) = node.node_pool() else {
        return Some(Reason::new(
            Code::NoNodePoolLabel,
            "node has no karpenter.sh/nodepool label",
        ));
    };
    if node.queued {
        return Some(Reason::new(
            Code::Queued,
            "already being disrupted (in the orchestration queue)",
        ));
    }
    if !node.initialized && !repair {
        return Some(Reason::new(Code::NotInitialized, "node is not initialized"));
    }
    if node.deleting {
        return Some(Reason::new(Code::Deleting, "node is being deleted"));
    }
    if node.marked_for_deletion {
        return Some(Reason::new(
            Code::MarkedForDeletion,
            "node is already marked for deletion",
        ));
    }
    if node.rebooting {
        return Some(Reason::new(Code::Rebooting, "node is rebooting in place"));
    }
    if let Some(until) = node.nominated_until.filter(|u| *u > now) {
        return Some(Reason::new(
            Code::Nominated,
            format!("nominated for pending pods until {}", hms(until)),
        ));
    }
    if !repair
        && do_not_disrupt::node_protected(
            node.annotations
                .get(karpenter_api::labels::DO_NOT_DISRUPT)
                .map(String::as_str),
        )
    {
        return Some(Reason::new(
            Code::NodeDoNotDisrupt,
            "node has karpenter.sh/do-not-disrupt=true",
        ));
    }
    if snapshot.node_pool(pool).is_none() {
        return Some(Reason::new(
            Code::NodePoolNotFound,
            format!("nodepool {pool} does not exist"),
        ));
    }
    None
}

/// Why one of the node's pods blocks graceful disruption at `now`.
pub fn pod_block(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Option<Reason> {
    for pod in &node.pods {
        if !pod.is_active() || pod.is_mirror() {
            continue;
        }
        let value = pod.annotation(karpenter_api::labels::DO_NOT_DISRUPT);
        if let PodProtection::Protected(why) =
            do_not_disrupt::pod_protection(value, pods::started(pod), now)
        {
            return Some(Reason::new(
                Code::PodDoNotDisrupt,
                format!("pod {} {}", pod.key(), why.trim_start_matches("pod ")),
            ));
        }
        if let Some(why) = pdb::eviction_block(&snapshot.pdbs, pod) {
            return Some(Reason::new(Code::PodDisruptionBudget, why));
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
        .filter(|(_, p)| p.is_reschedulable() && !pdb::fully_blocked(&snapshot.pdbs, p))
        .map(|(i, _)| i)
        .collect();
    let all: Vec<PodCostInput> = node
        .pods
        .iter()
        .map(|p| pods::cost_input(p, snapshot.features))
        .collect();
    let moving: Vec<PodCostInput> = reschedulable
        .iter()
        .filter_map(|&i| node.pods.get(i))
        .map(|p| pods::cost_input(p, snapshot.features))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use karpenter_api::labels as l;
    use karpenter_scheduling::builders::{PodBuilder, match_labels};

    use super::*;
    use crate::pdb::Pdb;
    use crate::testing::{managed, now, pool};

    fn snapshot(nodes: Vec<NodeState>) -> Snapshot {
        Snapshot {
            node_pools: vec![pool("general")],
            nodes,
            ..Default::default()
        }
    }

    /// The code each excluded node carries, by node name.
    fn excluded_codes(snapshot: &Snapshot, class: Class) -> BTreeMap<String, Code> {
        let (_, excluded) = candidates(snapshot, class, now());
        excluded
            .into_iter()
            .map(|e| (snapshot.nodes[e.index].name.clone(), e.reason.code))
            .collect()
    }

    #[test]
    fn nodes_left_out_for_node_level_causes_carry_the_matching_code() {
        let mut unmanaged = NodeState::new("unmanaged", now());
        unmanaged
            .labels
            .insert(l::NODEPOOL.into(), "general".into());
        let mut unlabelled = managed("unlabelled", "general");
        unlabelled.labels.remove(l::NODEPOOL);
        let mut queued = managed("queued", "general");
        queued.queued = true;
        let mut uninitialized = managed("uninitialized", "general");
        uninitialized.initialized = false;
        let mut deleting = managed("deleting", "general");
        deleting.deleting = true;
        let mut marked = managed("marked", "general");
        marked.marked_for_deletion = true;
        let mut nominated = managed("nominated", "general");
        nominated.nominated_until = Some(now() + chrono::Duration::minutes(1));
        let mut protected = managed("protected", "general");
        protected
            .annotations
            .insert(l::DO_NOT_DISRUPT.into(), "true".into());
        let orphan = managed("orphan", "missing");
        let eligible = managed("eligible", "general");
        let snap = snapshot(vec![
            unmanaged,
            unlabelled,
            queued,
            uninitialized,
            deleting,
            marked,
            nominated,
            protected,
            orphan,
            eligible,
        ]);
        let want = BTreeMap::from([
            ("unmanaged".to_owned(), Code::Unmanaged),
            ("unlabelled".to_owned(), Code::NoNodePoolLabel),
            ("queued".to_owned(), Code::Queued),
            ("uninitialized".to_owned(), Code::NotInitialized),
            ("deleting".to_owned(), Code::Deleting),
            ("marked".to_owned(), Code::MarkedForDeletion),
            ("nominated".to_owned(), Code::Nominated),
            ("protected".to_owned(), Code::NodeDoNotDisrupt),
            ("orphan".to_owned(), Code::NodePoolNotFound),
        ]);
        assert_eq!(excluded_codes(&snap, Class::Graceful), want);
        assert_eq!(excluded_codes(&snap, Class::Eventual), want);
    }

    #[test]
    fn pods_that_block_graceful_disruption_give_their_node_the_pod_codes() {
        let mut annotated = PodBuilder::new("annotated").build();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            l::DO_NOT_DISRUPT.to_owned(),
            "true".to_owned(),
        )]));
        let guarded = PodBuilder::new("guarded").label("app", "web").build();
        let mut with_annotated = managed("with-annotated", "general");
        with_annotated
            .pods
            .push(std::sync::Arc::new(annotated.into()));
        let mut with_guarded = managed("with-guarded", "general");
        with_guarded.pods.push(std::sync::Arc::new(guarded.into()));
        let mut snap = snapshot(vec![with_annotated, with_guarded]);
        snap.pdbs.push(Pdb {
            namespace: "default".into(),
            name: "web".into(),
            selector: match_labels(&[("app", "web")]),
            disruptions_allowed: 0,
            ..Default::default()
        });
        let (_, excluded) = candidates(&snap, Class::Graceful, now());
        let reasons: Vec<(Code, &str)> = excluded
            .iter()
            .map(|e| (e.reason.code, e.reason.text.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    Code::PodDoNotDisrupt,
                    "pod default/annotated has karpenter.sh/do-not-disrupt=true"
                ),
                (
                    Code::PodDisruptionBudget,
                    "blocked: PDB default/web allows 0 disruptions (pod default/guarded)"
                ),
            ]
        );
    }

    #[test]
    fn pod_blocks_do_not_exclude_a_node_from_eventual_methods_when_its_drain_is_bounded() {
        let mut annotated = PodBuilder::new("annotated").build();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            l::DO_NOT_DISRUPT.to_owned(),
            "true".to_owned(),
        )]));
        let mut node = managed("bounded", "general");
        node.termination_grace_period = Some(std::time::Duration::from_secs(60));
        node.pods.push(std::sync::Arc::new(annotated.into()));
        let snap = snapshot(vec![node]);
        assert_eq!(
            excluded_codes(&snap, Class::Graceful).get("bounded"),
            Some(&Code::PodDoNotDisrupt)
        );
        assert!(excluded_codes(&snap, Class::Eventual).is_empty());
    }
}
