//! The `Consolidatable` condition (upstream `nodeclaim/disruption/consolidation.go`): a node
//! may be consolidated once `consolidateAfter` has passed since its last pod event (or, if no
//! pod ever came or went, since it initialized). `Never` disables consolidation. A node still
//! waiting is told when it becomes consolidatable and how long that is ([`Reason::lifts`]).

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
        // The sentence stays the same from pass to pass (events repeat it); how long remains
        // is the reason's `lifts`.
        Err(Reason::new(
            Code::NotConsolidatable,
            format!(
                "not consolidatable until {} (consolidateAfter {} after {what})",
                hms(at),
                pool.spec.disruption.consolidate_after
            ),
        )
        .lifting_at(at, now))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::{managed, now, pool_with};

    fn waiting_node(last_pod_event_ago: i64) -> NodeState {
        let mut node = managed("n1", "default");
        node.initialized = true;
        node.initialized_at = Some(now() - chrono::Duration::hours(2));
        node.last_pod_event = Some(now() - chrono::Duration::minutes(last_pod_event_ago));
        node
    }

    #[test]
    fn a_node_waiting_for_consolidate_after_is_told_when_and_how_long_remains() {
        let pool = pool_with("default", serde_json::json!({"consolidateAfter": "30m"}));
        let why = consolidatable(&waiting_node(10), &pool, now())
            .expect_err("10 of the 30 minutes have passed");
        assert_eq!(why.code, Code::NotConsolidatable);
        assert_eq!(
            why.text,
            "not consolidatable until 10:20:00 UTC (consolidateAfter 30m after last pod event)"
        );
        let lifts = why.lifts.expect("the wait ends by itself");
        assert_eq!(lifts.at, now() + chrono::Duration::minutes(20));
        assert_eq!(lifts.remaining, Duration::from_secs(20 * 60));
        assert_eq!(
            serde_json::to_value(&why).ok(),
            Some(serde_json::json!({
                "code": "NotConsolidatable",
                "text": why.text,
                "lifts": {"at": "2026-11-23T10:20:00Z", "remaining": "20m"}
            }))
        );
    }

    #[test]
    fn a_node_past_consolidate_after_is_consolidatable_and_never_is_told_without_a_time() {
        let pool = pool_with("default", serde_json::json!({"consolidateAfter": "30m"}));
        assert_eq!(consolidatable(&waiting_node(45), &pool, now()), Ok(()));
        let never = pool_with("default", serde_json::json!({"consolidateAfter": "Never"}));
        let why = consolidatable(&waiting_node(45), &never, now()).expect_err("Never");
        assert_eq!(why.code, Code::ConsolidationDisabled);
        assert_eq!(why.lifts, None, "Never does not pass with time");
    }
}
