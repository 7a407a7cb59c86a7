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
//! Candidates are taken oldest drift first. With `TerminateFirstDrift` (upstream v1.15), a pool
//! that cannot stage a replacement first has its drifted nodes deleted first instead, within
//! the budget, and the static provisioning loop refills it ([`crate::terminate_first`]): a
//! pool at its node limit, or one whose template allows only full capacity reservations (then
//! only the nodes holding a slot of one go first). Without the gate such pools get a reason.

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
use crate::terminate_first::{self, TerminateFirst};

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
        if counts.running + counts.pending_disruption > replicas {
            held(
                pass,
                &drifted,
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
            held(pass, &drifted, budgets.why_not(&pool_name));
            continue;
        }
        let max_drifts = allowed.min(drifted.len() as i64);
        let gate = snapshot.features.terminate_first_drift;
        // Full reservations are checked first, and only with the gate on: without it there is
        // nothing to do but replace first.
        if let Some(offered) = gate
            .then(|| terminate_first::full_reservations(snapshot.catalog(&pool_name), node_pool))
            .flatten()
        {
            // Only a node holding a slot of a reservation still offered frees a slot its refill
            // can use: those go first, and only they can go first.
            let holds = |c: &Candidate| {
                terminate_first::held_reservation(snapshot, c)
                    .is_some_and(|id| offered.contains(id))
            };
            drifted.sort_by_key(|(c, _)| !holds(c));
            let blocked = Reason::new(
                Code::StaticPoolReservationsFull,
                format!(
                    "static nodepool {pool_name}'s capacity reservations are full and cannot stage a replacement"
                ),
            );
            unreplaceable(
                pass,
                &mut commands,
                &mut budgets,
                (node_pool, &drifted, max_drifts),
                &holds,
                (TerminateFirst::NoReservedCapacity, blocked),
            );
            continue;
        }
        let room = node_limit(node_pool).map_or(i64::MAX, |limit| (limit - counts.total).max(0));
        let count = max_drifts.min(room);
        if count == 0 {
            let blocked = Reason::new(
                Code::StaticPoolAtNodeLimit,
                format!(
                    "static nodepool {pool_name} is at its node limit ({} nodes) and cannot stage a replacement",
                    counts.total
                ),
            );
            unreplaceable(
                pass,
                &mut commands,
                &mut budgets,
                (node_pool, &drifted, max_drifts),
                &|_| true,
                (TerminateFirst::StaticAtLimit, blocked),
            );
            continue;
        }
        let template = match template_claim(snapshot, node_pool) {
            Ok(template) => template,
            Err(reason) => {
                held(pass, &drifted, reason);
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
                terminate_first: None,
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

/// Notes `why` for every drifted node of a pool that drifts none this pass.
fn held(pass: &mut Pass<'_>, drifted: &[(Candidate, DriftMark)], why: Reason) {
    for (c, mark) in drifted {
        pass.note(
            c.index,
            why.clone()
                .prefixed(&format!("drifted ({}) but ", mark.reason)),
        );
    }
}

/// A static pool's drifted nodes when no replacement can be staged first: with
/// `TerminateFirstDrift` (and a pool the static loop will refill), the first `max` that
/// `can_go_first` get a delete-only command each; every other node gets `blocked` (or, past
/// the budget, the budget's reason).
fn unreplaceable(
    pass: &mut Pass<'_>,
    commands: &mut Vec<Command>,
    budgets: &mut BudgetMap,
    (node_pool, drifted, max): (&NodePool, &[(Candidate, DriftMark)], i64),
    can_go_first: &dyn Fn(&Candidate) -> bool,
    (why, blocked): (TerminateFirst, Reason),
) {
    let name = pool::name(node_pool);
    let enabled =
        pass.snapshot.features.terminate_first_drift && terminate_first::refillable(node_pool);
    let max = usize::try_from(max).unwrap_or(0);
    for (i, (c, mark)) in drifted.iter().enumerate() {
        let prefix = format!("drifted ({}) but ", mark.reason);
        if i >= max {
            let reason = if enabled {
                budgets.why_not(name)
            } else {
                blocked.clone()
            };
            pass.note(c.index, reason.prefixed(&prefix));
            continue;
        }
        if !(enabled && can_go_first(c)) {
            pass.note(c.index, blocked.clone().prefixed(&prefix));
            continue;
        }
        budgets.take(name);
        commands.push(Command::terminate_first(
            Method::StaticDrift,
            c,
            format!(
                "node {} of static nodepool {name} drifted ({}) since {}",
                c.name,
                mark.reason,
                mark.since.format("%Y-%m-%dT%H:%M:%SZ"),
            ),
            why,
        ));
    }
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
