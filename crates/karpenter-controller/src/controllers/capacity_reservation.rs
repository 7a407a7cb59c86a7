//! The capacity reservation lifecycle loops (`--cloud-provider aws`), upstream v1.15.1's
//! `capacityreservation.*` controllers:
//!
//! - [`Expiration`] (`capacityreservation.expiration`): NodeClaims launched into a Capacity
//!   Block are deleted from 40 minutes before the block ends (the normal termination then
//!   drains them and the provisioner replaces their pods elsewhere), decided by
//!   [`karpenter_aws::capacity_reservation::expiration::decide`] from the blocks' end times in
//!   the EC2NodeClass statuses (which the EC2NodeClass controller reads from
//!   `DescribeCapacityReservations`). A scan on every index change and at the next block's
//!   expiring moment (at least every minute), so a deletion is not late by a poll period.
//! - [`CapacityTypeSync`] (`capacityreservation.capacitytype`): every minute the cloud's
//!   instances are listed; a reserved NodeClaim (and its registered Node) whose instance now
//!   runs on-demand, its reservation having ended or been cancelled, is relabelled
//!   ([`karpenter_aws::capacity_reservation::capacity_type`]).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_aws::capacity_reservation::capacity_type::{self, Relabel};
use karpenter_aws::capacity_reservation::expiration::{self, BlockEnds, Expiring};
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_state::Cluster;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// How often both loops look at least (upstream's `RequeueAfter: time.Minute`).
pub const INTERVAL: Duration = Duration::from_secs(60);

/// The Capacity Block expiry loop.
#[derive(Debug)]
pub struct Expiration<C> {
    pub ctx: Context<C>,
}

impl<C: CloudProvider + 'static> Reconciler for Expiration<C> {
    type Step = Expiring;
    type Error = WriteError;
    const NAME: &'static str = "capacityreservation.expiration";

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_secs(1), INTERVAL)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<Expiring> {
        let ends = BlockEnds::of_classes(cluster.node_classes());
        let decision = expiration::decide(&ends, cluster.node_claims(), now);
        let mut scan = Scan::new();
        for expiring in decision.delete {
            if !busy.contains(&expiring.node_claim) {
                scan.step(expiring.node_claim.clone(), expiring);
            }
        }
        if let Some(next) = decision.next {
            scan.requeue_after((next - now).to_std().unwrap_or(Duration::ZERO));
        }
        scan
    }

    async fn execute(&self, expiring: Expiring) -> Result<Action, WriteError> {
        self.ctx
            .writer()
            .delete::<NodeClaim>(
                &expiring.node_claim,
                "deleting for capacity block expiration",
            )
            .await?;
        tracing::info!(
            nodeclaim = %expiring.node_claim,
            capacity_reservation_id = %expiring.reservation_id,
            reason = %expiring,
            "initiating delete for capacity block expiration"
        );
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &Expiring) -> &'static str {
        "delete"
    }
}

/// The capacity-type label sync loop.
#[derive(Debug)]
pub struct CapacityTypeSync<C> {
    pub ctx: Context<C>,
}

/// The one step: list the cloud and relabel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sync;

/// Listing the cloud failed, or some relabels did (the rest were made).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("listing the cloud's instances: {0}")]
    List(#[source] CloudError),
    #[error("{failed} of {found} relabels failed; the first: {first}")]
    Relabel {
        failed: usize,
        found: usize,
        #[source]
        first: WriteError,
    },
}

impl<C: CloudProvider + 'static> Reconciler for CapacityTypeSync<C> {
    type Step = Sync;
    type Error = SyncError;
    const NAME: &'static str = "capacityreservation.capacitytype";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Sync> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Sync);
        }
        scan
    }

    async fn execute(&self, _: Sync) -> Result<Action, SyncError> {
        let listed: HashMap<String, String> = self
            .ctx
            .cloud
            .list()
            .await
            .map_err(SyncError::List)?
            .into_iter()
            .filter_map(|claim| {
                let provider_id = claim.status?.provider_id?;
                let capacity_type = claim.metadata.labels?.remove(labels::CAPACITY_TYPE)?;
                Some((provider_id, capacity_type))
            })
            .collect();
        let relabels = {
            let cluster = self.ctx.cache.lock();
            capacity_type::relabels(&listed, cluster.node_claims(), cluster.nodes())
        };
        let found = relabels.len();
        let writer = self.ctx.writer();
        let mut failures = Vec::new();
        for relabel in relabels {
            let written = match &relabel {
                Relabel::NodeClaim(name) => writer
                    .merge_metadata::<NodeClaim>(
                        name,
                        capacity_type::patch(),
                        "syncing the capacity type",
                    )
                    .await
                    .map(|_| ()),
                Relabel::Node { name, .. } => writer
                    .merge_metadata::<Node>(
                        name,
                        capacity_type::patch(),
                        "syncing the capacity type",
                    )
                    .await
                    .map(|_| ()),
            };
            match written {
                Ok(()) => tracing::debug!(
                    object = ?relabel,
                    "updated capacity type for nodeclaims"
                ),
                Err(error) => failures.push(error),
            }
        }
        let failed = failures.len();
        match failures.into_iter().next() {
            None => Ok(Action::RequeueAfter(INTERVAL)),
            Some(first) => Err(SyncError::Relabel {
                failed,
                found,
                first,
            }),
        }
    }

    fn error_policy(&self, _: &SyncError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Sync) -> &'static str {
        "sync"
    }
}
