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

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use thiserror::Error;

use crate::budget_map::BudgetMap;
use crate::candidate::{Candidate, Excluded};
use crate::command::{Command, CommandCandidate, Method};
use crate::consolidation;
use crate::pass::Pass;
use crate::reason::Code;
use crate::snapshot::Snapshot;

/// Validation delay before a consolidation command executes.
pub const COMMAND_VALIDATION_DELAY: std::time::Duration = std::time::Duration::from_secs(15);

/// Why a command no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    /// A candidate changed (pods, protection, nomination, deletion).
    #[error("churn: {0}")]
    Churn(String),
    /// The budget no longer allows the command.
    #[error("budget: {0}")]
    Budget(String),
    /// Re-simulation gives a different answer.
    #[error("scheduling: {0}")]
    Scheduling(String),
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
}

/// Re-checks `command` against a newer snapshot at `now`; returns the command to execute (for
/// emptiness, with only the candidates that survived).
pub fn validate(
    command: &Command,
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Result<Command, Rejection> {
    if command.method == Method::Emptiness {
        return validate_emptiness(command, snapshot, now);
    }
    let mut pass = Pass::new(snapshot, now);
    let (pool, excluded) = match command.method {
        Method::Drift | Method::StaticDrift => (&pass.eventual, &pass.eventual_excluded),
        _ => (&pass.graceful, &pass.graceful_excluded),
    };
    let mut current: Vec<Candidate> = Vec::new();
    for cc in &command.candidates {
        match pool.iter().find(|c| c.name == cc.node) {
            Some(c) => current.push(c.clone()),
            None => {
                let why = why_not_candidate(snapshot, excluded, &cc.node);
                return Err(Rejection::Churn(format!("{}: {why}", cc.node)));
            }
        }
    }
    let mut budgets = BudgetMap::build(snapshot, command.reason, now);
    for c in &current {
        if !budgets.take(&c.node_pool) {
            return Err(Rejection::Budget(budgets.why_not(&c.node_pool).text));
        }
    }
    match command.method {
        Method::Drift | Method::StaticDrift | Method::Emptiness => Ok(command.clone()),
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            let refs: Vec<&Candidate> = current.iter().collect();
            let again = consolidation::compute(&mut pass, &refs, command.method)
                .map_err(|why| Rejection::Scheduling(why.text))?;
            match (command.replacements.first(), again.replacements.first()) {
                (None, None) => Ok(command.clone()),
                (None, Some(_)) => Err(Rejection::Scheduling(
                    "a delete now needs a replacement".to_owned(),
                )),
                (Some(_), None) => Err(Rejection::Scheduling(
                    "a replacement is no longer needed (the decision changed to delete)".to_owned(),
                )),
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
                        Ok(command.clone())
                    } else {
                        Err(Rejection::Scheduling(format!(
                            "replacement options changed: {} no longer viable",
                            missing.join(", ")
                        )))
                    }
                }
            }
        }
    }
}

/// Why `node` is no longer a candidate: its exclusion reason, or that it is gone.
fn why_not_candidate(snapshot: &Snapshot, excluded: &[Excluded], node: &str) -> String {
    snapshot
        .nodes
        .iter()
        .position(|n| n.name == node)
        .and_then(|i| excluded.iter().find(|e| e.index == i))
        .map_or("node is gone".to_owned(), |e| e.reason.text.clone())
}

/// Emptiness validation: drop what no longer holds, keep the rest.
fn validate_emptiness(
    command: &Command,
    snapshot: &Snapshot,
    now: DateTime<Utc>,
) -> Result<Command, Rejection> {
    let pass = Pass::new(snapshot, now);
    let mut dropped: Vec<String> = Vec::new();
    let mut still: Vec<(&CommandCandidate, &Candidate)> = Vec::new();
    for cc in &command.candidates {
        match pass.graceful.iter().find(|c| c.name == cc.node) {
            Some(c) if c.is_empty() => still.push((cc, c)),
            Some(c) => dropped.push(format!("{} is no longer empty", c.name)),
            None => {
                let why = why_not_candidate(snapshot, &pass.graceful_excluded, &cc.node);
                dropped.push(format!("{}: {why}", cc.node));
            }
        }
    }
    if still.is_empty() {
        return Err(Rejection::Churn(format!(
            "{} candidate(s) are no longer valid ({})",
            command.candidates.len(),
            dropped.join("; ")
        )));
    }
    let mut budgets = BudgetMap::build(snapshot, command.reason, now);
    let mut over_budget = Vec::new();
    let mut kept: Vec<CommandCandidate> = Vec::new();
    for (cc, c) in still {
        if budgets.take(&c.node_pool) {
            kept.push(cc.clone());
        } else {
            over_budget.push(budgets.why_not(&c.node_pool).text);
        }
    }
    if kept.is_empty() {
        return Err(Rejection::Budget(over_budget.join("; ")));
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
            dropped.join("; ")
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
