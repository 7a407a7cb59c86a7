//! The disruption pass of the timeline: the simulated cluster as a
//! [`karpenter_disruption::Snapshot`], decided by [`karpenter_disruption::decide`].
//!
//! Simplifications, all on the side of fewer disruptions: no PodDisruptionBudgets (the loader
//! reads them for `explain -f`; the timeline does not use them), no expiry (`expireAfter` is not set on simulated nodes), and passes run only
//! for a while after the cluster changes ([`QUIET_AFTER`] plus the longest `consolidateAfter`),
//! so budget windows that open later on a quiet cluster are not noticed. Commands execute as
//! upstream's orchestration queue does (see `Runner::disruption_pass`): candidates tainted,
//! replacements launched, candidates deleted once the replacements are ready; a candidate being
//! disrupted is marked for deletion in the snapshot, so it consumes its pool's budget.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::Pod;
use karpenter_disruption::{NodeState, Snapshot};

use crate::scenario::Scenario;

/// How long passes keep running after a change, beyond the longest `consolidateAfter`.
pub const QUIET_AFTER: Duration = Duration::from_secs(60);

/// What the report says about disruption.
pub const NOTE: &str = "disruption runs every 10s through karpenter_disruption::decide (emptiness, drift, consolidation); graceful commands are validated after 15s (no pass decides meanwhile), candidates go once their replacements are ready; PDBs and expiry are not simulated";

/// The virtual clock as a timestamp: 2026-01-01T00:00:00Z plus `at`.
pub fn instant(at: Duration) -> DateTime<Utc> {
    let epoch = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
    epoch + chrono::Duration::from_std(at).unwrap_or_default()
}

/// The cluster as disruption sees it: `nodes` from the cluster-state index (in launch order,
/// with their prices), the pending pods and the scenario's NodePools and DaemonSets.
pub fn snapshot(scenario: &Scenario, nodes: Vec<NodeState>, pending: Vec<Pod>) -> Snapshot {
    Snapshot {
        node_pools: scenario.node_pools.clone(),
        instance_types: scenario
            .pool_types
            .iter()
            .map(|(name, types)| (name.clone(), types.scheduling.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into(),
        nodes,
        pdbs: Default::default(),
        pending_pods: pending.into_iter().map(|p| Arc::new(p.into())).collect(),
        daemonsets: scenario.daemonsets.clone(),
        features: Default::default(),
        solve_options: Default::default(),
        repair: None,
        buffer_nodes: Default::default(),
    }
}
