//! The instances Karpenter launched, as EC2 describes them (reference `karpenter-aws.md` 2.6):
//! one by id, all of the cluster's by tag, and their termination. Terminated instances are not
//! listed: upstream reads pending, running, stopping, stopped and shutting-down ones.
//!
//! The provider describes and terminates instances by id through its batchers
//! ([`crate::batcher::ec2`]), which call [`describe`] and [`terminate_all`] for many ids at
//! once and [`get`] and [`terminate`] for one.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::Filter;
use chrono::{DateTime, Utc};
use karpenter_cloud::CapacityType;
use karpenter_cloud::offering::{Reservation, ReservationKind};

use crate::clients::AwsClients;
use crate::error::AwsError;

/// The states in which an instance is still ours to account for.
pub const LIVE_STATES: &[&str] = &["pending", "running", "stopping", "stopped", "shutting-down"];

/// One instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// The zone's id (`use1-az1`), when EC2 names it.
    pub zone_id: Option<String>,
    pub state: String,
    pub capacity_type: CapacityType,
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_group_ids: BTreeSet<String>,
    pub tags: BTreeMap<String, String>,
    pub launch_time: Option<DateTime<Utc>>,
    /// `Placement.Tenancy` (`default` when EC2 leaves it out, as upstream reads it).
    pub tenancy: String,
    /// `Placement.GroupId`, when launched into a placement group.
    pub placement_group_id: Option<String>,
    /// `Placement.PartitionNumber`, in a partition placement group.
    pub partition_number: Option<u32>,
    /// The reservation of a `reserved` instance: one launched into a reservation it targeted
    /// (`CapacityReservationId` with the preference `capacity-reservations-only`, as upstream
    /// reads it; an open ODCR that caught an on-demand launch does not make it reserved). Its
    /// free slots are not known here (0).
    pub reservation: Option<Reservation>,
}

/// The reservation a described instance was launched into, as upstream's `NewInstance`.
fn reservation_of(instance: &aws_sdk_ec2::types::Instance) -> Option<Reservation> {
    let id = instance.capacity_reservation_id()?;
    let targeted = instance
        .capacity_reservation_specification()
        .and_then(|s| s.capacity_reservation_preference())
        .is_some_and(|p| p.as_str() == "capacity-reservations-only");
    if !targeted || instance.spot_instance_request_id().is_some() {
        return None;
    }
    let lifecycle = instance.instance_lifecycle().map(|l| l.as_str());
    Some(Reservation {
        id: id.to_owned(),
        kind: if lifecycle == Some("capacity-block") {
            ReservationKind::CapacityBlock
        } else {
            ReservationKind::Default
        },
        interruptible: lifecycle == Some("interruptible-capacity-reservation"),
        available_instances: 0,
    })
}

impl Instance {
    /// `aws:///<zone>/<instance-id>`.
    pub fn provider_id(&self) -> String {
        provider_id(&self.zone, &self.id)
    }
}

/// `aws:///<zone>/<instance-id>`.
pub fn provider_id(zone: &str, id: &str) -> String {
    format!("aws:///{zone}/{id}")
}

fn convert(instance: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    Some(Instance {
        id: instance.instance_id()?.to_owned(),
        instance_type: instance.instance_type()?.as_str().to_owned(),
        zone: instance.placement()?.availability_zone()?.to_owned(),
        zone_id: instance
            .placement()
            .and_then(|p| p.availability_zone_id())
            .map(str::to_owned),
        state: instance
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_owned())
            .unwrap_or_default(),
        reservation: reservation_of(instance),
        capacity_type: if reservation_of(instance).is_some() {
            CapacityType::Reserved
        } else if instance.spot_instance_request_id().is_some()
            || instance
                .instance_lifecycle()
                .is_some_and(|l| l.as_str() == "spot")
        {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        },
        image_id: instance.image_id().map(str::to_owned),
        subnet_id: instance.subnet_id().map(str::to_owned),
        security_group_ids: instance
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_owned))
            .collect(),
        tags: instance
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_owned(),
                    t.value().unwrap_or_default().to_owned(),
                ))
            })
            .collect(),
        launch_time: instance
            .launch_time()
            .and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos())),
        tenancy: instance
            .placement()
            .and_then(|p| p.tenancy())
            .map(|t| t.as_str().to_owned())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| karpenter_aws::launch::tenancy::DEFAULT.to_owned()),
        placement_group_id: instance
            .placement()
            .and_then(|p| p.group_id())
            .filter(|g| !g.is_empty())
            .map(str::to_owned),
        partition_number: instance
            .placement()
            .and_then(|p| p.partition_number())
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0),
    })
}

fn states() -> Filter {
    Filter::builder()
        .name("instance-state-name")
        .set_values(Some(LIVE_STATES.iter().map(|s| (*s).to_owned()).collect()))
        .build()
}

/// The live instance with `id`; `None` when EC2 no longer has it (or it is terminated).
pub async fn get(clients: &AwsClients, id: &str) -> Result<Option<Instance>, AwsError> {
    let out = clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .filters(states())
        .send()
        .await;
    let out = match out {
        Ok(out) => out,
        Err(error) => {
            let error = AwsError::from_sdk("ec2:DescribeInstances", &error);
            if error.is_not_found() {
                return Ok(None);
            }
            return Err(error);
        }
    };
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(convert)
        .find(|i| i.id == id))
}

/// The live instances among `ids`, in one (paginated) `DescribeInstances`. EC2 fails the whole
/// call when one id does not exist.
pub async fn describe(clients: &AwsClients, ids: &[String]) -> Result<Vec<Instance>, AwsError> {
    let mut out = Vec::new();
    let mut pages = clients
        .ec2
        .describe_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .filters(states())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeInstances", &e))?;
        out.extend(
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter_map(convert),
        );
    }
    Ok(out)
}

/// Every live instance this cluster's Karpenter launched (tagged with a NodePool, an
/// EC2NodeClass and the cluster).
pub async fn list(clients: &AwsClients, cluster: &str) -> Result<Vec<Instance>, AwsError> {
    let mut out = Vec::new();
    let mut pages = clients
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values("karpenter.sh/nodepool")
                .build(),
        )
        .filters(
            Filter::builder()
                .name("tag-key")
                .values("karpenter.k8s.aws/ec2nodeclass")
                .build(),
        )
        .filters(
            Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(cluster)
                .build(),
        )
        .filters(states())
        .max_results(1000)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeInstances", &e))?;
        out.extend(
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter_map(convert),
        );
    }
    Ok(out)
}

/// Reboots the instance in place (`ec2:RebootInstances`; EC2 has no client token for it).
pub async fn reboot(clients: &AwsClients, id: &str) -> Result<(), AwsError> {
    clients
        .ec2
        .reboot_instances()
        .instance_ids(id)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| AwsError::from_sdk("ec2:RebootInstances", &e))
}

/// Terminates the instances `ids` in one call: each instance's id and state after the call
/// (`shutting-down`, `terminated`, ...) as EC2 answers.
pub async fn terminate_all(
    clients: &AwsClients,
    ids: &[String],
) -> Result<Vec<(String, String)>, AwsError> {
    let out = clients
        .ec2
        .terminate_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:TerminateInstances", &e))?;
    Ok(out
        .terminating_instances()
        .iter()
        .filter_map(|change| {
            Some((
                change.instance_id()?.to_owned(),
                change.current_state()?.name()?.as_str().to_owned(),
            ))
        })
        .collect())
}

/// Terminates the instance (idempotent: terminating a terminated instance is fine).
pub async fn terminate(clients: &AwsClients, id: &str) -> Result<(), AwsError> {
    clients
        .ec2
        .terminate_instances()
        .instance_ids(id)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| AwsError::from_sdk("ec2:TerminateInstances", &e))
}
