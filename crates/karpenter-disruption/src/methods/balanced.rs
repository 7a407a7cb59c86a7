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
pub use crate::scores::{BalancedScore, ConsolidationMove, K};

/// The score of a move for one pool with what it is made of.
fn scored(
    pass: &Pass<'_>,
    pool_name: &str,
    candidates: &[&Candidate],
    replacement_cost: f64,
) -> BalancedScore {
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
    let disruption: f64 = in_pool.iter().map(|c| c.reschedule_disruption_cost).sum();
    let disruption_fraction = if pool_disruption > 0.0 {
        disruption / pool_disruption
    } else {
        0.0
    };
    let mut out = BalancedScore {
        node_pool: pool_name.to_owned(),
        score: 0.0,
        savings_fraction: 0.0,
        disruption_fraction,
    };
    if savings <= 0.0 || pool_cost <= 0.0 {
        return out;
    }
    out.savings_fraction = savings / pool_cost;
    out.score = if pool_disruption <= 0.0 || disruption <= 0.0 {
        f64::INFINITY
    } else {
        out.savings_fraction / disruption_fraction
    };
    out
}

/// Every Balanced pool's score of a move (none when no pool of the move is Balanced), in pool
/// name order.
pub fn evaluate(
    pass: &Pass<'_>,
    candidates: &[&Candidate],
    replacement_cost: f64,
) -> Vec<BalancedScore> {
    let pools: BTreeSet<&str> = candidates.iter().map(|c| c.node_pool.as_str()).collect();
    pools
        .into_iter()
        .filter(|name| {
            pass.snapshot
                .node_pool(name)
                .is_some_and(|p| pool::policy(p) == ConsolidationPolicy::Balanced)
        })
        .map(|name| scored(pass, name, candidates, replacement_cost))
        .collect()
}

/// The scores when every Balanced pool approves the move; else why the first that does not
/// rejects it.
pub fn verdict(scores: Vec<BalancedScore>) -> Result<Vec<BalancedScore>, Reason> {
    match scores.iter().find(|s| !s.approved()) {
        Some(rejected) => Err(Reason::new(
            Code::BalancedThreshold,
            format!(
                "Balanced: nodepool {} scores {:.2} < {:.2} (savings do not justify the disruption)",
                rejected.node_pool,
                rejected.score,
                1.0 / K
            ),
        )),
        None => Ok(scores),
    }
}

/// The Balanced pools' scores when every Balanced pool in the move approves it (none when no
/// pool of the move is Balanced).
pub fn approve(
    pass: &Pass<'_>,
    candidates: &[&Candidate],
    replacement_cost: f64,
) -> Result<Vec<BalancedScore>, Reason> {
    verdict(evaluate(pass, candidates, replacement_cost))
}

/// The moves of one decided (or, with `approved` false, Balanced-rejected) consolidation over
/// `candidates`: one per pool, with its Balanced score if any.
pub fn moves(
    pass: &Pass<'_>,
    candidates: &[&Candidate],
    scores: &[BalancedScore],
    approved: bool,
) -> Vec<ConsolidationMove> {
    let pools: BTreeSet<&str> = candidates.iter().map(|c| c.node_pool.as_str()).collect();
    pools
        .into_iter()
        .map(|name| ConsolidationMove {
            node_pool: name.to_owned(),
            policy: pass
                .snapshot
                .node_pool(name)
                .map(pool::policy)
                .unwrap_or_default(),
            approved,
            score: scores.iter().find(|s| s.node_pool == name).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod message_tests {
    use super::*;

    #[test]
    fn an_approval_is_told_with_upstreams_message() {
        let verdict = BalancedScore {
            node_pool: "default".into(),
            score: 1.2,
            savings_fraction: 0.12,
            disruption_fraction: 0.1,
        };
        assert_eq!(
            verdict.message(),
            "score 1.20 >= threshold 0.50 (k: 2, savings 12.0%, disruption 10.0%)"
        );
    }
}
