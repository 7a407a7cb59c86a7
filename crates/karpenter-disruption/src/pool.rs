//! NodePool facts disruption needs: whether it is static and its consolidation settings. The
//! scheduling view of a NodePool comes from the workspace's one conversion,
//! [`karpenter_scheduling::v1::node_pool`].

use std::time::Duration;

use karpenter_api::v1::{ConsolidationPolicy, NodePool};

pub fn name(pool: &NodePool) -> &str {
    pool.metadata.name.as_deref().unwrap_or_default()
}

/// Static pools (`spec.replicas` set) are never consolidated.
pub fn is_static(pool: &NodePool) -> bool {
    karpenter_scheduling::v1::is_static(pool)
}

/// `consolidateAfter` (`None` = Never).
pub fn consolidate_after(pool: &NodePool) -> Option<Duration> {
    pool.spec.disruption.consolidate_after.duration()
}

pub fn policy(pool: &NodePool) -> ConsolidationPolicy {
    pool.spec.disruption.consolidation_policy
}

/// The pool's status says it is not `Ready` (a `Ready` condition that is not `True`); a pool
/// without one (a manifest read offline) is not reported so.
pub fn reported_not_ready(pool: &NodePool) -> bool {
    karpenter_api::conditions::get(
        pool.status.as_ref().and_then(|s| s.conditions.as_deref()),
        karpenter_api::v1::nodepool::conditions::READY,
    )
    .is_some_and(|c| c.status != "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(status: serde_json::Value) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                "requirements": []}}},
            "status": status
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn ready(status: &str) -> serde_json::Value {
        serde_json::json!({"conditions": [{"type": "Ready", "status": status, "reason": "r",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    }

    #[test]
    fn only_a_ready_condition_that_is_not_true_reports_a_pool_not_ready() {
        assert!(reported_not_ready(&pool(ready("False"))));
        assert!(reported_not_ready(&pool(ready("Unknown"))));
        assert!(!reported_not_ready(&pool(ready("True"))));
        assert!(!reported_not_ready(&pool(serde_json::json!({}))));
    }
}
