//! `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate (and the inline `provider` of a v1alpha5
//! Provisioner, which has the same shape).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Object, Unknown};
use crate::v1::ec2nodeclass::BlockDeviceMapping;

/// `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate.
pub type AwsNodeTemplate = Object<AwsNodeTemplateSpec>;

/// The AWSNodeTemplate spec (selector maps rather than selector terms).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsNodeTemplateSpec {
    /// Tag (or `aws-ids`) selector for subnets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_selector: Option<BTreeMap<String, String>>,
    /// Tag (or `aws-ids`) selector for security groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_selector: Option<BTreeMap<String, String>>,
    /// Tag, `aws::ids`, `aws::name` and `aws::owners` selector for AMIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_selector: Option<BTreeMap<String, String>>,
    /// AL2 (default), AL2023, Bottlerocket, Ubuntu, Windows2019, Windows2022 or Custom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<LegacyMetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// An existing instance profile (v1beta1 replaced it with `role` or kept `instanceProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// A user-managed launch template: unsupported since v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template_name: Option<String>,
    /// The same, as the inline v1alpha5 `provider` spelled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template: Option<String>,
    /// Anything else (reported as dropped by the converter).
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// Instance metadata options as written (every field optional; v1alpha1 and v1beta1 defaulted
/// the hop limit to 2, v1 defaults it to 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyMetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

/// The hop limit v1alpha1 and v1beta1 used when `httpPutResponseHopLimit` was unset.
pub const LEGACY_DEFAULT_HOP_LIMIT: i64 = 2;
