//! Disruption budgets: how many nodes of a NodePool may be voluntarily disrupted right now.
//!
//! Semantics (upstream `Budget.IsActive`, `GetAllowedDisruptions`, `BuildDisruptionBudgetMapping`):
//! a budget without a schedule is always active; with one, it is active iff the first schedule
//! hit strictly after `now - duration` is at or before `now` (UTC). An active budget allows
//! `nodes` (a count, or a percentage of the pool's nodes rounded up); an inactive one does not
//! limit. An unparseable schedule allows nothing (fail closed). A reason is limited by every
//! budget that names it or names no reason; the pool's allowance is the minimum, minus the
//! nodes already disrupting (NotReady or marked for deletion), never below zero.

use chrono::{DateTime, Utc};
use karpenter_api::v1::{Budget, DisruptionReason};

/// How many nodes one budget allows, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetLimit {
    /// `None` when the budget is inactive (no limit).
    pub allowed: Option<u32>,
    pub explanation: String,
}

/// True when the budget constrains disruptions at `now`.
pub fn is_active(budget: &Budget, now: DateTime<Utc>) -> Result<bool, String> {
    let (Some(schedule), Some(duration)) = (&budget.schedule, &budget.duration) else {
        return Ok(true);
    };
    let cron = karpenter_api::schedule::parse_schedule(schedule)?;
    let window = chrono::Duration::from_std(duration.as_duration())
        .map_err(|_| format!("duration {} is too long", duration.as_str()))?;
    let checkpoint = now - window;
    match cron.find_next_occurrence(&checkpoint, false) {
        Ok(next) => Ok(next <= now),
        Err(_) => Ok(false),
    }
}

/// Scales `nodes` (`"10%"` or `"3"`) against the pool size, rounding percentages up.
pub fn scaled_nodes(nodes: &str, num_nodes: u32) -> Result<u32, String> {
    if let Some(percent) = nodes.strip_suffix('%') {
        let pct: u64 = percent
            .parse()
            .map_err(|_| format!("budget nodes {nodes:?} is not a percentage"))?;
        let scaled = (u64::from(num_nodes) * pct).div_ceil(100);
        Ok(u32::try_from(scaled).unwrap_or(u32::MAX))
    } else {
        nodes
            .parse()
            .map_err(|_| format!("budget nodes {nodes:?} is not a count or a percentage"))
    }
}

/// What one budget allows at `now` for a pool of `num_nodes`.
pub fn budget_limit(budget: &Budget, num_nodes: u32, now: DateTime<Utc>) -> BudgetLimit {
    let when = match (&budget.schedule, &budget.duration) {
        (Some(s), Some(d)) => format!(" (schedule {s:?} for {d})"),
        _ => String::new(),
    };
    match is_active(budget, now) {
        Err(err) => BudgetLimit {
            allowed: Some(0),
            explanation: format!("budget{when} is invalid and allows no disruptions: {err}"),
        },
        Ok(false) => BudgetLimit {
            allowed: None,
            explanation: format!("budget{when} is not active"),
        },
        Ok(true) => match scaled_nodes(&budget.nodes, num_nodes) {
            Ok(n) => BudgetLimit {
                allowed: Some(n),
                explanation: format!(
                    "budget nodes={}{when} allows {n} of {num_nodes} nodes",
                    budget.nodes
                ),
            },
            Err(err) => BudgetLimit {
                allowed: Some(0),
                explanation: format!("budget{when} is invalid and allows no disruptions: {err}"),
            },
        },
    }
}

/// The allowance of one NodePool for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    /// Nodes that may still be disrupted for this reason.
    pub allowed: u32,
    /// The budget that binds (the minimum), or why nothing binds.
    pub explanation: String,
}

/// The pool's allowance for `reason`: the minimum over active budgets that apply to the reason,
/// minus the nodes already disrupting.
pub fn allowed_disruptions(
    budgets: &[Budget],
    reason: DisruptionReason,
    num_nodes: u32,
    disrupting: u32,
    now: DateTime<Utc>,
) -> Allowance {
    let binding = budgets
        .iter()
        .filter(|b| b.reasons.as_ref().is_none_or(|rs| rs.contains(&reason)))
        .map(|b| budget_limit(b, num_nodes, now))
        .filter(|limit| limit.allowed.is_some())
        .min_by_key(|limit| limit.allowed);
    match binding {
        None => Allowance {
            allowed: num_nodes.saturating_sub(disrupting),
            explanation: format!("no active budget limits {} disruptions", reason.as_str()),
        },
        Some(limit) => {
            let budget = limit.allowed.unwrap_or(0);
            let allowed = budget.saturating_sub(disrupting);
            let explanation = if disrupting > 0 {
                format!(
                    "{}; {disrupting} already disrupting, {allowed} left",
                    limit.explanation
                )
            } else {
                limit.explanation
            };
            Allowance {
                allowed,
                explanation,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use karpenter_api::duration::GoDuration;

    fn budget(
        nodes: &str,
        schedule: Option<&str>,
        duration: Option<&str>,
        reasons: Option<Vec<DisruptionReason>>,
    ) -> Budget {
        Budget {
            nodes: nodes.to_owned(),
            schedule: schedule.map(str::to_owned),
            duration: duration.map(|d| GoDuration::parse(d).expect("test duration")),
            reasons,
        }
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        // Monday 2026-11-23
        Utc.with_ymd_and_hms(2026, 11, 23, h, m, 0)
            .single()
            .expect("valid time")
    }

    #[test]
    fn percentages_round_up_and_counts_are_exact() {
        for (nodes, pool, want) in [
            ("10%", 19, 2),
            ("10%", 10, 1),
            ("10%", 0, 0),
            ("0%", 50, 0),
            ("100%", 7, 7),
            ("3", 100, 3),
            ("0", 5, 0),
        ] {
            assert_eq!(scaled_nodes(nodes, pool), Ok(want), "{nodes} of {pool}");
        }
        assert!(scaled_nodes("ten", 5).is_err());
    }

    #[test]
    fn a_scheduled_budget_is_active_only_inside_its_window() {
        let b = budget("0", Some("0 9 * * mon-fri"), Some("8h"), None);
        assert_eq!(is_active(&b, at(8, 59)), Ok(false));
        assert_eq!(is_active(&b, at(9, 0)), Ok(true));
        assert_eq!(is_active(&b, at(16, 59)), Ok(true));
        assert_eq!(is_active(&b, at(17, 1)), Ok(false));
    }

    #[test]
    fn the_minimum_active_budget_for_the_reason_binds() {
        let budgets = vec![
            budget("10%", None, None, None),
            budget(
                "0",
                Some("0 9 * * *"),
                Some("8h"),
                Some(vec![DisruptionReason::Underutilized]),
            ),
            budget("1", None, None, Some(vec![DisruptionReason::Drifted])),
        ];
        let under =
            allowed_disruptions(&budgets, DisruptionReason::Underutilized, 30, 0, at(10, 0));
        assert_eq!(under.allowed, 0, "{under:?}");
        let under_night =
            allowed_disruptions(&budgets, DisruptionReason::Underutilized, 30, 0, at(20, 0));
        assert_eq!(under_night.allowed, 3, "{under_night:?}");
        let drift = allowed_disruptions(&budgets, DisruptionReason::Drifted, 30, 0, at(10, 0));
        assert_eq!(drift.allowed, 1, "{drift:?}");
        let empty = allowed_disruptions(&budgets, DisruptionReason::Empty, 30, 2, at(10, 0));
        assert_eq!(empty.allowed, 1, "{empty:?}");
        assert!(
            empty.explanation.contains("2 already disrupting"),
            "{}",
            empty.explanation
        );
    }

    #[test]
    fn an_invalid_schedule_fails_closed() {
        let budgets = vec![budget("100%", Some("61 * * * *"), Some("1h"), None)];
        let a = allowed_disruptions(&budgets, DisruptionReason::Empty, 10, 0, at(10, 0));
        assert_eq!(a.allowed, 0);
        assert!(a.explanation.contains("invalid"), "{}", a.explanation);
    }

    #[test]
    fn disrupting_nodes_never_drive_the_allowance_negative() {
        let budgets = vec![budget("2", None, None, None)];
        assert_eq!(
            allowed_disruptions(&budgets, DisruptionReason::Empty, 10, 5, at(0, 0)).allowed,
            0
        );
    }
}
