//! The Balanced consolidation policy (upstream `balanced.go`, `BalancedK = 2`): a move is
//! approved only if, for every Balanced pool it touches, the share of the pool's cost it saves
//! is at least half the share of the pool's disruption cost it spends.
//!
//! `savings = pool's candidate prices − its share of the replacement cost` (split by the
//! candidates' cost share), `savingsFraction = savings / pool cost` (pool cost = Σ prices of
//! its nodes, else Σ candidate prices), `disruptionFraction = Σ RescheduleDisruptionCost(pool
//! candidates) / Σ DisruptionCost(pool nodes)`; `score = savingsFraction / disruptionFraction`
//! (∞ when the pool has no disruption cost, 0 when nothing is saved); approve iff ≥ 1/k.

use std::collections::BTreeSet;

use karpenter_api::v1::ConsolidationPolicy;

use crate::candidate::{self, Candidate};
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};

/// `BalancedK`.
pub const K: f64 = 2.0;

/// The score of a move for one pool.
pub fn score(
    pass: &Pass<'_>,
    pool_name: &str,
    candidates: &[&Candidate],
    replacement_cost: f64,
) -> f64 {
    let snapshot = pass.snapshot;
    let total_candidate_cost: f64 = candidates.iter().map(|c| c.price).sum();
    let in_pool: Vec<&&Candidate> = candidates
        .iter()
        .filter(|c| c.node_pool == pool_name)
        .collect();
    let pool_candidate_cost: f64 = in_pool.iter().map(|c| c.price).sum();
    let mut pool_cost = 0.0;
    let mut pool_disruption = 0.0;
    for (i, node) in snapshot.nodes.iter().enumerate() {
        if node.node_pool() != Some(pool_name) || !node.managed() || node.deleting {
            continue;
        }
        pool_cost += snapshot.node_price(node);
        if let Some(c) = candidate::build(snapshot, i, pass.now) {
            pool_disruption += c.disruption_cost;
        }
    }
    if pool_cost <= 0.0 {
        pool_cost = pool_candidate_cost;
    }
    let share = if total_candidate_cost > 0.0 {
        pool_candidate_cost / total_candidate_cost
    } else {
        0.0
    };
    let savings = pool_candidate_cost - replacement_cost * share;
    if savings <= 0.0 || pool_cost <= 0.0 {
        return 0.0;
    }
    let savings_fraction = savings / pool_cost;
    let disruption: f64 = in_pool.iter().map(|c| c.reschedule_disruption_cost).sum();
    if pool_disruption <= 0.0 || disruption <= 0.0 {
        return f64::INFINITY;
    }
    savings_fraction / (disruption / pool_disruption)
}

/// `Ok` when every Balanced pool in the move approves it.
pub fn approve(
    pass: &Pass<'_>,
    candidates: &[&Candidate],
    replacement_cost: f64,
) -> Result<(), Reason> {
    let pools: BTreeSet<&str> = candidates.iter().map(|c| c.node_pool.as_str()).collect();
    for name in pools {
        let Some(p) = pass.snapshot.node_pool(name) else {
            continue;
        };
        if pool::policy(p) != ConsolidationPolicy::Balanced {
            continue;
        }
        let s = score(pass, name, candidates, replacement_cost);
        if s < 1.0 / K {
            return Err(Reason::new(
                Code::BalancedThreshold,
                format!(
                    "Balanced: nodepool {name} scores {s:.2} < {:.2} (savings do not justify the disruption)",
                    1.0 / K
                ),
            ));
        }
    }
    Ok(())
}
