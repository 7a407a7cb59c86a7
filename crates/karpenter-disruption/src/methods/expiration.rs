//! Expiration (upstream `nodeclaim/expiration`): a NodeClaim is deleted at `creation +
//! expireAfter`. It is forceful: budgets, do-not-disrupt and PDBs do not stop it (the drain
//! still respects PDBs until the termination grace period ends). It runs outside `decide`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::snapshot::Snapshot;

/// A NodeClaim to delete because it expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expired {
    pub node: String,
    pub node_claim: String,
    pub reason: String,
}

/// Every managed, not-yet-deleting node whose NodeClaim has expired at `now`.
pub fn expired(snapshot: &Snapshot, now: DateTime<Utc>) -> Vec<Expired> {
    snapshot
        .nodes
        .iter()
        .filter(|n| !n.deleting)
        .filter_map(|n| {
            let claim = n.node_claim.as_ref()?;
            let after = chrono::Duration::from_std(n.expire_after?).ok()?;
            let at = n.created + after;
            (now >= at).then(|| Expired {
                node: n.name.clone(),
                node_claim: claim.clone(),
                reason: format!(
                    "expired at {} (expireAfter {}h after creation); forceful: budgets do not apply",
                    at.format("%Y-%m-%dT%H:%M:%SZ"),
                    after.num_minutes() as f64 / 60.0
                ),
            })
        })
        .collect()
}
