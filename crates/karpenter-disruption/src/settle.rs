//! Whether the pods a started deletion moves are still in flight, so that the next pass
//! decides on where they landed rather than on where a simulation would put them.
//!
//! A pass that runs while a command's nodes drain simulates their pods as pending and packs
//! them; kube-scheduler spreads them instead, so the commands that pass decides around them
//! are often dropped at validation 15 s later (seen on upstream's performance-suite case: each
//! pass decided 0.1-0.3 s after a deletion, and three of its eight commands were dropped, each
//! costing a pass and a validation hold, ~25 s). The controller defers the pass after a
//! deletion until [`pods_in_flight`] is zero, at most [`SETTLE_AT_MOST`] (a pod that stays
//! pending does not stop disruption).
//!
//! A scale-down also ripens: its nodes become consolidatable one after another, each
//! `consolidateAfter` after its own last pod event, over as long as the pods took to go. A
//! pass in the middle of that decides on the nodes ripe so far, and the pods it moves land
//! (kube-scheduler's `LeastAllocated`) on the emptiest nodes, the very ones about to ripen:
//! seen on upstream's performance-suite case, a pass 6 s before 13 empty nodes became
//! consolidatable deleted 3 nodes whose pods then landed on those empty nodes, which were
//! no longer empty; the scale-down went on for 205 s in a cascade of commands, each moving
//! pods onto nodes a later one removed (189 evictions, against 54 for upstream's, which
//! happened to pass after the empty nodes ripened). [`ripening`] says when the next node
//! ripens, if within [`RIPENING`] (15 s, the validation hold); the controller holds the
//! pass's emptiness and consolidation commands ([`waits_for_ripening`]) until none is, at most
//! [`RIPEN_AT_MOST`], so they are decided on the whole scale-down at once (drift, repair and
//! expiration do not wait).

use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_scheduling::capacity_buffer::is_virtual;

use crate::consolidatable::consolidatable;
use crate::pool;
use crate::reason::Code;
use crate::snapshot::Snapshot;

/// A pass waits at most this long after a deletion for its pods to land.
pub const SETTLE_AT_MOST: Duration = Duration::from_secs(10);
/// A pass defers while a node becomes consolidatable within this long ([`ripening`]): the
/// validation hold of a command decided now ([`crate::queue::VALIDATION_DELAY`]), during which
/// no pass decides, so a node ripening within it waits no longer for the deferral, and the
/// pass decides with it.
pub const RIPENING: Duration = crate::queue::VALIDATION_DELAY;
/// ... and at most this long in all, so consolidation in a cluster whose nodes keep ripening
/// is decided at least this often. Longer than the ripening window itself: a node's ripening
/// moves back when another of its pods comes or goes (a scale-down's pods are deleted, then
/// gone seconds later), and a 20 s bound ran out 2-6 s before 37 empty nodes ripened, which
/// then waited a validation hold more.
pub const RIPEN_AT_MOST: Duration = Duration::from_secs(30);

/// Whether a command of `method` waits while nodes ripen: emptiness and consolidation, which
/// a ripening node would join; drift, static drift and repair do not wait.
pub fn waits_for_ripening(method: crate::command::Method) -> bool {
    use crate::command::Method;
    matches!(
        method,
        Method::Emptiness | Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
    )
}

/// The soonest time after `now`, within [`RIPENING`], at which a node of a pool that
/// consolidates becomes consolidatable (`consolidateAfter` passed since its last pod event);
/// `None` when no node is that close.
pub fn ripening(snapshot: &Snapshot, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let horizon = now + chrono::Duration::from_std(RIPENING).ok()?;
    snapshot
        .nodes
        .iter()
        .filter(|n| !n.deleting && !n.marked_for_deletion && n.initialized)
        .filter_map(|n| {
            let p = snapshot.node_pool(n.node_pool()?)?;
            if pool::is_static(p) {
                return None;
            }
            let why = consolidatable(n, p, now).err()?;
            let at = why
                .lifts
                .filter(|_| why.code == Code::NotConsolidatable)?
                .at;
            (at > now && at <= horizon).then_some(at)
        })
        .min()
}

/// Pods still moving: reschedulable pods not yet terminating on nodes being deleted (or marked
/// for deletion), and pods waiting for capacity (CapacityBuffer headroom is not a pod).
pub fn pods_in_flight(snapshot: &Snapshot) -> usize {
    let leaving = snapshot
        .nodes
        .iter()
        .filter(|n| n.deleting || n.marked_for_deletion)
        .flat_map(|n| n.pods.iter())
        .filter(|p| p.is_reschedulable() && !p.is_terminating())
        .count();
    let waiting = snapshot
        .pending_pods
        .iter()
        .filter(|p| !is_virtual(p))
        .count();
    leaving + waiting
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::NodeState;
    use chrono::{DateTime, Utc};
    use karpenter_scheduling::PodRecord;
    use karpenter_scheduling::builders::PodBuilder;
    use std::sync::Arc;

    fn at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    fn pod(name: &str) -> Arc<PodRecord> {
        Arc::new(
            PodBuilder::new(name)
                .owned_by("ReplicaSet", "web")
                .phase("Running")
                .build()
                .into(),
        )
    }

    fn terminating(name: &str) -> Arc<PodRecord> {
        let mut p = PodRecord::clone(&pod(name));
        p.metadata.deletion_timestamp =
            serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).ok();
        assert!(p.is_terminating());
        Arc::new(p)
    }

    fn node(name: &str, deleting: bool, pods: Vec<Arc<PodRecord>>) -> NodeState {
        let mut n = NodeState::new(name, at());
        n.deleting = deleting;
        n.pods = pods;
        n
    }

    #[test]
    fn a_pass_waits_for_the_nodes_that_become_consolidatable_within_its_validation_hold() {
        use crate::testing::{managed, pool_with};
        let pool = pool_with("default", serde_json::json!({"consolidateAfter": "30s"}));
        let idle_since = |seconds_ago: i64| {
            let mut n = managed("n", "default");
            n.initialized = true;
            n.last_pod_event = Some(at() - chrono::Duration::seconds(seconds_ago));
            n
        };
        let mut snapshot = Snapshot {
            // Ripe already; ripens in 6 s; in 25 s.
            nodes: vec![idle_since(40), idle_since(24), idle_since(5)],
            node_pools: vec![pool],
            ..Snapshot::default()
        };
        assert_eq!(
            ripening(&snapshot, at()),
            Some(at() + chrono::Duration::seconds(6))
        );
        // Once it has ripened, the next is 19 s away, past the 15 s: nothing to wait for.
        let later = at() + chrono::Duration::seconds(6);
        assert_eq!(ripening(&snapshot, later), None);
        // A node being deleted, or of a pool that never consolidates, is not waited for.
        snapshot.nodes[1].deleting = true;
        assert_eq!(ripening(&snapshot, at()), None);
        snapshot.nodes[1].deleting = false;
        snapshot.node_pools[0] =
            pool_with("default", serde_json::json!({"consolidateAfter": "Never"}));
        assert_eq!(ripening(&snapshot, at()), None);
    }

    #[test]
    fn pods_on_deleting_nodes_and_pending_pods_are_in_flight_until_they_land() {
        let mut snapshot = Snapshot {
            nodes: vec![
                node("staying", false, vec![pod("a")]),
                node("draining", true, vec![pod("b"), terminating("c")]),
            ],
            pending_pods: vec![pod("d")],
            ..Snapshot::default()
        };
        // b on the draining node and the pending d; c's replacement exists already.
        assert_eq!(pods_in_flight(&snapshot), 2);
        snapshot.nodes[1].pods = vec![terminating("b"), terminating("c")];
        snapshot.pending_pods.clear();
        assert_eq!(pods_in_flight(&snapshot), 0);
        // A node marked for deletion (its command started) counts before it is deleting.
        snapshot.nodes[0].marked_for_deletion = true;
        assert_eq!(pods_in_flight(&snapshot), 1);
    }
}
