//! The NodeClaim disruption conditions (upstream `nodeclaim/disruption`): what `Drifted` and
//! `Consolidatable` should say for each managed node of a snapshot. The controller writes them
//! on the NodeClaims, so `kubectl get nodeclaims` shows the same facts [`crate::decide`] acts
//! on.
//!
//! - `Drifted`: NodePool hash, requirements, instance type gone, in upstream order
//!   ([`crate::detect_drift`]), re-detected on every call (a condition written earlier does not
//!   keep itself alive); provider drift is the caller's to add. Not launched: cleared.
//! - `Consolidatable`: true once `consolidateAfter` has passed since the last pod event (or
//!   initialization); absent otherwise, and on static NodePools.

use chrono::{DateTime, Utc};

use crate::consolidatable::consolidatable;
use crate::drift_detect::drift;
use crate::pool;
use crate::snapshot::{DriftMark, Snapshot};

/// What one NodeClaim's disruption conditions should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConditions {
    pub node_claim: String,
    /// `Drifted=True` with this reason, or no `Drifted` condition.
    pub drifted: Option<DriftMark>,
    /// `Consolidatable=True`, or no `Consolidatable` condition.
    pub consolidatable: bool,
}

/// The conditions of every managed node's NodeClaim whose NodePool is in the snapshot.
pub fn claim_conditions(snapshot: &Snapshot, now: DateTime<Utc>) -> Vec<ClaimConditions> {
    snapshot
        .nodes
        .iter()
        .filter(|n| !n.deleting)
        .filter_map(|node| {
            let node_claim = node.node_claim.clone()?;
            let pool = snapshot.node_pool(node.node_pool()?)?;
            let mut fresh = node.clone();
            fresh.drifted = None;
            Some(ClaimConditions {
                node_claim,
                drifted: drift(snapshot, &fresh, now),
                consolidatable: !pool::is_static(pool) && consolidatable(node, pool, now).is_ok(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{managed, now, pool_with};
    use karpenter_api::labels;

    fn snapshot(nodes: Vec<crate::NodeState>) -> Snapshot {
        Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"consolidateAfter": "30s"}),
            )],
            nodes,
            ..Snapshot::default()
        }
    }

    fn hashed(mut node: crate::NodeState, hash: &str, version: &str) -> crate::NodeState {
        node.annotations
            .insert(labels::NODEPOOL_HASH.into(), hash.into());
        node.annotations
            .insert(labels::NODEPOOL_HASH_VERSION.into(), version.into());
        node
    }

    fn with_pool_hash(mut s: Snapshot, hash: &str, version: &str) -> Snapshot {
        s.node_pools[0].metadata.annotations = Some(
            [
                (labels::NODEPOOL_HASH.to_owned(), hash.to_owned()),
                (labels::NODEPOOL_HASH_VERSION.to_owned(), version.to_owned()),
            ]
            .into(),
        );
        s
    }

    #[test]
    fn a_node_quiet_for_consolidate_after_is_consolidatable_and_a_busy_one_is_not() {
        let quiet = managed("quiet", "general");
        let mut busy = managed("busy", "general");
        busy.last_pod_event = Some(now() - chrono::Duration::seconds(10));
        let got = claim_conditions(&snapshot(vec![quiet, busy]), now());
        assert_eq!(got.len(), 2);
        assert!(got[0].consolidatable, "{got:?}");
        assert!(!got[1].consolidatable, "{got:?}");
        assert!(got.iter().all(|c| c.drifted.is_none()));
    }

    #[test]
    fn a_changed_template_drifts_only_nodes_stamped_with_the_same_hash_version() {
        let ours = hashed(managed("ours", "general"), "1", "rs1");
        let upstreams = hashed(managed("upstream", "general"), "99", "v3");
        let current = hashed(managed("current", "general"), "2", "rs1");
        let s = with_pool_hash(snapshot(vec![ours, upstreams, current]), "2", "rs1");
        let got = claim_conditions(&s, now());
        let drifted: Vec<(&str, Option<&str>)> = got
            .iter()
            .map(|c| {
                (
                    c.node_claim.as_str(),
                    c.drifted.as_ref().map(|d| d.reason.as_str()),
                )
            })
            .collect();
        assert_eq!(
            drifted,
            [
                ("ours-claim", Some("NodePoolDrifted")),
                ("upstream-claim", None),
                ("current-claim", None)
            ]
        );
    }

    #[test]
    fn drift_is_detected_afresh_so_a_stale_condition_clears() {
        let mut node = hashed(managed("n", "general"), "2", "rs1");
        node.drifted = Some(DriftMark {
            reason: "NodePoolDrifted".into(),
            since: now(),
        });
        let s = with_pool_hash(snapshot(vec![node]), "2", "rs1");
        assert_eq!(claim_conditions(&s, now())[0].drifted, None);
    }

    #[test]
    fn an_instance_type_gone_from_a_known_catalog_drifts_but_an_unknown_catalog_does_not() {
        let mut node = managed("n", "general");
        node.labels
            .insert(labels::INSTANCE_TYPE.into(), "m5.large".into());
        let mut s = snapshot(vec![node]);
        assert_eq!(
            claim_conditions(&s, now())[0].drifted,
            None,
            "catalog unknown"
        );
        let other = karpenter_scheduling::fixtures::fake_instance_types(1);
        std::sync::Arc::make_mut(&mut s.instance_types).insert("general".into(), other);
        assert_eq!(
            claim_conditions(&s, now())[0]
                .drifted
                .as_ref()
                .map(|d| d.reason.as_str()),
            Some("InstanceTypeNotFound")
        );
    }

    #[test]
    fn nodes_without_a_claim_or_pool_and_deleting_nodes_get_nothing() {
        let mut unmanaged = managed("u", "general");
        unmanaged.node_claim = None;
        let orphan = managed("o", "gone");
        let mut deleting = managed("d", "general");
        deleting.deleting = true;
        assert!(claim_conditions(&snapshot(vec![unmanaged, orphan, deleting]), now()).is_empty());
    }
}
