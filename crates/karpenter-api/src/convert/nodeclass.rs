//! v1beta1 EC2NodeClass -> v1 EC2NodeClass (the rules of upstream's v1 conversion webhook).
//!
//! - No `amiSelectorTerms`: the v1beta1 default (latest EKS-optimized AMI of the family)
//!   becomes the alias `<family>@latest`; AL2 gets a warning because AL2 AMIs stop at
//!   Kubernetes 1.32. `Custom` without terms is an error.
//! - `Ubuntu` is gone: the family becomes AL2, a `/dev/sda1` 20Gi gp3 encrypted root volume is
//!   added when no block devices are set, and the annotation
//!   `compatibility.karpenter.k8s.aws/v1beta1-ubuntu` records what was changed. Ubuntu without
//!   `amiSelectorTerms` is an error, as upstream.
//! - IMDS: v1beta1 defaulted the hop limit to 2, v1 to 1; the old effective value is written.
//! - Tags Karpenter owns in v1 (`kubernetes.io/cluster/*`, ...) are dropped with a warning.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::legacy::v1alpha1_aws::{LEGACY_DEFAULT_HOP_LIMIT, LegacyMetadataOptions};
use crate::legacy::v1beta1_aws;
use crate::v1::ec2nodeclass::{
    BlockDevice, BlockDeviceMapping, EnabledDisabled, HttpTokens, MetadataOptions,
    RESTRICTED_TAG_KEYS, RESTRICTED_TAG_PREFIX, VolumeType,
};
use crate::v1::{AmiFamily, AmiSelectorTerm, EC2NodeClass, EC2NodeClassSpec};

use super::{FieldError, NODE_ROLE_PLACEHOLDER, Notes, Options, Produced, metadata, to_json};

/// Annotation upstream's conversion webhook sets on EC2NodeClasses converted from Ubuntu.
pub const UBUNTU_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu";

/// Warns when `role` is still the placeholder.
pub(crate) fn role_placeholder_note(role: Option<&str>, notes: &mut Notes) {
    if role == Some(NODE_ROLE_PLACEHOLDER) {
        notes.warn(
            "spec.role",
            "placeholder: replace $KARPENTER_NODE_ROLE with the name of the node IAM role (not the instance profile), or convert with --node-role NAME",
        );
    }
}

fn parse_family(family: &str) -> Option<AmiFamily> {
    Some(match family {
        "AL2" => AmiFamily::AL2,
        "AL2023" => AmiFamily::AL2023,
        "Bottlerocket" => AmiFamily::Bottlerocket,
        "Custom" => AmiFamily::Custom,
        "Windows2019" => AmiFamily::Windows2019,
        "Windows2022" => AmiFamily::Windows2022,
        "Windows2025" => AmiFamily::Windows2025,
        _ => return None,
    })
}

fn enabled_disabled(
    value: Option<&str>,
    default: EnabledDisabled,
    field: &str,
) -> Result<EnabledDisabled, FieldError> {
    match value {
        None => Ok(default),
        Some("enabled") => Ok(EnabledDisabled::Enabled),
        Some("disabled") => Ok(EnabledDisabled::Disabled),
        Some(other) => Err(FieldError::new(
            field,
            format!("must be enabled or disabled, found {other:?}"),
        )),
    }
}

/// The v1 metadata options equal to what v1beta1 applied, noting the hop-limit change.
fn metadata_options(
    old: Option<&LegacyMetadataOptions>,
    notes: &mut Notes,
) -> Result<MetadataOptions, FieldError> {
    let old = old.cloned().unwrap_or_default();
    let field = "spec.metadataOptions";
    let hop = match old.http_put_response_hop_limit {
        Some(hop) => hop,
        None => {
            notes.info(
                format!("{field}.httpPutResponseHopLimit"),
                "the default before v1, kept; v1 defaults to 1, which blocks IMDS from pods not on the host network",
            );
            LEGACY_DEFAULT_HOP_LIMIT
        }
    };
    let tokens = match old.http_tokens.as_deref() {
        None | Some("required") => HttpTokens::Required,
        Some("optional") => HttpTokens::Optional,
        Some(other) => {
            return Err(FieldError::new(
                format!("{field}.httpTokens"),
                format!("must be required or optional, found {other:?}"),
            ));
        }
    };
    Ok(MetadataOptions {
        http_endpoint: enabled_disabled(
            old.http_endpoint.as_deref(),
            EnabledDisabled::Enabled,
            &format!("{field}.httpEndpoint"),
        )?,
        http_protocol_ipv6: enabled_disabled(
            old.http_protocol_ipv6.as_deref(),
            EnabledDisabled::Disabled,
            &format!("{field}.httpProtocolIPv6"),
        )?,
        http_put_response_hop_limit: hop,
        http_tokens: tokens,
    })
}

fn allowed_tags(
    tags: Option<&BTreeMap<String, String>>,
    notes: &mut Notes,
) -> Option<BTreeMap<String, String>> {
    let tags = tags?;
    let mut out = BTreeMap::new();
    for (key, value) in tags {
        if RESTRICTED_TAG_KEYS.contains(&key.as_str()) || key.starts_with(RESTRICTED_TAG_PREFIX) {
            notes.warn(
                format!("spec.tags[{key}]"),
                "dropped: Karpenter sets this tag itself in v1 and rejects it in spec.tags",
            );
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    Some(out)
}

fn ubuntu_root_volume() -> BlockDeviceMapping {
    BlockDeviceMapping {
        device_name: Some("/dev/sda1".to_owned()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_type: Some(VolumeType::Gp3),
            volume_size: Some(Quantity("20Gi".to_owned())),
            ..Default::default()
        }),
        root_volume: true,
    }
}

pub(crate) fn to_v1(
    nc: &v1beta1_aws::EC2NodeClass,
    mut notes: Notes,
    options: &Options,
) -> Result<Produced, FieldError> {
    let spec = &nc.spec;
    notes.dropped_unknown("spec", &spec.unknown);
    let mut meta = metadata::clean(&nc.metadata);
    let mut block_device_mappings = spec.block_device_mappings.clone();

    let family_name = match spec.ami_family.as_deref() {
        Some(f) => f,
        None => {
            notes.info("spec.amiFamily", "unset (v1beta1 required it): assumed AL2");
            "AL2"
        }
    };
    let ubuntu = family_name == "Ubuntu";
    let family = if ubuntu {
        AmiFamily::AL2
    } else {
        parse_family(family_name).ok_or_else(|| {
            FieldError::new("spec.amiFamily", format!("unknown AMI family {family_name:?}: expected AL2, AL2023, Bottlerocket, Ubuntu, Custom, Windows2019 or Windows2022"))
        })?
    };
    let mut ami_terms = spec.ami_selector_terms.clone();
    if ubuntu {
        if ami_terms.is_empty() {
            return Err(FieldError::new(
                "spec.amiFamily",
                "Ubuntu without amiSelectorTerms cannot be converted: v1 has no Ubuntu family. Add amiSelectorTerms selecting your Ubuntu EKS AMIs (e.g. name + owner 099720109477) and convert again",
            ));
        }
        let mut changed = vec!["amiFamily"];
        if block_device_mappings.as_ref().is_none_or(Vec::is_empty) {
            block_device_mappings = Some(vec![ubuntu_root_volume()]);
            changed.push("blockDeviceMappings");
            notes.info(
                "spec.blockDeviceMappings",
                "the Ubuntu root volume (/dev/sda1, 20Gi gp3, encrypted) that v1beta1 defaulted",
            );
        }
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(
                UBUNTU_COMPATIBILITY_ANNOTATION.to_owned(),
                changed.join(","),
            );
        notes.warn(
            "spec.amiFamily",
            "Ubuntu is no longer an AMI family: converted to AL2 (the same bootstrap script), as upstream's conversion webhook does; check the nodes still join",
        );
    }
    let mut ami_family = Some(family);
    if ami_terms.is_empty() {
        if family == AmiFamily::Custom {
            return Err(FieldError::new(
                "spec.amiSelectorTerms",
                "required with amiFamily Custom",
            ));
        }
        let alias = format!("{}@latest", family.as_str().to_ascii_lowercase());
        ami_terms.push(AmiSelectorTerm {
            alias: Some(alias.clone()),
            ..Default::default()
        });
        ami_family = None;
        if family == AmiFamily::AL2 {
            notes.warn(
                "spec.amiSelectorTerms[0].alias",
                "the default before v1 (latest EKS-optimized AL2 AMI); AL2 is deprecated and has no AMIs for Kubernetes 1.33+, plan a move to al2023@latest",
            );
        } else {
            notes.info(
                "spec.amiSelectorTerms[0].alias",
                "the default before v1 (latest EKS-optimized AMI of the family)",
            );
        }
    }
    if ami_family == Some(AmiFamily::Custom) {
        notes.warn(
            "spec.amiFamily",
            "Custom AMIs must now register nodes with the karpenter.sh/unregistered:NoExecute taint (userData is passed as is)",
        );
    }

    let (mut role, instance_profile) = (spec.role.clone(), spec.instance_profile.clone());
    if role.is_none() && instance_profile.is_none() {
        role = Some(NODE_ROLE_PLACEHOLDER.to_owned());
    }
    if role.as_deref() == Some(NODE_ROLE_PLACEHOLDER)
        && let Some(node_role) = &options.node_role
    {
        role = Some(node_role.clone());
    }
    role_placeholder_note(role.as_deref(), &mut notes);

    let v1_spec = EC2NodeClassSpec {
        subnet_selector_terms: spec.subnet_selector_terms.clone(),
        security_group_selector_terms: spec.security_group_selector_terms.clone(),
        capacity_reservation_selector_terms: None,
        placement_group_selector: None,
        associate_public_ip_address: spec.associate_public_ip_address,
        ip_prefix_count: None,
        ami_selector_terms: ami_terms,
        ami_family,
        user_data: spec.user_data.clone(),
        role,
        instance_profile,
        tags: allowed_tags(spec.tags.as_ref(), &mut notes),
        kubelet: None,
        block_device_mappings,
        instance_store_policy: spec.instance_store_policy,
        network_interfaces: None,
        detailed_monitoring: spec.detailed_monitoring,
        metadata_options: Some(metadata_options(
            spec.metadata_options.as_ref(),
            &mut notes,
        )?),
        connection_tracking: None,
        context: spec.context.clone(),
        cpu_options: None,
        enclave_options: None,
    };
    let mut out = EC2NodeClass::new(nc.name(), v1_spec);
    out.metadata = meta;
    Ok(Produced {
        value: to_json(&out)?,
        notes,
        kubelet: None,
    })
}
