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
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::v1::{DisruptionReason, NodePool};
use karpenter_scheduling::{NewNodeClaim, SolveInput};

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, CommandCandidate, Method};
use crate::drift_detect;
use crate::pass::Pass;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::snapshot::{DriftMark, Snapshot};

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
        let counts = PoolCounts::of(snapshot, &pool_name);
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

/// Node counts of one pool (upstream `NodePoolState.GetNodeCount`).
#[derive(Debug, Default)]
struct PoolCounts {
    /// Not deleting and not marked for deletion.
    running: i64,
    /// Marked for deletion (or queued for disruption), not yet deleting.
    pending_disruption: i64,
    /// Every node of the pool, deleting ones included: what counts against `limits.nodes`.
    total: i64,
}

impl PoolCounts {
    fn of(snapshot: &Snapshot, pool_name: &str) -> Self {
        let mut counts = PoolCounts::default();
        for node in snapshot
            .nodes
            .iter()
            .filter(|n| n.managed() && n.node_pool() == Some(pool_name))
        {
            counts.total += 1;
            if node.deleting {
                continue;
            }
            if node.marked_for_deletion || node.queued {
                counts.pending_disruption += 1;
            } else {
                counts.running += 1;
            }
        }
        counts
    }
}

/// `limits.nodes`, when set and a whole number.
fn node_limit(node_pool: &NodePool) -> Option<i64> {
    let quantity = node_pool.spec.limits.as_ref()?.get("nodes")?;
    quantity.0.trim().parse::<i64>().ok()
}

/// A NodeClaim from the pool's template alone (upstream `NewNodeClaimTemplate`): the pool's
/// requirements, labels and taints, every instance type of the pool that carries its
/// DaemonSets, cheapest first. Found by asking the solver to place one pod that requests
/// nothing and tolerates everything on this pool only; the pod is then dropped.
fn template_claim(snapshot: &Snapshot, node_pool: &NodePool) -> Result<NewNodeClaim, Reason> {
    let name = pool::name(node_pool).to_owned();
    let converted = karpenter_scheduling::v1::node_pool(node_pool)
        .map_err(|e| Reason::new(Code::NodePoolInvalid, e.to_string()))?;
    let probe = Pod {
        metadata: ObjectMeta {
            name: Some(format!("static-drift-template-{name}")),
            namespace: Some("default".to_owned()),
            uid: Some(format!("static-drift-template-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    let input = SolveInput {
        node_pools: vec![converted],
        instance_types: BTreeMap::from([(name.clone(), snapshot.catalog(&name).to_vec())]).into(),
        daemonsets: snapshot.daemonsets.clone(),
        pods: vec![Arc::new(probe.into())],
        options: snapshot.solve_options.clone(),
        ..Default::default()
    };
    let mut claim = karpenter_scheduling::solve(&input)
        .new_node_claims
        .into_iter()
        .next()
        .ok_or_else(|| {
            Reason::new(
                Code::StaticPoolNoInstanceType,
                format!("no instance type of static nodepool {name} fits its template"),
            )
        })?;
    claim.pods.clear();
    Ok(claim)
}
