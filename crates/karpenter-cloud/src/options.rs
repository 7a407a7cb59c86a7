//! What the caller decides when turning shapes into instance types: region and zones, spot
//! discount, the provider settings (`VM_MEMORY_OVERHEAD_PERCENT`, `RESERVED_ENIS`) and the
//! EC2NodeClass facts that change capacity and overhead (AMI family, kubelet settings, root
//! volume, instance-store policy).

use crate::error::OptionsError;
use crate::resources::GIB;

/// Upstream's default `VM_MEMORY_OVERHEAD_PERCENT`.
pub const DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;
/// The default spot discount: spot price = on-demand price x (1 - 0.6).
pub const DEFAULT_SPOT_DISCOUNT: f64 = 0.6;
/// The default region.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The default root volume (AL2/AL2023 `/dev/xvda`, Bottlerocket `/dev/xvdb`): 20Gi.
pub const DEFAULT_EPHEMERAL_STORAGE_BYTES: i64 = 20 * GIB;
/// Zones per region when none are given.
pub const DEFAULT_ZONES_PER_REGION: usize = 3;

/// The AMI family of the EC2NodeClass (the API's type); it decides a few capacity and
/// overhead rules ([`pods_per_core_enabled`], [`uses_eni_limited_memory_overhead`],
/// [`supports_family`]). Windows families are not modelled: the catalog is Linux-only, and
/// they follow the AL2023 rules here.
pub use karpenter_api::v1::AmiFamily;

/// Whether kubelet's `podsPerCore` is honoured (not on Bottlerocket).
pub fn pods_per_core_enabled(family: AmiFamily) -> bool {
    !matches!(family, AmiFamily::Bottlerocket)
}

/// Whether the kube-reserved memory term uses ENI-limited pods (with no reserved ENIs)
/// rather than the computed pod count (AL2, AL2023, Custom).
pub fn uses_eni_limited_memory_overhead(family: AmiFamily) -> bool {
    !matches!(family, AmiFamily::Bottlerocket)
}

/// Whether the family can run the type's instance family (`a1.*` is excluded for AL2023).
pub fn supports_family(ami_family: AmiFamily, family: &str) -> bool {
    !(matches!(ami_family, AmiFamily::AL2023) && family == "a1")
}

/// An eviction threshold (`evictionHard` value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// `N%` of capacity, 0 <= N <= 100; 100% disables the threshold (counts as 0).
    Percent(f64),
    /// A fixed amount in bytes.
    Bytes(i64),
}

/// Per-resource overrides for kube-reserved or system-reserved (each set key replaces the
/// computed value).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservedOverrides {
    pub cpu_millis: Option<i64>,
    pub memory_bytes: Option<i64>,
    pub ephemeral_storage_bytes: Option<i64>,
}

/// `evictionHard` signals that change allocatable.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EvictionHard {
    /// `memory.available`.
    pub memory_available: Option<Threshold>,
    /// `nodefs.available`.
    pub nodefs_available: Option<Threshold>,
}

/// The EC2NodeClass `spec.kubelet` fields that change capacity or overhead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletSettings {
    pub max_pods: Option<u32>,
    pub pods_per_core: Option<u32>,
    pub kube_reserved: ReservedOverrides,
    pub system_reserved: ReservedOverrides,
    pub eviction_hard: EvictionHard,
}

/// Everything [`crate::Catalog::instance_types`] needs besides the shapes and prices.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogOptions {
    /// Region name, e.g. `us-east-1`.
    pub region: String,
    /// Zone names; empty means [`default_zones`] of the region.
    pub zones: Vec<String>,
    /// Spot discount in [0, 1): spot price = on-demand x (1 - discount), always an estimate.
    pub spot_discount: f64,
    /// `VM_MEMORY_OVERHEAD_PERCENT`, in [0, 1).
    pub vm_memory_overhead_percent: f64,
    /// `RESERVED_ENIS`: ENIs kept from the VPC CNI, lowering ENI-limited max pods.
    pub reserved_enis: u32,
    pub ami_family: AmiFamily,
    pub kubelet: KubeletSettings,
    /// Root volume size that becomes `ephemeral-storage`; `None` means 20Gi.
    pub root_volume_bytes: Option<i64>,
    /// `instanceStorePolicy: RAID0`: local instance store becomes `ephemeral-storage`.
    pub instance_store_raid0: bool,
}

impl Default for CatalogOptions {
    fn default() -> Self {
        Self {
            region: DEFAULT_REGION.to_string(),
            zones: Vec::new(),
            spot_discount: DEFAULT_SPOT_DISCOUNT,
            vm_memory_overhead_percent: DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
            reserved_enis: 0,
            ami_family: AmiFamily::AL2023,
            kubelet: KubeletSettings::default(),
            root_volume_bytes: None,
            instance_store_raid0: false,
        }
    }
}

/// The default zones of a region: `<region>a`, `<region>b`, `<region>c`.
pub fn default_zones(region: &str) -> Vec<String> {
    ["a", "b", "c"]
        .iter()
        .take(DEFAULT_ZONES_PER_REGION)
        .map(|suffix| format!("{region}{suffix}"))
        .collect()
}

impl CatalogOptions {
    /// The zones offerings are made in.
    pub fn effective_zones(&self) -> Vec<String> {
        if self.zones.is_empty() {
            default_zones(&self.region)
        } else {
            self.zones.clone()
        }
    }

    /// The root volume size in bytes.
    pub fn effective_root_volume_bytes(&self) -> i64 {
        self.root_volume_bytes
            .unwrap_or(DEFAULT_EPHEMERAL_STORAGE_BYTES)
    }

    /// Rejects values the formulas cannot use, naming the option.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.region.trim().is_empty() {
            return Err(OptionsError::new("region", "must not be empty"));
        }
        if let Some(index) = self.zones.iter().position(|zone| zone.trim().is_empty()) {
            return Err(OptionsError::new(
                format!("zones[{index}]"),
                "must not be empty",
            ));
        }
        if !(self.spot_discount.is_finite() && (0.0..1.0).contains(&self.spot_discount)) {
            return Err(OptionsError::new(
                "spot_discount",
                format!("must be at least 0 and below 1, got {}", self.spot_discount),
            ));
        }
        let overhead = self.vm_memory_overhead_percent;
        if !(overhead.is_finite() && (0.0..1.0).contains(&overhead)) {
            return Err(OptionsError::new(
                "vm_memory_overhead_percent",
                format!("must be at least 0 and below 1, got {overhead}"),
            ));
        }
        if let Some(bytes) = self.root_volume_bytes
            && bytes <= 0
        {
            return Err(OptionsError::new(
                "root_volume_bytes",
                format!("must be positive, got {bytes}"),
            ));
        }
        validate_reserved("kubelet.kube_reserved", &self.kubelet.kube_reserved)?;
        validate_reserved("kubelet.system_reserved", &self.kubelet.system_reserved)?;
        let eviction = &self.kubelet.eviction_hard;
        validate_threshold(
            "kubelet.eviction_hard.memory_available",
            eviction.memory_available,
        )?;
        validate_threshold(
            "kubelet.eviction_hard.nodefs_available",
            eviction.nodefs_available,
        )
    }
}

fn validate_reserved(field: &str, reserved: &ReservedOverrides) -> Result<(), OptionsError> {
    for (name, value) in [
        ("cpu_millis", reserved.cpu_millis),
        ("memory_bytes", reserved.memory_bytes),
        ("ephemeral_storage_bytes", reserved.ephemeral_storage_bytes),
    ] {
        if let Some(value) = value
            && value < 0
        {
            return Err(OptionsError::new(
                format!("{field}.{name}"),
                format!("must not be negative, got {value}"),
            ));
        }
    }
    Ok(())
}

fn validate_threshold(field: &str, threshold: Option<Threshold>) -> Result<(), OptionsError> {
    match threshold {
        Some(Threshold::Percent(percent))
            if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) =>
        {
            Err(OptionsError::new(
                field,
                format!("a percentage must be between 0 and 100, got {percent}"),
            ))
        }
        Some(Threshold::Bytes(bytes)) if bytes < 0 => Err(OptionsError::new(
            field,
            format!("must not be negative, got {bytes}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_zones_are_a_b_and_c_of_the_region() {
        assert_eq!(
            CatalogOptions::default().effective_zones(),
            ["us-east-1a", "us-east-1b", "us-east-1c"]
        );
        assert_eq!(default_zones("eu-west-1")[2], "eu-west-1c");
    }

    #[test]
    fn default_options_are_valid() {
        assert_eq!(CatalogOptions::default().validate(), Ok(()));
    }

    #[test]
    fn invalid_options_name_the_option() {
        type Edit = fn(&mut CatalogOptions);
        let cases: [(Edit, &str); 6] = [
            (|o| o.spot_discount = 1.0, "spot_discount"),
            (
                |o| o.vm_memory_overhead_percent = -0.1,
                "vm_memory_overhead_percent",
            ),
            (|o| o.zones = vec![String::new()], "zones[0]"),
            (|o| o.root_volume_bytes = Some(0), "root_volume_bytes"),
            (
                |o| o.kubelet.kube_reserved.memory_bytes = Some(-1),
                "kubelet.kube_reserved.memory_bytes",
            ),
            (
                |o| o.kubelet.eviction_hard.memory_available = Some(Threshold::Percent(101.0)),
                "kubelet.eviction_hard.memory_available",
            ),
        ];
        for (edit, field) in cases {
            let mut options = CatalogOptions::default();
            edit(&mut options);
            assert_eq!(
                options.validate().err().map(|e| e.option),
                Some(field.to_string())
            );
        }
    }
}
