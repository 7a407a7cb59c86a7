//! The `Consolidatable` condition (upstream `nodeclaim/disruption/consolidation.go`): a node
//! may be consolidated once `consolidateAfter` has passed since its last pod event (or, if no
//! pod ever came or went, since it initialized). `Never` disables consolidation.

use chrono::{DateTime, Utc};
use karpenter_api::v1::NodePool;

use crate::pool;
use crate::snapshot::NodeState;
use crate::time_fmt::hms;

/// `Ok` when the node is consolidatable at `now`, else why not.
pub fn consolidatable(node: &NodeState, pool: &NodePool, now: DateTime<Utc>) -> Result<(), String> {
    let Some(after) = pool::consolidate_after(pool) else {
        return Err(format!(
            "nodepool {} has consolidateAfter: Never",
            pool::name(pool)
        ));
    };
    if !node.initialized {
        return Err("node is not initialized".to_owned());
    }
    let (base, what) = match (node.last_pod_event, node.initialized_at) {
        (Some(t), _) => (t, "last pod event"),
        (None, Some(t)) => (t, "initialization"),
        (None, None) => return Ok(()),
    };
    let Ok(after) = chrono::Duration::from_std(after) else {
        return Err("consolidateAfter is too long".to_owned());
    };
    let at = base + after;
    if now >= at {
        Ok(())
    } else {
        Err(format!(
            "not consolidatable until {} (consolidateAfter {} after {what})",
            hms(at),
            pool.spec.disruption.consolidate_after
        ))
    }
}
