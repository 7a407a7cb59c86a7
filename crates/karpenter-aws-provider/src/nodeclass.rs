//! Resolving an EC2NodeClass against AWS: subnets, security groups, AMIs (aliases through
//! SSM), the instance profile and the capacity reservations, into the pure [`Resolution`] that
//! `karpenter_aws::nodeclass::status` turns into the status; and the clean-up of a deleted
//! class (its managed instance profile and launch templates).
//!
//! Every question asked here is one `karpenter_aws::nodeclass` says to ask; nothing here
//! decides what the answers mean.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::types::Filter as Ec2Filter;
use chrono::{DateTime, Utc};
use karpenter_api::v1::EC2NodeClass;
use karpenter_api::v1::ec2nodeclass::{
    AmiStatus, CapacityReservationStatus, SecurityGroupStatus, SubnetStatus,
};
use karpenter_aws::capacity_reservation;
use karpenter_aws::nodeclass::amis::{self, Alias, Candidate, Image};
use karpenter_aws::nodeclass::instance_profile;
use karpenter_aws::nodeclass::selectors::{self, Query, Subnet};
use karpenter_aws::nodeclass::status::{Outcome, Resolution};
use karpenter_aws::placement_group;

use crate::capacity_reservations::CapacityReservations;
use crate::clients::AwsClients;
use crate::error::AwsError;
use crate::placement_groups::PlacementGroups;

/// Asks AWS what an EC2NodeClass selects.
#[derive(Debug, Clone)]
pub struct NodeClassResolver {
    clients: AwsClients,
    cluster: String,
    placement_groups: Arc<PlacementGroups>,
    reservations: Arc<CapacityReservations>,
}

fn filters(query: &Query) -> Vec<Ec2Filter> {
    query
        .filters
        .iter()
        .map(|f| {
            Ec2Filter::builder()
                .name(&f.name)
                .set_values(Some(f.values.clone()))
                .build()
        })
        .collect()
}

fn time(text: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn image_of(image: &aws_sdk_ec2::types::Image) -> Option<Image> {
    Some(Image {
        id: image.image_id()?.to_owned(),
        name: image.name().unwrap_or_default().to_owned(),
        architecture: image.architecture().map(|a| a.as_str().to_owned())?,
        creation_date: time(image.creation_date()),
        deprecation_time: time(image.deprecation_time()),
    })
}

impl NodeClassResolver {
    pub fn new(clients: AwsClients, cluster: impl Into<String>) -> Self {
        NodeClassResolver {
            clients,
            cluster: cluster.into(),
            placement_groups: Arc::new(PlacementGroups::new()),
            reservations: Arc::new(CapacityReservations::default()),
        }
    }

    /// Resolves capacity reservations with `reservations` (the provider's: launches see the
    /// free slots this reads, and its gate).
    pub fn with_capacity_reservations(mut self, reservations: Arc<CapacityReservations>) -> Self {
        self.reservations = reservations;
        self
    }

    /// Whether the class's reservations are read (gate `ReservedCapacity` on, terms given):
    /// the controller then reads them every [`capacity_reservation::POLL_PERIOD`].
    pub fn polls_reservations(&self, class: &EC2NodeClass) -> bool {
        self.reservations.enabled()
            && class
                .spec
                .capacity_reservation_selector_terms
                .as_ref()
                .is_some_and(|t| !t.is_empty())
    }

    /// Resolves placement groups into `groups` (the provider's, so launches see what the
    /// class's condition says).
    pub fn with_placement_groups(mut self, groups: Arc<PlacementGroups>) -> Self {
        self.placement_groups = groups;
        self
    }

    pub fn clients(&self) -> &AwsClients {
        &self.clients
    }

    /// Everything the class selects, for Kubernetes `k8s_version` (`v1.36.3`).
    pub async fn resolve(
        &self,
        class: &EC2NodeClass,
        k8s_version: &str,
        now: DateTime<Utc>,
    ) -> (Resolution, BTreeMap<String, i64>) {
        let (subnets, ips) = self.subnets(class).await;
        let security_groups = self.security_groups(class).await;
        let amis = self.amis(class, k8s_version, now).await;
        let instance_profile = self.instance_profile(class).await;
        let capacity_reservations = self.capacity_reservations(class, now).await;
        let validation = karpenter_aws::nodeclass::status::validate(class);
        let placement_group = self.placement_group(class).await;
        (
            Resolution {
                subnets,
                security_groups,
                amis,
                instance_profile,
                capacity_reservations,
                validation,
                placement_group,
            },
            ips,
        )
    }

    /// The reservations the class selects (`DescribeCapacityReservations`, as upstream's
    /// capacity reservation reconciler): `None` with the gate `ReservedCapacity` off. Their
    /// free slots are refreshed on the way.
    pub async fn capacity_reservations(
        &self,
        class: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Option<Outcome<Vec<CapacityReservationStatus>>> {
        if !self.reservations.enabled() {
            return None;
        }
        let terms = class
            .spec
            .capacity_reservation_selector_terms
            .as_deref()
            .unwrap_or_default();
        if terms.is_empty() {
            return Some(Outcome::Ready(Vec::new()));
        }
        let name = class.metadata.name.as_deref().unwrap_or_default();
        let described = match self.reservations.describe(&self.clients, terms).await {
            Ok(described) => described,
            Err(error) => {
                return Some(Outcome::failed(
                    "CapacityReservationsResolutionFailed",
                    format!("getting capacity reservations, {error}"),
                ));
            }
        };
        let resolved = capacity_reservation::resolve(&described, now);
        for error in &resolved.errors {
            tracing::error!(ec2nodeclass = name, %error, "failed to parse discovered capacity reservation");
        }
        tracing::debug!(
            ec2nodeclass = name,
            ids = ?resolved.reservations.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            "discovered capacity reservations"
        );
        Some(Outcome::Ready(resolved.reservations))
    }

    /// The class's placement group (`DescribePlacementGroups`), as its `PlacementGroupReady`
    /// outcome: ready without a selector or when an available group matched.
    pub async fn placement_group(&self, class: &EC2NodeClass) -> Outcome<()> {
        let Some(selector) = placement_group::selector(class) else {
            return Outcome::Ready(());
        };
        let found = match self
            .placement_groups
            .describe(&self.clients, selector)
            .await
        {
            Ok(found) => found,
            Err(error) => {
                return Outcome::failed(placement_group::RESOLUTION_FAILED, error.to_string());
            }
        };
        match placement_group::outcome(Some(selector), found) {
            Outcome::Ready(group) => {
                if let Some(group) = group {
                    tracing::debug!(ec2nodeclass = class.metadata.name.as_deref().unwrap_or_default(), id = %group.id, name = %group.name, strategy = group.strategy.as_str(), "resolved the placement group");
                }
                Outcome::Ready(())
            }
            Outcome::NotReady { reason, message } => Outcome::NotReady { reason, message },
            Outcome::Failed { reason, message } => Outcome::Failed { reason, message },
        }
    }

    /// The class's subnets, with their free addresses.
    pub async fn subnets(
        &self,
        class: &EC2NodeClass,
    ) -> (Outcome<Vec<SubnetStatus>>, BTreeMap<String, i64>) {
        let mut found = Vec::new();
        for query in selectors::subnet_queries(&class.spec.subnet_selector_terms) {
            let mut pages = self
                .clients
                .ec2
                .describe_subnets()
                .set_filters(Some(filters(&query)))
                .max_results(500)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(page) => page,
                    Err(error) => {
                        let error = AwsError::from_sdk("ec2:DescribeSubnets", &error);
                        return (
                            Outcome::failed("SubnetsResolutionFailed", error.to_string()),
                            BTreeMap::new(),
                        );
                    }
                };
                for subnet in page.subnets() {
                    let (Some(id), Some(zone)) = (subnet.subnet_id(), subnet.availability_zone())
                    else {
                        continue;
                    };
                    found.push(Subnet {
                        id: id.to_owned(),
                        zone: zone.to_owned(),
                        zone_id: subnet.availability_zone_id().map(str::to_owned),
                        available_ips: i64::from(
                            subnet.available_ip_address_count().unwrap_or_default(),
                        ),
                    });
                }
            }
        }
        let ips = found
            .iter()
            .map(|s| (s.id.clone(), s.available_ips))
            .collect();
        let status = selectors::subnet_status(&found);
        if status.is_empty() {
            return (
                Outcome::not_ready(
                    "SubnetsNotFound",
                    "SubnetSelector did not match any Subnets",
                ),
                ips,
            );
        }
        (Outcome::Ready(status), ips)
    }

    /// The class's security groups.
    pub async fn security_groups(&self, class: &EC2NodeClass) -> Outcome<Vec<SecurityGroupStatus>> {
        let mut found = Vec::new();
        for query in selectors::security_group_queries(&class.spec.security_group_selector_terms) {
            let mut pages = self
                .clients
                .ec2
                .describe_security_groups()
                .set_filters(Some(filters(&query)))
                .max_results(500)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(page) => page,
                    Err(error) => {
                        let error = AwsError::from_sdk("ec2:DescribeSecurityGroups", &error);
                        return Outcome::failed(
                            "SecurityGroupsResolutionFailed",
                            error.to_string(),
                        );
                    }
                };
                for group in page.security_groups() {
                    if let Some(id) = group.group_id() {
                        found.push((id.to_owned(), group.group_name().map(str::to_owned)));
                    }
                }
            }
        }
        let status = selectors::security_group_status(&found);
        if status.is_empty() {
            return Outcome::not_ready(
                "SecurityGroupsNotFound",
                "SecurityGroupSelector did not match any SecurityGroups",
            );
        }
        Outcome::Ready(status)
    }

    /// An SSM parameter's value; `None` when it does not exist.
    async fn parameter(&self, name: &str) -> Result<Option<String>, AwsError> {
        match self.clients.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter.and_then(|p| p.value)),
            Err(error) => {
                let error = AwsError::from_sdk("ssm:GetParameter", &error);
                if error.is_not_found() {
                    Ok(None)
                } else {
                    Err(error)
                }
            }
        }
    }

    /// Describes images by id (deprecated ones included).
    async fn images_by_id(&self, ids: Vec<String>) -> Result<Vec<Image>, AwsError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .clients
            .ec2
            .describe_images()
            .set_image_ids(Some(ids))
            .include_deprecated(true)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeImages", &e))?;
        Ok(out.images().iter().filter_map(image_of).collect())
    }

    async fn images(&self, query: &Query) -> Result<Vec<Image>, AwsError> {
        let mut out = Vec::new();
        let mut pages = self
            .clients
            .ec2
            .describe_images()
            .set_filters(Some(filters(query)))
            .set_owners((!query.owners.is_empty()).then(|| query.owners.clone()))
            .include_deprecated(true)
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeImages", &e))?;
            out.extend(page.images().iter().filter_map(image_of));
        }
        Ok(out)
    }

    /// The class's AMIs.
    pub async fn amis(
        &self,
        class: &EC2NodeClass,
        k8s_version: &str,
        now: DateTime<Utc>,
    ) -> Outcome<Vec<AmiStatus>> {
        match self.candidates(class, k8s_version).await {
            Ok(Ok(candidates)) => {
                let status = amis::select(&candidates, now);
                if status.is_empty() {
                    Outcome::not_ready("AMINotFound", "AMISelector did not match any AMIs")
                } else {
                    Outcome::Ready(status)
                }
            }
            Ok(Err((reason, message))) => Outcome::NotReady { reason, message },
            Err(error) => Outcome::failed("AMIsResolutionFailed", error.to_string()),
        }
    }

    async fn candidates(
        &self,
        class: &EC2NodeClass,
        k8s_version: &str,
    ) -> Result<Result<Vec<Candidate>, (String, String)>, AwsError> {
        let mut candidates = Vec::new();
        for (index, term) in class.spec.ami_selector_terms.iter().enumerate() {
            if let Some(alias) = &term.alias {
                let Some(k8s) = amis::k8s_minor(k8s_version) else {
                    return Ok(Err((
                        "AMINotFound".into(),
                        format!("cannot read the Kubernetes version {k8s_version:?}"),
                    )));
                };
                let parameters = match Alias::parse(index, alias)
                    .and_then(|a| amis::alias_parameters(index, &a, &k8s))
                {
                    Ok(parameters) => parameters,
                    Err(error) => return Ok(Err((error.reason().into(), error.to_string()))),
                };
                let mut ids: Vec<(String, usize)> = Vec::new();
                for (i, parameter) in parameters.iter().enumerate() {
                    if let Some(id) = self.parameter(&parameter.path).await? {
                        ids.push((id, i));
                    }
                }
                if ids.is_empty() {
                    return Ok(Err((
                        "AMINotFound".into(),
                        format!("failed to discover any AMIs for alias {alias}"),
                    )));
                }
                let images = self
                    .images_by_id(ids.iter().map(|(id, _)| id.clone()).collect())
                    .await?;
                for (id, i) in &ids {
                    if let Some(image) = images.iter().find(|image| &image.id == id)
                        && let Some(candidate) =
                            amis::alias_candidate(image.clone(), &parameters[*i])
                    {
                        candidates.push(candidate);
                    }
                }
            } else if let Some(parameter) = &term.ssm_parameter
                && let Some(id) = self
                    .parameter(parameter)
                    .await?
                    .filter(|v| v.starts_with("ami-"))
            {
                candidates.extend(
                    self.images_by_id(vec![id])
                        .await?
                        .into_iter()
                        .filter_map(amis::plain_candidate),
                );
            }
        }
        for query in selectors::image_queries(&class.spec.ami_selector_terms) {
            candidates.extend(
                self.images(&query)
                    .await?
                    .into_iter()
                    .filter_map(amis::plain_candidate),
            );
        }
        Ok(Ok(candidates))
    }

    /// The instance profile the class launches with: `spec.instanceProfile` as is, or the
    /// managed profile for `spec.role` (created, tagged and given the role when needed).
    pub async fn instance_profile(&self, class: &EC2NodeClass) -> Outcome<String> {
        if let Some(profile) = &class.spec.instance_profile {
            return match self
                .clients
                .iam
                .get_instance_profile()
                .instance_profile_name(profile)
                .send()
                .await
            {
                Ok(_) => Outcome::Ready(profile.clone()),
                Err(error) => {
                    let error = AwsError::from_sdk("iam:GetInstanceProfile", &error);
                    if error.is_not_found() {
                        Outcome::not_ready(
                            "InstanceProfileNotFound",
                            format!("instance profile {profile} does not exist"),
                        )
                    } else {
                        Outcome::failed("InstanceProfileResolutionFailed", error.to_string())
                    }
                }
            };
        }
        let Some(role) = class.spec.role.as_deref() else {
            return Outcome::not_ready(
                "InstanceProfileNotFound",
                "neither spec.role nor spec.instanceProfile is set",
            );
        };
        match self.ensure_profile(class, role).await {
            Ok(name) => Outcome::Ready(name),
            Err(error)
                if error.operation == "iam:AddRoleToInstanceProfile" && error.is_not_found() =>
            {
                Outcome::not_ready(
                    "RoleNotFound",
                    format!("role {role} does not exist: {error}"),
                )
            }
            Err(error) => Outcome::failed("InstanceProfileCreationFailed", error.to_string()),
        }
    }

    async fn ensure_profile(&self, class: &EC2NodeClass, role: &str) -> Result<String, AwsError> {
        let region = &self.clients.region;
        let name = instance_profile::name(region, &self.cluster, class);
        let role = instance_profile::role_name(role);
        let iam = &self.clients.iam;
        let existing = match iam
            .get_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
        {
            Ok(out) => out.instance_profile,
            Err(error) => {
                let error = AwsError::from_sdk("iam:GetInstanceProfile", &error);
                if !error.is_not_found() {
                    return Err(error);
                }
                None
            }
        };
        let roles: Vec<String> = match existing {
            Some(profile) => profile
                .roles()
                .iter()
                .map(|r| r.role_name().to_owned())
                .collect(),
            None => {
                let uid = class.metadata.uid.as_deref().unwrap_or_default();
                let tags = instance_profile::tags(region, &self.cluster, class)
                    .into_iter()
                    .filter_map(|(k, v)| {
                        aws_sdk_iam::types::Tag::builder()
                            .key(k)
                            .value(v)
                            .build()
                            .ok()
                    })
                    .collect();
                iam.create_instance_profile()
                    .instance_profile_name(&name)
                    .path(instance_profile::path(region, &self.cluster, uid))
                    .set_tags(Some(tags))
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("iam:CreateInstanceProfile", &e))?;
                tracing::info!(ec2nodeclass = class.metadata.name.as_deref().unwrap_or_default(), instance_profile = %name, "created instance profile");
                Vec::new()
            }
        };
        if roles.iter().any(|r| r == role) {
            return Ok(name);
        }
        for other in &roles {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(other)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("iam:RemoveRoleFromInstanceProfile", &e))?;
        }
        iam.add_role_to_instance_profile()
            .instance_profile_name(&name)
            .role_name(role)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("iam:AddRoleToInstanceProfile", &e))?;
        Ok(name)
    }

    /// Deletes the managed instance profile of a class being deleted (nothing for
    /// `spec.instanceProfile`, which is the user's).
    pub async fn delete_instance_profile(&self, class: &EC2NodeClass) -> Result<(), AwsError> {
        if class.spec.role.is_none() {
            return Ok(());
        }
        let name = instance_profile::name(&self.clients.region, &self.cluster, class);
        let iam = &self.clients.iam;
        let profile = match iam
            .get_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
        {
            Ok(out) => out.instance_profile,
            Err(error) => {
                let error = AwsError::from_sdk("iam:GetInstanceProfile", &error);
                if error.is_not_found() {
                    return Ok(());
                }
                return Err(error);
            }
        };
        for role in profile.iter().flat_map(|p| p.roles()) {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(role.role_name())
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("iam:RemoveRoleFromInstanceProfile", &e))?;
        }
        match iam
            .delete_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => {
                let error = AwsError::from_sdk("iam:DeleteInstanceProfile", &error);
                if error.is_not_found() {
                    Ok(())
                } else {
                    Err(error)
                }
            }
        }
    }
}
