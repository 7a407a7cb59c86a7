//! Helpers for this crate's unit tests: a fixed `now`, NodePools from a disruption block, and
//! managed nodes.

use chrono::{DateTime, TimeZone, Utc};
use karpenter_api::labels as l;
use karpenter_api::v1::NodePool;

use crate::snapshot::NodeState;

/// A Monday, 10:00 UTC.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 10, 0, 0)
        .single()
        .expect("valid time")
}

/// A NodePool with default disruption settings.
pub fn pool(name: &str) -> NodePool {
    pool_with(name, serde_json::json!({}))
}

/// A NodePool with this `spec.disruption`.
pub fn pool_with(name: &str, disruption: serde_json::Value) -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "disruption": disruption,
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }}
        }
    }))
    .expect("valid NodePool")
}

/// An initialized node of `pool` with a NodeClaim, created two hours before [`now`].
pub fn managed(name: &str, pool: &str) -> NodeState {
    let mut node = NodeState::new(name, now() - chrono::Duration::hours(2));
    node.node_claim = Some(format!("{name}-claim"));
    node.labels.insert(l::NODEPOOL.into(), pool.into());
    node
}
