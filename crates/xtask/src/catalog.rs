//! Turns moto's `DescribeInstanceTypes` data into the embedded catalog.
//!
//! Kept: types EC2 describes as HVM on `x86_64` or `arm64` (upstream's `DescribeInstanceTypes`
//! filter) that the list-price rule prices. Every kept shape is validated.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use karpenter_cloud::pricing::list_prices::{LIST_PRICE_REGION, LIST_PRICE_SOURCE, list_price};
use karpenter_cloud::{
    Accelerator, Architecture, CATALOG_FORMAT, Catalog, CatalogHeader, Gpu, InstanceShape,
    InstanceStore, NeuronDevice, UsageClass,
};
use serde_json::Value;

use crate::ec2_data;

/// The committed catalog, relative to the workspace root.
pub const OUTPUT: &str = "crates/karpenter-cloud/data/ec2-catalog.jsonl";

/// The generator's output.
pub struct Generated {
    pub text: String,
    pub count: usize,
}

/// Reads the wheel and renders the catalog file.
pub fn generate(wheel: &Path) -> anyhow::Result<Generated> {
    let data = ec2_data::read_instance_types(wheel)?;
    let types = data
        .as_object()
        .context("instance_types.json is not an object keyed by instance type")?;
    let mut shapes = Vec::new();
    for (name, info) in types {
        if let Some(shape) = shape_of(name, info).with_context(|| format!("moto entry {name}"))? {
            shapes.push(shape);
        }
    }
    let header = CatalogHeader {
        format: CATALOG_FORMAT.to_string(),
        source: Some(ec2_data::SOURCE.to_string()),
        source_sha256: Some(ec2_data::MOTO_WHEEL_SHA256.to_string()),
        license: Some(ec2_data::LICENSE.to_string()),
        price_region: LIST_PRICE_REGION.to_string(),
        price_source: Some(LIST_PRICE_SOURCE.to_string()),
        instance_types: None,
    };
    let catalog = Catalog::from_shapes(ec2_data::SOURCE, header, shapes)?;
    let text = catalog.render().context("rendering the catalog")?;
    // The output must load back as it is.
    Catalog::parse("the generated catalog", &text)?;
    Ok(Generated {
        count: catalog.shapes().len(),
        text,
    })
}

/// Compares the committed file with the generated text.
pub fn check(target: &Path, generated: &str) -> anyhow::Result<ExitCode> {
    let committed =
        std::fs::read_to_string(target).with_context(|| format!("reading {}", target.display()))?;
    if committed == generated {
        println!("{OUTPUT} is up to date");
        return Ok(ExitCode::SUCCESS);
    }
    let first_difference = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    eprintln!(
        "{OUTPUT} differs from the generator's output (first at line {}; committed {} lines, \
         generated {}). Run `cargo xtask catalog` and commit the result.",
        first_difference + 1,
        committed.lines().count(),
        generated.lines().count(),
    );
    Ok(ExitCode::FAILURE)
}

/// The shape of one moto entry; `None` when it is filtered out.
fn shape_of(name: &str, info: &Value) -> anyhow::Result<Option<InstanceShape>> {
    let virtualization = strings(info, "/SupportedVirtualizationTypes")?;
    if !virtualization.iter().any(|v| v == "hvm") {
        return Ok(None);
    }
    let architectures: Vec<Architecture> = strings(info, "/ProcessorInfo/SupportedArchitectures")?
        .iter()
        .filter_map(|arch| Architecture::from_ec2_name(arch))
        .collect();
    let usage_classes: Vec<UsageClass> = strings(info, "/SupportedUsageClasses")?
        .iter()
        .filter_map(|class| UsageClass::from_ec2_name(class))
        .collect();
    if architectures.is_empty() || usage_classes.is_empty() {
        return Ok(None);
    }
    let network = info
        .pointer("/NetworkInfo")
        .context("missing NetworkInfo")?;
    let mut shape = InstanceShape {
        name: name.to_string(),
        vcpus: u32_at(info, "/VCpuInfo/DefaultVCpus")?,
        memory_mib: u64_at(info, "/MemoryInfo/SizeInMiB")?,
        architectures,
        cpu_manufacturer: string_at(info, "/ProcessorInfo/Manufacturer")?,
        cpu_clock_ghz: info
            .pointer("/ProcessorInfo/SustainedClockSpeedInGhz")
            .and_then(Value::as_f64),
        hypervisor: info
            .pointer("/Hypervisor")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_string),
        bare_metal: bool_at(info, "/BareMetal"),
        burstable: bool_at(info, "/BurstablePerformanceSupported"),
        max_enis: default_card_enis(network)?,
        ipv4_per_eni: u32_at(network, "/Ipv4AddressesPerInterface")?,
        efa_interfaces: network
            .pointer("/EfaInfo/MaximumEfaInterfaces")
            .and_then(Value::as_u64)
            .map_or(Ok(0), u32::try_from)?,
        network_bandwidth_mbps: baseline_bandwidth_mbps(network),
        ebs_bandwidth_mbps: ebs_bandwidth_mbps(info),
        encryption_in_transit: bool_at(network, "/EncryptionInTransitSupported"),
        instance_store: instance_store(info)?,
        gpus: gpus(info)?,
        inference_accelerators: accelerators(info)?,
        neuron_devices: neuron_devices(info)?,
        usage_classes,
        price: None,
    };
    shape.price = list_price(&shape);
    Ok(shape.price.is_some().then_some(shape))
}

/// `MaximumNetworkInterfaces` of the default network card (the one the VPC CNI uses).
fn default_card_enis(network: &Value) -> anyhow::Result<u32> {
    let index = network
        .pointer("/DefaultNetworkCardIndex")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let card = network
        .pointer("/NetworkCards")
        .and_then(Value::as_array)
        .and_then(|cards| {
            cards
                .iter()
                .find(|card| card.get("NetworkCardIndex").and_then(Value::as_u64) == Some(index))
        });
    match card {
        Some(card) => u32_at(card, "/MaximumNetworkInterfaces"),
        None => u32_at(network, "/MaximumNetworkInterfaces"),
    }
}

/// Sum of the cards' baseline bandwidth, in megabits per second.
fn baseline_bandwidth_mbps(network: &Value) -> Option<u64> {
    let cards = network.pointer("/NetworkCards")?.as_array()?;
    let gbps: Vec<f64> = cards
        .iter()
        .filter_map(|card| card.get("BaselineBandwidthInGbps").and_then(Value::as_f64))
        .collect();
    if gbps.is_empty() {
        return None;
    }
    let mbps = (gbps.iter().sum::<f64>() * 1000.0).round();
    (mbps.is_finite() && mbps > 0.0).then_some(mbps as u64)
}

/// `MaximumBandwidthInMbps` when the type is EBS-optimized by default (upstream's condition).
fn ebs_bandwidth_mbps(info: &Value) -> Option<u64> {
    let ebs = info.pointer("/EbsInfo")?;
    if ebs.pointer("/EbsOptimizedSupport")?.as_str()? != "default" {
        return None;
    }
    ebs.pointer("/EbsOptimizedInfo/MaximumBandwidthInMbps")?
        .as_u64()
}

fn instance_store(info: &Value) -> anyhow::Result<Option<InstanceStore>> {
    let Some(store) = info.pointer("/InstanceStorageInfo") else {
        return Ok(None);
    };
    Ok(Some(InstanceStore {
        total_gb: u64_at(store, "/TotalSizeInGB")?,
        nvme: store.pointer("/NvmeSupport").and_then(Value::as_str) != Some("unsupported"),
    }))
}

fn gpus(info: &Value) -> anyhow::Result<Vec<Gpu>> {
    entries(info, "/GpuInfo/Gpus")
        .iter()
        .map(|gpu| {
            Ok(Gpu {
                name: string_at(gpu, "/Name")?,
                manufacturer: string_at(gpu, "/Manufacturer")?,
                count: u32_at(gpu, "/Count")?,
                memory_mib: u64_at(gpu, "/MemoryInfo/SizeInMiB")?,
            })
        })
        .collect()
}

fn accelerators(info: &Value) -> anyhow::Result<Vec<Accelerator>> {
    entries(info, "/InferenceAcceleratorInfo/Accelerators")
        .iter()
        .map(|accelerator| {
            Ok(Accelerator {
                name: string_at(accelerator, "/Name")?,
                manufacturer: string_at(accelerator, "/Manufacturer")?,
                count: u32_at(accelerator, "/Count")?,
            })
        })
        .collect()
}

fn neuron_devices(info: &Value) -> anyhow::Result<Vec<NeuronDevice>> {
    entries(info, "/NeuronInfo/NeuronDevices")
        .iter()
        .map(|device| {
            Ok(NeuronDevice {
                name: string_at(device, "/Name")?,
                count: u32_at(device, "/Count")?,
                cores: u32_at(device, "/CoreInfo/Count")?,
            })
        })
        .collect()
}

fn entries<'a>(info: &'a Value, pointer: &str) -> &'a [Value] {
    info.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn strings(info: &Value, pointer: &str) -> anyhow::Result<Vec<String>> {
    info.pointer(pointer)
        .and_then(Value::as_array)
        .with_context(|| format!("missing list {pointer}"))?
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_string)
                .with_context(|| format!("{pointer} holds a non-string"))
        })
        .collect()
}

fn string_at(info: &Value, pointer: &str) -> anyhow::Result<String> {
    info.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("missing string {pointer}"))
}

fn u64_at(info: &Value, pointer: &str) -> anyhow::Result<u64> {
    info.pointer(pointer)
        .and_then(Value::as_u64)
        .with_context(|| format!("missing integer {pointer}"))
}

fn u32_at(info: &Value, pointer: &str) -> anyhow::Result<u32> {
    let value = u64_at(info, pointer)?;
    u32::try_from(value).with_context(|| format!("{pointer} = {value} is too large"))
}

fn bool_at(info: &Value, pointer: &str) -> bool {
    info.pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}
