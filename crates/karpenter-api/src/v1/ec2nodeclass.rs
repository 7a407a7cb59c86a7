//! `karpenter.k8s.aws/v1` EC2NodeClass: how to launch an EC2 instance (subnets, security groups,
//! AMIs, IAM role, user data, block devices, metadata options, tags, kubelet settings).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::NodeSelectorRequirementWithMinValues;

/// AMI alias families (the part of `family@version` before the `@`).
pub const ALIAS_FAMILIES: &[&str] = &[
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];

/// Tag keys Karpenter owns; users may not set them in `spec.tags`.
pub const RESTRICTED_TAG_KEYS: &[&str] = &[
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
];
/// Tag key prefix Karpenter owns (`kubernetes.io/cluster/<name>`).
pub const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";

/// Tag maps in selector terms: at most 20 entries, no empty keys or values.
type SelectorTags = Option<BTreeMap<String, String>>;

/// EC2NodeClass is the Schema for the EC2NodeClass API.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    status = "EC2NodeClassStatus",
    derive = "PartialEq",
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Role",
        type_ = "string",
        json_path = ".spec.role",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))").message("must specify exactly one of ['role', 'instanceProfile']"),
    validation = Rule::new("(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))").message("changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this."),
    validation = Rule::new("self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)").message("amiFamily must be set if amiSelectorTerms does not contain an alias"),
    validation = Rule::new("!has(self.amiFamily) || self.amiFamily == 'Custom' || !self.amiSelectorTerms.exists(x, has(x.alias)) || self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+').lowerAscii() == self.amiFamily.lowerAscii())").message("amiFamily must be 'Custom' or match the family of the alias in amiSelectorTerms"),
)]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into: terms are ORed, conditions within a term ANDed.
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.size() != 0").message("subnetSelectorTerms cannot be empty"),
        validation = Rule::new("self.all(x, has(x.tags) || has(x.id))").message("expected at least one, got none, ['tags', 'id']"),
        validation = Rule::new("!self.exists(x, has(x.id) && has(x.tags))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
    )]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups to attach.
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.size() != 0").message("securityGroupSelectorTerms cannot be empty"),
        validation = Rule::new("self.all(x, has(x.tags) || has(x.id) || has(x.name))").message("expected at least one, got none, ['tags', 'id', 'name']"),
        validation = Rule::new("!self.exists(x, has(x.id) && (has(x.tags) || has(x.name)))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
        validation = Rule::new("!self.exists(x, has(x.name) && (has(x.tags) || has(x.id)))").message("'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
    )]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// On-demand capacity reservations and capacity blocks Karpenter may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[x_kube(
        validation = Rule::new("self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))").message("expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
        validation = Rule::new("!self.exists(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in a capacity reservation selector term"),
    )]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// The placement group to launch into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Whether to assign a public IPv4 address (default: the subnet's setting).
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Number of IPv4 prefixes to assign to the primary network interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// AMIs to launch: an alias (`al2023@latest`) or id/name/tags/ssmParameter terms.
    #[schemars(length(min = 1, max = 30))]
    #[x_kube(
        validation = Rule::new("self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))").message("expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"),
        validation = Rule::new("!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
        validation = Rule::new("!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))").message("'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
        validation = Rule::new("!(self.exists(x, has(x.alias)) && self.size() != 1)").message("'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
    )]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// The AMI family (bootstrap format); inferred from the alias when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    /// User data merged with (or, for Custom, replacing) Karpenter's bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for the nodes; Karpenter manages an instance profile for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("role cannot be empty"))]
    pub role: Option<String>,
    /// An existing instance profile (unmanaged), instead of `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("instanceProfile cannot be empty"))]
    pub instance_profile: Option<String>,
    /// Tags applied to instances, volumes, network interfaces and launch templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new("self.all(k, k != '')").message("empty tag keys aren't supported"),
        validation = Rule::new("self.all(k, k != 'eks:eks-cluster-name')").message("tag contains a restricted tag matching eks:eks-cluster-name"),
        validation = Rule::new("self.all(k, !k.startsWith('kubernetes.io/cluster'))").message("tag contains a restricted tag matching kubernetes.io/cluster/"),
        validation = Rule::new("self.all(k, k != 'karpenter.sh/nodepool')").message("tag contains a restricted tag matching karpenter.sh/nodepool"),
        validation = Rule::new("self.all(k, k != 'karpenter.sh/nodeclaim')").message("tag contains a restricted tag matching karpenter.sh/nodeclaim"),
        validation = Rule::new("self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')").message("tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"),
    )]
    pub tags: Option<BTreeMap<String, String>>,
    /// Kubelet configuration: any field of the upstream kubelet `KubeletConfiguration`
    /// (`kubelet.config.k8s.io/v1beta1`, k8s.io/kubelet v0.37). Karpenter reads maxPods,
    /// podsPerCore, kubeReserved, systemReserved and evictionHard (and the other fields it maps
    /// to bootstrap flags) and passes all others through to the user data unchanged. Field names
    /// and types are validated by Karpenter, which reports a rejected configuration as
    /// `ValidationSucceeded=False` on the class rather than failing the apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_object_schema")]
    pub kubelet: Option<BTreeMap<String, serde_json::Value>>,
    /// Block devices; defaults depend on the AMI family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[x_kube(validation = Rule::new("self.filter(x, has(x.rootVolume) ? x.rootVolume : false).size() <= 1").message("must have only one blockDeviceMappings with rootVolume"))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// How to use instance-store volumes (`RAID0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Network interfaces to attach (the primary one must be card 0, device 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 150))]
    #[x_kube(
        validation = Rule::new("self.exists(x, x.networkCardIndex == 0 && x.deviceIndex == 0 && x.interfaceType == 'interface')").message("networkInterfaces must contain a primary interface (networkCardIndex 0, deviceIndex 0, interfaceType interface)"),
        validation = Rule::new("self.all(x, self.exists_one(y, y.networkCardIndex == x.networkCardIndex && y.deviceIndex == x.deviceIndex))").message("networkInterfaces must have unique (networkCardIndex, deviceIndex) pairs"),
        validation = Rule::new("self.all(x, x.interfaceType != 'efa-only' || self.filter(y, y.networkCardIndex == x.networkCardIndex && y.interfaceType == 'efa-only').size() == 1)").message("at most one efa-only interface per network card"),
    )]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// Enables detailed (1-minute) CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options.
    #[serde(
        default = "default_metadata_options_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata_options: Option<MetadataOptions>,
    /// Connection tracking timeouts for the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)").message("at least one connectionTracking field must be set"))]
    pub connection_tracking: Option<ConnectionTracking>,
    /// EC2 Fleet context (for reserved capacity pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// CPU options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    /// Whether instances are enabled for AWS Nitro Enclaves. When enabled, instance types are
    /// restricted to those that support Nitro Enclaves. When omitted or `enabled` is false,
    /// Nitro Enclaves are disabled. When given, `enabled` is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enclave_options: Option<EnclaveOptions>,
}

/// `spec.kubelet`: an object the API server keeps as given, at every depth (upstream's
/// `+kubebuilder:pruning:PreserveUnknownFields` map of `apiextensionsv1.JSON`).
fn open_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-preserve-unknown-fields": true },
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

impl EC2NodeClassSpec {
    /// `enclaveOptions.enabled`: Nitro Enclaves asked for.
    pub fn enclaves_enabled(&self) -> bool {
        self.enclave_options.as_ref().is_some_and(|e| e.enabled)
    }
}

fn default_metadata_options_some() -> Option<MetadataOptions> {
    Some(MetadataOptions::default())
}

/// A subnet selector term: tags or an id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    pub tags: SelectorTags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// A security group selector term: tags, an id or a name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    pub tags: SelectorTags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A capacity reservation selector term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    pub tags: SelectorTags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMatchCriteria {
    Open,
    Targeted,
}

/// Selects a placement group by name or id (exactly one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.name) != has(self.id)").message("expected exactly one of ['name', 'id']"))]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// An AMI selector term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`, e.g. `al2023@latest` or `bottlerocket@v1.20.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30), regex(pattern = "^[a-zA-Z0-9]+@.+$"))]
    #[x_kube(
        validation = Rule::new("self.split('@')[0] in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']").message("family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"),
        validation = Rule::new("self.split('@')[0] in ['windows2019', 'windows2022', 'windows2025'] ? self.split('@')[1] == 'latest' : true").message("windows families may only specify version 'latest'"),
    )]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    pub tags: SelectorTags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// The AMI family, which decides the bootstrap format and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum AmiFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AmiFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::AL2 => "AL2",
            AmiFamily::AL2023 => "AL2023",
            AmiFamily::Bottlerocket => "Bottlerocket",
            AmiFamily::Custom => "Custom",
            AmiFamily::Windows2019 => "Windows2019",
            AmiFamily::Windows2022 => "Windows2022",
            AmiFamily::Windows2025 => "Windows2025",
        }
    }

    /// The family named by an alias prefix (`al2023` -> AL2023).
    /// Case-insensitive: `AL2023@latest` and `al2023@latest` name the same family.
    pub fn from_alias_family(family: &str) -> Option<Self> {
        Some(match family.to_ascii_lowercase().as_str() {
            "al2" => AmiFamily::AL2,
            "al2023" => AmiFamily::AL2023,
            "bottlerocket" => AmiFamily::Bottlerocket,
            "windows2019" => AmiFamily::Windows2019,
            "windows2022" => AmiFamily::Windows2022,
            "windows2025" => AmiFamily::Windows2025,
            _ => return None,
        })
    }
}

impl EC2NodeClassSpec {
    /// The AMI family in effect: `amiFamily`, else the alias's family.
    pub fn resolved_ami_family(&self) -> Option<AmiFamily> {
        self.ami_family.or_else(|| {
            self.ami_selector_terms
                .iter()
                .filter_map(|t| t.alias.as_deref())
                .find_map(|alias| AmiFamily::from_alias_family(alias.split('@').next()?))
        })
    }
}

/// A block device mapping.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// Pattern of `ebs.volumeSize`: up to 59000Gi, 64000G, 58Ti or 64T.
pub const VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";

/// An EBS volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.snapshotID) || has(self.volumeSize)").message("snapshotID or volumeSize must be defined"),
    validation = Rule::new("!has(self.volumeInitializationRate) || has(self.snapshotID)").message("volumeInitializationRate requires snapshotID"),
)]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "volume_size_schema")]
    pub volume_size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

fn volume_size_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": VOLUME_SIZE_PATTERN,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    Standard,
    Io1,
    Io2,
    Gp2,
    Sc1,
    St1,
    Gp3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum InstanceStorePolicy {
    RAID0,
}

/// A network interface to attach at launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    #[schemars(range(min = 0))]
    pub device_index: i32,
    pub interface_type: InterfaceType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum InterfaceType {
    #[serde(rename = "interface")]
    Interface,
    #[serde(rename = "efa-only")]
    EfaOnly,
}

/// Instance metadata service options; defaults `{enabled, disabled, 1, required}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default = "enabled")]
    pub http_endpoint: EnabledDisabled,
    #[serde(default = "disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: EnabledDisabled,
    #[serde(default = "default_hop_limit")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    #[serde(default = "required")]
    pub http_tokens: HttpTokens,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: EnabledDisabled::Enabled,
            http_protocol_ipv6: EnabledDisabled::Disabled,
            http_put_response_hop_limit: default_hop_limit(),
            http_tokens: HttpTokens::Required,
        }
    }
}

fn enabled() -> EnabledDisabled {
    EnabledDisabled::Enabled
}
fn disabled() -> EnabledDisabled {
    EnabledDisabled::Disabled
}
fn default_hop_limit() -> i64 {
    1
}
fn required() -> HttpTokens {
    HttpTokens::Required
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EnabledDisabled {
    Enabled,
    Disabled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    Required,
    Optional,
}

/// Connection tracking timeouts, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// Nitro Enclaves options (`spec.enclaveOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnclaveOptions {
    /// Whether the instance is enabled for AWS Nitro Enclaves.
    pub enabled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<EnabledDisabled>,
}

/// Observed state of an EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<SubnetStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroupStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservations: Option<Vec<CapacityReservationStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<AmiStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    pub availability_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
}

/// EC2NodeClass condition types.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const AMIS_READY: &str = "AMIsReady";
    pub const SUBNETS_READY: &str = "SubnetsReady";
    pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
    pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    pub const PLACEMENT_GROUP_READY: &str = "PlacementGroupReady";
    pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
}
