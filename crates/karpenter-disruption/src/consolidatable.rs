//! The `Consolidatable` condition (upstream `nodeclaim/disruption/consolidation.go`): a node
//! may be consolidated once `consolidateAfter` has passed since its last pod event (or, if no
//! pod ever came or went, since it initialized). `Never` disables consolidation.

use chrono::{DateTime, Utc};
use karpenter_api::v1::NodePool;

use crate::pool;
use crate::reason::{Code, Reason};
use crate::snapshot::NodeState;
use crate::time_fmt::hms;

/// `Ok` when the node is consolidatable at `now`, else why not.
pub fn consolidatable(node: &NodeState, pool: &NodePool, now: DateTime<Utc>) -> Result<(), Reason> {
    let Some(after) = pool::consolidate_after(pool) else {
        return Err(Reason::new(
            Code::ConsolidationDisabled,
            format!("nodepool {} has consolidateAfter: Never", pool::name(pool)),
        ));
    };
    if !node.initialized {
        return Err(Reason::new(Code::NotInitialized, "node is not initialized"));
    }
    let (base, what) = match (node.last_pod_event, node.initialized_at) {
        (Some(t), _) => (t, "last pod event"),
        (None, Some(t)) => (t, "initialization"),
        (None, None) => return Ok(()),
    };
    let Ok(after) = chrono::Duration::from_std(after) else {
        // The wait never ends in representable time.
        return Err(Reason::new(
            Code::NotConsolidatable,
            "consolidateAfter is too long",
        ));
    };
    let at = base + after;
    if now >= at {
        Ok(())
    } else {
        Err(Reason::new(
            Code::NotConsolidatable,
            format!(
                "not consolidatable until {} (consolidateAfter {} after {what})",
                hms(at),
                pool.spec.disruption.consolidate_after
            ),
        ))
    }
}
