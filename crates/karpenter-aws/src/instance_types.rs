//! Instance types from EC2's own answers: `DescribeInstanceTypes` and
//! `DescribeInstanceTypeOfferings`, plus [`Prices`], into the catalog crate's
//! [`InstanceTypeInfo`].
//!
//! # What this module owns
//!
//! * [`Ec2InstanceType`]: the `DescribeInstanceTypes` fields upstream reads, as serde structs in
//!   EC2's JSON spelling, and their conversion into a [`karpenter_cloud::InstanceShape`] (upstream's
//!   request filter — HVM, `x86_64`/`arm64` — re-applied: other types convert to `None`);
//! * the zones each type is offered in ([`offering_zones`], availability-zone offerings only);
//! * [`resolve`]: shapes x zones (offered ∩ the caller's, i.e. the EC2NodeClass subnets' zones)
//!   x prices into instance types.
//!
//! Capacity, overhead, ENI-limited max pods, `VM_MEMORY_OVERHEAD_PERCENT`, kube-reserved and
//! labels are **not** computed here: [`InstanceTypeInfo::resolve`] of `karpenter-cloud` does it,
//! with the same formulas the embedded catalog uses, so a type described live and the same type
//! in the embedded catalog resolve identically.
//!
//! # What it must not do
//!
//! No EC2 calls, no pagination, no caching (the async shell's job); no panics on EC2 data:
//! a type that cannot be converted is reported in [`Resolved::skipped`].

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::v1::EC2NodeClassSpec;
use karpenter_cloud::capacity;
use karpenter_cloud::{
    Accelerator, Architecture, CatalogOptions, Gpu, InstanceShape, InstanceStore, InstanceTypeInfo,
    NeuronDevice, OptionsError, UsageClass,
};
use serde::Deserialize;

use crate::pricing::Prices;

/// One `InstanceTypeInfo` of a `DescribeInstanceTypes` answer (fields upstream reads).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Ec2InstanceType {
    pub instance_type: String,
    #[serde(rename = "VCpuInfo")]
    pub vcpu_info: VCpuInfo,
    pub memory_info: MemoryInfo,
    pub processor_info: ProcessorInfo,
    pub network_info: NetworkInfo,
    #[serde(default)]
    pub gpu_info: Option<GpuInfo>,
    #[serde(default)]
    pub inference_accelerator_info: Option<InferenceAcceleratorInfo>,
    #[serde(default)]
    pub neuron_info: Option<NeuronInfo>,
    #[serde(default)]
    pub instance_storage_info: Option<InstanceStorageInfo>,
    /// `nitro` or `xen`; absent for bare metal.
    #[serde(default)]
    pub hypervisor: Option<String>,
    #[serde(default)]
    pub bare_metal: Option<bool>,
    #[serde(default)]
    pub burstable_performance_supported: Option<bool>,
    #[serde(default)]
    pub supported_usage_classes: Vec<String>,
    #[serde(default)]
    pub supported_virtualization_types: Vec<String>,
    #[serde(default)]
    pub ebs_info: Option<EbsInfo>,
    /// `supported` or `unsupported`; absent when EC2 did not say.
    #[serde(default)]
    pub nitro_enclaves_support: Option<String>,
    /// The placement group strategies the type supports (`cluster`, `partition`, `spread`).
    #[serde(default)]
    pub placement_group_info: Option<PlacementGroupInfo>,
}

impl Ec2InstanceType {
    /// EC2 says the type supports AWS Nitro Enclaves (`NitroEnclavesSupport: supported`).
    pub fn supports_nitro_enclaves(&self) -> bool {
        self.nitro_enclaves_support.as_deref() == Some("supported")
    }

    /// Upstream's per-EC2NodeClass compatibility checks that karpenter-rs applies to described
    /// types (`compatibility.IsCompatibleWithNodeClass`): with `enclaveOptions.enabled`, only
    /// types that support Nitro Enclaves. `Err` says why the type is left out.
    pub fn compatible_with(&self, class: &EC2NodeClassSpec) -> Result<(), String> {
        if class.enclaves_enabled() && !self.supports_nitro_enclaves() {
            return Err(format!(
                "does not support Nitro Enclaves (NitroEnclavesSupport: {}), which enclaveOptions.enabled asks for",
                self.nitro_enclaves_support
                    .as_deref()
                    .unwrap_or("not given")
            ));
        }
        Ok(())
    }
}

/// The described types an EC2NodeClass can launch (see [`Ec2InstanceType::compatible_with`]),
/// and the others with the reason they are left out.
pub fn compatible_with_node_class<'a>(
    described: &'a [Ec2InstanceType],
    class: &EC2NodeClassSpec,
) -> (Vec<&'a Ec2InstanceType>, Vec<SkippedType>) {
    let mut compatible = Vec::new();
    let mut skipped = Vec::new();
    for ec2 in described {
        match ec2.compatible_with(class) {
            Ok(()) => compatible.push(ec2),
            Err(reason) => skipped.push(SkippedType {
                instance_type: ec2.instance_type.clone(),
                reason,
            }),
        }
    }
    (compatible, skipped)
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PlacementGroupInfo {
    #[serde(default)]
    pub supported_strategies: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct VCpuInfo {
    #[serde(rename = "DefaultVCpus")]
    pub default_vcpus: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MemoryInfo {
    #[serde(rename = "SizeInMiB")]
    pub size_in_mib: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProcessorInfo {
    #[serde(default)]
    pub supported_architectures: Vec<String>,
    #[serde(default)]
    pub manufacturer: Option<String>,
    #[serde(rename = "SustainedClockSpeedInGhz", default)]
    pub sustained_clock_speed_in_ghz: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkInfo {
    pub maximum_network_interfaces: u32,
    #[serde(rename = "Ipv4AddressesPerInterface")]
    pub ipv4_addresses_per_interface: u32,
    #[serde(default)]
    pub default_network_card_index: Option<u32>,
    #[serde(default)]
    pub network_cards: Vec<NetworkCard>,
    #[serde(default)]
    pub efa_info: Option<EfaInfo>,
    #[serde(default)]
    pub encryption_in_transit_supported: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkCard {
    pub network_card_index: u32,
    pub maximum_network_interfaces: u32,
    #[serde(rename = "BaselineBandwidthInGbps", default)]
    pub baseline_bandwidth_in_gbps: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EfaInfo {
    pub maximum_efa_interfaces: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuInfo {
    #[serde(default)]
    pub gpus: Vec<GpuDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuDevice {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
    #[serde(default)]
    pub memory_info: Option<GpuMemory>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct GpuMemory {
    #[serde(rename = "SizeInMiB")]
    pub size_in_mib: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InferenceAcceleratorInfo {
    #[serde(default)]
    pub accelerators: Vec<AcceleratorDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AcceleratorDevice {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronInfo {
    #[serde(default)]
    pub neuron_devices: Vec<NeuronDeviceInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronDeviceInfo {
    pub name: String,
    pub count: u32,
    pub core_info: NeuronCoreInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronCoreInfo {
    pub count: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceStorageInfo {
    #[serde(rename = "TotalSizeInGB")]
    pub total_size_in_gb: u64,
    #[serde(default)]
    pub nvme_support: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsInfo {
    #[serde(default)]
    pub ebs_optimized_support: Option<String>,
    #[serde(default)]
    pub ebs_optimized_info: Option<EbsOptimizedInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsOptimizedInfo {
    #[serde(rename = "MaximumBandwidthInMbps", default)]
    pub maximum_bandwidth_in_mbps: Option<u64>,
}

/// The `DescribeInstanceTypes` output.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DescribeInstanceTypesOutput {
    #[serde(default)]
    pub instance_types: Vec<Ec2InstanceType>,
    #[serde(default)]
    pub next_token: Option<String>,
}

/// One `InstanceTypeOffering`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeOffering {
    pub instance_type: String,
    /// `region`, `availability-zone` or `availability-zone-id`.
    #[serde(default)]
    pub location_type: Option<String>,
    pub location: String,
}

/// The `DescribeInstanceTypeOfferings` output.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DescribeInstanceTypeOfferingsOutput {
    #[serde(default)]
    pub instance_type_offerings: Vec<InstanceTypeOffering>,
    #[serde(default)]
    pub next_token: Option<String>,
}

/// A type EC2 describes in a way the formulas cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DescribeInstanceTypes {instance_type}: {field}: {message}")]
pub struct ConversionError {
    pub instance_type: String,
    /// The shape field, e.g. `vcpus`, `max_enis`.
    pub field: String,
    pub message: String,
}

impl Ec2InstanceType {
    /// The catalog shape, or `None` when upstream's request filter would not have returned the
    /// type (not HVM, no `x86_64`/`arm64`) or it cannot be bought on demand or as spot.
    pub fn to_shape(&self) -> Result<Option<InstanceShape>, ConversionError> {
        if !self.supported_virtualization_types.is_empty()
            && !self
                .supported_virtualization_types
                .iter()
                .any(|v| v == "hvm")
        {
            return Ok(None);
        }
        let architectures: Vec<Architecture> = self
            .processor_info
            .supported_architectures
            .iter()
            .filter_map(|a| Architecture::from_ec2_name(a))
            .collect();
        let usage_classes: Vec<UsageClass> = self
            .supported_usage_classes
            .iter()
            .filter_map(|c| UsageClass::from_ec2_name(c))
            .collect();
        if architectures.is_empty() || usage_classes.is_empty() {
            return Ok(None);
        }
        let network = &self.network_info;
        let default_card = network.default_network_card_index.unwrap_or(0);
        let max_enis = network
            .network_cards
            .iter()
            .find(|card| card.network_card_index == default_card)
            .map_or(network.maximum_network_interfaces, |card| {
                card.maximum_network_interfaces
            });
        let bandwidth_gbps: Vec<f64> = network
            .network_cards
            .iter()
            .filter_map(|card| card.baseline_bandwidth_in_gbps)
            .collect();
        let network_bandwidth_mbps = if bandwidth_gbps.is_empty() {
            None
        } else {
            let mbps = (bandwidth_gbps.iter().sum::<f64>() * 1000.0).round();
            (mbps.is_finite() && mbps > 0.0 && mbps < 1e12).then_some(mbps as u64)
        };
        let ebs_bandwidth_mbps = self
            .ebs_info
            .as_ref()
            .filter(|ebs| ebs.ebs_optimized_support.as_deref() == Some("default"))
            .and_then(|ebs| ebs.ebs_optimized_info.as_ref())
            .and_then(|info| info.maximum_bandwidth_in_mbps);
        let shape = InstanceShape {
            name: self.instance_type.clone(),
            vcpus: self.vcpu_info.default_vcpus,
            memory_mib: self.memory_info.size_in_mib,
            architectures,
            cpu_manufacturer: self.processor_info.manufacturer.clone().unwrap_or_default(),
            cpu_clock_ghz: self.processor_info.sustained_clock_speed_in_ghz,
            hypervisor: self.hypervisor.clone().filter(|h| !h.is_empty()),
            bare_metal: self.bare_metal.unwrap_or(false),
            burstable: self.burstable_performance_supported.unwrap_or(false),
            max_enis,
            ipv4_per_eni: network.ipv4_addresses_per_interface,
            efa_interfaces: network
                .efa_info
                .as_ref()
                .map_or(0, |efa| efa.maximum_efa_interfaces),
            network_bandwidth_mbps,
            ebs_bandwidth_mbps,
            encryption_in_transit: network.encryption_in_transit_supported.unwrap_or(false),
            instance_store: self
                .instance_storage_info
                .as_ref()
                .map(|store| InstanceStore {
                    total_gb: store.total_size_in_gb,
                    nvme: store.nvme_support.as_deref() != Some("unsupported"),
                }),
            gpus: self
                .gpu_info
                .iter()
                .flat_map(|info| info.gpus.iter())
                .map(|gpu| Gpu {
                    name: gpu.name.clone(),
                    manufacturer: gpu.manufacturer.clone(),
                    count: gpu.count,
                    memory_mib: gpu.memory_info.as_ref().map_or(0, |m| m.size_in_mib),
                })
                .collect(),
            inference_accelerators: self
                .inference_accelerator_info
                .iter()
                .flat_map(|info| info.accelerators.iter())
                .map(|a| Accelerator {
                    name: a.name.clone(),
                    manufacturer: a.manufacturer.clone(),
                    count: a.count,
                })
                .collect(),
            neuron_devices: self
                .neuron_info
                .iter()
                .flat_map(|info| info.neuron_devices.iter())
                .map(|d| NeuronDevice {
                    name: d.name.clone(),
                    count: d.count,
                    cores: d.core_info.count,
                })
                .collect(),
            usage_classes,
            price: None,
        };
        shape.validate().map_err(|problem| ConversionError {
            instance_type: self.instance_type.clone(),
            field: problem.field,
            message: problem.message,
        })?;
        Ok(Some(shape))
    }
}

/// The availability zones each type is offered in (`availability-zone` offerings; offerings
/// by region or zone id are ignored).
pub fn offering_zones(offerings: &[InstanceTypeOffering]) -> BTreeMap<String, BTreeSet<String>> {
    let mut zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for offering in offerings {
        if offering
            .location_type
            .as_deref()
            .is_none_or(|t| t == "availability-zone")
        {
            zones
                .entry(offering.instance_type.clone())
                .or_default()
                .insert(offering.location.clone());
        }
    }
    zones
}

/// A described type that did not become an instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedType {
    pub instance_type: String,
    pub reason: String,
}

/// The instance types, sorted by name, and the described types left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    pub instance_types: Vec<InstanceTypeInfo>,
    pub skipped: Vec<SkippedType>,
}

/// Resolves described types for `options` (AMI family, kubelet settings, zones = the
/// EC2NodeClass subnets' zones; empty means the region's default zones). A type's offerings are
/// made in the zones it is offered in that `options` allows; a type with no such zone, no price
/// or an AMI family that cannot run it is skipped.
pub fn resolve<T: Borrow<Ec2InstanceType>>(
    described: &[T],
    zones_by_type: &BTreeMap<String, BTreeSet<String>>,
    prices: &Prices,
    options: &CatalogOptions,
) -> Result<Resolved, OptionsError> {
    options.validate()?;
    let allowed: BTreeSet<String> = options.effective_zones().into_iter().collect();
    let mut resolved = Resolved::default();
    let mut skip = |instance_type: &str, reason: String| {
        resolved.skipped.push(SkippedType {
            instance_type: instance_type.to_string(),
            reason,
        });
    };
    let mut infos = Vec::new();
    for ec2 in described {
        let ec2: &Ec2InstanceType = ec2.borrow();
        let name = ec2.instance_type.as_str();
        let shape = match ec2.to_shape() {
            Ok(Some(shape)) => shape,
            Ok(None) => {
                skip(
                    name,
                    "not HVM on x86_64/arm64 with on-demand or spot".to_string(),
                );
                continue;
            }
            Err(error) => {
                skip(name, error.to_string());
                continue;
            }
        };
        if !capacity::compatible(&shape, options.ami_family) {
            skip(
                name,
                format!("AMI family {} cannot run it", options.ami_family.as_str()),
            );
            continue;
        }
        let zones: Vec<String> = zones_by_type
            .get(name)
            .map(|offered| offered.intersection(&allowed).cloned().collect())
            .unwrap_or_default();
        if zones.is_empty() {
            skip(name, "not offered in any allowed zone".to_string());
            continue;
        }
        let table = prices.to_price_table(&[name], &zones);
        let type_options = CatalogOptions {
            zones,
            ..options.clone()
        };
        match InstanceTypeInfo::resolve(&shape, &table, &type_options) {
            Some(info) => infos.push(info),
            None => skip(name, "no on-demand price".to_string()),
        }
    }
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    resolved.instance_types = infos;
    Ok(resolved)
}
