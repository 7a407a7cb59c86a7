//! Fencing: a replica writes only while its leadership is confirmed.
//!
//! The elector extends the [`Fence`] after each successful acquire or renew to the time the
//! request was **sent** plus the renew deadline (10 s of upstream's timings). Every write path
//! ([`crate::cluster::writes::Writer`], evictions, the cloud's create and delete, every step the
//! loops start) checks it first and refuses once that time has passed. A standby takes the
//! Lease only after it has seen the Lease unchanged for the lease duration (15 s), counted from
//! when it read our last renewal, which we sent earlier: so a replica that was paused (SIGSTOP,
//! a stalled VM, a long GC pause elsewhere on the node) and wakes up refuses every write at
//! least 5 s before anyone else can lead. The time is the monotonic clock, which keeps running
//! while a process is stopped.
//!
//! What it cannot stop: a request whose bytes had already left for the API server when the
//! pause began. The window is the time between a check and its send, microseconds, not the
//! pause.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A write refused because leadership is not confirmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not written: this replica's leadership is unconfirmed since {overdue:?} ago (past the renew deadline; another replica may lead)"
)]
pub struct Fenced {
    /// How long ago the fence closed (zero when it was closed on purpose).
    pub overdue: Duration,
}

/// Nanoseconds since `base` until which writes are allowed; 0 is closed.
#[derive(Debug)]
struct Inner {
    base: Instant,
    until: AtomicU64,
    /// Without leader election nothing fences (one replica by configuration).
    open: bool,
}

/// Whether this replica may write now. Cheap to clone and to check (one atomic load).
#[derive(Debug, Clone)]
pub struct Fence(Arc<Inner>);

impl Fence {
    /// Closed until the elector confirms leadership.
    pub fn closed() -> Self {
        Fence(Arc::new(Inner {
            base: Instant::now(),
            until: AtomicU64::new(0),
            open: false,
        }))
    }

    /// Always open: leader election is disabled, so this replica is the only writer by
    /// configuration.
    pub fn unelected() -> Self {
        Fence(Arc::new(Inner {
            base: Instant::now(),
            until: AtomicU64::new(0),
            open: true,
        }))
    }

    /// Allows writes until `until` (never shortens an allowance already given for later).
    pub fn extend_to(&self, until: Instant) {
        let nanos = u64::try_from(until.saturating_duration_since(self.0.base).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        self.0.until.fetch_max(nanos, Ordering::AcqRel);
    }

    /// Refuses every write from now on (leadership lost or given up).
    pub fn close(&self) {
        self.0.until.store(0, Ordering::Release);
    }

    /// `Ok` while writes are allowed.
    pub fn check(&self) -> Result<(), Fenced> {
        if self.0.open {
            return Ok(());
        }
        let until = self.0.until.load(Ordering::Acquire);
        if until == 0 {
            return Err(Fenced {
                overdue: Duration::ZERO,
            });
        }
        let deadline = self.0.base + Duration::from_nanos(until);
        let now = Instant::now();
        if now < deadline {
            Ok(())
        } else {
            Err(Fenced {
                overdue: now - deadline,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_fence_allows_writes_until_the_deadline_it_was_extended_to() {
        let fence = Fence::closed();
        assert!(
            fence.check().is_err(),
            "closed until leadership is confirmed"
        );
        fence.extend_to(Instant::now() + Duration::from_secs(10));
        assert_eq!(fence.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(fence.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(3)).await;
        let refused = fence.check().unwrap_err();
        assert_eq!(refused.overdue, Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_renewal_never_shortens_the_allowance_and_close_ends_it() {
        let fence = Fence::closed();
        let start = Instant::now();
        fence.extend_to(start + Duration::from_secs(10));
        fence.extend_to(start + Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(fence.check(), Ok(()));
        fence.close();
        assert!(fence.check().is_err());
        let clone = fence.clone();
        fence.extend_to(Instant::now() + Duration::from_secs(1));
        assert_eq!(clone.check(), Ok(()), "clones share the fence");
    }

    #[tokio::test(start_paused = true)]
    async fn without_election_the_fence_never_closes() {
        let fence = Fence::unelected();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(fence.check(), Ok(()));
    }
}
