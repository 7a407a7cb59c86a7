//! When an active scheduled budget stops being active: the end of the window that contains
//! `now`, extended while later schedule hits overlap it (so "0 until 17:00 UTC" is true).

use chrono::{DateTime, Utc};
use karpenter_api::v1::Budget;

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

    #[test]
    fn unscheduled_budgets_have_no_end() {
        let b = Budget::default();
        assert_eq!(active_until(&b, at(10, 0)), None);
    }
}
