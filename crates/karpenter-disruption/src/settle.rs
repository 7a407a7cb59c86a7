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

use std::time::Duration;

use karpenter_scheduling::capacity_buffer::is_virtual;

use crate::snapshot::Snapshot;

/// A pass waits at most this long after a deletion for its pods to land.
pub const SETTLE_AT_MOST: Duration = Duration::from_secs(10);

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
