//! The labels every node of a type carries (karpenter-aws.md section 3.4): the Kubernetes
//! well-known ones and the `karpenter.k8s.aws/instance-*` facts. Zone and capacity type differ per
//! offering and are not here.

use std::collections::BTreeMap;

use karpenter_api::labels;

use crate::shape::InstanceShape;

/// The labels of one type in one region.
pub fn instance_labels(shape: &InstanceShape, region: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut set = |key: &str, value: String| {
        out.insert(key.to_string(), value);
    };

    set(labels::INSTANCE_TYPE, shape.name.clone());
    set(labels::OS, "linux".to_string());
    set(labels::REGION, region.to_string());
    // EC2 lists at most one of x86_64/arm64 per type; the first one is the type's architecture.
    if let Some(arch) = shape.architectures.first() {
        set(labels::ARCH, arch.kubernetes_name().to_string());
    }

    if let Some((category, generation)) = category_and_generation(&shape.name) {
        set(labels::INSTANCE_CATEGORY, category.to_string());
        set(labels::INSTANCE_GENERATION, generation.to_string());
    }
    set(labels::INSTANCE_FAMILY, shape.family().to_string());
    set(labels::INSTANCE_SIZE, shape.size().to_string());
    set(
        labels::INSTANCE_CAPABILITY_FLEX,
        shape.family().contains("-flex").to_string(),
    );
    set(labels::INSTANCE_CPU, shape.vcpus.to_string());
    set(
        labels::INSTANCE_CPU_MANUFACTURER,
        lower_kebab(&shape.cpu_manufacturer),
    );
    if let Some(ghz) = shape.cpu_clock_ghz {
        set(
            labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            format!("{}", (ghz * 1000.0).round() as i64),
        );
    }
    set(labels::INSTANCE_MEMORY, shape.memory_mib.to_string());
    // Upstream inserts the hypervisor as is: "" for bare metal.
    set(
        labels::INSTANCE_HYPERVISOR,
        shape.hypervisor.clone().unwrap_or_default(),
    );
    set(
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        shape.encryption_in_transit.to_string(),
    );
    if let Some(store) = shape.instance_store.as_ref().filter(|store| store.nvme) {
        set(labels::INSTANCE_LOCAL_NVME, store.total_gb.to_string());
    }
    if let Some(mbps) = shape.network_bandwidth_mbps {
        set(labels::INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
    }
    if let Some(mbps) = shape.ebs_bandwidth_mbps {
        set(labels::INSTANCE_EBS_BANDWIDTH, mbps.to_string());
    }

    if let [gpu] = shape.gpus.as_slice() {
        set(labels::INSTANCE_GPU_NAME, lower_kebab(&gpu.name));
        set(
            labels::INSTANCE_GPU_MANUFACTURER,
            lower_kebab(&gpu.manufacturer),
        );
        set(labels::INSTANCE_GPU_COUNT, gpu.count.to_string());
        set(labels::INSTANCE_GPU_MEMORY, gpu.memory_mib.to_string());
    }
    // Inference accelerators count only when the type has no Neuron devices; Neuron devices
    // are reported with manufacturer `aws`.
    if let ([accelerator], []) = (
        shape.inference_accelerators.as_slice(),
        shape.neuron_devices.as_slice(),
    ) {
        set(
            labels::INSTANCE_ACCELERATOR_NAME,
            lower_kebab(&accelerator.name),
        );
        set(
            labels::INSTANCE_ACCELERATOR_MANUFACTURER,
            lower_kebab(&accelerator.manufacturer),
        );
        set(
            labels::INSTANCE_ACCELERATOR_COUNT,
            accelerator.count.to_string(),
        );
    }
    if let [device] = shape.neuron_devices.as_slice() {
        set(labels::INSTANCE_ACCELERATOR_NAME, lower_kebab(&device.name));
        set(labels::INSTANCE_ACCELERATOR_MANUFACTURER, "aws".to_string());
        set(labels::INSTANCE_ACCELERATOR_COUNT, device.count.to_string());
    }
    out
}

/// Upstream's `lowerKabobCase`: spaces to dashes, then lowercase.
pub fn lower_kebab(value: &str) -> String {
    value.replace(' ', "-").to_lowercase()
}

/// Category and generation as upstream's `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.` captures them
/// (groups 1 and 3): `m7i-flex.large` -> (`m`, `7`), `u-6tb1.metal` -> (`u`, `1`).
pub fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let (category, rest) = name.split_at(letters);
    // With the optional `-<digits>tb` group first, as the regex tries it first.
    let after_group = rest.strip_prefix('-').and_then(|tail| {
        let digits = leading_digits(tail);
        (digits > 0)
            .then(|| &tail[digits..])
            .and_then(|tail| tail.strip_prefix("tb"))
    });
    for candidate in after_group.into_iter().chain([rest]) {
        let digits = leading_digits(candidate);
        if digits > 0 && candidate[digits..].contains('.') {
            return Some((category, &candidate[..digits]));
        }
    }
    None
}

fn leading_digits(value: &str) -> usize {
    value.bytes().take_while(u8::is_ascii_digit).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_and_generation_match_upstreams_pattern() {
        for (name, expected) in [
            ("m5.large", Some(("m", "5"))),
            ("m7i-flex.large", Some(("m", "7"))),
            ("c6gn.16xlarge", Some(("c", "6"))),
            ("u-6tb1.metal", Some(("u", "1"))),
            ("u7i-12tb.224xlarge", Some(("u", "7"))),
            ("x2iedn.xlarge", Some(("x", "2"))),
            ("inf1.xlarge", Some(("inf", "1"))),
            ("p4d.24xlarge", Some(("p", "4"))),
            ("mac.metal", None),
        ] {
            assert_eq!(category_and_generation(name), expected, "{name}");
        }
    }

    #[test]
    fn lower_kebab_replaces_spaces_and_lowercases() {
        assert_eq!(lower_kebab("Qualcomm AI100"), "qualcomm-ai100");
        assert_eq!(lower_kebab("NVIDIA"), "nvidia");
    }
}
