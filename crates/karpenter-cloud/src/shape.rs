//! One instance type's raw facts, as the catalog file records them.
//!
//! A shape is what EC2's `DescribeInstanceTypes` says about a type, reduced to what the capacity,
//! overhead and label formulas need, plus its on-demand list price. Everything derived (allocatable,
//! labels, offerings) is computed from shapes by [`crate::Catalog::instance_types`].

use serde::{Deserialize, Serialize};

/// Upper bounds that keep every formula far away from integer overflow.
const MAX_VCPUS: u32 = 1 << 20;
const MAX_MEMORY_MIB: u64 = 1 << 32;
const MAX_ENIS: u32 = 1 << 16;
const MAX_IPV4_PER_ENI: u32 = 1 << 16;
const MAX_STORE_GB: u64 = 1 << 30;

/// A CPU architecture, spelled as EC2 spells it (`x86_64`, `arm64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Architecture {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "arm64")]
    Arm64,
}

impl Architecture {
    /// The `kubernetes.io/arch` value (`amd64`, `arm64`).
    pub fn kubernetes_name(self) -> &'static str {
        match self {
            Self::X86_64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }

    /// The EC2 name (`x86_64`, `arm64`).
    pub fn ec2_name(self) -> &'static str {
        match self {
            Self::X86_64 => "x86_64",
            Self::Arm64 => "arm64",
        }
    }

    /// Parses an EC2 architecture name; `None` for ones Karpenter does not launch (`i386`,
    /// `arm64_mac`, `x86_64_mac`).
    pub fn from_ec2_name(name: &str) -> Option<Self> {
        match name {
            "x86_64" => Some(Self::X86_64),
            "arm64" => Some(Self::Arm64),
            _ => None,
        }
    }
}

/// A way to buy the type (EC2 `SupportedUsageClasses`, without `capacity-block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum UsageClass {
    #[serde(rename = "on-demand")]
    OnDemand,
    #[serde(rename = "spot")]
    Spot,
}

impl UsageClass {
    /// Parses an EC2 usage class; `None` for ones the catalog does not model (`capacity-block`).
    pub fn from_ec2_name(name: &str) -> Option<Self> {
        match name {
            "on-demand" => Some(Self::OnDemand),
            "spot" => Some(Self::Spot),
            _ => None,
        }
    }
}

/// One GPU entry (EC2 `GpuInfo.Gpus[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// As EC2 spells it, e.g. `T4`, `A10G`.
    pub name: String,
    /// As EC2 spells it, e.g. `NVIDIA`, `AMD`, `Habana`.
    pub manufacturer: String,
    pub count: u32,
    /// Memory of one GPU.
    pub memory_mib: u64,
}

/// One inference accelerator entry (EC2 `InferenceAcceleratorInfo.Accelerators[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
}

/// One Neuron device entry (EC2 `NeuronInfo.NeuronDevices[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeuronDevice {
    pub name: String,
    pub count: u32,
    /// Neuron cores per device.
    pub cores: u32,
}

/// Local instance storage (EC2 `InstanceStorageInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceStore {
    /// Total size in decimal gigabytes, as EC2 reports it.
    pub total_gb: u64,
    /// True when the disks are NVMe (EC2 `NvmeSupport` is not `unsupported`).
    pub nvme: bool,
}

/// The raw facts about one instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceShape {
    /// `family.size`, e.g. `m5.large`.
    pub name: String,
    /// EC2 `VCpuInfo.DefaultVCpus`.
    pub vcpus: u32,
    /// EC2 `MemoryInfo.SizeInMiB`.
    pub memory_mib: u64,
    /// In EC2's order; the first one decides the arm64 memory reservation.
    pub architectures: Vec<Architecture>,
    /// EC2 `ProcessorInfo.Manufacturer`, e.g. `Intel`, `AMD`, `AWS`.
    pub cpu_manufacturer: String,
    /// EC2 `ProcessorInfo.SustainedClockSpeedInGhz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_clock_ghz: Option<f64>,
    /// `nitro` or `xen`; absent for bare metal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub bare_metal: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub burstable: bool,
    /// Maximum network interfaces on the default network card (the VPC CNI uses only that card).
    pub max_enis: u32,
    /// EC2 `NetworkInfo.Ipv4AddressesPerInterface`.
    pub ipv4_per_eni: u32,
    /// EC2 `NetworkInfo.EfaInfo.MaximumEfaInterfaces`, 0 without EFA.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub efa_interfaces: u32,
    /// Baseline network bandwidth in megabits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_bandwidth_mbps: Option<u64>,
    /// Maximum EBS bandwidth in megabits per second, when the type is EBS-optimized by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs_bandwidth_mbps: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub encryption_in_transit: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store: Option<InstanceStore>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inference_accelerators: Vec<Accelerator>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neuron_devices: Vec<NeuronDevice>,
    /// How the type can be bought.
    pub usage_classes: Vec<UsageClass>,
    /// On-demand price in USD per hour in the catalog's price region; types without one have no
    /// offerings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// What is wrong with one field of a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeProblem {
    /// Path of the field, e.g. `vcpus` or `gpus[0].count`.
    pub field: String,
    pub message: String,
}

impl ShapeProblem {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl InstanceShape {
    /// The family (`m5` of `m5.large`).
    pub fn family(&self) -> &str {
        self.name.split_once('.').map_or("", |(family, _)| family)
    }

    /// The size (`large` of `m5.large`).
    pub fn size(&self) -> &str {
        self.name.split_once('.').map_or("", |(_, size)| size)
    }

    /// Checks the facts the formulas rely on; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ShapeProblem> {
        validate_name(&self.name)?;
        check_range("vcpus", u64::from(self.vcpus), 1, u64::from(MAX_VCPUS))?;
        check_range("memory_mib", self.memory_mib, 1, MAX_MEMORY_MIB)?;
        if self.architectures.is_empty() {
            return Err(ShapeProblem::new(
                "architectures",
                "must list at least one architecture",
            ));
        }
        if self.architectures.first() == Some(&Architecture::Arm64) && self.memory_mib <= 64 {
            return Err(ShapeProblem::new(
                "memory_mib",
                "arm64 types reserve 64 MiB, so memory must be more than 64 MiB",
            ));
        }
        if self.cpu_manufacturer.trim().is_empty() {
            return Err(ShapeProblem::new("cpu_manufacturer", "must not be empty"));
        }
        if let Some(ghz) = self.cpu_clock_ghz
            && !(ghz.is_finite() && ghz > 0.0 && ghz < 1000.0)
        {
            return Err(ShapeProblem::new(
                "cpu_clock_ghz",
                format!("must be a positive number of GHz, got {ghz}"),
            ));
        }
        check_range("max_enis", u64::from(self.max_enis), 0, u64::from(MAX_ENIS))?;
        check_range(
            "ipv4_per_eni",
            u64::from(self.ipv4_per_eni),
            1,
            u64::from(MAX_IPV4_PER_ENI),
        )?;
        if let Some(store) = &self.instance_store {
            check_range("instance_store.total_gb", store.total_gb, 1, MAX_STORE_GB)?;
        }
        self.validate_devices()?;
        if self.usage_classes.is_empty() {
            return Err(ShapeProblem::new(
                "usage_classes",
                "must list at least one of on-demand, spot",
            ));
        }
        if let Some(price) = self.price
            && !(price.is_finite() && price > 0.0)
        {
            return Err(ShapeProblem::new(
                "price",
                format!("must be a positive number of USD per hour, got {price}"),
            ));
        }
        Ok(())
    }

    fn validate_devices(&self) -> Result<(), ShapeProblem> {
        for (index, gpu) in self.gpus.iter().enumerate() {
            non_empty(&format!("gpus[{index}].name"), &gpu.name)?;
            non_empty(&format!("gpus[{index}].manufacturer"), &gpu.manufacturer)?;
        }
        for (index, accelerator) in self.inference_accelerators.iter().enumerate() {
            let field = format!("inference_accelerators[{index}]");
            non_empty(&format!("{field}.name"), &accelerator.name)?;
            non_empty(&format!("{field}.manufacturer"), &accelerator.manufacturer)?;
        }
        for (index, device) in self.neuron_devices.iter().enumerate() {
            non_empty(&format!("neuron_devices[{index}].name"), &device.name)?;
        }
        Ok(())
    }
}

fn validate_name(name: &str) -> Result<(), ShapeProblem> {
    let valid = name.split_once('.').is_some_and(|(family, size)| {
        !family.is_empty() && !size.is_empty() && !size.contains('.')
    }) && name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(ShapeProblem::new(
            "name",
            format!("{name:?} is not of the form family.size (lowercase letters, digits, '-')"),
        ))
    }
}

fn non_empty(field: &str, value: &str) -> Result<(), ShapeProblem> {
    if value.trim().is_empty() {
        Err(ShapeProblem::new(field, "must not be empty"))
    } else {
        Ok(())
    }
}

fn check_range(field: &str, value: u64, min: u64, max: u64) -> Result<(), ShapeProblem> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ShapeProblem::new(
            field,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// m5.large as moto 5.2.5 describes it.
    pub(crate) fn m5_large() -> InstanceShape {
        InstanceShape {
            name: "m5.large".into(),
            vcpus: 2,
            memory_mib: 8192,
            architectures: vec![Architecture::X86_64],
            cpu_manufacturer: "Intel".into(),
            cpu_clock_ghz: Some(3.1),
            hypervisor: Some("nitro".into()),
            bare_metal: false,
            burstable: false,
            max_enis: 3,
            ipv4_per_eni: 10,
            efa_interfaces: 0,
            network_bandwidth_mbps: Some(750),
            ebs_bandwidth_mbps: Some(4750),
            encryption_in_transit: false,
            instance_store: None,
            gpus: vec![],
            inference_accelerators: vec![],
            neuron_devices: vec![],
            usage_classes: vec![UsageClass::OnDemand, UsageClass::Spot],
            price: Some(0.096),
        }
    }

    #[test]
    fn a_valid_shape_passes_validation() {
        assert_eq!(m5_large().validate(), Ok(()));
    }

    #[test]
    fn invalid_shapes_name_the_offending_field() {
        type Edit = fn(&mut InstanceShape);
        let cases: [(Edit, &str); 9] = [
            (|s| s.name = "m5large".into(), "name"),
            (|s| s.name = "M5.large".into(), "name"),
            (|s| s.vcpus = 0, "vcpus"),
            (|s| s.memory_mib = 0, "memory_mib"),
            (|s| s.architectures.clear(), "architectures"),
            (|s| s.ipv4_per_eni = 0, "ipv4_per_eni"),
            (|s| s.usage_classes.clear(), "usage_classes"),
            (|s| s.price = Some(f64::NAN), "price"),
            (
                |s| {
                    s.gpus.push(Gpu {
                        name: String::new(),
                        manufacturer: "NVIDIA".into(),
                        count: 1,
                        memory_mib: 1,
                    })
                },
                "gpus[0].name",
            ),
        ];
        for (edit, field) in cases {
            let mut shape = m5_large();
            edit(&mut shape);
            let problem = shape.validate().err();
            assert_eq!(problem.map(|p| p.field), Some(field.to_string()));
        }
    }

    #[test]
    fn family_and_size_split_on_the_dot() {
        let mut shape = m5_large();
        shape.name = "m7i-flex.2xlarge".into();
        assert_eq!((shape.family(), shape.size()), ("m7i-flex", "2xlarge"));
    }
}
