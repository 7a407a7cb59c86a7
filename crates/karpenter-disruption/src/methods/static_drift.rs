//! StaticDrift (reason `Drifted`, eventual; static NodePools only): replace drifted nodes of a
//! static pool (`spec.replicas` set) one for one with a fresh NodeClaim from the pool's
//! template, so the pool keeps its replica count.
//!
//! Per static pool, upstream's rules (`staticdrift.go`):
//! - nothing happens while the pool is still scaling down (running + pending-disruption nodes
//!   exceed `replicas`);
//! - the number replaced is the smallest of the pool's `Drifted` budget, its drifted
//!   candidates, and the room under `limits.nodes` for staging replacements (each replacement
//!   is launched before its candidate goes, so a pool at its node limit cannot drift);
//! - each command is one candidate and one replacement; there is no simulation and no price
//!   rule (the pool's pods are not moved by a solver, the replacement is the template).
//!
//! Candidates are taken oldest drift first. Upstream's newer terminate-first variant (feature
//! gate `TerminateFirstDrift`, for pools at their node limit) is not implemented: such pools
//! get a reason instead.

use std::collections::BTreeMap;

use karpenter_api::v1::{DisruptionReason, NodePool};
use karpenter_scheduling::NewNodeClaim;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, CommandCandidate, Method};
use crate::drift_detect;
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::snapshot::{DriftMark, Snapshot};
use crate::static_pool::{PoolCounts, node_limit};

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let snapshot = pass.snapshot;
    let mut by_pool: BTreeMap<String, Vec<(Candidate, DriftMark)>> = BTreeMap::new();
    for c in &pass.eventual {
        let Some(node) = snapshot.nodes.get(c.index) else {
            continue;
        };
        if !snapshot
            .node_pool(&c.node_pool)
            .is_some_and(pool::is_static)
        {
            continue;
        }
        if let Some(mark) = drift_detect::drift(snapshot, node, pass.now) {
            by_pool
                .entry(c.node_pool.clone())
                .or_default()
                .push((c.clone(), mark));
        }
    }
    pass.eligible.push((
        DisruptionReason::Drifted,
        by_pool.values().map(Vec::len).sum(),
    ));
    let mut budgets = BudgetMap::build(snapshot, DisruptionReason::Drifted, pass.now);
    let mut commands = Vec::new();
    for (pool_name, mut drifted) in by_pool {
        let Some(node_pool) = snapshot.node_pool(&pool_name) else {
            continue;
        };
        drifted.sort_by(|(a, am), (b, bm)| am.since.cmp(&bm.since).then(a.name.cmp(&b.name)));
        let replicas = node_pool.spec.replicas.unwrap_or(0);
        let counts = PoolCounts::of(&snapshot.nodes, &pool_name);
        let held = |pass: &mut Pass<'_>, why: Reason| {
            for (c, mark) in &drifted {
                pass.note(
                    c.index,
                    why.clone()
                        .prefixed(&format!("drifted ({}) but ", mark.reason)),
                );
            }
        };
        if counts.running + counts.pending_disruption > replicas {
            held(
                pass,
                Reason::new(
                    Code::StaticPoolScalingDown,
                    format!(
                        "static nodepool {pool_name} is still scaling down ({} running and {} pending disruption for {replicas} replicas)",
                        counts.running, counts.pending_disruption
                    ),
                ),
            );
            continue;
        }
        let allowed = i64::from(budgets.allowed(&pool_name));
        if allowed == 0 {
            held(pass, budgets.why_not(&pool_name));
            continue;
        }
        let max_drifts = allowed.min(drifted.len() as i64);
        let room = node_limit(node_pool).map_or(i64::MAX, |limit| (limit - counts.total).max(0));
        let count = max_drifts.min(room);
        if count == 0 {
            held(
                pass,
                Reason::new(
                    Code::StaticPoolAtNodeLimit,
                    format!(
                        "static nodepool {pool_name} is at its node limit ({} nodes) and cannot stage a replacement",
                        counts.total
                    ),
                ),
            );
            continue;
        }
        let template = match template_claim(snapshot, node_pool) {
            Ok(template) => template,
            Err(reason) => {
                held(pass, reason);
                continue;
            }
        };
        let taken = usize::try_from(count).unwrap_or(usize::MAX);
        for (c, mark) in drifted.iter().take(taken) {
            budgets.take(&pool_name);
            commands.push(Command {
                method: Method::StaticDrift,
                reason: DisruptionReason::Drifted,
                explanation: format!(
                    "node {} of static nodepool {pool_name} drifted ({}) since {}; a node from the template replaces it",
                    c.name,
                    mark.reason,
                    mark.since.format("%Y-%m-%dT%H:%M:%SZ"),
                ),
                savings_per_hour: c.price - template.cheapest_price(),
                candidates: vec![CommandCandidate::from(c)],
                replacements: vec![template.clone()],
                balanced: Vec::new(),
                repair: None,
            });
        }
        for (c, mark) in drifted.iter().skip(taken) {
            let why = if room < max_drifts {
                Reason::new(
                    Code::StaticPoolAtNodeLimit,
                    format!(
                        "static nodepool {pool_name} has room under limits.nodes for {room} replacement(s) this pass"
                    ),
                )
            } else {
                budgets.why_not(&pool_name)
            };
            pass.note(
                c.index,
                why.prefixed(&format!("drifted ({}) but ", mark.reason)),
            );
        }
    }
    commands
}

/// A NodeClaim from the pool's template alone
/// ([`karpenter_scheduling::template::template_claim`]), or why there is none.
pub(crate) fn template_claim(
    snapshot: &Snapshot,
    node_pool: &NodePool,
) -> Result<NewNodeClaim, Reason> {
    use karpenter_scheduling::template::TemplateClaimError;
    let name = pool::name(node_pool);
    karpenter_scheduling::template::template_claim(
        node_pool,
        snapshot.catalog(name),
        &snapshot.daemonsets,
        &snapshot.solve_options,
    )
    .map_err(|e| match e {
        TemplateClaimError::Invalid(e) => Reason::new(Code::NodePoolInvalid, e.to_string()),
        TemplateClaimError::NoInstanceType { .. } => Reason::new(
            Code::StaticPoolNoInstanceType,
            format!("no instance type of static nodepool {name} fits its template"),
        ),
    })
}
