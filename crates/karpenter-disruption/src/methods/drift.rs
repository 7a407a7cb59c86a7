//! Drift (reason `Drifted`, eventual): replace the node that drifted first (empty ones before
//! the rest) whose pods all fit elsewhere or on replacements; one node per pass, any number of
//! replacements, no price rule. Static pools are left to [`crate::methods::static_drift`].
//!
//! With `TerminateFirstDrift`, a reserved node whose pods fit nowhere while it stays, but fit
//! once its reservation slot is free, is deleted first ([`crate::terminate_first`]).

use karpenter_api::v1::DisruptionReason;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, CommandCandidate, Method};
use crate::drift_detect;
use crate::pass::Pass;
use crate::pool;
use crate::simulate::Outcome;
use crate::snapshot::DriftMark;
use crate::terminate_first::{self, TerminateFirst};

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let snapshot = pass.snapshot;
    let mut drifted: Vec<(Candidate, DriftMark)> = Vec::new();
    for c in &pass.eventual {
        let Some(node) = snapshot.nodes.get(c.index) else {
            continue;
        };
        if snapshot
            .node_pool(&c.node_pool)
            .is_some_and(pool::is_static)
        {
            continue;
        }
        if let Some(mark) = drift_detect::drift(snapshot, node, pass.now) {
            drifted.push((c.clone(), mark));
        }
    }
    pass.eligible
        .push((DisruptionReason::Drifted, drifted.len()));
    drifted.sort_by_key(|(_, m)| m.since);
    let (mut order, rest): (Vec<_>, Vec<_>) = drifted.into_iter().partition(|(c, _)| c.is_empty());
    order.extend(rest);
    let budgets = BudgetMap::build(snapshot, DisruptionReason::Drifted, pass.now);
    for (c, mark) in order {
        let prefix = format!("drifted ({})", mark.reason);
        if budgets.allowed(&c.node_pool) == 0 {
            pass.note(
                c.index,
                budgets
                    .why_not(&c.node_pool)
                    .prefixed(&format!("{prefix} but ")),
            );
            continue;
        }
        let (outcome, _) = pass.sim.simulate(snapshot, &[&c], false);
        let replacements = match outcome {
            Outcome::Unschedulable(_)
                if snapshot.features.terminate_first_drift
                    && terminate_first::fits_once_gone(pass, &c) =>
            {
                return vec![terminate_first_command(&c, &prefix, &mark)];
            }
            Outcome::Unschedulable(why) => {
                pass.note(c.index, why.prefixed(&format!("{prefix} but ")));
                continue;
            }
            Outcome::Fits => Vec::new(),
            Outcome::NeedsNew(claims) => claims,
        };
        let cost: f64 = replacements.iter().map(|r| r.cheapest_price()).sum();
        return vec![Command {
            method: Method::Drift,
            reason: DisruptionReason::Drifted,
            explanation: format!(
                "node {} {prefix} since {}; {}",
                c.name,
                mark.since.format("%Y-%m-%dT%H:%M:%SZ"),
                if replacements.is_empty() {
                    "its pods fit on other nodes".to_owned()
                } else {
                    format!("{} replacement(s) launched first", replacements.len())
                }
            ),
            savings_per_hour: c.price - cost,
            candidates: vec![CommandCandidate::from(&c)],
            replacements,
            balanced: Vec::new(),
            repair: None,
            terminate_first: None,
        }];
    }
    Vec::new()
}

/// The delete-only command for a reserved node whose replacement can only launch into the
/// slot it holds (gate `TerminateFirstDrift`).
fn terminate_first_command(c: &Candidate, prefix: &str, mark: &DriftMark) -> Command {
    Command::terminate_first(
        Method::Drift,
        c,
        format!(
            "node {} {prefix} since {}",
            c.name,
            mark.since.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        TerminateFirst::NoReservedCapacity,
    )
}
