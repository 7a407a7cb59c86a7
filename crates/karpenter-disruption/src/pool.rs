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
