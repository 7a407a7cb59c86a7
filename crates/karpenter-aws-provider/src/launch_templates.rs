//! Launch templates in EC2 (reference `karpenter-aws.md` 2.2): made on first use, found again
//! by their content-hash name (`DescribeLaunchTemplates`) after a restart, remembered while
//! used and deleted once idle for [`IDLE_TTL`] (upstream deletes on cache expiry), and all of a
//! class's deleted with the class.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    Filter, LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCpuOptionsRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateEnclaveOptionsRequest,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
};
use base64::Engine;
use karpenter_aws::launch_template::LaunchTemplate;

use crate::clients::AwsClients;
use crate::error::AwsError;
use crate::metrics::metrics;

/// A template unused this long is deleted from EC2.
pub const IDLE_TTL: Duration = Duration::from_secs(300);

/// The launch templates this process made or found.
#[derive(Debug, Default)]
pub struct LaunchTemplates {
    used: Mutex<HashMap<String, Instant>>,
}

fn tags(tags: &std::collections::BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// `LaunchTemplateData` as EC2 takes it.
pub fn request_data(template: &LaunchTemplate) -> RequestLaunchTemplateData {
    let data = &template.data;
    let block_devices = data
        .block_device_mappings
        .iter()
        .map(|m| {
            let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_delete_on_termination(m.ebs.delete_on_termination)
                .set_encrypted(m.ebs.encrypted)
                .set_iops(m.ebs.iops.and_then(|v| i32::try_from(v).ok()))
                .set_kms_key_id(m.ebs.kms_key_id.clone())
                .set_snapshot_id(m.ebs.snapshot_id.clone())
                .set_throughput(m.ebs.throughput.and_then(|v| i32::try_from(v).ok()))
                .set_volume_initialization_rate(m.ebs.volume_initialization_rate)
                .set_volume_size(m.ebs.volume_size_gib.and_then(|v| i32::try_from(v).ok()))
                .set_volume_type(m.ebs.volume_type.as_deref().map(Into::into))
                .build();
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .set_device_name(m.device_name.clone())
                .ebs(ebs)
                .build()
        })
        .collect();
    let interfaces = data
        .network_interfaces
        .iter()
        .map(|n| {
            let mut b = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .set_network_card_index(n.network_card_index)
                .device_index(n.device_index)
                .set_interface_type(n.interface_type.clone())
                .set_groups(Some(n.groups.clone()))
                .set_associate_public_ip_address(n.associate_public_ip_address)
                .set_ipv4_prefix_count(n.ipv4_prefix_count)
                .set_ipv6_prefix_count(n.ipv6_prefix_count)
                .set_ipv6_address_count(n.ipv6_address_count)
                .set_primary_ipv6(n.primary_ipv6);
            if let Some(c) = &n.connection_tracking {
                b = b.connection_tracking_specification(
                    aws_sdk_ec2::types::ConnectionTrackingSpecificationRequest::builder()
                        .set_tcp_established_timeout(c.tcp_established_timeout)
                        .set_udp_stream_timeout(c.udp_stream_timeout)
                        .set_udp_timeout(c.udp_timeout)
                        .build(),
                );
            }
            b.build()
        })
        .collect();
    let metadata = &data.metadata_options;
    let mut builder = RequestLaunchTemplateData::builder()
        .image_id(&data.image_id)
        .user_data(base64::engine::general_purpose::STANDARD.encode(&data.user_data))
        .set_block_device_mappings(Some(block_devices))
        .iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(&data.iam_instance_profile_name)
                .build(),
        )
        .monitoring(
            LaunchTemplatesMonitoringRequest::builder()
                .enabled(data.monitoring_enabled)
                .build(),
        )
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(metadata.http_endpoint.as_str().into())
                .set_http_protocol_ipv6(metadata.http_protocol_ipv6.as_deref().map(Into::into))
                .http_put_response_hop_limit(
                    i32::try_from(metadata.http_put_response_hop_limit).unwrap_or(1),
                )
                .http_tokens(metadata.http_tokens.as_str().into())
                .instance_metadata_tags(metadata.instance_metadata_tags.as_str().into())
                .build(),
        )
        .placement(
            LaunchTemplatePlacementRequest::builder()
                .tenancy(data.placement_tenancy.as_str().into())
                .set_group_id(data.placement_group_id.clone())
                .set_partition_number(
                    data.placement_partition_number
                        .and_then(|n| i32::try_from(n).ok()),
                )
                .build(),
        )
        .set_tag_specifications(Some(
            data.tag_resource_types
                .iter()
                .map(|kind| {
                    LaunchTemplateTagSpecificationRequest::builder()
                        .resource_type(ResourceType::from(kind.as_str()))
                        .set_tags(Some(tags(&template.tags)))
                        .build()
                })
                .collect(),
        ));
    if !data.security_group_ids.is_empty() {
        builder = builder.set_security_group_ids(Some(data.security_group_ids.clone()));
    }
    if !data.network_interfaces.is_empty() {
        builder = builder.set_network_interfaces(Some(interfaces));
    }
    if let Some(nested) = &data.cpu_nested_virtualization {
        builder = builder.cpu_options(
            LaunchTemplateCpuOptionsRequest::builder()
                .nested_virtualization(nested.as_str().into())
                .build(),
        );
    }
    if data.enclave_enabled {
        builder = builder.enclave_options(
            LaunchTemplateEnclaveOptionsRequest::builder()
                .enabled(true)
                .build(),
        );
    }
    if let Some(preference) = &data.capacity_reservation_preference {
        builder = builder.capacity_reservation_specification(
            aws_sdk_ec2::types::LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(preference.as_str().into())
                .set_capacity_reservation_target(data.capacity_reservation_id.as_ref().map(|id| {
                    aws_sdk_ec2::types::CapacityReservationTarget::builder()
                        .capacity_reservation_id(id)
                        .build()
                }))
                .build(),
        );
    }
    if let Some(market) = &data.market_type {
        builder = builder.instance_market_options(
            aws_sdk_ec2::types::LaunchTemplateInstanceMarketOptionsRequest::builder()
                .market_type(market.as_str().into())
                .build(),
        );
    }
    builder.build()
}

impl LaunchTemplates {
    fn touch(&self, name: &str) {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.insert(name.to_owned(), Instant::now());
    }

    /// Forgets a template (EC2 said it is gone): the next launch makes it again.
    pub fn forget(&self, name: &str) {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.remove(name);
    }

    fn known(&self, name: &str) -> bool {
        let used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.contains_key(name)
    }

    /// Makes sure the template exists in EC2.
    pub async fn ensure(
        &self,
        clients: &AwsClients,
        template: &LaunchTemplate,
    ) -> Result<(), AwsError> {
        if self.known(&template.name) {
            self.touch(&template.name);
            return Ok(());
        }
        match clients
            .ec2
            .describe_launch_templates()
            .launch_template_names(&template.name)
            .send()
            .await
        {
            Ok(out) if !out.launch_templates().is_empty() => {
                self.touch(&template.name);
                return Ok(());
            }
            Ok(_) => {}
            Err(error) => {
                let error = AwsError::from_sdk("ec2:DescribeLaunchTemplates", &error);
                if !error.is_not_found()
                    && error.code != "InvalidLaunchTemplateName.NotFoundException"
                {
                    return Err(error);
                }
            }
        }
        let created = clients
            .ec2
            .create_launch_template()
            .launch_template_name(&template.name)
            .launch_template_data(request_data(template))
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::LaunchTemplate)
                    .set_tags(Some(tags(&template.tags)))
                    .build(),
            )
            .send()
            .await;
        match created {
            Ok(_) => {
                tracing::debug!(launch_template = %template.name, "created launch template");
                if let Some(class) = template.tags.get("karpenter.k8s.aws/ec2nodeclass") {
                    metrics().userdata_bytes(class, template.data.user_data.len());
                }
            }
            Err(error) => {
                let error = AwsError::from_sdk("ec2:CreateLaunchTemplate", &error);
                // A concurrent launch (or another replica before a failover) made it first.
                if !error.code.contains("AlreadyExists") && !error.code.contains("InUse") {
                    return Err(error);
                }
            }
        }
        self.touch(&template.name);
        Ok(())
    }

    /// Deletes the templates idle for longer than [`IDLE_TTL`].
    pub async fn sweep(&self, clients: &AwsClients) {
        let idle: Vec<String> = {
            let used = self
                .used
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            used.iter()
                .filter(|(_, at)| at.elapsed() > IDLE_TTL)
                .map(|(name, _)| name.clone())
                .collect()
        };
        for name in idle {
            match clients
                .ec2
                .delete_launch_template()
                .launch_template_name(&name)
                .send()
                .await
            {
                Ok(_) => self.forget(&name),
                Err(error) => {
                    let error = AwsError::from_sdk("ec2:DeleteLaunchTemplate", &error);
                    if error.is_not_found() || error.code.contains("NotFound") {
                        self.forget(&name);
                    } else {
                        tracing::warn!(launch_template = %name, %error, "deleting an idle launch template failed; retried later");
                    }
                }
            }
        }
    }

    /// Deletes every template of the cluster made for `node_class` (its finalizer).
    pub async fn delete_for_class(
        &self,
        clients: &AwsClients,
        cluster: &str,
        node_class: &str,
    ) -> Result<usize, AwsError> {
        let mut names = Vec::new();
        let mut pages = clients
            .ec2
            .describe_launch_templates()
            .filters(
                Filter::builder()
                    .name("tag:eks:eks-cluster-name")
                    .values(cluster)
                    .build(),
            )
            .filters(
                Filter::builder()
                    .name("tag:karpenter.k8s.aws/ec2nodeclass")
                    .values(node_class)
                    .build(),
            )
            .max_results(200)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeLaunchTemplates", &e))?;
            names.extend(page.launch_templates().iter().filter_map(|t| {
                t.launch_template_name()
                    .map(|n| (n.to_owned(), t.launch_template_id().map(str::to_owned)))
            }));
        }
        for (name, id) in &names {
            // By id when described with one: an id names one template even where a name was
            // reused (the AWS emulator kept a second template of one name that a delete by
            // name could no longer reach, and the finalizer retried it forever).
            let request = clients.ec2.delete_launch_template();
            let request = match id {
                Some(id) => request.launch_template_id(id),
                None => request.launch_template_name(name),
            };
            if let Err(error) = request.send().await {
                let error = AwsError::from_sdk("ec2:DeleteLaunchTemplate", &error);
                if !error.code.contains("NotFound") {
                    return Err(error);
                }
            }
            self.forget(name);
        }
        metrics().forget_node_class(node_class);
        Ok(names.len())
    }
}
