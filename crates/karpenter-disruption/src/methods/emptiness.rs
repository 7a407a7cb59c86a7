//! Emptiness (reason `Empty`): delete every empty, consolidatable node within budget, in one
//! command, highest savings ratio first. Applies to every consolidation policy; skipped for
//! static pools, `consolidateAfter: Never` and nodes holding CapacityBuffer headroom.

use karpenter_api::v1::DisruptionReason;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, CommandCandidate, Method};
use crate::consolidatable::consolidatable;
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let snapshot = pass.snapshot;
    let mut empties: Vec<Candidate> = Vec::new();
    let mut notes = Vec::new();
    for c in &pass.graceful {
        let Some(p) = snapshot.node_pool(&c.node_pool) else {
            continue;
        };
        if !c.is_empty() {
            notes.push((
                c.index,
                Reason::new(
                    Code::NotEmpty,
                    format!("not empty ({} pods to reschedule)", c.reschedulable.len()),
                ),
            ));
            continue;
        }
        // Upstream: a node hosting virtual buffer pods is not empty; the provisioner placed
        // buffer capacity there on purpose, and removing it would launch it again.
        if snapshot.buffer_nodes.contains(&c.name) || snapshot.buffer_nodes.contains(&c.node_claim)
        {
            notes.push((
                c.index,
                Reason::new(Code::NotEmpty, format!("node {:?} has buffer pods", c.name)),
            ));
            continue;
        }
        if pool::is_static(p) {
            notes.push((
                c.index,
                Reason::new(
                    Code::StaticNodePool,
                    "static nodepools are not consolidated",
                ),
            ));
            continue;
        }
        let Some(node) = snapshot.nodes.get(c.index) else {
            continue;
        };
        if let Err(why) = consolidatable(node, p, pass.now) {
            notes.push((c.index, why.prefixed("empty but ")));
            continue;
        }
        empties.push(c.clone());
    }
    pass.eligible.push((DisruptionReason::Empty, empties.len()));
    empties.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()));
    let mut budgets = BudgetMap::build(snapshot, DisruptionReason::Empty, pass.now);
    let mut chosen = Vec::new();
    for c in empties {
        if budgets.take(&c.node_pool) {
            chosen.push(c);
        } else {
            notes.push((
                c.index,
                budgets.why_not(&c.node_pool).prefixed("empty but "),
            ));
        }
    }
    for (i, n) in notes {
        pass.note(i, n);
    }
    if chosen.is_empty() {
        return Vec::new();
    }
    let savings: f64 = chosen.iter().map(|c| c.price).sum();
    let names: Vec<&str> = chosen.iter().map(|c| c.name.as_str()).collect();
    vec![Command {
        method: Method::Emptiness,
        reason: DisruptionReason::Empty,
        explanation: format!(
            "{} empty node(s) deleted ({}), saving {savings:.4}/h",
            chosen.len(),
            names.join(", ")
        ),
        candidates: chosen.iter().map(CommandCandidate::from).collect(),
        replacements: Vec::new(),
        savings_per_hour: savings,
        balanced: Vec::new(),
        repair: None,
        terminate_first: None,
    }]
}
