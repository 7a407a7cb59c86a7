//! Drift detection (upstream `nodeclaim/disruption/drift.go`), for snapshots whose nodes do not
//! carry a `Drifted` condition already. Reasons in upstream order: `NodePoolDrifted` (the
//! nodepool-hash annotation differs and the hash versions agree), `RequirementsDrifted` (a node
//! label the NodePool constrains no longer satisfies the requirement), `InstanceTypeNotFound`
//! (checked once the node is over an hour old, and only when the pool's catalog is known). Provider drift arrives as `NodeState::drifted`.

use chrono::{DateTime, Utc};
use karpenter_api::labels::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
use karpenter_api::v1::common::Operator;

use crate::snapshot::{DriftMark, NodeState, Snapshot};

/// The node's drift, if any; newly detected drift is dated `now`.
pub fn drift(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> Option<DriftMark> {
    if let Some(mark) = &node.drifted {
        return Some(mark.clone());
    }
    let pool = snapshot.node_pool(node.node_pool()?)?;
    let mark = |reason: &str| {
        Some(DriftMark {
            reason: reason.to_owned(),
            since: now,
        })
    };
    let pool_ann = pool.metadata.annotations.as_ref();
    let pool_hash = pool_ann.and_then(|a| a.get(NODEPOOL_HASH));
    let pool_version = pool_ann.and_then(|a| a.get(NODEPOOL_HASH_VERSION));
    let node_hash = node.annotations.get(NODEPOOL_HASH);
    let node_version = node.annotations.get(NODEPOOL_HASH_VERSION);
    if let (Some(p), Some(n)) = (pool_hash, node_hash)
        && p != n
        && pool_version == node_version
    {
        return mark("NodePoolDrifted");
    }
    for req in &pool.spec.template.spec.requirements {
        let Some(value) = node.labels.get(&req.key) else {
            continue;
        };
        let ok = match req.operator {
            Operator::In => req.values.contains(value),
            Operator::NotIn => !req.values.contains(value),
            Operator::Exists => true,
            Operator::DoesNotExist => false,
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let (Ok(v), Some(Ok(bound))) = (
                    value.parse::<i64>(),
                    req.values.first().map(|b| b.parse::<i64>()),
                ) else {
                    continue;
                };
                match req.operator {
                    Operator::Gt => v > bound,
                    Operator::Lt => v < bound,
                    Operator::Gte => v >= bound,
                    _ => v <= bound,
                }
            }
        };
        if !ok {
            return mark("RequirementsDrifted");
        }
    }
    // An empty catalog means the pool's instance types are unknown (the provider failed to
    // list them), not that every type is gone: no drift from that.
    let old_enough = now - node.created > chrono::Duration::hours(1);
    if old_enough
        && !snapshot.catalog(node.node_pool()?).is_empty()
        && let Some(it) = node.instance_type()
        && snapshot.instance_type(node.node_pool()?, it).is_none()
    {
        return mark("InstanceTypeNotFound");
    }
    None
}
