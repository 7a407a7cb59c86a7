//! ARC zonal shifts of the cluster (`ENABLE_ZONAL_SHIFT`): the last answer of
//! `arc-zonal-shift:GetManagedResource` for the cluster's ARN, which the EC2 provider reads on
//! every instance-type listing, launch and termination
//! ([`karpenter_aws::zonal_shift`] decides what a shift means).
//!
//! The cluster's ARN comes from `eks:DescribeCluster` once, at start ([`ZonalShifts::start`]),
//! together with a first `GetManagedResource`: a cluster ARC does not know (not registered for
//! zonal shift) stops the start, as upstream. Then the zonal shift loop of the controller calls
//! [`ZonalShifts::refresh`] every 30 seconds. A failed refresh keeps the last answer.

use std::collections::BTreeSet;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use karpenter_aws::zonal_shift::{Shift, shifted_zones};

use crate::clients::AwsClients;
use crate::error::AwsError;

const GET_MANAGED_RESOURCE: &str = "arc-zonal-shift:GetManagedResource";

/// The cluster's zonal shifts as ARC last said.
#[derive(Debug)]
pub struct ZonalShifts {
    cluster_arn: String,
    shifts: RwLock<Vec<Shift>>,
    /// Changes whenever the answer changes (instance types cached by a version are re-read).
    version: AtomicU64,
}

impl ZonalShifts {
    /// Reads the cluster's ARN from EKS and its zonal shifts from ARC; either failing fails
    /// the start (upstream: "cluster not registered to Zonal Shift").
    pub async fn start(clients: &AwsClients, cluster_name: &str) -> Result<Self, AwsError> {
        let out = clients
            .eks
            .describe_cluster()
            .name(cluster_name)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("eks:DescribeCluster", &e))?;
        let cluster_arn = out
            .cluster()
            .and_then(|c| c.arn())
            .ok_or_else(|| {
                AwsError::new(
                    "eks:DescribeCluster",
                    "NoArn",
                    format!("cluster {cluster_name} has no ARN"),
                )
            })?
            .to_owned();
        let this = ZonalShifts {
            cluster_arn,
            shifts: RwLock::new(Vec::new()),
            version: AtomicU64::new(0),
        };
        this.refresh(clients).await?;
        Ok(this)
    }

    /// The cluster's ARN (the managed resource ARC is asked about).
    pub fn cluster_arn(&self) -> &str {
        &self.cluster_arn
    }

    /// Asks ARC again; returns the shifts it answered. On failure the last answer stays.
    pub async fn refresh(&self, clients: &AwsClients) -> Result<Vec<Shift>, AwsError> {
        let out = clients
            .arc
            .get_managed_resource()
            .resource_identifier(&self.cluster_arn)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(GET_MANAGED_RESOURCE, &e))?;
        let shifts: Vec<Shift> = out
            .zonal_shifts()
            .iter()
            .filter_map(|z| {
                Some(Shift {
                    away_from: z.away_from().to_owned(),
                    expiry: DateTime::from_timestamp(z.expiry_time().secs(), 0)?,
                    applied: z.applied_status().as_str() == "APPLIED",
                })
            })
            .collect();
        let mut current = self
            .shifts
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current != shifts {
            *current = shifts.clone();
            self.version.fetch_add(1, Ordering::Relaxed);
        }
        Ok(shifts)
    }

    /// The zone ids shifted away from at `now`.
    pub fn shifted(&self, now: DateTime<Utc>) -> BTreeSet<String> {
        shifted_zones(
            &self
                .shifts
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            now,
        )
    }

    /// Changes with every new answer and every shift that starts or stops counting (expiry).
    pub fn version(&self, now: DateTime<Utc>) -> u64 {
        let shifted = self.shifted(now);
        let mut hash = self.version.load(Ordering::Relaxed);
        for id in shifted {
            for b in id.bytes() {
                hash = hash.wrapping_mul(31).wrapping_add(u64::from(b));
            }
        }
        hash
    }
}
