//! The region's instance types as EC2 describes them (`DescribeInstanceTypes`, HVM on
//! x86_64/arm64, and `DescribeInstanceTypeOfferings` per availability zone), converted into
//! `karpenter_aws::instance_types` values. Upstream lists them at start (it must succeed) and
//! every 12 hours; so does [`crate::provider::AwsCloud`].

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, InstanceTypeInfo as SdkType, LocationType};
use karpenter_aws::instance_types::{
    AcceleratorDevice, EbsInfo, EbsOptimizedInfo, Ec2InstanceType, EfaInfo, GpuDevice, GpuInfo,
    GpuMemory, InferenceAcceleratorInfo, InstanceStorageInfo, InstanceTypeOffering, MemoryInfo,
    NetworkCard, NetworkInfo, NeuronCoreInfo, NeuronDeviceInfo, NeuronInfo, PlacementGroupInfo,
    ProcessorInfo, VCpuInfo, offering_zones,
};

use crate::clients::AwsClients;
use crate::error::AwsError;

/// What EC2 says the region offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ec2Catalog {
    pub instance_types: Vec<Ec2InstanceType>,
    /// The availability zones each type is offered in.
    pub zones_by_type: BTreeMap<String, BTreeSet<String>>,
}

fn u32_of(value: Option<i32>) -> u32 {
    value
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or_default()
}

fn u64_of(value: Option<i64>) -> u64 {
    value
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or_default()
}

/// One SDK instance type as the pure crate reads it.
pub fn convert(sdk: &SdkType) -> Option<Ec2InstanceType> {
    let name = sdk.instance_type()?.as_str().to_owned();
    let processor = sdk.processor_info();
    let network = sdk.network_info();
    Some(Ec2InstanceType {
        instance_type: name,
        vcpu_info: VCpuInfo {
            default_vcpus: u32_of(sdk.v_cpu_info().and_then(|v| v.default_v_cpus())),
        },
        memory_info: MemoryInfo {
            size_in_mib: u64_of(sdk.memory_info().and_then(|m| m.size_in_mib())),
        },
        processor_info: ProcessorInfo {
            supported_architectures: processor
                .map(|p| {
                    p.supported_architectures()
                        .iter()
                        .map(|a| a.as_str().to_owned())
                        .collect()
                })
                .unwrap_or_default(),
            manufacturer: processor.and_then(|p| p.manufacturer()).map(str::to_owned),
            sustained_clock_speed_in_ghz: processor.and_then(|p| p.sustained_clock_speed_in_ghz()),
        },
        network_info: NetworkInfo {
            maximum_network_interfaces: u32_of(
                network.and_then(|n| n.maximum_network_interfaces()),
            ),
            ipv4_addresses_per_interface: u32_of(
                network.and_then(|n| n.ipv4_addresses_per_interface()),
            ),
            default_network_card_index: network
                .and_then(|n| n.default_network_card_index())
                .and_then(|v| u32::try_from(v).ok()),
            network_cards: network
                .map(|n| {
                    n.network_cards()
                        .iter()
                        .map(|c| NetworkCard {
                            network_card_index: u32_of(c.network_card_index()),
                            maximum_network_interfaces: u32_of(c.maximum_network_interfaces()),
                            baseline_bandwidth_in_gbps: c.baseline_bandwidth_in_gbps(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            efa_info: network.and_then(|n| n.efa_info()).map(|e| EfaInfo {
                maximum_efa_interfaces: u32_of(e.maximum_efa_interfaces()),
            }),
            encryption_in_transit_supported: network
                .and_then(|n| n.encryption_in_transit_supported()),
        },
        gpu_info: sdk.gpu_info().map(|g| GpuInfo {
            gpus: g
                .gpus()
                .iter()
                .map(|d| GpuDevice {
                    name: d.name().unwrap_or_default().to_owned(),
                    manufacturer: d.manufacturer().unwrap_or_default().to_owned(),
                    count: u32_of(d.count()),
                    memory_info: d.memory_info().map(|m| GpuMemory {
                        size_in_mib: u64::try_from(m.size_in_mib().unwrap_or_default())
                            .unwrap_or_default(),
                    }),
                })
                .collect(),
        }),
        inference_accelerator_info: sdk.inference_accelerator_info().map(|i| {
            InferenceAcceleratorInfo {
                accelerators: i
                    .accelerators()
                    .iter()
                    .map(|a| AcceleratorDevice {
                        name: a.name().unwrap_or_default().to_owned(),
                        manufacturer: a.manufacturer().unwrap_or_default().to_owned(),
                        count: u32_of(a.count()),
                    })
                    .collect(),
            }
        }),
        neuron_info: sdk.neuron_info().map(|n| NeuronInfo {
            neuron_devices: n
                .neuron_devices()
                .iter()
                .map(|d| NeuronDeviceInfo {
                    name: d.name().unwrap_or_default().to_owned(),
                    count: u32_of(d.count()),
                    core_info: NeuronCoreInfo {
                        count: u32_of(d.core_info().and_then(|c| c.count())),
                    },
                })
                .collect(),
        }),
        instance_storage_info: sdk.instance_storage_info().map(|s| InstanceStorageInfo {
            total_size_in_gb: u64_of(s.total_size_in_gb()),
            nvme_support: s.nvme_support().map(|n| n.as_str().to_owned()),
        }),
        hypervisor: sdk.hypervisor().map(|h| h.as_str().to_owned()),
        bare_metal: sdk.bare_metal(),
        burstable_performance_supported: sdk.burstable_performance_supported(),
        supported_usage_classes: sdk
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_owned())
            .collect(),
        supported_virtualization_types: sdk
            .supported_virtualization_types()
            .iter()
            .map(|v| v.as_str().to_owned())
            .collect(),
        nitro_enclaves_support: sdk.nitro_enclaves_support().map(|n| n.as_str().to_owned()),
        ebs_info: sdk.ebs_info().map(|e| EbsInfo {
            ebs_optimized_support: e.ebs_optimized_support().map(|s| s.as_str().to_owned()),
            ebs_optimized_info: e.ebs_optimized_info().map(|o| EbsOptimizedInfo {
                maximum_bandwidth_in_mbps: o
                    .maximum_bandwidth_in_mbps()
                    .and_then(|v| u64::try_from(v).ok()),
            }),
        }),
        placement_group_info: sdk.placement_group_info().map(|p| PlacementGroupInfo {
            supported_strategies: p
                .supported_strategies()
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
        }),
    })
}

/// Lists the region's instance types and their zones.
pub async fn describe(clients: &AwsClients) -> Result<Ec2Catalog, AwsError> {
    let mut instance_types = Vec::new();
    let mut pages = clients
        .ec2
        .describe_instance_types()
        .filters(
            Filter::builder()
                .name("supported-virtualization-type")
                .values("hvm")
                .build(),
        )
        .filters(
            Filter::builder()
                .name("processor-info.supported-architecture")
                .values("x86_64")
                .values("arm64")
                .build(),
        )
        .max_results(100)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypes", &e))?;
        instance_types.extend(page.instance_types().iter().filter_map(convert));
    }
    let mut offerings = Vec::new();
    let mut pages = clients
        .ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .max_results(1000)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypeOfferings", &e))?;
        offerings.extend(page.instance_type_offerings().iter().filter_map(|o| {
            Some(InstanceTypeOffering {
                instance_type: o.instance_type()?.as_str().to_owned(),
                location_type: o.location_type().map(|l| l.as_str().to_owned()),
                location: o.location()?.to_owned(),
            })
        }));
    }
    if instance_types.is_empty() {
        return Err(AwsError::new(
            "ec2:DescribeInstanceTypes",
            "Empty",
            "EC2 described no HVM x86_64/arm64 instance types in the region",
        ));
    }
    instance_types.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
    Ok(Ec2Catalog {
        instance_types,
        zones_by_type: offering_zones(&offerings),
    })
}
