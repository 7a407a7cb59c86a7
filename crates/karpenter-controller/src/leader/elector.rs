//! One round of leader election against the API server. A leader whose lease is still valid
//! first renews optimistically: it writes over the Lease it last wrote, with that write's
//! `resourceVersion`, without reading (client-go's fast path: one request per renewal instead
//! of two). Otherwise, or when that write fails, the slow path: read the Lease, decide with
//! [`record::step`](super::record::step), write with the read `resourceVersion` (a concurrent
//! writer makes ours fail with 409, never both succeed); a leader renewing on the slow path
//! counts it in `leader_election_slowpath_total`. Also the release. The loop around it lives in
//! `mod.rs`.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

use super::LeaderError;
use super::record::{self, Step};

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// We hold the Lease now.
    Holding,
    /// Someone else holds it (`None`: a concurrent writer won this round).
    Standby(Option<String>),
}

/// The elector's memory between rounds: the last record seen and since when, and the Lease
/// as we last wrote it while holding it (for the fast path).
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_duration: Duration,
    observed: Option<(LeaseSpec, Instant)>,
    written: Option<(Lease, Instant)>,
    slowpath: Counter,
}

impl Elector {
    /// `slowpath` counts renewals that had to read the Lease first.
    pub fn new(
        api: Api<Lease>,
        name: String,
        identity: String,
        lease_duration: Duration,
        slowpath: Counter,
    ) -> Self {
        Self {
            api,
            name,
            identity,
            lease_duration,
            observed: None,
            written: None,
            slowpath,
        }
    }

    /// Tries to acquire or renew the Lease once: the fast path when we hold a valid lease,
    /// the slow path otherwise or when the fast path's write is refused.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Round, LeaderError> {
        if let Some(round) = self.renew_optimistically().await {
            return Ok(round);
        }
        self.read_and_write().await
    }

    /// client-go's fast path: while the lease we last wrote is valid (written less than a
    /// lease duration ago, by the request's start), write a renewed record over it without
    /// reading. `None` when there is no such lease or the write failed (a 409: someone wrote
    /// the Lease since; or any error): the caller falls back to the slow path.
    async fn renew_optimistically(&mut self) -> Option<Round> {
        let (mut lease, written_at) = self.written.take()?;
        if written_at.elapsed() >= self.lease_duration {
            return None;
        }
        lease.spec = Some(record::next_spec(
            &self.identity,
            lease.spec.as_ref(),
            self.lease_duration,
            Timestamp::now(),
        ));
        let sent = Instant::now();
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(lease) => {
                self.observe(lease.spec.as_ref());
                self.written = Some((lease, sent));
                Some(Round::Holding)
            }
            Err(err) => {
                tracing::debug!(lease = %self.name, error = %err, "renewing the lease optimistically failed, falling back to the slow path");
                None
            }
        }
    }

    /// The slow path: read the Lease, decide, write with the read `resourceVersion`.
    async fn read_and_write(&mut self) -> Result<Round, LeaderError> {
        self.written = None;
        let current =
            self.api
                .get_opt(&self.name)
                .await
                .map_err(|source| LeaderError::ReadLease {
                    name: self.name.clone(),
                    source,
                })?;
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        let unchanged_for = self.observe(spec.as_ref());
        let step = match (&current, spec.as_ref()) {
            // A Lease without a spec is as good as free.
            (Some(_), None) => Step::Take,
            _ => record::step(&self.identity, spec.as_ref(), unchanged_for),
        };
        let next = record::next_spec(
            &self.identity,
            spec.as_ref(),
            self.lease_duration,
            Timestamp::now(),
        );
        let sent = Instant::now();
        let written = match (step, current) {
            (Step::Wait { holder }, _) => return Ok(Round::Standby(Some(holder))),
            (Step::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(next),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (step @ (Step::Renew | Step::Take), Some(mut lease)) => {
                if step == Step::Renew {
                    // We held it and had to read it first (client-go counts the same case).
                    self.slowpath.inc();
                }
                // metadata.resourceVersion is the one we read: optimistic concurrency.
                lease.spec = Some(next);
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(lease) => {
                self.observe(lease.spec.as_ref());
                self.written = Some((lease, sent));
                Ok(Round::Holding)
            }
            // Someone else wrote first (409 on update, or AlreadyExists on create).
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Standby(None)),
            Err(source) => Err(LeaderError::WriteLease {
                name: self.name.clone(),
                source,
            }),
        }
    }

    /// Gives the Lease up if we still hold it, so a standby takes over at once.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        self.written = None;
        let current =
            self.api
                .get_opt(&self.name)
                .await
                .map_err(|source| LeaderError::ReadLease {
                    name: self.name.clone(),
                    source,
                })?;
        let Some(mut lease) = current else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_ref() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        lease.spec = Some(record::released_spec(spec, Timestamp::now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            // Changed under us: we no longer hold it, nothing to release.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(LeaderError::ReleaseLease {
                name: self.name.clone(),
                source,
            }),
        }
    }

    /// Records `spec` as seen now if it differs from the last one; returns
    /// how long the record has been unchanged.
    fn observe(&mut self, spec: Option<&LeaseSpec>) -> Duration {
        let now = Instant::now();
        match (&self.observed, spec) {
            (Some((seen, since)), Some(spec)) if seen == spec => now.duration_since(*since),
            (_, Some(spec)) => {
                self.observed = Some((spec.clone(), now));
                Duration::ZERO
            }
            (_, None) => {
                self.observed = None;
                Duration::ZERO
            }
        }
    }
}
