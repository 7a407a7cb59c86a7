//! One round of leader election against the API server: read the Lease,
//! decide with [`record::step`](super::record::step), write with the read
//! `resourceVersion` (a concurrent writer makes ours fail with 409, never
//! both succeed). Also the release. The loop around it lives in `mod.rs`.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
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

/// The elector's memory between rounds: the last record seen and since when.
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_duration: Duration,
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    pub fn new(api: Api<Lease>, name: String, identity: String, lease_duration: Duration) -> Self {
        Self {
            api,
            name,
            identity,
            lease_duration,
            observed: None,
        }
    }

    /// Tries to acquire or renew the Lease once.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Round, LeaderError> {
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
            (Step::Renew | Step::Take, Some(mut lease)) => {
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
