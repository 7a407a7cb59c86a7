//! Reboots committed per NodeClaim (upstream v1.15's `RebootHistory`): a node whose repair
//! policy says reboot is rebooted at most [`REBOOTS_BEFORE_REPLACEMENT`] times in
//! [`WINDOW`]; past that, repair replaces it, since a fault that comes back after two reboots
//! will not go away with a third.
//!
//! A value the controller keeps in memory (as upstream does: a restart forgets it, at worst
//! two more reboots) and copies into each snapshot's nodes
//! ([`crate::snapshot::NodeState::committed_reboots`]); the repair method reads only that.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

/// How far back committed reboots count.
pub const WINDOW: chrono::Duration = chrono::Duration::hours(24);
/// Reboots within [`WINDOW`] after which repair replaces instead.
pub const REBOOTS_BEFORE_REPLACEMENT: usize = 2;

/// Committed reboots by NodeClaim name.
#[derive(Debug, Clone, Default)]
pub struct RebootHistory {
    committed: HashMap<String, Vec<DateTime<Utc>>>,
}

impl RebootHistory {
    /// Records a reboot committed for `node_claim` at `at` (once per commit); entries older
    /// than [`WINDOW`] are dropped on the way.
    pub fn record(&mut self, node_claim: &str, at: DateTime<Utc>) {
        self.forget_before(at - WINDOW);
        let times = self.committed.entry(node_claim.to_owned()).or_default();
        if times.len() < REBOOTS_BEFORE_REPLACEMENT {
            times.push(at);
        }
    }

    /// The reboots committed for `node_claim` within [`WINDOW`] of `now`.
    pub fn recent(&self, node_claim: &str, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        self.committed
            .get(node_claim)
            .map(|times| {
                times
                    .iter()
                    .copied()
                    .filter(|t| *t > now - WINDOW)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn forget_before(&mut self, cutoff: DateTime<Utc>) {
        self.committed.retain(|_, times| {
            times.retain(|t| *t > cutoff);
            !times.is_empty()
        });
    }
}

/// Whether a node with these committed reboots has used up its reboots at `now`.
pub fn exhausted(committed: &[DateTime<Utc>], now: DateTime<Utc>) -> bool {
    committed.iter().filter(|t| **t > now - WINDOW).count() >= REBOOTS_BEFORE_REPLACEMENT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hours: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
            + chrono::Duration::hours(hours)
    }

    #[test]
    fn two_reboots_within_a_day_use_them_up_and_a_day_later_they_are_back() {
        let mut history = RebootHistory::default();
        history.record("a", at(0));
        assert!(!exhausted(&history.recent("a", at(1)), at(1)));
        history.record("a", at(2));
        assert!(exhausted(&history.recent("a", at(3)), at(3)));
        assert!(
            !exhausted(&history.recent("b", at(3)), at(3)),
            "per NodeClaim"
        );
        // The first falls out of the window 24 h after it.
        assert!(!exhausted(&history.recent("a", at(25)), at(25)));
    }

    #[test]
    fn old_entries_are_forgotten_and_at_most_two_are_kept() {
        let mut history = RebootHistory::default();
        for h in 0..5 {
            history.record("a", at(h));
        }
        assert_eq!(history.recent("a", at(5)).len(), 2);
        history.record("b", at(48));
        assert!(history.recent("a", at(48)).is_empty());
        assert!(
            !history.committed.contains_key("a"),
            "dropped, not kept empty"
        );
    }
}
