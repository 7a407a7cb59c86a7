//! `karpenter.k8s.aws/v1beta1` EC2NodeClass (removed upstream in v1.1).
//!
//! Differences from v1: `Ubuntu` is an AMI family, `amiSelectorTerms` is optional (no `alias`),
//! `amiFamily` is required, `kubelet` lives on the NodePool, and the IMDS hop limit defaults to 2.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::v1alpha1_aws::LegacyMetadataOptions;
use super::{Object, Unknown};
use crate::v1::ec2nodeclass::{
    AmiSelectorTerm, BlockDeviceMapping, InstanceStorePolicy, SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
};

/// `karpenter.k8s.aws/v1beta1` EC2NodeClass.
pub type EC2NodeClass = Object<EC2NodeClassSpec>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// AL2, AL2023, Bottlerocket, Ubuntu, Custom, Windows2019 or Windows2022.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<LegacyMetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}
