//! Re-checking a command after the validation delay (upstream `validation.go`, 15 s).
//!
//! Emptiness keeps its survivors (upstream `EmptinessValidator`): candidates that are no longer
//! candidates or no longer empty, are nominated, or no longer fit the budget are dropped, and
//! the command goes on with the rest; it is rejected only when none is left.
//!
//! Consolidation is all or nothing: every candidate must still be a candidate (not nominated,
//! no new do-not-disrupt or PDB block, not deleted), the budget must still allow all of them,
//! and a re-simulation must reproduce the decision: a delete still needs no new node; a
//! replacement is still exactly one node whose options include all of the command's options.
//! Drift commands are not delayed; they pass when their candidates are still candidates and
//! within budget.
//!
//! Commands decided in one pass are validated together ([`validate_all`]), in order, against
//! one snapshot: they share the budgets, and each consolidation that holds is taken into the
//! re-simulations of the next (as the pass decided them), so a command is rejected when it no
//! longer holds together with those validated before it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use thiserror::Error;

use crate::budgets::map::BudgetMap;
use crate::candidate::{Candidate, Excluded};
use crate::command::{Command, CommandCandidate, Method};
use crate::methods::consolidation;
use crate::pass::Pass;
use crate::reason::{Code, Reason, Reasons};
use crate::snapshot::Snapshot;
use karpenter_api::v1::DisruptionReason;

/// Validation delay before a consolidation command executes.
pub const COMMAND_VALIDATION_DELAY: std::time::Duration = std::time::Duration::from_secs(15);

/// Why a command no longer holds: the kind (variant, [`Rejection::code`]) and the precise
/// cause ([`Rejection::reason`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    /// A candidate changed (pods, protection, nomination, deletion).
    #[error("churn: {0}")]
    Churn(Reason),
    /// The budget no longer allows the command.
    #[error("budget: {0}")]
    Budget(Reason),
    /// Re-simulation gives a different answer.
    #[error("scheduling: {0}")]
    Scheduling(Reason),
}

impl Rejection {
    /// The stable code of the rejection's kind, for events and metric labels.
    pub fn code(&self) -> Code {
        match self {
            Rejection::Churn(_) => Code::CandidateChanged,
            Rejection::Budget(_) => Code::BudgetExhausted,
            Rejection::Scheduling(_) => Code::DecisionChanged,
        }
    }

    /// The precise cause (e.g. `Nominated` within churn, `NotCheaper` within scheduling).
    pub fn reason(&self) -> &Reason {
        match self {
            Rejection::Churn(r) | Rejection::Budget(r) | Rejection::Scheduling(r) => r,
        }
    }
}

/// Re-checks `command` against a newer snapshot at `now`; returns the command to execute (for
/// emptiness, with only the candidates that survived).
pub fn validate(
    command: &Command,
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Result<Command, Rejection> {
    let mut pass = Pass::new(snapshot, now);
    validate_in(&mut pass, &mut BTreeMap::new(), command)
}

/// Re-checks `commands` (decided in one pass, in their order) together against a newer
/// snapshot at `now`: one verdict per command, in order.
pub fn validate_all(
    commands: &[Command],
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Vec<Result<Command, Rejection>> {
    let mut pass = Pass::new(snapshot, now);
    let mut budgets = BTreeMap::new();
    commands
        .iter()
        .map(|command| validate_in(&mut pass, &mut budgets, command))
        .collect()
}

/// The budgets left for `reason`, built on first use.
fn budgets_for<'b>(
    budgets: &'b mut BTreeMap<DisruptionReason, BudgetMap>,
    pass: &Pass<'_>,
    reason: DisruptionReason,
) -> &'b mut BudgetMap {
    budgets
        .entry(reason)
        .or_insert_with(|| BudgetMap::build(pass.snapshot, reason, pass.now))
}

/// [`validate`] within a batch: `budgets` carries what earlier commands of the batch took, and
/// `pass` the consolidations validated before this one.
fn validate_in(
    pass: &mut Pass<'_>,
    budgets: &mut BTreeMap<DisruptionReason, BudgetMap>,
    command: &Command,
) -> Result<Command, Rejection> {
    if command.method == Method::Emptiness {
        return validate_emptiness(pass, budgets, command);
    }
    let (pool, excluded) = match command.method {
        Method::Drift | Method::StaticDrift => (&pass.eventual, &pass.eventual_excluded),
        _ => (&pass.graceful, &pass.graceful_excluded),
    };
    let mut current: Vec<Candidate> = Vec::new();
    for cc in &command.candidates {
        match pool.iter().find(|c| c.name == cc.node) {
            Some(c) => current.push(c.clone()),
            None => {
                let why = why_not_candidate(pass.snapshot, excluded, &cc.node);
                return Err(Rejection::Churn(why.prefixed(&format!("{}: ", cc.node))));
            }
        }
    }
    if let Some((c, why)) = current
        .iter()
        .find_map(|c| pass.taken(c.index).map(|why| (c, why)))
    {
        return Err(Rejection::Churn(why.prefixed(&format!("{}: ", c.name))));
    }
    let left = budgets_for(budgets, pass, command.reason);
    let mut after = left.clone();
    for c in &current {
        if !after.take(&c.node_pool) {
            return Err(Rejection::Budget(after.why_not(&c.node_pool)));
        }
    }
    match command.method {
        Method::Drift | Method::StaticDrift | Method::Emptiness | Method::Repair => {
            *left = after;
            Ok(command.clone())
        }
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            let refs: Vec<&Candidate> = current.iter().collect();
            let again = consolidation::compute(pass, &refs, command.method)
                .map_err(Rejection::Scheduling)?;
            same_decision(command, &again)?;
            pass.commit(&refs);
            *budgets_for(budgets, pass, command.reason) = after;
            Ok(command.clone())
        }
    }
}

/// Whether the re-simulation `again` reproduces `command`: a delete still needs no new node;
/// a replacement is still one node whose options include all of the command's.
fn same_decision(command: &Command, again: &Command) -> Result<(), Rejection> {
    match (command.replacements.first(), again.replacements.first()) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(Rejection::Scheduling(Reason::new(
            Code::DecisionChanged,
            "a delete now needs a replacement",
        ))),
        (Some(_), None) => Err(Rejection::Scheduling(Reason::new(
            Code::DecisionChanged,
            "a replacement is no longer needed (the decision changed to delete)",
        ))),
        (Some(before), Some(after)) => {
            let now_opts: BTreeSet<&str> = after
                .instance_type_options
                .iter()
                .map(|o| &*o.name)
                .collect();
            let missing: Vec<&str> = before
                .instance_type_options
                .iter()
                .map(|o| &*o.name)
                .filter(|n| !now_opts.contains(n))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(Rejection::Scheduling(Reason::new(
                    Code::DecisionChanged,
                    format!(
                        "replacement options changed: {} no longer viable",
                        missing.join(", ")
                    ),
                )))
            }
        }
    }
}

/// Why `node` is no longer a candidate: its exclusion reason, or that it is gone.
fn why_not_candidate(snapshot: &Snapshot, excluded: &[Excluded], node: &str) -> Reason {
    snapshot
        .nodes
        .iter()
        .position(|n| n.name == node)
        .and_then(|i| excluded.iter().find(|e| e.index == i))
        .map_or_else(
            || Reason::new(Code::NodeGone, "node is gone"),
            |e| e.reason.clone(),
        )
}

/// Emptiness validation: drop what no longer holds, keep the rest.
fn validate_emptiness(
    pass: &Pass<'_>,
    budgets: &mut BTreeMap<DisruptionReason, BudgetMap>,
    command: &Command,
) -> Result<Command, Rejection> {
    let snapshot = pass.snapshot;
    let mut dropped: Vec<Reason> = Vec::new();
    let mut still: Vec<(&CommandCandidate, &Candidate)> = Vec::new();
    for cc in &command.candidates {
        match pass.graceful.iter().find(|c| c.name == cc.node) {
            Some(c) if pass.taken(c.index).is_some() => dropped.push(Reason::new(
                Code::NotEmpty,
                format!("{} receives the pods of another command", c.name),
            )),
            Some(c) if c.is_empty() => still.push((cc, c)),
            Some(c) => dropped.push(Reason::new(
                Code::NotEmpty,
                format!("{} is no longer empty", c.name),
            )),
            None => {
                let why = why_not_candidate(snapshot, &pass.graceful_excluded, &cc.node);
                dropped.push(why.prefixed(&format!("{}: ", cc.node)));
            }
        }
    }
    if still.is_empty() {
        // Several candidates, possibly for different causes: the kind is the code.
        return Err(Rejection::Churn(Reason::new(
            Code::CandidateChanged,
            format!(
                "{} candidate(s) are no longer valid ({})",
                command.candidates.len(),
                Reasons::new(dropped)
            ),
        )));
    }
    let budgets = budgets_for(budgets, pass, command.reason);
    let mut over_budget = Vec::new();
    let mut kept: Vec<CommandCandidate> = Vec::new();
    for (cc, c) in still {
        if budgets.take(&c.node_pool) {
            kept.push(cc.clone());
        } else {
            over_budget.push(budgets.why_not(&c.node_pool));
        }
    }
    if kept.is_empty() {
        // Every survivor over its pool's budget: the first pool's cause stands for all.
        let code = over_budget
            .first()
            .map_or(Code::BudgetExhausted, |r| r.code);
        return Err(Rejection::Budget(Reason::new(
            code,
            Reasons::new(over_budget).text(),
        )));
    }
    let mut validated = command.clone();
    if kept.len() < command.candidates.len() {
        validated.savings_per_hour = kept.iter().map(|c| c.price).sum::<f64>() + 0.0;
        let names: Vec<&str> = kept.iter().map(|c| c.node.as_str()).collect();
        dropped.extend(over_budget);
        validated.explanation = format!(
            "{} empty node(s) still deleted after validation ({}); dropped: {}",
            kept.len(),
            names.join(", "),
            Reasons::new(dropped)
        );
    }
    validated.candidates = kept;
    Ok(validated)
}

/// Per-pool candidate counts of a command (what it consumes from budgets).
pub fn budget_usage(command: &Command) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for c in &command.candidates {
        *out.entry(c.node_pool.clone()).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::DriftMark;
    use crate::testing::{managed, now, pool_with};

    /// A pass that decides to drift node `a` (empty, but its pool never consolidates).
    fn drifting() -> (Snapshot, Command) {
        let mut node = managed("a", "general");
        node.drifted = Some(DriftMark {
            reason: "NodePoolDrifted".into(),
            since: now(),
        });
        let snapshot = Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"consolidateAfter": "Never"}),
            )],
            nodes: vec![node],
            ..Default::default()
        };
        let decision = crate::decide(&snapshot, now());
        let command = decision.commands.first().cloned().expect("a drift command");
        assert_eq!(command.method, Method::Drift);
        (snapshot, command)
    }

    #[test]
    fn a_candidate_nominated_since_the_decision_is_churn_caused_by_the_nomination() {
        let (mut snapshot, command) = drifting();
        snapshot.nodes[0].nominated_until = Some(now() + chrono::Duration::minutes(1));
        let rejection = validate(&command, &snapshot, now()).expect_err("rejected");
        assert_eq!(rejection.code(), Code::CandidateChanged);
        assert_eq!(rejection.reason().code, Code::Nominated);
        assert!(
            rejection
                .to_string()
                .starts_with("churn: a: nominated for pending pods until"),
            "{rejection}"
        );
    }

    #[test]
    fn a_candidate_gone_since_the_decision_is_churn_caused_by_its_absence() {
        let (mut snapshot, command) = drifting();
        snapshot.nodes.clear();
        let rejection = validate(&command, &snapshot, now()).expect_err("rejected");
        assert_eq!(rejection.code(), Code::CandidateChanged);
        assert_eq!(rejection.reason().code, Code::NodeGone);
        assert_eq!(rejection.to_string(), "churn: a: node is gone");
    }
}
