//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics and upstream's timings (15 s lease, 10 s renew deadline, 2 s retry).
//!
//! Owns the election loop and the [`Leadership`] handle the rest of the
//! controller watches: wait until leading, notice when leadership ends. A
//! leader that cannot renew within the renew deadline, or finds someone else
//! holding the Lease, reports [`LeaderState::Lost`] and stops; the caller must
//! stop acting (upstream exits the process). On cancel the Lease is released so
//! a standby takes over at once. It must not start or stop controllers itself.
//!
//! Why not `kube-lease-manager` (0.13.1 does build on kube 5): its leader keeps
//! reporting leadership while it cannot reach the API server (there is no renew
//! deadline), it counts durations in whole seconds, and it has no retry period;
//! a leader that outlives its lease unawares is the failure this module exists
//! to prevent. The rules are small and live, pure, in `record`.

mod elector;
mod fence;
mod record;

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::settings::Settings;
use elector::{Elector, Round};
pub use fence::{Fence, Fenced};

/// Why leader election failed or ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Reading the Lease failed.
    #[error("reading Lease {name}")]
    ReadLease {
        /// The Lease.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Creating or updating the Lease failed (other than losing a race).
    #[error("writing Lease {name}")]
    WriteLease {
        /// The Lease.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Releasing the Lease on shutdown failed; a standby takes over when it expires.
    #[error("releasing Lease {name}")]
    ReleaseLease {
        /// The Lease.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Releasing the Lease on shutdown did not finish within the renew deadline.
    #[error("releasing Lease {name}: no answer within {secs} s")]
    ReleaseTimeout {
        /// The Lease.
        name: String,
        /// The time allowed.
        secs: u64,
    },
    /// We were leader and are not any more.
    #[error("lost leadership of Lease {name}: {reason}")]
    Lost {
        /// The Lease.
        name: String,
        /// Why (renew deadline passed, or another holder).
        reason: String,
    },
    /// The election task panicked or was aborted.
    #[error("the leader election task ended abnormally")]
    Task(#[source] tokio::task::JoinError),
}

/// Timings of the election; [`Default`] is upstream's (controller-runtime's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a holder's claim lasts after its last renewal (written into the Lease).
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long steps down (< lease_duration).
    pub renew_deadline: Duration,
    /// Time between attempts, both to acquire and to renew.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Which Lease, and who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// Our holder identity (unique per process).
    pub identity: String,
    /// Timings.
    pub timings: LeaseTimings,
}

impl LeaseConfig {
    /// From the settings: `LEADER_ELECTION_NAME`, and `LEADER_ELECTION_NAMESPACE`
    /// or, when empty, the client's default namespace (in a pod, the pod's
    /// namespace, as controller-runtime does; out of cluster the kubeconfig
    /// context's namespace instead of controller-runtime's error).
    pub fn from_settings(settings: &Settings, client: &Client) -> Self {
        let namespace = if settings.leader_election_namespace.is_empty() {
            client.default_namespace().to_string()
        } else {
            settings.leader_election_namespace.clone()
        };
        Self {
            namespace,
            name: settings.leader_election_name.clone(),
            identity: default_identity(),
            timings: LeaseTimings::default(),
        }
    }
}

/// `<hostname>_<random>`, like controller-runtime's `<hostname>_<uuid>`.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "karpenter".to_string());
    format!("{host}_{:016x}", random_u64())
}

fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// client-go's `JitterUntil(retryPeriod, 1.2)`: up to 20% longer, so that
/// standbys do not all try at the same instant.
fn jittered(period: Duration) -> Duration {
    let fraction = (random_u64() % 1000) as f64 / 1000.0;
    period.mul_f64(1.0 + 0.2 * fraction)
}

/// Where the election stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Trying to acquire; someone else may be leading.
    Standby,
    /// We hold the Lease.
    Leading,
    /// Cancelled; the Lease was released if we held it.
    Stopped,
    /// We led and no longer do: stop acting.
    Lost,
}

/// `leader_election_master_status{name}` (controller-runtime's, for client-go's elector): 0
/// once the election starts, 1 while this replica holds the Lease, 0 again when it loses it.
/// `name` is the Lease's name, as controller-runtime's election ID. (A release on shutdown
/// leaves it, as client-go does.)
///
/// `leader_election_slowpath_total{name}` (client-go's): renewals of a held Lease that had to
/// read it first, because the optimistic write over the Lease as last written was refused
/// (someone else wrote it since) or the lease was no longer valid. controller-runtime
/// documents it but never registers it; karpenter-rs does.
#[derive(Debug, Clone, Default)]
pub struct LeaderMetrics {
    master_status: Family<Vec<(&'static str, String)>, Gauge>,
    slowpath: Family<Vec<(&'static str, String)>, Counter>,
}

impl LeaderMetrics {
    /// Creates the metric and registers it in `registry`.
    pub fn register(registry: &crate::http::Metrics) -> Self {
        let metrics = LeaderMetrics::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            metrics.master_status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            metrics.slowpath.clone(),
        );
        metrics
    }

    /// The slow-path counter of the Lease `name`.
    pub(crate) fn slowpath(&self, name: &str) -> Counter {
        self.slowpath
            .get_or_create(&vec![("name", name.to_owned())])
            .clone()
    }

    /// How many renewals of the Lease `name` took the slow path so far.
    pub fn slowpaths(&self, name: &str) -> u64 {
        self.slowpath(name).get()
    }

    /// Whether this replica leads the Lease `name`.
    pub fn leading(&self, name: &str, leading: bool) {
        self.master_status
            .get_or_create(&vec![("name", name.to_owned())])
            .set(i64::from(leading));
    }
}

/// The running election: watch its state, wait for it to end.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<LeaderState>,
    fence: Fence,
    task: JoinHandle<Result<(), LeaderError>>,
}

impl Leadership {
    /// Starts electing on the Lease. Cancel `cancel` to stop and release.
    pub fn spawn(client: Client, config: LeaseConfig, cancel: CancellationToken) -> Self {
        Self::spawn_with(client, config, cancel, LeaderMetrics::default())
    }

    /// [`Leadership::spawn`], reporting leadership in `metrics`.
    pub fn spawn_with(
        client: Client,
        config: LeaseConfig,
        cancel: CancellationToken,
        metrics: LeaderMetrics,
    ) -> Self {
        let (tx, rx) = watch::channel(LeaderState::Standby);
        let api = Api::<Lease>::namespaced(client, &config.namespace);
        let elector = Elector::new(
            api,
            config.name.clone(),
            config.identity.clone(),
            config.timings.lease_duration,
            metrics.slowpath(&config.name),
        );
        let fence = Fence::closed();
        metrics.leading(&config.name, false);
        let task = tokio::spawn(run_election(
            elector,
            config,
            cancel,
            tx,
            fence.clone(),
            metrics,
        ));
        Self {
            state: rx,
            fence,
            task,
        }
    }

    /// Leader without a Lease (`DISABLE_LEADER_ELECTION=true`) until `cancel`.
    pub fn unelected(cancel: CancellationToken) -> Self {
        let (tx, rx) = watch::channel(LeaderState::Leading);
        let task = tokio::spawn(async move {
            cancel.cancelled().await;
            tx.send_replace(LeaderState::Stopped);
            Ok(())
        });
        Self {
            state: rx,
            fence: Fence::unelected(),
            task,
        }
    }

    /// The fence every write checks ([`Fence`]): open while leadership is confirmed.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        *self.state.borrow()
    }

    /// A receiver of state changes (for components that gate on leadership).
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }

    /// Waits until we lead (`true`) or the election ended first (`false`).
    pub async fn wait_until_leading(&mut self) -> bool {
        match self
            .state
            .wait_for(|s| !matches!(s, LeaderState::Standby))
            .await
        {
            Ok(state) => *state == LeaderState::Leading,
            Err(_) => false,
        }
    }

    /// Waits until we do not lead (any more) and returns the state then.
    pub async fn wait_until_not_leading(&mut self) -> LeaderState {
        match self.state.wait_for(|s| *s != LeaderState::Leading).await {
            Ok(state) => *state,
            Err(_) => LeaderState::Stopped,
        }
    }

    /// Waits for the election to end: `Ok` after a cancel (Lease released),
    /// [`LeaderError::Lost`] after losing leadership.
    pub async fn join(self) -> Result<(), LeaderError> {
        self.task.await.map_err(LeaderError::Task)?
    }

    /// Stops electing **without** releasing the Lease, as a crash would: a
    /// standby takes over only once the Lease expires. For tests.
    pub fn abort(self) {
        self.task.abort();
    }
}

async fn run_election(
    mut elector: Elector,
    config: LeaseConfig,
    cancel: CancellationToken,
    tx: watch::Sender<LeaderState>,
    fence: Fence,
    metrics: LeaderMetrics,
) -> Result<(), LeaderError> {
    let LeaseTimings {
        renew_deadline,
        retry_period,
        ..
    } = config.timings;
    let lease = format!("{}/{}", config.namespace, config.name);

    // Acquire.
    loop {
        // Leadership is counted from when the request left, not from its answer: a standby
        // counts the lease duration from when it read our write, which is later.
        let sent = Instant::now();
        let round = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            round = elector.try_acquire_or_renew() => Some(round),
        };
        let Some(round) = round else {
            return stop(&mut elector, &config, &tx, &fence).await;
        };
        match round {
            Ok(Round::Holding) => {
                fence.extend_to(sent + renew_deadline);
                break;
            }
            Ok(Round::Standby(holder)) => {
                tracing::debug!(lease = %lease, holder = holder.as_deref().unwrap_or("?"), "waiting for the leader lease");
            }
            Err(err) => {
                tracing::warn!(lease = %lease, error = %err, "trying to acquire the leader lease")
            }
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => return stop(&mut elector, &config, &tx, &fence).await,
            () = tokio::time::sleep(jittered(retry_period)) => {}
        }
    }
    tracing::info!(lease = %lease, identity = %config.identity, "acquired the leader lease");
    metrics.leading(&config.name, true);
    tx.send_replace(LeaderState::Leading);

    // Renew.
    let mut renewed_at = Instant::now();
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return stop(&mut elector, &config, &tx, &fence).await,
            () = tokio::time::sleep(retry_period) => {}
        }
        let deadline = renewed_at + renew_deadline;
        let sent = Instant::now();
        let reason = match tokio::time::timeout_at(deadline, elector.try_acquire_or_renew()).await {
            Ok(Ok(Round::Holding)) => {
                renewed_at = Instant::now();
                fence.extend_to(sent + renew_deadline);
                continue;
            }
            Ok(Ok(Round::Standby(Some(holder)))) => format!("the Lease is held by {holder}"),
            Ok(Ok(Round::Standby(None))) if Instant::now() < deadline => continue,
            Ok(Err(err)) if Instant::now() < deadline => {
                tracing::warn!(lease = %lease, error = %err, "renewing the leader lease");
                continue;
            }
            Ok(Ok(Round::Standby(None)) | Err(_)) | Err(_) => {
                format!("not renewed within the renew deadline of {renew_deadline:?}")
            }
        };
        fence.close();
        metrics.leading(&config.name, false);
        tracing::error!(lease = %lease, reason = %reason, "lost the leader lease");
        tx.send_replace(LeaderState::Lost);
        return Err(LeaderError::Lost {
            name: lease,
            reason,
        });
    }
}

/// On cancel: release if we hold the Lease (bounded by the renew deadline), then report Stopped.
async fn stop(
    elector: &mut Elector,
    config: &LeaseConfig,
    tx: &watch::Sender<LeaderState>,
    fence: &Fence,
) -> Result<(), LeaderError> {
    let limit = config.timings.renew_deadline;
    // Nothing is written once the Lease is being given up.
    fence.close();
    let released = match tokio::time::timeout(limit, elector.release()).await {
        Ok(result) => result,
        Err(_) => Err(LeaderError::ReleaseTimeout {
            name: config.name.clone(),
            secs: limit.as_secs(),
        }),
    };
    if released.is_ok() {
        tracing::info!(lease = %config.name, "released the leader lease");
    }
    tx.send_replace(LeaderState::Stopped);
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_timings_are_the_default() {
        let t = LeaseTimings::default();
        assert_eq!(
            (t.lease_duration, t.renew_deadline, t.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
    }

    #[test]
    fn jitter_adds_at_most_a_fifth_of_the_period() {
        let period = Duration::from_secs(2);
        for _ in 0..100 {
            let d = jittered(period);
            assert!(d >= period && d <= period.mul_f64(1.2), "{d:?}");
        }
    }

    #[test]
    fn identities_differ_between_electors() {
        assert_ne!(default_identity(), default_identity());
    }

    #[tokio::test]
    async fn without_election_we_lead_until_cancelled_then_stop() {
        let cancel = CancellationToken::new();
        let mut leadership = Leadership::unelected(cancel.clone());
        assert!(leadership.wait_until_leading().await);
        cancel.cancel();
        assert_eq!(
            leadership.wait_until_not_leading().await,
            LeaderState::Stopped
        );
        leadership.join().await.expect("ends cleanly");
    }
}
