//! Per-NodePool allowances for one disruption reason (upstream `BuildDisruptionBudgetMapping`),
//! decremented as a method takes candidates.
//!
//! A pool's size counts managed, initialized nodes whose instance is not terminating yet; those
//! that are NotReady (except for `Unhealthy`), marked for deletion or draining are already disrupting and consume the
//! budget. When a pool has nothing left, [`BudgetMap::why_not`] says which budget binds and
//! until when.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use karpenter_api::v1::DisruptionReason;

use crate::budgets::budget::{allowed_disruptions, budget_limit};
use crate::budgets::window::next_opening;
use crate::reason::{Code, Reason};
use crate::snapshot::Snapshot;
use crate::time_fmt::hm_relative;

/// One pool's allowance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAllowance {
    pub allowed: u32,
    /// The allowance before this pass took any.
    pub initial: u32,
    /// What the active budgets allow before the nodes already disrupting are subtracted
    /// (`karpenter_nodepools_allowed_disruptions`).
    pub budget: u32,
    pub num_nodes: u32,
    pub disrupting: u32,
    /// Why the allowance is what it is.
    pub explanation: String,
    /// When the budgets next allow a disruption, if they allow none now because of scheduled
    /// windows (`budgets::window::next_opening`).
    pub opens_at: Option<DateTime<Utc>>,
}

/// Allowances for every pool, for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetMap {
    pub reason: DisruptionReason,
    pub pools: BTreeMap<String, PoolAllowance>,
}

impl BudgetMap {
    /// Counts nodes per pool and evaluates the pool's budgets for `reason` at `now`.
    pub fn build(snapshot: &Snapshot, reason: DisruptionReason, now: DateTime<Utc>) -> Self {
        let mut counts: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
        for node in &snapshot.nodes {
            let Some(pool) = node.node_pool() else {
                continue;
            };
            if !node.managed() || !node.initialized || node.instance_terminating {
                continue;
            }
            let entry = counts.entry(pool).or_default();
            entry.0 += 1;
            // A node draining (being deleted) still disrupts until its instance terminates,
            // as upstream counts it (`MarkedForDeletion` includes a deletion timestamp).
            // Not for repair's budget: NotReady is what repair fixes, so counting it would let
            // a wave of unhealthy nodes use up the very budget that repairs them (upstream).
            let not_ready = !node.ready && reason != DisruptionReason::Unhealthy;
            if not_ready || node.marked_for_deletion || node.deleting {
                entry.1 += 1;
            }
        }
        let mut pools = BTreeMap::new();
        for pool in &snapshot.node_pools {
            let Some(name) = pool.metadata.name.as_deref() else {
                continue;
            };
            let (num_nodes, disrupting) = counts.get(name).copied().unwrap_or_default();
            let budgets = &pool.spec.disruption.budgets;
            let allowance = allowed_disruptions(budgets, reason, num_nodes, disrupting, now);
            let budget = allowed_disruptions(budgets, reason, num_nodes, 0, now).allowed;
            let opens_at = if budget == 0 {
                next_opening(budgets, reason, num_nodes, now)
            } else {
                None
            };
            let explanation = if allowance.allowed > 0 {
                allowance.explanation
            } else {
                zero_explanation(
                    pool,
                    reason,
                    num_nodes,
                    disrupting,
                    now,
                    &allowance.explanation,
                )
            };
            pools.insert(
                name.to_owned(),
                PoolAllowance {
                    allowed: allowance.allowed,
                    initial: allowance.allowed,
                    budget,
                    num_nodes,
                    disrupting,
                    explanation,
                    opens_at,
                },
            );
        }
        BudgetMap { reason, pools }
    }

    /// The maps a pass reports, one per reason: `Unhealthy` (only when repair runs, as
    /// upstream builds its mapping only then), `Empty`, `Drifted`, `Underutilized`. What the
    /// controller publishes as `karpenter_nodepools_allowed_disruptions` and `explain nodepool`
    /// answers.
    pub fn for_pass(snapshot: &Snapshot, now: DateTime<Utc>) -> Vec<Self> {
        let repair = snapshot
            .repair
            .is_some()
            .then_some(DisruptionReason::Unhealthy);
        repair
            .into_iter()
            .chain([
                DisruptionReason::Empty,
                DisruptionReason::Drifted,
                DisruptionReason::Underutilized,
            ])
            .map(|reason| Self::build(snapshot, reason, now))
            .collect()
    }

    pub fn allowed(&self, pool: &str) -> u32 {
        self.pools.get(pool).map_or(0, |p| p.allowed)
    }

    /// Takes one disruption from the pool's allowance; false when none is left.
    pub fn take(&mut self, pool: &str) -> bool {
        match self.pools.get_mut(pool) {
            Some(p) if p.allowed > 0 => {
                p.allowed -= 1;
                true
            }
            _ => false,
        }
    }

    /// Why the pool cannot disrupt another node.
    pub fn why_not(&self, pool: &str) -> Reason {
        match self.pools.get(pool) {
            None => Reason::new(
                Code::NodePoolNotFound,
                format!("nodepool {pool} does not exist"),
            ),
            Some(p) if p.allowed == 0 && p.initial > 0 => Reason::new(
                Code::BudgetExhausted,
                format!(
                    "budget for {} in nodepool {pool} is used up by this pass ({} taken: {})",
                    self.reason.as_str(),
                    p.initial,
                    p.explanation
                ),
            ),
            Some(p) => Reason::new(Code::BudgetExhausted, p.explanation.clone()),
        }
    }
}

fn zero_explanation(
    pool: &karpenter_api::v1::NodePool,
    reason: DisruptionReason,
    num_nodes: u32,
    disrupting: u32,
    now: DateTime<Utc>,
    fallback: &str,
) -> String {
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let prefix = format!("budget for {} in nodepool {name}", reason.as_str());
    let binding = pool
        .spec
        .disruption
        .budgets
        .iter()
        .filter(|b| b.reasons.as_ref().is_none_or(|rs| rs.contains(&reason)))
        .map(|b| (b, budget_limit(b, num_nodes, now)))
        .filter(|(_, l)| l.allowed.is_some())
        .min_by_key(|(_, l)| l.allowed);
    match binding {
        Some((budget, limit)) if limit.allowed == Some(0) => {
            match next_opening(&pool.spec.disruption.budgets, reason, num_nodes, now) {
                Some(until) => format!("{prefix} is 0 until {}", hm_relative(now, until)),
                None if limit.explanation.contains("invalid") => {
                    format!("{prefix} is 0: {}", limit.explanation)
                }
                None => format!("{prefix} is 0 (nodes={})", budget.nodes),
            }
        }
        Some((_, limit)) if disrupting > 0 => format!(
            "{prefix} is used up: {disrupting} of {} allowed nodes are already disrupting",
            limit.allowed.unwrap_or(0)
        ),
        _ if num_nodes == 0 => format!("{prefix} is 0: the pool has no initialized nodes"),
        _ => format!("{prefix} is 0 ({fallback})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{managed, now, pool_with};

    fn snapshot(nodes: Vec<crate::NodeState>) -> Snapshot {
        Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"budgets": [{"nodes": "1"}]}),
            )],
            nodes,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_draining_node_uses_the_budget_until_its_instance_terminates() {
        let mut draining = managed("a", "general");
        draining.deleting = true;
        let others = || vec![managed("b", "general"), managed("c", "general")];
        let mut nodes = others();
        nodes.push(draining.clone());
        let map = BudgetMap::build(&snapshot(nodes), DisruptionReason::Drifted, now());
        assert_eq!(map.allowed("general"), 0, "{map:?}");
        assert_eq!(map.pools["general"].disrupting, 1);
        assert_eq!(map.pools["general"].budget, 1, "the budget itself");
        draining.instance_terminating = true;
        let mut nodes = others();
        nodes.push(draining);
        let map = BudgetMap::build(&snapshot(nodes), DisruptionReason::Drifted, now());
        assert_eq!(map.allowed("general"), 1, "{map:?}");
        assert_eq!(map.pools["general"].num_nodes, 2);
    }
}
