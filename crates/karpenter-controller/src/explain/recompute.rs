//! The answers recomputed from an index, without acting: one provisioning solve and one
//! disruption pass over a [`Cluster`] at `now`, through the same functions the loops call
//! (the provisioner's [`batch_pods`] and [`launchable_pools`], [`Cluster::solve_input`],
//! [`karpenter_scheduling::solve`]; the disruption loop's [`snapshot_of`],
//! [`BudgetMap::for_pass`] and [`karpenter_disruption::decide`]), fed into an
//! [`Explanations`] as the loops feed theirs. `karpenter explain -f` answers from it offline.
//!
//! What the loops do around a decision and this does not: default spread constraints from
//! `SCHEDULER_CONFIG` (their selectors are looked up in the API server), node repair (the
//! cloud's policies), the NodePool limit check at NodeClaim creation, and the orchestration
//! queue (no command is held: the pass decides as if none were).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use karpenter_disruption::{BudgetMap, Snapshot};
use karpenter_scheduling::PoolInstanceTypes;
use karpenter_state::Cluster;

use super::{Explanations, node_pools, rfc3339};
use crate::controllers::disruption::snapshot_of;
use crate::controllers::provisioner::{batch_pods, dra_ignored, launchable_pools, solve_options};
use crate::settings::Settings;

/// The recomputed answers and the pass's snapshot (for removal simulations).
#[derive(Debug)]
pub struct Recomputed {
    pub explanations: Explanations,
    pub snapshot: Snapshot,
}

/// One batch and one disruption pass over `cluster` at `now`. `pools` are the solver's
/// NodePools and `instance_types` their instance types by NodePool name (the controller's
/// catalogs, or `simulate`'s).
pub fn recompute(
    cluster: &Cluster,
    pools: &[karpenter_scheduling::NodePool],
    instance_types: &PoolInstanceTypes,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Recomputed {
    let explanations = Explanations::default();
    let (launchable, not_ready) = launchable_pools(cluster);
    let solver_pools = pools
        .iter()
        .filter(|p| launchable.contains(&p.name))
        .cloned()
        .collect();
    let (dra, pods) = batch_pods(cluster, settings);
    let input = cluster.solve_input(
        pods,
        solver_pools,
        instance_types.clone(),
        solve_options(settings),
    );
    let result = if input.pods.is_empty() {
        Default::default()
    } else {
        karpenter_scheduling::solve(&input)
    };
    explanations.batch_decided(now, &result, &not_ready, &dra_ignored(&dra));
    explanations.closest_types(&input.pods, instance_types);
    let snapshot = snapshot_of(
        cluster,
        settings,
        instance_types.clone(),
        &BTreeSet::new(),
        now,
    );
    let maps = BudgetMap::for_pass(&snapshot, now);
    explanations.node_pools_observed(node_pools(&snapshot, &maps, &rfc3339(now)));
    let decision = karpenter_disruption::decide(&snapshot, now);
    explanations.disruption_decided(now, &decision);
    Recomputed {
        explanations,
        snapshot,
    }
}
