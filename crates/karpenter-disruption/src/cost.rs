//! The cost formulas that order disruption candidates (upstream `disruptionutils`).
//!
//! `EvictionCost(pod) = clamp(1 + deletion_cost / 2^27 + priority / 2^25, -10, 10)`;
//! `LifetimeRemaining = clamp((expireAfter - age) / expireAfter, 0, 1)` (1 when expiry is
//! `Never`); a node's `DisruptionCost = Σ EvictionCost(pods) × LifetimeRemaining`;
//! `RescheduleDisruptionCost = 1 + Σ max(0, EvictionCost(reschedulable pods))`; a node is empty
//! iff that is ≤ 1; candidates are ordered by `SavingsRatio = price / RescheduleDisruptionCost`.

use std::time::Duration;

/// What the cost formulas need of a pod.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PodCostInput {
    /// The `controller.kubernetes.io/pod-deletion-cost` annotation, if it parses as an integer.
    pub deletion_cost: Option<i32>,
    /// `spec.priority`.
    pub priority: Option<i32>,
}

/// The cost of evicting one pod.
pub fn eviction_cost(pod: PodCostInput) -> f64 {
    let mut cost = 1.0;
    if let Some(d) = pod.deletion_cost {
        cost += f64::from(d) / 2f64.powi(27);
    }
    if let Some(p) = pod.priority {
        cost += f64::from(p) / 2f64.powi(25);
    }
    cost.clamp(-10.0, 10.0)
}

/// The share of the node's lifetime still ahead of it (1 for nodes that never expire).
pub fn lifetime_remaining(expire_after: Option<Duration>, age: Duration) -> f64 {
    match expire_after {
        None => 1.0,
        Some(total) if total.is_zero() => 0.0,
        Some(total) => {
            ((total.as_secs_f64() - age.as_secs_f64()) / total.as_secs_f64()).clamp(0.0, 1.0)
        }
    }
}

/// `Σ EvictionCost(pods) × LifetimeRemaining`.
pub fn disruption_cost(pods: &[PodCostInput], lifetime_remaining: f64) -> f64 {
    pods.iter().map(|p| eviction_cost(*p)).sum::<f64>() * lifetime_remaining
}

/// `1 + Σ max(0, EvictionCost(reschedulable pods))`.
pub fn reschedule_disruption_cost(reschedulable: &[PodCostInput]) -> f64 {
    1.0 + reschedulable
        .iter()
        .map(|p| eviction_cost(*p).max(0.0))
        .sum::<f64>()
}

/// A node is empty when rescheduling it costs nothing beyond the node itself.
pub fn is_empty(reschedule_disruption_cost: f64) -> bool {
    reschedule_disruption_cost <= 1.0
}

/// `price / RescheduleDisruptionCost`: higher first.
pub fn savings_ratio(price_per_hour: f64, reschedule_disruption_cost: f64) -> f64 {
    if reschedule_disruption_cost <= 0.0 {
        return f64::INFINITY;
    }
    price_per_hour / reschedule_disruption_cost
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_cost_follows_deletion_cost_and_priority_and_is_clamped() {
        assert_eq!(eviction_cost(PodCostInput::default()), 1.0);
        assert_eq!(
            eviction_cost(PodCostInput {
                deletion_cost: Some(1 << 27),
                priority: None
            }),
            2.0
        );
        assert_eq!(
            eviction_cost(PodCostInput {
                deletion_cost: None,
                priority: Some(1 << 25)
            }),
            2.0
        );
        assert_eq!(
            eviction_cost(PodCostInput {
                deletion_cost: Some(i32::MAX),
                priority: Some(i32::MAX)
            }),
            10.0
        );
        assert_eq!(
            eviction_cost(PodCostInput {
                deletion_cost: Some(i32::MIN),
                priority: Some(i32::MIN)
            }),
            -10.0
        );
    }

    #[test]
    fn lifetime_remaining_is_the_unexpired_share() {
        let day = Duration::from_secs(86_400);
        assert_eq!(lifetime_remaining(None, day), 1.0);
        assert_eq!(lifetime_remaining(Some(day * 30), day * 15), 0.5);
        assert_eq!(lifetime_remaining(Some(day), day * 2), 0.0);
    }

    #[test]
    fn a_node_whose_pods_cost_nothing_to_reschedule_is_empty() {
        assert!(is_empty(reschedule_disruption_cost(&[])));
        let negative = PodCostInput {
            deletion_cost: Some(-(1 << 30)),
            priority: None,
        };
        assert!(
            is_empty(reschedule_disruption_cost(&[negative])),
            "negative costs count as zero"
        );
        assert!(!is_empty(reschedule_disruption_cost(&[
            PodCostInput::default()
        ])));
    }

    #[test]
    fn savings_ratio_prefers_expensive_nodes_with_cheap_pods() {
        let cheap_pods = reschedule_disruption_cost(&[PodCostInput::default()]);
        let costly_pods = reschedule_disruption_cost(&[PodCostInput::default(); 4]);
        assert!(savings_ratio(0.192, cheap_pods) > savings_ratio(0.192, costly_pods));
        assert_eq!(disruption_cost(&[PodCostInput::default(); 4], 0.5), 2.0);
    }
}
