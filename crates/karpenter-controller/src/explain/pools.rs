//! The NodePool answers, from a disruption pass's snapshot and its budget maps (values in,
//! values out).

use karpenter_disruption::{BudgetMap, Snapshot};

use super::model::{BudgetAnswer, ConditionAnswer, LimitAnswer, NodeCounts, NodePoolAnswer};

/// One answer per NodePool of `snapshot`; `decided_at` RFC 3339.
pub fn node_pools(
    snapshot: &Snapshot,
    maps: &[BudgetMap],
    decided_at: &str,
) -> Vec<NodePoolAnswer> {
    snapshot
        .node_pools
        .iter()
        .filter_map(|pool| {
            let name = pool.metadata.name.clone()?;
            let mut conditions: Vec<ConditionAnswer> = pool
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .map(|c| ConditionAnswer {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect();
            conditions.sort_by_key(|c| (c.type_ != "Ready", c.type_.clone()));
            let used = pool.status.as_ref().and_then(|s| s.resources.as_ref());
            let limits = pool
                .spec
                .limits
                .iter()
                .flatten()
                .map(|(resource, limit)| LimitAnswer {
                    resource: resource.clone(),
                    used: used
                        .and_then(|u| u.get(resource))
                        .map(|q| q.0.clone())
                        .unwrap_or_default(),
                    limit: limit.0.clone(),
                })
                .collect();
            let budgets = maps
                .iter()
                .filter_map(|map| {
                    let a = map.pools.get(&name)?;
                    Some(BudgetAnswer {
                        reason: map.reason.as_str().to_owned(),
                        allowed: a.allowed,
                        budget: a.budget,
                        disrupting: a.disrupting,
                        explanation: a.explanation.clone(),
                        opens_at: a.opens_at.map(super::rfc3339),
                    })
                })
                .collect();
            let mut nodes = NodeCounts::default();
            for node in snapshot
                .nodes
                .iter()
                .filter(|n| n.node_pool() == Some(name.as_str()))
            {
                nodes.total += 1;
                nodes.initialized += u32::from(node.initialized);
                nodes.not_ready += u32::from(!node.ready);
                nodes.deleting += u32::from(node.marked_for_deletion || node.deleting);
                nodes.drifted += u32::from(node.drifted.is_some());
            }
            Some(NodePoolAnswer {
                node_pool: name,
                decided_at: decided_at.to_owned(),
                conditions,
                limits,
                budgets,
                nodes,
            })
        })
        .collect()
}
