//! One node's removal simulation (`karpenter explain consolidation --node NAME`): what single-node
//! consolidation would find for this node alone, whatever the pass would pick first. Can its
//! pods go elsewhere, where would each go, is a replacement needed and would it be cheaper (by
//! how much); or the precise reason it cannot be removed. And what would stop a pass from taking
//! it now even if the simulation succeeds (its pool's `Underutilized` budget).
//!
//! It runs the pass's own pieces on the snapshot: candidate eligibility, the consolidation rules
//! (`methods::consolidation`), the rescheduling simulation and the replacement price rules.

use chrono::{DateTime, Utc};
use karpenter_api::v1::DisruptionReason;
use karpenter_scheduling::SolveResult;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, Method};
use crate::methods::consolidation;
use crate::pass::Pass;
use crate::reason::{Code, Reason};
use crate::snapshot::Snapshot;

/// What removing one node would do.
#[derive(Debug, Clone, PartialEq)]
pub struct Removal {
    pub node: String,
    /// Its NodePool (empty when it has none).
    pub node_pool: String,
    /// Its price per hour (0 when it is not a candidate).
    pub price: f64,
    /// Where each of its pods that needs a new home would go (empty when the node is not a
    /// candidate, or has none).
    pub moves: Vec<PodMove>,
    pub verdict: RemovalVerdict,
    /// What stops a pass from taking it now besides the verdict (its pool's budget for the
    /// reason: `Empty` for an empty node, else `Underutilized`).
    pub held_by: Vec<Reason>,
}

/// The verdict of the simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum RemovalVerdict {
    /// Consolidation would delete or replace it: the command it would take.
    Removable(Box<Command>),
    /// It cannot be removed, and why (most specific first).
    Kept(Vec<Reason>),
}

/// Where one pod would go.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMove {
    /// `namespace/name`.
    pub pod: String,
    pub to: Destination,
}

/// A pod's destination in the simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum Destination {
    /// A node that exists.
    Node(String),
    /// A new NodeClaim of this NodePool (the replacement).
    NewNodeClaim { node_pool: String },
    /// Nowhere: why.
    Nowhere(String),
}

/// Simulates removing node `name` of `snapshot` at `now`; `None` when the snapshot has no
/// such node.
pub fn simulate_removal(snapshot: &Snapshot, name: &str, now: DateTime<Utc>) -> Option<Removal> {
    let index = snapshot.nodes.iter().position(|n| n.name == name)?;
    let node_pool = snapshot.nodes[index]
        .node_pool()
        .unwrap_or_default()
        .to_owned();
    let mut pass = Pass::new(snapshot, now);
    let Some(candidate) = pass.graceful.iter().find(|c| c.index == index).cloned() else {
        let reasons = pass
            .graceful_excluded
            .iter()
            .filter(|e| e.index == index)
            .map(|e| e.reason.clone())
            .collect::<Vec<_>>();
        let reasons = if reasons.is_empty() {
            vec![Reason::new(
                Code::NothingFound,
                "not a disruption candidate",
            )]
        } else {
            reasons
        };
        return Some(Removal {
            node: name.to_owned(),
            node_pool,
            price: 0.0,
            moves: Vec::new(),
            verdict: RemovalVerdict::Kept(reasons),
            held_by: Vec::new(),
        });
    };
    let mut held_by = Vec::new();
    let (_, result) = pass.sim.simulate(snapshot, &[&candidate], true);
    let moves = moves(snapshot, &candidate, &result);
    let ineligible = consolidation::ineligible(&pass, &candidate);
    let empty = ineligible
        .as_ref()
        .is_some_and(|why| why.code == Code::LeftToEmptiness);
    let verdict = match ineligible.filter(|_| !empty) {
        Some(why) => RemovalVerdict::Kept(vec![why]),
        None => {
            match consolidation::compute(&mut pass, &[&candidate], Method::SingleNodeConsolidation)
            {
                // An empty node is emptiness's to delete, under the Empty budget.
                Ok(command) if empty => RemovalVerdict::Removable(Box::new(Command {
                    method: Method::Emptiness,
                    reason: DisruptionReason::Empty,
                    explanation: format!("delete {name}: it is empty"),
                    ..command
                })),
                Ok(command) => RemovalVerdict::Removable(Box::new(command)),
                Err(why) => RemovalVerdict::Kept(vec![why]),
            }
        }
    };
    let reason = if empty {
        DisruptionReason::Empty
    } else {
        DisruptionReason::Underutilized
    };
    let budgets = BudgetMap::build(snapshot, reason, now);
    if budgets.allowed(&candidate.node_pool) == 0 {
        held_by.push(budgets.why_not(&candidate.node_pool));
    }
    Some(Removal {
        node: name.to_owned(),
        node_pool,
        price: candidate.price,
        moves,
        verdict,
        held_by,
    })
}

/// Where the simulation put each of the candidate's reschedulable pods.
fn moves(snapshot: &Snapshot, candidate: &Candidate, result: &SolveResult) -> Vec<PodMove> {
    let Some(node) = snapshot.nodes.get(candidate.index) else {
        return Vec::new();
    };
    candidate
        .reschedulable
        .iter()
        .filter_map(|&i| node.pods.get(i))
        .map(|pod| {
            let key = pod.key();
            let uid = pod.uid_or_key();
            let placed = |p: &karpenter_scheduling::PodRef| p.uid == uid || p.to_string() == key;
            let to = if let Some(p) = result.existing_placements.iter().find(|p| placed(&p.pod)) {
                Destination::Node(p.node.clone())
            } else if let Some(claim) = result
                .new_node_claims
                .iter()
                .find(|c| c.pods.iter().any(placed))
            {
                Destination::NewNodeClaim {
                    node_pool: claim.node_pool.clone(),
                }
            } else if let Some(u) = result.unschedulable.iter().find(|u| placed(&u.pod)) {
                Destination::Nowhere(u.reason.clone())
            } else {
                Destination::Nowhere("the simulation did not place it".to_owned())
            };
            PodMove { pod: key, to }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{managed, now, pool_with};

    #[test]
    fn a_node_that_is_not_in_the_snapshot_has_no_simulation() {
        let snapshot = Snapshot::default();
        assert_eq!(simulate_removal(&snapshot, "ghost", now()), None);
    }

    #[test]
    fn an_empty_node_is_emptinesss_to_delete_with_nothing_to_move_but_a_zero_budget_holds_it() {
        let snapshot = Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s", "budgets": [{"nodes": "0"}]}),
            )],
            nodes: vec![managed("a", "general")],
            ..Snapshot::default()
        };
        let removal = simulate_removal(&snapshot, "a", now()).expect("node a is in the snapshot");
        assert!(removal.moves.is_empty(), "{removal:?}");
        assert!(
            matches!(&removal.verdict, RemovalVerdict::Removable(c) if c.is_delete() && c.method == Method::Emptiness),
            "{removal:?}"
        );
        assert_eq!(removal.held_by.len(), 1, "{removal:?}");
        assert_eq!(removal.held_by[0].code, Code::BudgetExhausted);
    }
}
