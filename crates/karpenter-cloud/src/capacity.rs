//! Capacity formulas, as upstream computes them (karpenter-aws.md section 3.2).
//!
//! Floating-point steps are done in the same order as upstream so the rounding matches bit for bit.

use std::collections::BTreeMap;

use karpenter_api::labels;

use crate::options::{AmiFamily, CatalogOptions};
use crate::resources::{MIB, Resources};
use crate::shape::{Architecture, InstanceShape};

/// Memory Graviton (arm64) types keep for CMA, unusable by pods.
const ARM64_RESERVED_MIB: i64 = 64;

/// The node's capacity: cpu, memory, ephemeral storage, pods and extended resources.
pub fn capacity(shape: &InstanceShape, options: &CatalogOptions) -> Resources {
    Resources {
        cpu_millis: cpu_millis(shape),
        memory_bytes: memory_bytes(shape, options.vm_memory_overhead_percent),
        ephemeral_storage_bytes: ephemeral_storage_bytes(shape, options),
        pods: pods(shape, options),
        extended: extended_resources(shape),
    }
}

/// `DefaultVCpus` x 1000.
pub fn cpu_millis(shape: &InstanceShape) -> i64 {
    i64::from(shape.vcpus) * 1000
}

/// `M - ceil(M x overhead)` MiB in bytes, where M is `SizeInMiB` less 64 MiB when the first
/// architecture is arm64.
pub fn memory_bytes(shape: &InstanceShape, vm_memory_overhead_percent: f64) -> i64 {
    let mut mib = i64::try_from(shape.memory_mib).unwrap_or(i64::MAX / MIB);
    if shape.architectures.first() == Some(&Architecture::Arm64) {
        mib = mib.saturating_sub(ARM64_RESERVED_MIB);
    }
    let bytes = mib.saturating_mul(MIB);
    // Upstream: ceil(float64(bytes) * percent / 1024 / 1024), in this order.
    let overhead_mib = (bytes as f64 * vm_memory_overhead_percent / 1024.0 / 1024.0).ceil() as i64;
    bytes.saturating_sub(overhead_mib.saturating_mul(MIB))
}

/// Max pods from the default network card's ENIs:
/// `max(0, maxENIs - reservedENIs) x (IPv4PerENI - 1) + 2`, or 0 when no ENI is usable.
pub fn eni_limited_pods(shape: &InstanceShape, reserved_enis: u32) -> i64 {
    let usable = (i64::from(shape.max_enis) - i64::from(reserved_enis)).max(0);
    if usable == 0 {
        return 0;
    }
    usable
        .saturating_mul(i64::from(shape.ipv4_per_eni) - 1)
        .saturating_add(2)
}

/// The `pods` capacity: kubelet `maxPods` if set, else ENI-limited pods; then capped at
/// `podsPerCore x vCPUs` when `podsPerCore` is set and the AMI family honours it.
pub fn pods(shape: &InstanceShape, options: &CatalogOptions) -> i64 {
    let kubelet = &options.kubelet;
    let mut count = match kubelet.max_pods {
        Some(max_pods) => i64::from(max_pods),
        // Every modelled (Linux) AMI family supports ENI-limited pod density.
        None => eni_limited_pods(shape, options.reserved_enis),
    };
    if let Some(per_core) = kubelet.pods_per_core
        && per_core > 0
        && crate::options::pods_per_core_enabled(options.ami_family)
    {
        count = count.min(i64::from(per_core).saturating_mul(i64::from(shape.vcpus)));
    }
    count
}

/// The pod count the kube-reserved memory term uses: ENI-limited pods with no reserved ENIs
/// for AL2, AL2023 and Custom (whatever `maxPods` and `RESERVED_ENIS` say), else `pods`.
pub fn pods_for_memory_overhead(shape: &InstanceShape, options: &CatalogOptions) -> i64 {
    if crate::options::uses_eni_limited_memory_overhead(options.ami_family) {
        eni_limited_pods(shape, 0)
    } else {
        pods(shape, options)
    }
}

/// The local instance store (decimal GB) with `instanceStorePolicy: RAID0`, else the root volume.
pub fn ephemeral_storage_bytes(shape: &InstanceShape, options: &CatalogOptions) -> i64 {
    match &shape.instance_store {
        Some(store) if options.instance_store_raid0 => i64::try_from(store.total_gb)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000),
        _ => options.effective_root_volume_bytes(),
    }
}

/// GPUs by manufacturer (`nvidia.com/gpu`, `amd.com/gpu`, `habana.ai/gaudi`), Neuron devices and
/// cores, and EFA interfaces. Zero amounts are left out.
pub fn extended_resources(shape: &InstanceShape) -> BTreeMap<String, i64> {
    let mut extended: BTreeMap<String, i64> = BTreeMap::new();
    let mut add = |name: &str, amount: i64| {
        if amount > 0 {
            let entry = extended.entry(name.to_string()).or_insert(0);
            *entry = (*entry).saturating_add(amount);
        }
    };
    for gpu in &shape.gpus {
        let resource = match gpu.manufacturer.as_str() {
            "NVIDIA" => labels::RESOURCE_NVIDIA_GPU,
            "AMD" => labels::RESOURCE_AMD_GPU,
            "Habana" => labels::RESOURCE_HABANA_GAUDI,
            _ => continue,
        };
        add(resource, i64::from(gpu.count));
    }
    if let Some(first) = shape.neuron_devices.first() {
        // Upstream reads the first device entry only (EC2 lists one per type).
        add(labels::RESOURCE_AWS_NEURON, i64::from(first.count));
        add(
            labels::RESOURCE_AWS_NEURON_CORE,
            i64::from(first.count).saturating_mul(i64::from(first.cores)),
        );
    }
    add(labels::RESOURCE_EFA, i64::from(shape.efa_interfaces));
    extended
}

/// Whether the AMI family can run this type at all.
pub fn compatible(shape: &InstanceShape, ami_family: AmiFamily) -> bool {
    crate::options::supports_family(ami_family, shape.family())
}
