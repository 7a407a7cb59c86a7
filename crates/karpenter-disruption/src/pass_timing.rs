//! When the next disruption pass runs: every [`PASS_INTERVAL`] as upstream polls, at once after
//! a pass that decided something (more may be possible), and early once what a pass decides
//! from has changed and then stayed still for [`QUIET`].
//!
//! A pass that found nothing finds nothing again until its inputs change: a pod bound to,
//! finished on or deleted from a node, a node or NodeClaim added or removed, a NodeClaim
//! becoming `Consolidatable` or `Drifted`, a NodePool edited. Waiting out the rest of the
//! interval after such a change (5 s on average, 10 s at worst) is most of what a scale-down's
//! first command waits before its 15 s validation. The early pass waits for the change to
//! settle ([`QUIET`]: a ReplicaSet's scale-down, or the pods a drain moved, arrive as a burst)
//! and comes at most every [`MIN_GAP`], so a cluster that never stands still is passed over
//! every [`PASS_INTERVAL`], as before. The caller says what the inputs are (a `stamp` that
//! changes when they do); this type only keeps time.
//!
//! Generic over the clock, as the provisioning batch window (`karpenter_lifecycle::batcher`)
//! is: the controller uses
//! `std::time::Instant`, a virtual clock can use a `Duration` since its start.

use std::ops::Add;
use std::time::Duration;

use crate::decide::PASS_INTERVAL;

/// How long the inputs must stay unchanged before an early pass.
pub const QUIET: Duration = Duration::from_secs(2);
/// Early passes come at least this long after the pass before.
pub const MIN_GAP: Duration = Duration::from_secs(3);

/// The pass schedule of one disruption loop.
#[derive(Debug, Clone)]
pub struct PassTiming<T> {
    /// When a pass is due whatever changed.
    next: T,
    /// The inputs' stamp last observed, and when it last changed.
    seen: Option<(u64, T)>,
    /// The stamp the last pass decided from, and when it ran.
    last: Option<(Option<u64>, T)>,
}

impl<T: Copy + Ord + Add<Duration, Output = T>> PassTiming<T> {
    /// A loop started at `now`: its first pass is due at once.
    pub fn new(now: T) -> Self {
        PassTiming {
            next: now,
            seen: None,
            last: None,
        }
    }

    /// The inputs' `stamp` at `now`; a new value restarts the quiet period.
    pub fn observe(&mut self, stamp: u64, now: T) {
        match self.seen {
            Some((seen, _)) if seen == stamp => {}
            _ => self.seen = Some((stamp, now)),
        }
    }

    /// Whether a pass is due at `now`.
    pub fn due(&self, now: T) -> bool {
        now >= self.next || self.early_at().is_some_and(|at| now >= at)
    }

    /// When the inputs changed since the last pass allow an early one (if they did).
    fn early_at(&self) -> Option<T> {
        let (stamp, changed) = self.seen?;
        let Some((passed_on, passed_at)) = self.last else {
            return Some(changed + QUIET);
        };
        if passed_on == Some(stamp) {
            return None;
        }
        Some((changed + QUIET).max(passed_at + MIN_GAP))
    }

    /// A pass is due by `at` at the latest (a node becomes consolidatable then).
    pub fn due_by(&mut self, at: T) {
        self.next = self.next.min(at);
    }

    /// A pass ran at `now` on the inputs last observed; `decided` when it produced commands
    /// (the next pass is then due at once, as upstream goes again after acting).
    pub fn passed(&mut self, now: T, decided: bool) {
        self.last = Some((self.seen.map(|(stamp, _)| stamp), now));
        self.next = if decided { now } else { now + PASS_INTERVAL };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    /// A loop whose first pass ran at 0 s on inputs `1` and found nothing.
    fn after_a_quiet_pass() -> PassTiming<Duration> {
        let mut timing = PassTiming::new(s(0));
        timing.observe(1, s(0));
        assert!(timing.due(s(0)));
        timing.passed(s(0), false);
        timing
    }

    #[test]
    fn with_nothing_changed_a_pass_comes_every_interval() {
        let mut timing = after_a_quiet_pass();
        timing.observe(1, s(5));
        assert!(!timing.due(s(9)));
        assert!(timing.due(PASS_INTERVAL));
    }

    #[test]
    fn a_change_brings_the_pass_forward_once_it_has_been_still_for_the_quiet_period() {
        let mut timing = after_a_quiet_pass();
        // A scale-down: pods go from 4 s to 4.8 s.
        timing.observe(2, s(4));
        timing.observe(3, ms(4_800));
        assert!(!timing.due(ms(6_700)));
        assert!(timing.due(ms(6_800)));
        timing.passed(ms(6_800), false);
        // The pass saw those inputs: the next is due at the interval again.
        assert!(!timing.due(s(16)));
        assert!(timing.due(ms(16_800)));
    }

    #[test]
    fn early_passes_keep_their_minimum_gap() {
        let mut timing = after_a_quiet_pass();
        timing.observe(2, ms(100));
        // Still for 2 s by 2.1 s, but the last pass was at 0 s.
        assert!(!timing.due(ms(2_100)));
        assert!(timing.due(s(3)));
    }

    #[test]
    fn inputs_that_never_stand_still_are_passed_over_every_interval() {
        let mut timing = after_a_quiet_pass();
        for half_second in 1..20 {
            let now = ms(500 * half_second);
            timing.observe(half_second, now);
            assert!(!timing.due(now), "at {now:?}");
        }
        assert!(timing.due(PASS_INTERVAL));
    }

    #[test]
    fn after_a_pass_that_decided_the_next_is_due_at_once() {
        let mut timing = after_a_quiet_pass();
        timing.observe(1, s(10));
        timing.passed(s(10), true);
        assert!(timing.due(s(10)));
    }

    #[test]
    fn a_pass_can_be_brought_forward_but_not_put_off() {
        let mut timing = after_a_quiet_pass();
        timing.due_by(s(4));
        assert!(!timing.due(ms(3_900)));
        assert!(timing.due(s(4)));
        timing.due_by(s(30));
        assert!(timing.due(s(4)), "a later time does not put the pass off");
    }

    #[test]
    fn the_first_pass_is_due_at_once() {
        let timing: PassTiming<Duration> = PassTiming::new(s(7));
        assert!(timing.due(s(7)));
    }
}
