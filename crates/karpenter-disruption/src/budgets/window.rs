//! When an active scheduled budget stops being active: the end of the window that contains
//! `now`, extended while later schedule hits overlap it (so "0 until 17:00 UTC" is true); and
//! when a reason's budgets that allow no disruption now next allow one ([`next_opening`]).

use chrono::{DateTime, Utc};
use karpenter_api::v1::{Budget, DisruptionReason};

use crate::budgets::budget::allowed_disruptions;

/// Upper bound on windows stepped over by [`next_opening`] (back-to-back zero windows).
const MAX_WINDOWS: usize = 64;

/// Upper bound on schedule hits walked (a `* * * * *` schedule with a long duration).
const MAX_HITS: usize = 20_000;

/// The end of the active window containing `now`; `None` for an unscheduled (always active)
/// budget, an invalid one, or one that is not active.
pub fn active_until(budget: &Budget, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let (Some(schedule), Some(duration)) = (&budget.schedule, &budget.duration) else {
        return None;
    };
    let cron = karpenter_api::schedule::parse_schedule(schedule).ok()?;
    let window = chrono::Duration::from_std(duration.as_duration()).ok()?;
    let mut hit = cron.find_next_occurrence(&(now - window), false).ok()?;
    if hit > now {
        return None;
    }
    let mut last = hit;
    for _ in 0..MAX_HITS {
        match cron.find_next_occurrence(&hit, false) {
            Ok(next) if next <= last + window && next > hit => {
                last = next;
                hit = next;
            }
            _ => break,
        }
    }
    Some(last + window)
}

/// When `budgets` next allow a disruption for `reason` in a pool of `num_nodes` (nodes already
/// disrupting aside), if they allow none at `now` because of scheduled windows: the end of the
/// zero window, stepped over any window that keeps it at zero from then on. `None` when they
/// allow one now, when the pool has no nodes, or when no schedule ends the zero (an
/// unscheduled `nodes: "0"`, an invalid budget).
pub fn next_opening(
    budgets: &[Budget],
    reason: DisruptionReason,
    num_nodes: u32,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if num_nodes == 0 {
        return None;
    }
    let applies = |b: &&Budget| b.reasons.as_ref().is_none_or(|rs| rs.contains(&reason));
    let mut at = now;
    for _ in 0..MAX_WINDOWS {
        if allowed_disruptions(budgets, reason, num_nodes, 0, at).allowed > 0 {
            return (at > now).then_some(at);
        }
        // The earliest end of an active scheduled window: only then can the zero lift.
        at = budgets
            .iter()
            .filter(applies)
            .filter_map(|b| active_until(b, at))
            .filter(|end| *end > at)
            .min()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use karpenter_api::duration::GoDuration;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, h, m, 0)
            .single()
            .unwrap_or_default()
    }

    fn budget(schedule: &str, duration: &str) -> Budget {
        Budget {
            nodes: "0".into(),
            schedule: Some(schedule.into()),
            duration: GoDuration::parse(duration).ok(),
            reasons: None,
        }
    }

    #[test]
    fn a_business_hours_budget_is_active_until_the_window_closes() {
        let b = budget("0 9 * * *", "8h");
        assert_eq!(active_until(&b, at(10, 30)), Some(at(17, 0)));
        assert_eq!(active_until(&b, at(18, 0)), None);
    }

    #[test]
    fn overlapping_hits_extend_the_window() {
        let b = budget("0 * * * *", "90m");
        // hits every hour, each lasting 90 minutes: the windows chain forever, capped by MAX_HITS
        assert!(active_until(&b, at(10, 30)).is_some_and(|t| t > at(12, 0)));
    }

    fn zero(schedule: &str, duration: &str) -> Budget {
        budget(schedule, duration)
    }

    #[test]
    fn a_zero_business_hours_budget_opens_when_the_window_closes() {
        let budgets = [zero("0 9 * * 1-5", "8h")];
        // Monday 2026-11-23, 10:30: closed until 17:00.
        assert_eq!(
            next_opening(&budgets, DisruptionReason::Underutilized, 3, at(10, 30)),
            Some(at(17, 0))
        );
        assert_eq!(
            next_opening(&budgets, DisruptionReason::Underutilized, 3, at(18, 0)),
            None,
            "open now: no next opening"
        );
    }

    #[test]
    fn back_to_back_zero_windows_open_after_the_last() {
        // 09:00-13:00 and 13:00-17:00, both zero: open at 17:00, not 13:00.
        let budgets = [zero("0 9 * * *", "4h"), zero("0 13 * * *", "4h")];
        assert_eq!(
            next_opening(&budgets, DisruptionReason::Drifted, 3, at(10, 0)),
            Some(at(17, 0))
        );
    }

    #[test]
    fn a_zero_for_another_reason_or_without_schedule_has_no_opening() {
        let mut drift_only = zero("0 9 * * *", "8h");
        drift_only.reasons = Some(vec![DisruptionReason::Drifted]);
        assert_eq!(
            next_opening(&[drift_only], DisruptionReason::Empty, 3, at(10, 0)),
            None,
            "the budget does not apply to Empty: open now"
        );
        let always = Budget {
            nodes: "0".into(),
            ..Budget::default()
        };
        assert_eq!(
            next_opening(&[always], DisruptionReason::Empty, 3, at(10, 0)),
            None,
            "never opens"
        );
    }

    #[test]
    fn unscheduled_budgets_have_no_end() {
        let b = Budget::default();
        assert_eq!(active_until(&b, at(10, 0)), None);
    }
}
