//! Single-node consolidation (upstream `singlenodeconsolidation.go`): candidates by savings
//! ratio, interleaved round-robin across NodePools; pools without Underutilized budget are
//! skipped; a candidate that can be deleted or replaced by one cheaper node (and that a
//! Balanced pool approves) becomes a command.
//!
//! Upstream stops at the first such candidate: one command per pass, each held 15 s for
//! validation, so a cluster with many small moves settles one move per ~25 s. Here the search
//! goes on over the rest of the candidates within the budget, each simulated with the
//! commands already decided taken in ([`Pass::commit`]: their candidates gone, their pods
//! where they move), so every command of the pass holds together with the others; once the
//! pass has a command, only within `pass::FURTHER_WORK`.

use std::collections::BTreeMap;

use karpenter_api::v1::DisruptionReason;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, Method};
use crate::methods::balanced;
use crate::methods::consolidation;
use crate::pass::Pass;

/// Round-robin over pools, keeping each pool's order; pools in order of first appearance.
pub fn interleave(sorted: Vec<Candidate>) -> Vec<Candidate> {
    let mut order: Vec<String> = Vec::new();
    let mut by_pool: BTreeMap<String, std::collections::VecDeque<Candidate>> = BTreeMap::new();
    for c in sorted {
        if !by_pool.contains_key(&c.node_pool) {
            order.push(c.node_pool.clone());
        }
        by_pool.entry(c.node_pool.clone()).or_default().push_back(c);
    }
    let mut out = Vec::new();
    loop {
        let mut any = false;
        for p in &order {
            if let Some(c) = by_pool.get_mut(p).and_then(|q| q.pop_front()) {
                out.push(c);
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let candidates = interleave(consolidation::eligible(pass));
    pass.eligible
        .push((DisruptionReason::Underutilized, candidates.len()));
    let mut budgets = BudgetMap::build(pass.snapshot, DisruptionReason::Underutilized, pass.now);
    // Multi-node consolidation's commands of this pass spend the same budget.
    let committed: Vec<usize> = pass.committed.iter().copied().collect();
    for i in committed {
        if let Some(pool) = pass.snapshot.nodes.get(i).and_then(|n| n.node_pool()) {
            budgets.take(pool);
        }
    }
    let mut commands = Vec::new();
    for c in &candidates {
        if !pass.may_look_further() {
            break;
        }
        if let Some(why) = pass.taken(c.index) {
            pass.note(c.index, why);
            continue;
        }
        if budgets.allowed(&c.node_pool) == 0 {
            pass.note(c.index, budgets.why_not(&c.node_pool));
            continue;
        }
        // CanPassThreshold: even deleting outright would not satisfy a Balanced pool.
        if let Err(why) = balanced::approve(pass, &[c], 0.0) {
            pass.note(c.index, why);
            continue;
        }
        let result =
            consolidation::compute(pass, &[c], Method::SingleNodeConsolidation).and_then(|cmd| {
                let cost: f64 = cmd.replacements.iter().map(|r| r.cheapest_price()).sum();
                let scores = balanced::evaluate(pass, &[c], cost);
                let approved = scores.iter().all(balanced::BalancedScore::approved);
                let moves = balanced::moves(pass, &[c], &scores, approved);
                pass.moves.extend(moves);
                balanced::verdict(scores).map(|balanced| Command { balanced, ..cmd })
            });
        match result {
            Ok(cmd) => {
                budgets.take(&c.node_pool);
                pass.commit(&[c]);
                commands.push(cmd);
            }
            Err(why) => pass.note(c.index, why),
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(name: &str, pool: &str) -> Candidate {
        Candidate {
            index: 0,
            name: name.into(),
            node_claim: String::new(),
            node_pool: pool.into(),
            instance_type: String::new(),
            capacity_type: String::new(),
            zone: String::new(),
            price: 0.0,
            reschedulable: Vec::new(),
            disruption_cost: 0.0,
            reschedule_disruption_cost: 1.0,
        }
    }

    #[test]
    fn candidates_are_interleaved_round_robin_by_pool_keeping_each_pools_order() {
        let sorted = vec![
            cand("a1", "a"),
            cand("a2", "a"),
            cand("a3", "a"),
            cand("b1", "b"),
            cand("c1", "c"),
            cand("b2", "b"),
        ];
        let names: Vec<String> = interleave(sorted).into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["a1", "b1", "c1", "a2", "b2", "a3"]);
    }
}
