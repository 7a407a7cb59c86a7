//! What multi- and single-node consolidation share (upstream `consolidation.go`): which
//! candidates may be consolidated, and `compute`: simulate removing them, then DELETE when
//! their pods fit on existing nodes, REPLACE when exactly one cheaper NodeClaim takes them, else
//! nothing (with the reason).

use karpenter_api::v1::{ConsolidationPolicy, DisruptionReason};

use crate::candidate::Candidate;
use crate::command::{Command, CommandCandidate, Method};
use crate::consolidatable::consolidatable;
use crate::methods::replacement;
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::simulate::{Outcome, Spread};

/// How a refused delete's reason begins.
const PACKED: &str =
    "the pods fit only as packed by the plan: spread the way kube-scheduler spreads them";

/// Why the candidate cannot be consolidated, if it cannot.
pub fn ineligible(pass: &Pass<'_>, c: &Candidate) -> Option<Reason> {
    let snapshot = pass.snapshot;
    let p = snapshot.node_pool(&c.node_pool)?;
    if pool::is_static(p) {
        return Some(Reason::new(
            Code::StaticNodePool,
            "static nodepools are not consolidated",
        ));
    }
    if c.is_empty() {
        return Some(Reason::new(
            Code::LeftToEmptiness,
            "empty (left to emptiness)",
        ));
    }
    if pool::policy(p) == ConsolidationPolicy::WhenEmpty {
        return Some(Reason::new(
            Code::WhenEmptyPolicy,
            format!(
                "nodepool {} consolidates only empty nodes (WhenEmpty)",
                c.node_pool
            ),
        ));
    }
    if snapshot
        .instance_type(&c.node_pool, &c.instance_type)
        .is_none()
    {
        return Some(Reason::new(
            Code::InstanceTypeNotOffered,
            format!(
                "instance type {:?} is not offered to nodepool {}",
                c.instance_type, c.node_pool
            ),
        ));
    }
    if c.capacity_type.is_empty() || c.zone.is_empty() {
        return Some(Reason::new(
            Code::NodeLabelsMissing,
            "node has no capacity-type or zone label",
        ));
    }
    let node = snapshot.nodes.get(c.index)?;
    consolidatable(node, p, pass.now).err()
}

/// The consolidatable candidates, sorted by savings ratio (highest first); notes the others.
pub fn eligible(pass: &mut Pass<'_>) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for c in &pass.graceful {
        match ineligible(pass, c) {
            None => out.push(c.clone()),
            Some(why) => notes.push((c.index, why)),
        }
    }
    for (i, n) in notes {
        pass.note(i, n);
    }
    out.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()));
    out
}

/// Simulates consolidating `candidates` together.
pub fn compute(
    pass: &mut Pass<'_>,
    candidates: &[&Candidate],
    method: Method,
) -> Result<Command, Reason> {
    let command = compute_unchecked(pass, candidates, method)?;
    check_spread(pass, candidates, command)
}

/// A delete `command` of `candidates` (from [`compute_unchecked`]) kept only when kube-scheduler
/// placing the pods ([`crate::simulate::Simulator::spread`]) would not launch a node costing
/// as much as the delete saves; a replacement passes unchecked.
pub fn check_spread(
    pass: &mut Pass<'_>,
    candidates: &[&Candidate],
    mut command: Command,
) -> Result<Command, Reason> {
    if !command.replacements.is_empty() {
        return Ok(command);
    }
    let total = command.savings_per_hour;
    match pass.sim.spread(pass.snapshot, candidates) {
        Spread::Holds => Ok(command),
        Spread::Unschedulable(why) => Err(Reason::new(
            Code::SpreadNeedsNewNode,
            format!("{PACKED}, {}", why.text),
        )),
        // The launch kube-scheduler's placement would cause eats the saving.
        Spread::Launches { price, pod } if price >= total => Err(Reason::new(
            Code::SpreadNeedsNewNode,
            format!(
                "{PACKED}, pod {pod} would need a new node ({price:.4}/h), as much as the delete saves ({total:.4}/h)"
            ),
        )),
        Spread::Launches { price, pod } => {
            command.explanation.push_str(&format!(
                " (placed as kube-scheduler spreads them, pod {pod} may need a new node of {price:.4}/h: still {:.4}/h saved)",
                total - price
            ));
            Ok(command)
        }
    }
}

/// [`compute`] without [`check_spread`]: multi-node consolidation's search probes many
/// prefixes and checks only the one it keeps.
pub fn compute_unchecked(
    pass: &mut Pass<'_>,
    candidates: &[&Candidate],
    method: Method,
) -> Result<Command, Reason> {
    let snapshot = pass.snapshot;
    let multi = method == Method::MultiNodeConsolidation;
    let (outcome, _) = pass.sim.simulate(snapshot, candidates, true);
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
    let mut replacements = match outcome {
        Outcome::Unschedulable(why) => return Err(why),
        Outcome::Fits => Vec::new(),
        Outcome::NeedsNew(claims) if claims.len() > 1 => {
            return Err(Reason::new(
                Code::MultipleReplacements,
                format!(
                    "rescheduling needs {} new nodes; consolidation replaces with at most one",
                    claims.len()
                ),
            ));
        }
        Outcome::NeedsNew(claims) => claims,
    };
    if let Some(claim) = replacements.first_mut() {
        *claim = replacement::cheaper_replacement(snapshot, claim, candidates, multi)?;
        if multi {
            claim.instance_type_options =
                replacement::filter_out_same_instance_type(claim, candidates);
            if claim.instance_type_options.is_empty() {
                return Err(Reason::new(
                    Code::NotCheaper,
                    "the replacement is not cheaper than a candidate of the same instance type",
                ));
            }
        }
    }
    let cost: f64 = replacements.iter().map(|r| r.cheapest_price()).sum();
    let savings = total - cost;
    let explanation = match replacements.first() {
        None => format!(
            "delete {}: their pods fit on other nodes, saving {savings:.4}/h",
            names.join(", ")
        ),
        Some(r) => format!(
            "replace {} ({total:.4}/h) with one {} node ({} options from {} {:.4}/h), saving {savings:.4}/h",
            names.join(", "),
            r.node_pool,
            r.instance_type_options.len(),
            r.instance_type_options.first().map_or("", |o| &*o.name),
            r.cheapest_price()
        ),
    };
    Ok(Command {
        method,
        reason: DisruptionReason::Underutilized,
        candidates: candidates
            .iter()
            .map(|c| CommandCandidate::from(*c))
            .collect(),
        replacements,
        savings_per_hour: savings,
        explanation,
        balanced: Vec::new(),
        repair: None,
        terminate_first: None,
    })
}
