//! Node repair (reason `Unhealthy`; upstream v1.15 `disruption/repair.go`): replace a node one
//! of whose conditions has matched a cloud repair policy for longer than the policy's
//! toleration. It runs first (fixing a fault outranks any saving) and only with the
//! `NodeRepair` gate ([`Snapshot::repair`] set).
//!
//! Who may be repaired: a managed node of an existing, non-static NodePool that no command
//! holds, not being deleted or nominated; unlike the other methods an uninitialized node and
//! one with `karpenter.sh/do-not-disrupt` may be (repair is not discretionary). Vetoes:
//! `karpenter.sh/do-not-repair=true` on the node; pods that block eviction (a PDB, a pod's
//! do-not-disrupt) when neither the policy nor the NodeClaim bounds the drain.
//!
//! Never all at once: no node of a NodePool is repaired while more than the threshold (20% by
//! default, rounded up: upstream's constant, a setting here) of its nodes have a condition the
//! policies cover, tolerated or not: a correlated failure is not fixed by replacing everything.
//!
//! Order: the highest repair score (priority rank + half-hours since eligible), then the lower
//! disruption cost, then the name. The first candidate whose pool has `Unhealthy` budget (an
//! uninitialized node needs none) and whose pods fit elsewhere or on replacements becomes the
//! one command of the pass, its drain bound `min(policy bound, NodeClaim's)`.
//!
//! A reboot policy's node is rebooted in place: its command has no replacement and the
//! controller commits the reboot (`Rebooting=True/RebootRequested`) instead of deleting it;
//! a node rebooted twice within a day already is replaced instead (upstream's
//! `RebootHistory`, [`crate::reboot_history`]).
//! A static NodePool's node is replaced by a node from the pool's template, as static drift
//! does (no simulation), unless the pool is scaling down or at its `limits.nodes`.
//! With `TerminateFirstRepair` a node whose replacement cannot be staged first (a reserved
//! node whose pods only fit in the slot it frees; a static pool at its limit or with full
//! reservations) is deleted first instead ([`crate::terminate_first`]).

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_api::v1::DisruptionReason;
use karpenter_cloud::RepairMatcher;
use karpenter_cloud::repair::{self, RepairAction, RepairResult};

use crate::budgets::map::BudgetMap;
use crate::candidate::{self, Candidate};
use crate::command::{Command, CommandCandidate, Method, RepairCommand, TerminateFirst};
use crate::methods::static_drift;
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::reboot_history;
use crate::simulate::Outcome;
use crate::snapshot::{NodeState, Snapshot};
use crate::static_pool::{PoolCounts, node_limit};
use crate::terminate_first;
use crate::time_fmt::hms;

pub use crate::repair_settings::{DO_NOT_REPAIR, RepairSettings, UnhealthyThreshold};

/// A node repair would act on, with its decision.
#[derive(Debug, Clone)]
struct Eligible {
    candidate: Candidate,
    result: RepairResult,
    score: f64,
    initialized: bool,
    claim_grace: Option<Duration>,
    /// A reboot policy's node replaced because it was rebooted twice within a day already.
    escalated: bool,
}

/// `Ready=False (KubeletNotReady)`.
fn condition_text(result: &RepairResult) -> String {
    if result.reason.is_empty() {
        format!("{}={}", result.condition, result.status)
    } else {
        format!("{}={} ({})", result.condition, result.status, result.reason)
    }
}

fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 3600, (secs % 3600) / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// Per pool: (nodes, unhealthy nodes), counting Nodes with a nodepool label as upstream does
/// (a node is unhealthy as soon as a condition matches, before its toleration).
pub fn unhealthy_counts(
    snapshot: &Snapshot,
    matcher: &RepairMatcher,
) -> BTreeMap<String, (u32, u32)> {
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for node in snapshot.nodes.iter().filter(|n| n.has_node) {
        let Some(pool) = node.node_pool() else {
            continue;
        };
        let entry = counts.entry(pool.to_owned()).or_default();
        entry.0 += 1;
        if node.conditions.iter().any(|c| matcher.covers(c)) {
            entry.1 += 1;
        }
    }
    counts
}

/// Why repair leaves a node alone at the node level (`None`: it may be repaired).
fn node_block(
    snapshot: &Snapshot,
    node: &NodeState,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Reason> {
    if node.node_claim.is_some() && node.node_pool().is_none() {
        return Some(Reason::new(
            Code::NoNodePoolLabel,
            "repair requires a NodePool to construct and budget a safe replacement",
        ));
    }
    candidate::node_block_for(snapshot, node, now, candidate::Class::Repair)
}

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let snapshot = pass.snapshot;
    let Some(settings) = snapshot.repair.as_ref() else {
        return Vec::new();
    };
    let now = pass.now;
    let mut eligible: Vec<Eligible> = Vec::new();
    for (index, node) in snapshot.nodes.iter().enumerate() {
        let matches = settings.matcher.matches(&node.conditions, node.created);
        if matches.is_empty() || node.node_claim.is_none() || node.rebooting {
            continue;
        }
        let Some(mut result) = repair::resolve(&matches, now, node.last_reboot_end) else {
            if let Some(first) = repair::earliest_eligible(&matches) {
                let text = if first.reason.is_empty() {
                    format!("{}={}", first.condition, first.status)
                } else {
                    format!("{}={} ({})", first.condition, first.status, first.reason)
                };
                pass.note(
                    index,
                    Reason::new(
                        Code::UnhealthyTolerated,
                        format!(
                            "unhealthy: {text}; repair tolerates it until {} ({} toleration)",
                            hms(first.eligible_at),
                            go_duration(first.policy.toleration)
                        ),
                    ),
                );
            }
            continue;
        };
        // Upstream's RebootHistory: past two reboots in a day, the node is replaced.
        let escalated = result.action == RepairAction::RebootNode
            && reboot_history::exhausted(&node.committed_reboots, now);
        if escalated {
            result.action = RepairAction::ReplaceNode;
        }
        let prefix = format!("unhealthy ({}) but ", condition_text(&result));
        if let Some(block) = node_block(snapshot, node, now) {
            pass.note(index, block.prefixed(&prefix));
            continue;
        }
        if node
            .annotations
            .get(DO_NOT_REPAIR)
            .is_some_and(|v| v == "true")
        {
            pass.note(
                index,
                Reason::new(
                    Code::DoNotRepair,
                    format!("repair is blocked through the {DO_NOT_REPAIR:?} annotation"),
                )
                .prefixed(&prefix),
            );
            continue;
        }
        let pod_blocked = candidate::pod_block(snapshot, node, now).is_some();
        if pod_blocked
            && result.termination_grace_period.is_none()
            && node.termination_grace_period.is_none()
        {
            pass.note(
                index,
                Reason::new(
                    Code::RepairNeedsGracePeriod,
                    "repair requires a termination grace period to bypass blocking pods",
                )
                .prefixed(&prefix),
            );
            continue;
        }
        let Some(mut c) = candidate::build(snapshot, index, now) else {
            continue;
        };
        // Repair moves every reschedulable pod, those a PDB blocks too (upstream's
        // IncludeBlockedCandidatePods): the drain bound will evict them.
        c.reschedulable = node
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_reschedulable())
            .map(|(i, _)| i)
            .collect();
        eligible.push(Eligible {
            score: result.score_at(now),
            candidate: c,
            result,
            initialized: node.initialized,
            claim_grace: node.termination_grace_period,
            escalated,
        });
    }
    pass.eligible
        .push((DisruptionReason::Unhealthy, eligible.len()));
    eligible.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(
                a.candidate
                    .disruption_cost
                    .total_cmp(&b.candidate.disruption_cost),
            )
            .then_with(|| a.candidate.name.cmp(&b.candidate.name))
    });
    let counts = unhealthy_counts(snapshot, &settings.matcher);
    let budgets = BudgetMap::build(snapshot, DisruptionReason::Unhealthy, now);
    let threshold = &settings.unhealthy_threshold;
    for e in eligible {
        let c = &e.candidate;
        let prefix = format!("unhealthy ({}) but ", condition_text(&e.result));
        let (total, unhealthy) = counts.get(&c.node_pool).copied().unwrap_or_default();
        if unhealthy > threshold.limit(total) {
            pass.note(
                c.index,
                Reason::new(
                    Code::UnhealthyThresholdExceeded,
                    format!(
                        "more than {} of nodes in nodepool {:?} are unhealthy ({unhealthy} of {total})",
                        threshold.as_str(),
                        c.node_pool
                    ),
                ),
            );
            continue;
        }
        // Budgets count initialized nodes only: an uninitialized one neither needs nor takes any.
        if e.initialized && budgets.allowed(&c.node_pool) == 0 {
            pass.note(c.index, budgets.why_not(&c.node_pool).prefixed(&prefix));
            continue;
        }
        let grace = e
            .result
            .termination_grace_period
            .as_ref()
            .map(|(bound, _)| e.claim_grace.map_or(*bound, |claim| claim.min(*bound)));
        let command = |explanation: String,
                       replacements: Vec<karpenter_scheduling::NewNodeClaim>,
                       reboot: bool,
                       terminate_first: Option<TerminateFirst>| {
            let cost: f64 = replacements.iter().map(|r| r.cheapest_price()).sum();
            Command {
                method: Method::Repair,
                reason: DisruptionReason::Unhealthy,
                explanation: format!("{explanation}{}", grace_text(grace)),
                savings_per_hour: if reboot || terminate_first.is_some() {
                    0.0
                } else {
                    c.price - cost
                },
                candidates: vec![CommandCandidate::from(c)],
                replacements,
                balanced: Vec::new(),
                repair: Some(RepairCommand {
                    condition: e.result.condition.clone(),
                    status: e.result.status.clone(),
                    reason: e.result.reason.clone(),
                    reboot,
                    termination_grace_period: grace,
                }),
                terminate_first,
            }
        };
        // A reboot is in place: no replacement, no simulation (upstream's `commitReboot`).
        if e.result.action == RepairAction::RebootNode {
            let explanation = format!(
                "node {} is unhealthy: {} past its {} toleration; rebooted in place",
                c.name,
                condition_text(&e.result),
                go_duration(e.result.toleration),
            );
            return vec![command(explanation, Vec::new(), true, None)];
        }
        // A static NodePool's pods are not moved by a solver: as upstream, repair mirrors
        // static drift, one node from the pool's template for the broken one.
        if let Some(node_pool) = snapshot
            .node_pool(&c.node_pool)
            .filter(|p| pool::is_static(p))
        {
            let head = format!(
                "node {} of static nodepool {} is unhealthy: {} past its {} toleration",
                c.name,
                c.node_pool,
                condition_text(&e.result),
                go_duration(e.result.toleration),
            );
            match static_repair(snapshot, node_pool, c) {
                Ok(StaticRepair::Replace(template)) => {
                    return vec![command(
                        format!("{head}; a node from the template replaces it"),
                        vec![template],
                        false,
                        None,
                    )];
                }
                Ok(StaticRepair::TerminateFirst(why)) => {
                    return vec![command(
                        format!("{head}; {}", why.sentence()),
                        Vec::new(),
                        false,
                        Some(why),
                    )];
                }
                Err(why) => {
                    pass.note(c.index, why.prefixed(&prefix));
                    continue;
                }
            }
        }
        let head = format!(
            "node {} is unhealthy: {} since {}, past its {} toleration ({}policy {}={}{}){}",
            c.name,
            condition_text(&e.result),
            hms(e.result.eligible_at
                - chrono::Duration::from_std(e.result.toleration).unwrap_or_default()),
            go_duration(e.result.toleration),
            if e.result.fallback { "fallback " } else { "" },
            e.result.condition,
            e.result.status,
            if e.result.reason_regex.is_empty() {
                String::new()
            } else {
                format!(" reason ~ {:?}", e.result.reason_regex)
            },
            if e.escalated {
                format!(
                    "; rebooted {} times in the last 24 h already, so replaced",
                    reboot_history::REBOOTS_BEFORE_REPLACEMENT
                )
            } else {
                String::new()
            },
        );
        let (outcome, _) = pass.sim.simulate(snapshot, &[c], false);
        let replacements = match outcome {
            Outcome::Unschedulable(_)
                if snapshot.features.terminate_first_repair
                    && terminate_first::fits_once_gone(pass, c) =>
            {
                let why = TerminateFirst::NoReservedCapacity;
                return vec![command(
                    format!("{head}; {}", why.sentence()),
                    Vec::new(),
                    false,
                    Some(why),
                )];
            }
            Outcome::Unschedulable(why) => {
                pass.note(c.index, why.prefixed(&prefix));
                continue;
            }
            Outcome::Fits => Vec::new(),
            Outcome::NeedsNew(claims) => claims,
        };
        let tail = if replacements.is_empty() {
            "its pods fit on other nodes".to_owned()
        } else {
            format!("{} replacement(s) launched first", replacements.len())
        };
        return vec![command(
            format!("{head}; {tail}"),
            replacements,
            false,
            None,
        )];
    }
    Vec::new()
}

/// `; drain bounded to ...` (or `; no drain (forceful)`) for a repair command's explanation;
/// empty when the NodeClaim's own bound applies.
fn grace_text(grace: Option<Duration>) -> String {
    match grace {
        Some(g) if g.is_zero() => "; no drain (forceful)".to_owned(),
        Some(g) => format!("; drain bounded to {}", go_duration(g)),
        None => String::new(),
    }
}

/// How a static NodePool's broken node is repaired.
#[derive(Debug)]
enum StaticRepair {
    /// A node from the pool's template, launched first.
    Replace(karpenter_scheduling::NewNodeClaim),
    /// Deleted first, refilled by the static loop (`TerminateFirstRepair`).
    TerminateFirst(TerminateFirst),
}

/// The repair of a static NodePool's broken node `c`, or why there is none, as upstream's
/// repair of static nodes: nothing while the pool is still scaling down (a replacement would
/// be surplus); with `TerminateFirstRepair`, terminate-first when the pool's reservations are
/// full (only for a node holding a slot of one) or it is at `limits.nodes`, and the pool will
/// be refilled; else the pool's template, launched first.
fn static_repair(
    snapshot: &Snapshot,
    node_pool: &karpenter_api::v1::NodePool,
    c: &Candidate,
) -> Result<StaticRepair, Reason> {
    let name = pool::name(node_pool);
    let replicas = node_pool.spec.replicas.unwrap_or(0);
    let counts = PoolCounts::of(&snapshot.nodes, name);
    if counts.running + counts.pending_disruption > replicas {
        return Err(Reason::new(
            Code::StaticPoolScalingDown,
            format!(
                "static nodepool {name} is still scaling down ({} running and {} pending disruption for {replicas} replicas)",
                counts.running, counts.pending_disruption
            ),
        ));
    }
    let gate = snapshot.features.terminate_first_repair;
    let full = gate
        .then(|| terminate_first::full_reservations(snapshot.catalog(name), node_pool))
        .flatten();
    let reservations_full = Reason::new(
        Code::StaticPoolReservationsFull,
        format!(
            "static nodepool {name}'s capacity reservations are full and cannot stage a replacement"
        ),
    );
    if let Some(offered) = &full
        && !terminate_first::held_reservation(snapshot, c).is_some_and(|id| offered.contains(id))
    {
        return Err(reservations_full);
    }
    if full.is_some() {
        return if terminate_first::refillable(node_pool) {
            Ok(StaticRepair::TerminateFirst(
                TerminateFirst::NoReservedCapacity,
            ))
        } else {
            Err(reservations_full)
        };
    }
    if node_limit(node_pool).is_some_and(|limit| counts.total >= limit) {
        if gate && terminate_first::refillable(node_pool) {
            return Ok(StaticRepair::TerminateFirst(TerminateFirst::StaticAtLimit));
        }
        return Err(Reason::new(
            Code::StaticPoolAtNodeLimit,
            format!(
                "static nodepool {name} is at its node limit ({} nodes) and cannot stage a replacement",
                counts.total
            ),
        ));
    }
    static_drift::template_claim(snapshot, node_pool).map(StaticRepair::Replace)
}

#[cfg(test)]
mod tests;
