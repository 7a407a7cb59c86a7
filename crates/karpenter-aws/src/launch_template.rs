//! Launch templates: what `ec2:CreateLaunchTemplate` would be sent for one NodeClaim, and the
//! name that identifies those contents.
//!
//! # What this module owns
//!
//! Building [`LaunchTemplate`] from a [`LaunchTemplateRequest`] (EC2NodeClass, NodeClaim, AMI,
//! the instance types the template serves, capacity type, cluster facts) as upstream's
//! `launchtemplate.go`/`types.go` and the AMI-family resolver fill `CreateLaunchTemplateInput`
//! (reference `karpenter-aws.md` 1.7, 1.8, 2.2, 2.4): image, user data ([`crate::userdata`]),
//! block device mappings (the EC2NodeClass's, else the family default), metadata options
//! (`InstanceMetadataTags` always disabled, no IPv6 option in the isolated regions), instance
//! profile, monitoring, network interfaces carrying the security groups, tags, placement
//! (tenancy, the class's placement group and the targeted partition), CPU options, enclave
//! options and capacity reservations (a template per reservation targets it; with the gate
//! `ReservedCapacity` on every other template opts out of reservations); and its name `karpenter.k8s.aws/<decimal hash>`.
//!
//! The name is a hash of a canonical rendering of the contents (JSON with sorted maps and sorted
//! security group ids, SHA-256, first 8 bytes as a decimal `u64`): equal contents give equal
//! names, any change of a field gives a new name. The instance types are not part of it (they go
//! into CreateFleet overrides), but their resolved `maxPods` is, through the user data.
//!
//! # What it must not do
//!
//! No EC2 call, no cache, no clock: creating, describing and deleting templates is the async
//! shell's job. It does not group instance types (callers group by max pods first; a mixed
//! group is an error).

use std::collections::BTreeMap;
use std::net::IpAddr;

use karpenter_api::labels;
use karpenter_api::v1::ec2nodeclass::{
    BlockDeviceMapping, EnabledDisabled, HttpTokens, InterfaceType, MetadataOptions, VolumeType,
};
use karpenter_api::v1::{AmiFamily, EC2NodeClass, NodeClaim};
use karpenter_cloud::InstanceTypeInfo;
use karpenter_cloud::offering::{Reservation, ReservationKind};
use karpenter_scheduling::Quantity;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::placement_group::Placement;
use crate::userdata::{self, BootstrapInput, ClusterFacts, UserDataError};

/// Prefix of every launch template name Karpenter creates.
pub const NAME_PREFIX: &str = "karpenter.k8s.aws";
/// Regions whose IMDS does not accept `HttpProtocolIpv6`.
pub const IPV6_IMDS_UNSUPPORTED_REGIONS: &[&str] = &[
    "us-iso-east-1",
    "us-iso-west-1",
    "us-isob-east-1",
    "us-isob-west-1",
    "us-isof-south-1",
    "us-isof-east-1",
];

/// What one launch template is built from.
#[derive(Debug, Clone)]
pub struct LaunchTemplateRequest<'a> {
    pub node_class: &'a EC2NodeClass,
    pub node_claim: &'a NodeClaim,
    pub cluster: &'a ClusterFacts,
    pub region: &'a str,
    /// The AMI the instance types were mapped to.
    pub image_id: &'a str,
    /// The instance types this template serves; all must have the same `pods` capacity.
    pub instance_types: &'a [InstanceTypeInfo],
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: &'a str,
    /// `default` or `dedicated`.
    pub tenancy: &'a str,
    /// The class's placement group and the partition the claim targets, if any.
    pub placement: Option<&'a Placement>,
    /// Capacity reservations: targeted (gate `ReservedCapacity` on) or left open.
    pub capacity_reservation: ReservationLaunch<'a>,
}

/// How a launch template treats capacity reservations (upstream's `LaunchMode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReservationLaunch<'a> {
    /// Gate `ReservedCapacity` off: no `CapacityReservationSpecification`, so an `open` ODCR
    /// may catch the launch (the behaviour before native reservation support).
    Open,
    /// Gate on: a reserved launch targets its reservation (`capacity-reservations-only`, and
    /// the market type `capacity-block` or `interruptible-capacity-reservation` for those);
    /// any other launch stays out of every reservation (preference `none`).
    Targeted(Option<&'a Reservation>),
}

/// The contents and name of one launch template.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchTemplate {
    /// `karpenter.k8s.aws/<hash of data and tags>`.
    pub name: String,
    pub data: LaunchTemplateData,
    /// Tags of the launch template itself (`TagSpecifications[launch-template]`).
    pub tags: BTreeMap<String, String>,
    /// The instance types it serves (not hashed: they go into the fleet's overrides).
    #[serde(skip)]
    pub instance_types: Vec<String>,
}

/// `LaunchTemplateData`, field by field as EC2 names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct LaunchTemplateData {
    pub image_id: String,
    /// The final user data, not yet base64-encoded.
    pub user_data: String,
    pub block_device_mappings: Vec<BlockDeviceMappingRequest>,
    pub iam_instance_profile_name: String,
    pub monitoring_enabled: bool,
    /// Empty whenever network interfaces are given (they carry the groups); upstream always
    /// gives at least the primary one.
    pub security_group_ids: Vec<String>,
    pub network_interfaces: Vec<NetworkInterfaceRequest>,
    pub metadata_options: MetadataOptionsRequest,
    /// Resource types tagged at launch (`network-interface`, plus `spot-instances-request` for
    /// spot), each with the launch template's tags.
    pub tag_resource_types: Vec<String>,
    pub placement_tenancy: String,
    /// `Placement.GroupId`: the class's placement group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_group_id: Option<String>,
    /// `Placement.PartitionNumber`: the partition the NodeClaim targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_partition_number: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_nested_virtualization: Option<String>,
    /// `EnclaveOptions.Enabled`: the EC2NodeClass's `enclaveOptions.enabled`.
    pub enclave_enabled: bool,
    /// `CapacityReservationSpecification.CapacityReservationPreference`:
    /// `capacity-reservations-only` (a reserved launch) or `none` ([`ReservationLaunch`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_preference: Option<String>,
    /// `CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_id: Option<String>,
    /// `InstanceMarketOptions.MarketType`: `capacity-block` or
    /// `interruptible-capacity-reservation` for those reservations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub market_type: Option<String>,
}

/// One block device mapping (`LaunchTemplateBlockDeviceMappingRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BlockDeviceMappingRequest {
    pub device_name: Option<String>,
    pub ebs: EbsRequest,
}

/// An EBS volume; sizes in GiB, rounded up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_size_gib: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// One network interface (`LaunchTemplateInstanceNetworkInterfaceSpecificationRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkInterfaceRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_card_index: Option<i32>,
    pub device_index: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface_type: Option<String>,
    /// Sorted.
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_prefix_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_address_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_ipv6: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTrackingRequest>,
}

/// Connection tracking timeouts, seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConnectionTrackingRequest {
    pub tcp_established_timeout: Option<i32>,
    pub udp_stream_timeout: Option<i32>,
    pub udp_timeout: Option<i32>,
}

/// Instance metadata options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MetadataOptionsRequest {
    pub http_endpoint: String,
    /// Omitted in [`IPV6_IMDS_UNSUPPORTED_REGIONS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_protocol_ipv6: Option<String>,
    pub http_put_response_hop_limit: i64,
    pub http_tokens: String,
    /// Always `disabled`.
    pub instance_metadata_tags: String,
}

/// Why a launch template cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchTemplateError {
    #[error("no instance types to build a launch template for")]
    NoInstanceTypes,
    #[error(
        "instance types {first} ({first_pods} pods) and {other} ({other_pods} pods) need different launch templates: group instance types by max pods first"
    )]
    MixedMaxPods {
        first: String,
        first_pods: i64,
        other: String,
        other_pods: i64,
    },
    #[error("status.securityGroups: no security groups are present in the status")]
    NoSecurityGroups,
    #[error("status.instanceProfile: the EC2NodeClass has no instance profile yet")]
    NoInstanceProfile,
    #[error("spec.blockDeviceMappings[{index}].ebs.volumeSize: {reason}")]
    InvalidVolumeSize { index: usize, reason: String },
    #[error("spec.resources.requests[{resource}]: {reason}")]
    InvalidRequest { resource: String, reason: String },
    #[error(transparent)]
    UserData(#[from] UserDataError),
}

/// The tags on everything Karpenter launches for a NodeClaim (upstream `utils.GetTags`):
/// `spec.tags` plus the Karpenter-owned ones, which win.
pub fn launch_tags(
    node_class: &EC2NodeClass,
    node_claim: &NodeClaim,
    cluster_name: &str,
) -> BTreeMap<String, String> {
    let mut tags = node_class.spec.tags.clone().unwrap_or_default();
    let nodepool = node_claim
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(labels::NODEPOOL))
        .cloned()
        .unwrap_or_default();
    tags.insert(
        format!("kubernetes.io/cluster/{cluster_name}"),
        "owned".to_string(),
    );
    tags.insert(labels::NODEPOOL.to_string(), nodepool);
    tags.insert("eks:eks-cluster-name".to_string(), cluster_name.to_string());
    tags.insert(
        "karpenter.k8s.aws/ec2nodeclass".to_string(),
        node_class.metadata.name.clone().unwrap_or_default(),
    );
    tags
}

/// The family's default block devices (gp3, encrypted): AL2 and AL2023 a 20 GiB `/dev/xvda`;
/// Bottlerocket a 4 GiB `/dev/xvda` (OS) and a 20 GiB `/dev/xvdb` (data); Windows a 50 GiB
/// `/dev/sda1`; Custom none (the AMI's own mappings apply).
pub fn default_block_device_mappings(family: AmiFamily) -> Vec<BlockDeviceMappingRequest> {
    let gp3 = |device: &str, gib: i64| BlockDeviceMappingRequest {
        device_name: Some(device.to_string()),
        ebs: EbsRequest {
            encrypted: Some(true),
            volume_size_gib: Some(gib),
            volume_type: Some("gp3".to_string()),
            ..EbsRequest::default()
        },
    };
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => vec![gp3("/dev/xvda", 20)],
        AmiFamily::Bottlerocket => vec![gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            vec![gp3("/dev/sda1", 50)]
        }
        AmiFamily::Custom => Vec::new(),
    }
}

/// Builds the launch template and its name.
pub fn build(request: &LaunchTemplateRequest<'_>) -> Result<LaunchTemplate, LaunchTemplateError> {
    let spec = &request.node_class.spec;
    let status = request.node_class.status.as_ref();
    let max_pods = shared_max_pods(request.instance_types)?;
    let mut security_groups: Vec<String> = status
        .and_then(|s| s.security_groups.as_ref())
        .map(|groups| groups.iter().map(|g| g.id.clone()).collect())
        .unwrap_or_default();
    if security_groups.is_empty() {
        return Err(LaunchTemplateError::NoSecurityGroups);
    }
    security_groups.sort();
    security_groups.dedup();
    let instance_profile = status
        .and_then(|s| s.instance_profile.clone())
        .or_else(|| spec.instance_profile.clone())
        .filter(|p| !p.is_empty())
        .ok_or(LaunchTemplateError::NoInstanceProfile)?;

    let bootstrap = BootstrapInput::for_node_claim(
        request.cluster.clone(),
        request.node_class,
        request.node_claim,
        request.capacity_type,
        u32::try_from(max_pods).ok(),
    )?;
    let user_data = userdata::render(&bootstrap)?;

    let block_device_mappings = match spec.block_device_mappings.as_deref() {
        Some(mappings) if !mappings.is_empty() => mappings
            .iter()
            .enumerate()
            .map(|(index, mapping)| block_device_mapping(index, mapping))
            .collect::<Result<_, _>>()?,
        _ => default_block_device_mappings(bootstrap.family),
    };
    let ipv6 = request
        .cluster
        .dns_ip
        .as_deref()
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .is_some_and(|ip| matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none()));
    let requests = request
        .node_claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let efa_count = match requests.and_then(|r| r.get(labels::RESOURCE_EFA)) {
        None => 0,
        Some(quantity) => Quantity::parse(&quantity.0)
            .ok()
            .and_then(|q| i32::try_from(q.value()).ok())
            .filter(|n| *n >= 0)
            .ok_or_else(|| LaunchTemplateError::InvalidRequest {
                resource: labels::RESOURCE_EFA.to_string(),
                reason: format!("{:?} is not a whole number of interfaces", quantity.0),
            })?,
    };
    let network_interfaces =
        network_interfaces(request.node_class, &security_groups, ipv6, efa_count);
    let metadata = spec.metadata_options.clone().unwrap_or_default();
    let mut tag_resource_types = vec!["network-interface".to_string()];
    if request.capacity_type == labels::CAPACITY_TYPE_SPOT {
        tag_resource_types.push("spot-instances-request".to_string());
    }
    let data = LaunchTemplateData {
        image_id: request.image_id.to_string(),
        user_data,
        block_device_mappings,
        iam_instance_profile_name: instance_profile,
        monitoring_enabled: spec.detailed_monitoring.unwrap_or(false),
        security_group_ids: if network_interfaces.is_empty() {
            security_groups
        } else {
            Vec::new()
        },
        network_interfaces,
        metadata_options: metadata_options(&metadata, request.region),
        tag_resource_types,
        placement_tenancy: request.tenancy.to_string(),
        placement_group_id: request.placement.map(|p| p.group_id.clone()),
        placement_partition_number: request.placement.and_then(|p| p.partition_number),
        cpu_nested_virtualization: spec
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization)
            .map(|n| enabled_disabled(n).to_string()),
        // Upstream v1.15: from the EC2NodeClass's enclaveOptions (the instance types were
        // narrowed to those supporting Nitro Enclaves when the class asked for them).
        enclave_enabled: spec.enclaves_enabled(),
        capacity_reservation_preference: match request.capacity_reservation {
            ReservationLaunch::Open => None,
            ReservationLaunch::Targeted(Some(_)) => Some("capacity-reservations-only".into()),
            ReservationLaunch::Targeted(None) => Some("none".into()),
        },
        capacity_reservation_id: match request.capacity_reservation {
            ReservationLaunch::Targeted(Some(r)) => Some(r.id.clone()),
            _ => None,
        },
        market_type: match request.capacity_reservation {
            ReservationLaunch::Targeted(Some(r)) if r.kind == ReservationKind::CapacityBlock => {
                Some("capacity-block".into())
            }
            ReservationLaunch::Targeted(Some(r)) if r.interruptible => {
                Some("interruptible-capacity-reservation".into())
            }
            _ => None,
        },
    };
    let tags = launch_tags(
        request.node_class,
        request.node_claim,
        &request.cluster.name,
    );
    let name = name_of(&data, &tags);
    Ok(LaunchTemplate {
        name,
        data,
        tags,
        instance_types: request
            .instance_types
            .iter()
            .map(|it| it.name.clone())
            .collect(),
    })
}

/// `karpenter.k8s.aws/<decimal u64>`: the first 8 bytes of SHA-256 over the canonical JSON of
/// the contents and tags.
pub fn name_of(data: &LaunchTemplateData, tags: &BTreeMap<String, String>) -> String {
    // Serializing plain structs, strings and BTreeMaps cannot fail; an empty rendering would
    // still give a stable name.
    let canonical = serde_json::to_vec(&(data, tags)).unwrap_or_default();
    let digest = Sha256::digest(&canonical);
    let mut first = [0u8; 8];
    for (slot, byte) in first.iter_mut().zip(digest.iter()) {
        *slot = *byte;
    }
    format!("{NAME_PREFIX}/{}", u64::from_be_bytes(first))
}

fn shared_max_pods(instance_types: &[InstanceTypeInfo]) -> Result<i64, LaunchTemplateError> {
    let Some(first) = instance_types.first() else {
        return Err(LaunchTemplateError::NoInstanceTypes);
    };
    if let Some(other) = instance_types
        .iter()
        .find(|it| it.capacity.pods != first.capacity.pods)
    {
        return Err(LaunchTemplateError::MixedMaxPods {
            first: first.name.clone(),
            first_pods: first.capacity.pods,
            other: other.name.clone(),
            other_pods: other.capacity.pods,
        });
    }
    Ok(first.capacity.pods)
}

fn block_device_mapping(
    index: usize,
    mapping: &BlockDeviceMapping,
) -> Result<BlockDeviceMappingRequest, LaunchTemplateError> {
    let ebs = mapping.ebs.clone().unwrap_or_default();
    let volume_size_gib = match &ebs.volume_size {
        None => None,
        Some(size) => {
            let bytes = Quantity::parse(&size.0)
                .map_err(|error| LaunchTemplateError::InvalidVolumeSize {
                    index,
                    reason: error.to_string(),
                })?
                .value();
            let gib = (bytes + (1 << 30) - 1).div_euclid(1 << 30);
            Some(i64::try_from(gib).ok().filter(|g| *g > 0).ok_or_else(|| {
                LaunchTemplateError::InvalidVolumeSize {
                    index,
                    reason: format!("{:?} is not a positive size", size.0),
                }
            })?)
        }
    };
    Ok(BlockDeviceMappingRequest {
        device_name: mapping.device_name.clone(),
        ebs: EbsRequest {
            delete_on_termination: ebs.delete_on_termination,
            encrypted: ebs.encrypted,
            iops: ebs.iops.filter(|n| *n != 0),
            kms_key_id: ebs.kms_key_id,
            snapshot_id: ebs.snapshot_id,
            throughput: ebs.throughput.filter(|n| *n != 0),
            volume_initialization_rate: ebs.volume_initialization_rate,
            volume_size_gib,
            volume_type: ebs.volume_type.map(|t| volume_type(t).to_string()),
        },
    })
}

fn volume_type(volume_type: VolumeType) -> &'static str {
    match volume_type {
        VolumeType::Standard => "standard",
        VolumeType::Io1 => "io1",
        VolumeType::Io2 => "io2",
        VolumeType::Gp2 => "gp2",
        VolumeType::Sc1 => "sc1",
        VolumeType::St1 => "st1",
        VolumeType::Gp3 => "gp3",
    }
}

fn enabled_disabled(value: EnabledDisabled) -> &'static str {
    match value {
        EnabledDisabled::Enabled => "enabled",
        EnabledDisabled::Disabled => "disabled",
    }
}

fn metadata_options(options: &MetadataOptions, region: &str) -> MetadataOptionsRequest {
    MetadataOptionsRequest {
        http_endpoint: enabled_disabled(options.http_endpoint).to_string(),
        http_protocol_ipv6: (!IPV6_IMDS_UNSUPPORTED_REGIONS.contains(&region))
            .then(|| enabled_disabled(options.http_protocol_ipv6).to_string()),
        http_put_response_hop_limit: options.http_put_response_hop_limit,
        http_tokens: match options.http_tokens {
            HttpTokens::Required => "required",
            HttpTokens::Optional => "optional",
        }
        .to_string(),
        instance_metadata_tags: "disabled".to_string(),
    }
}

/// Upstream's `generateNetworkInterfaces`: the EC2NodeClass's interfaces one to one, else one
/// EFA interface per requested EFA device, else the primary interface alone.
fn network_interfaces(
    node_class: &EC2NodeClass,
    groups: &[String],
    ipv6: bool,
    efa_count: i32,
) -> Vec<NetworkInterfaceRequest> {
    let spec = &node_class.spec;
    let prefix_count = spec.ip_prefix_count;
    let conntrack = spec.connection_tracking.as_ref().and_then(|c| {
        (c.tcp_established_timeout.is_some()
            || c.udp_stream_timeout.is_some()
            || c.udp_timeout.is_some())
        .then_some(ConnectionTrackingRequest {
            tcp_established_timeout: c.tcp_established_timeout,
            udp_stream_timeout: c.udp_stream_timeout,
            udp_timeout: c.udp_timeout,
        })
    });
    let addressed = |interface: NetworkInterfaceRequest| NetworkInterfaceRequest {
        associate_public_ip_address: spec.associate_public_ip_address,
        ipv4_prefix_count: if ipv6 { None } else { prefix_count },
        ipv6_prefix_count: if ipv6 { prefix_count } else { None },
        ipv6_address_count: ipv6.then_some(1),
        primary_ipv6: ipv6.then_some(true),
        connection_tracking: conntrack.clone(),
        ..interface
    };
    if let Some(interfaces) = spec.network_interfaces.as_deref().filter(|i| !i.is_empty()) {
        return interfaces
            .iter()
            .map(|ni| {
                let base = NetworkInterfaceRequest {
                    network_card_index: Some(ni.network_card_index),
                    device_index: ni.device_index,
                    interface_type: Some(
                        match ni.interface_type {
                            InterfaceType::Interface => "interface",
                            InterfaceType::EfaOnly => "efa-only",
                        }
                        .to_string(),
                    ),
                    groups: groups.to_vec(),
                    ..NetworkInterfaceRequest::default()
                };
                // EFA-only interfaces take no addresses, public IP or connection tracking.
                if ni.interface_type == InterfaceType::EfaOnly {
                    base
                } else {
                    addressed(base)
                }
            })
            .collect();
    }
    if efa_count > 0 {
        return (0..efa_count)
            .map(|card| {
                addressed(NetworkInterfaceRequest {
                    network_card_index: Some(card),
                    device_index: if card == 0 { 0 } else { 1 },
                    interface_type: Some("efa".to_string()),
                    groups: groups.to_vec(),
                    ..NetworkInterfaceRequest::default()
                })
            })
            .collect();
    }
    vec![addressed(NetworkInterfaceRequest {
        device_index: 0,
        groups: groups.to_vec(),
        ..NetworkInterfaceRequest::default()
    })]
}
