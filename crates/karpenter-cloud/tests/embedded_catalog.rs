//! Table tests of the embedded catalog against values computed by hand from upstream's formulas.
//!
//! Units: cpu in millicores, memory and storage in MiB (1 MiB = 1,048,576 bytes), pods as a count.
//! Defaults: VM_MEMORY_OVERHEAD_PERCENT 0.075, RESERVED_ENIS 0, AL2023, 20Gi root volume.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_cloud::{
    AmiFamily, CapacityType, Catalog, CatalogOptions, InstanceTypeInfo, KubeletSettings,
};

const MIB: i64 = 1024 * 1024;
const GIB: i64 = 1024 * MIB;

fn embedded() -> Catalog {
    match Catalog::embedded() {
        Ok(catalog) => catalog,
        Err(error) => panic!("the embedded catalog does not load: {error}"),
    }
}

fn resolve(options: &CatalogOptions) -> BTreeMap<String, InstanceTypeInfo> {
    match embedded().instance_types(options) {
        Ok(types) => types.into_iter().map(|t| (t.name.clone(), t)).collect(),
        Err(error) => panic!("{error}"),
    }
}

fn get<'a>(types: &'a BTreeMap<String, InstanceTypeInfo>, name: &str) -> &'a InstanceTypeInfo {
    match types.get(name) {
        Some(info) => info,
        None => panic!("{name} is not in the catalog"),
    }
}

/// One row: capacity and allocatable (cpu m, memory MiB, pods) and kube-reserved (cpu m, memory MiB).
struct Expected {
    name: &'static str,
    capacity: (i64, i64, i64),
    kube_reserved: (i64, i64),
    allocatable: (i64, i64, i64),
}

#[test]
fn capacity_overhead_and_allocatable_match_upstream_formulas() {
    let rows = [
        // m5.large: 2 vCPU, 8192 MiB, x86_64, 3 ENIs x 10 IPv4.
        //   memory  = 8192 - ceil(8192 x 0.075 = 614.4) = 8192 - 615 = 7577 MiB
        //   pods    = 3 x (10 - 1) + 2 = 29
        //   kube cpu = 1000 x 6% + 1000 x 1% = 60 + 10 = 70m; kube memory = 11 x 29 + 255 = 574 MiB
        //   allocatable = 2000 - 70 = 1930m; 7577 - 574 - 100 (eviction) = 6903 MiB; 29 pods
        Expected {
            name: "m5.large",
            capacity: (2000, 7577, 29),
            kube_reserved: (70, 574),
            allocatable: (1930, 6903, 29),
        },
        // m6g.medium: 1 vCPU, 4096 MiB, arm64 (64 MiB kept for CMA), 2 ENIs x 4 IPv4.
        //   memory  = 4032 - ceil(4032 x 0.075 = 302.4) = 4032 - 303 = 3729 MiB
        //   pods    = 2 x (4 - 1) + 2 = 8
        //   kube cpu = 1000 x 6% = 60m; kube memory = 11 x 8 + 255 = 343 MiB
        //   allocatable = 940m; 3729 - 343 - 100 = 3286 MiB
        Expected {
            name: "m6g.medium",
            capacity: (1000, 3729, 8),
            kube_reserved: (60, 343),
            allocatable: (940, 3286, 8),
        },
        // t3.nano: 2 vCPU, 512 MiB, 2 ENIs x 2 IPv4.
        //   memory  = 512 - ceil(38.4) = 473 MiB; pods = 2 x (2 - 1) + 2 = 4
        //   kube memory = 11 x 4 + 255 = 299 MiB; allocatable memory = 473 - 299 - 100 = 74 MiB
        Expected {
            name: "t3.nano",
            capacity: (2000, 473, 4),
            kube_reserved: (70, 299),
            allocatable: (1930, 74, 4),
        },
        // c5.18xlarge: 72 vCPU, 147456 MiB, 15 ENIs x 50 IPv4.
        //   memory  = 147456 - ceil(11059.2) = 136396 MiB; pods = 15 x 49 + 2 = 737
        //   kube cpu = 60 + 10 + 10 + (72000 - 4000) x 0.25% = 250m
        //   kube memory = 11 x 737 + 255 = 8362 MiB; allocatable = 71750m, 136396 - 8362 - 100 = 127934 MiB
        Expected {
            name: "c5.18xlarge",
            capacity: (72_000, 136_396, 737),
            kube_reserved: (250, 8362),
            allocatable: (71_750, 127_934, 737),
        },
        // g4dn.xlarge: 4 vCPU, 16384 MiB, 3 ENIs x 10 IPv4.
        //   memory  = 16384 - ceil(1228.8) = 15155 MiB; pods = 29
        //   kube cpu = 60 + 10 + 10 = 80m; allocatable memory = 15155 - 574 - 100 = 14481 MiB
        Expected {
            name: "g4dn.xlarge",
            capacity: (4000, 15_155, 29),
            kube_reserved: (80, 574),
            allocatable: (3920, 14_481, 29),
        },
        // inf1.xlarge: 4 vCPU, 8192 MiB, 4 ENIs x 10 IPv4: pods = 4 x 9 + 2 = 38.
        //   kube memory = 11 x 38 + 255 = 673 MiB; allocatable memory = 7577 - 673 - 100 = 6804 MiB
        Expected {
            name: "inf1.xlarge",
            capacity: (4000, 7577, 38),
            kube_reserved: (80, 673),
            allocatable: (3920, 6804, 38),
        },
    ];
    let types = resolve(&CatalogOptions::default());
    for row in rows {
        let info = get(&types, row.name);
        let allocatable = info.allocatable();
        let actual = Expected {
            name: row.name,
            capacity: (
                info.capacity.cpu_millis,
                info.capacity.memory_bytes / MIB,
                info.capacity.pods,
            ),
            kube_reserved: (
                info.overhead.kube_reserved.cpu_millis,
                info.overhead.kube_reserved.memory_bytes / MIB,
            ),
            allocatable: (
                allocatable.cpu_millis,
                allocatable.memory_bytes / MIB,
                allocatable.pods,
            ),
        };
        assert_eq!(info.capacity.memory_bytes % MIB, 0, "{}", row.name);
        assert_eq!(
            (actual.capacity, actual.kube_reserved, actual.allocatable),
            (row.capacity, row.kube_reserved, row.allocatable),
            "{}",
            row.name
        );
    }
}

#[test]
fn m5_large_has_exact_byte_values_and_default_storage_overheads() {
    let types = resolve(&CatalogOptions::default());
    let info = get(&types, "m5.large");
    assert_eq!(info.capacity.memory_bytes, 7_945_060_352); // 7577 MiB
    assert_eq!(info.capacity.ephemeral_storage_bytes, 20 * GIB);
    assert_eq!(info.overhead.kube_reserved.ephemeral_storage_bytes, GIB);
    assert_eq!(info.overhead.system_reserved, Default::default());
    // Eviction: 100Mi of memory; ceil(20Gi / 100 x 10) = 2Gi of storage.
    assert_eq!(info.overhead.eviction_threshold.memory_bytes, 100 * MIB);
    assert_eq!(
        info.overhead.eviction_threshold.ephemeral_storage_bytes,
        2 * GIB
    );
    // 20Gi - 1Gi - 2Gi = 17Gi.
    assert_eq!(info.allocatable().ephemeral_storage_bytes, 17 * GIB);
    assert!(info.capacity.extended.is_empty());
}

#[test]
fn pod_limits_follow_reserved_enis_max_pods_and_pods_per_core() {
    // (options, m5.large pods, kube-reserved memory MiB)
    let cases = [
        // RESERVED_ENIS=1: (3 - 1) x 9 + 2 = 20 pods; the memory term still uses 29 pods (upstream).
        (
            CatalogOptions {
                reserved_enis: 1,
                ..CatalogOptions::default()
            },
            20,
            574,
        ),
        // RESERVED_ENIS=3 leaves no usable ENI: 0 pods.
        (
            CatalogOptions {
                reserved_enis: 3,
                ..CatalogOptions::default()
            },
            0,
            574,
        ),
        // maxPods=110 on AL2023: 110 pods, memory term from ENI-limited 29 pods = 574 MiB.
        (
            CatalogOptions {
                kubelet: KubeletSettings {
                    max_pods: Some(110),
                    ..KubeletSettings::default()
                },
                ..CatalogOptions::default()
            },
            110,
            574,
        ),
        // maxPods=110 on Bottlerocket: the memory term uses 110 pods: 11 x 110 + 255 = 1465 MiB.
        (
            CatalogOptions {
                ami_family: AmiFamily::Bottlerocket,
                kubelet: KubeletSettings {
                    max_pods: Some(110),
                    ..KubeletSettings::default()
                },
                ..CatalogOptions::default()
            },
            110,
            1465,
        ),
        // podsPerCore=4: min(4 x 2, 29) = 8 pods.
        (
            CatalogOptions {
                kubelet: KubeletSettings {
                    pods_per_core: Some(4),
                    ..KubeletSettings::default()
                },
                ..CatalogOptions::default()
            },
            8,
            574,
        ),
        // Bottlerocket ignores podsPerCore: 29 pods, 574 MiB.
        (
            CatalogOptions {
                ami_family: AmiFamily::Bottlerocket,
                kubelet: KubeletSettings {
                    pods_per_core: Some(4),
                    ..KubeletSettings::default()
                },
                ..CatalogOptions::default()
            },
            29,
            574,
        ),
    ];
    for (options, pods, kube_memory_mib) in cases {
        let types = resolve(&options);
        let info = get(&types, "m5.large");
        assert_eq!(
            (
                info.capacity.pods,
                info.overhead.kube_reserved.memory_bytes / MIB
            ),
            (pods, kube_memory_mib),
            "{options:?}"
        );
    }
}

#[test]
fn the_vm_memory_overhead_percent_is_configurable() {
    // 5%: 8192 - ceil(409.6) = 7782 MiB; 0%: 8192 MiB.
    for (percent, memory_mib) in [(0.05, 7782), (0.0, 8192)] {
        let types = resolve(&CatalogOptions {
            vm_memory_overhead_percent: percent,
            ..CatalogOptions::default()
        });
        assert_eq!(
            get(&types, "m5.large").capacity.memory_bytes / MIB,
            memory_mib
        );
    }
}

#[test]
fn labels_describe_the_instance_type() {
    let types = resolve(&CatalogOptions::default());
    let cases: [(&str, &[(&str, &str)]); 5] = [
        (
            "m5.large",
            &[
                (labels::INSTANCE_TYPE, "m5.large"),
                (labels::ARCH, "amd64"),
                (labels::OS, "linux"),
                (labels::REGION, "us-east-1"),
                (labels::INSTANCE_CATEGORY, "m"),
                (labels::INSTANCE_FAMILY, "m5"),
                (labels::INSTANCE_GENERATION, "5"),
                (labels::INSTANCE_SIZE, "large"),
                (labels::INSTANCE_CPU, "2"),
                (labels::INSTANCE_CPU_MANUFACTURER, "intel"),
                (labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, "3100"),
                (labels::INSTANCE_MEMORY, "8192"),
                (labels::INSTANCE_HYPERVISOR, "nitro"),
                (labels::INSTANCE_NETWORK_BANDWIDTH, "750"),
                (labels::INSTANCE_EBS_BANDWIDTH, "4750"),
                (labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "false"),
                (labels::INSTANCE_CAPABILITY_FLEX, "false"),
            ],
        ),
        (
            "m6g.medium",
            &[
                (labels::ARCH, "arm64"),
                (labels::INSTANCE_CPU_MANUFACTURER, "aws"),
                // The label is the raw size; the 64 MiB arm64 reservation only affects capacity.
                (labels::INSTANCE_MEMORY, "4096"),
            ],
        ),
        (
            "m7i-flex.large",
            &[
                (labels::INSTANCE_FAMILY, "m7i-flex"),
                (labels::INSTANCE_CATEGORY, "m"),
                (labels::INSTANCE_GENERATION, "7"),
                (labels::INSTANCE_CAPABILITY_FLEX, "true"),
            ],
        ),
        (
            "g4dn.xlarge",
            &[
                (labels::INSTANCE_GPU_NAME, "t4"),
                (labels::INSTANCE_GPU_MANUFACTURER, "nvidia"),
                (labels::INSTANCE_GPU_COUNT, "1"),
                (labels::INSTANCE_GPU_MEMORY, "16384"),
                (labels::INSTANCE_LOCAL_NVME, "125"),
                (labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, "true"),
            ],
        ),
        (
            "inf1.xlarge",
            &[
                (labels::INSTANCE_ACCELERATOR_NAME, "inferentia"),
                (labels::INSTANCE_ACCELERATOR_MANUFACTURER, "aws"),
                (labels::INSTANCE_ACCELERATOR_COUNT, "1"),
            ],
        ),
    ];
    for (name, expected) in cases {
        let info = get(&types, name);
        for (key, value) in expected {
            assert_eq!(
                info.labels.get(*key).map(String::as_str),
                Some(*value),
                "{name} {key}"
            );
        }
    }
    // Bare metal has an empty hypervisor, as upstream inserts it.
    assert_eq!(
        get(&types, "m5.metal")
            .labels
            .get(labels::INSTANCE_HYPERVISOR)
            .map(String::as_str),
        Some("")
    );
    // Only GPU types have GPU labels.
    assert!(
        !get(&types, "m5.large")
            .labels
            .contains_key(labels::INSTANCE_GPU_NAME)
    );
}

#[test]
fn accelerators_become_extended_resources() {
    let types = resolve(&CatalogOptions::default());
    let extended = |name: &str| get(&types, name).capacity.extended.clone();
    assert_eq!(
        extended("g4dn.xlarge"),
        BTreeMap::from([(labels::RESOURCE_NVIDIA_GPU.to_string(), 1)])
    );
    // One Inferentia device with 4 cores.
    assert_eq!(
        extended("inf1.xlarge"),
        BTreeMap::from([
            (labels::RESOURCE_AWS_NEURON.to_string(), 1),
            (labels::RESOURCE_AWS_NEURON_CORE.to_string(), 4),
        ])
    );
    // c5n.18xlarge has one EFA interface.
    assert_eq!(
        extended("c5n.18xlarge"),
        BTreeMap::from([(labels::RESOURCE_EFA.to_string(), 1)])
    );
}

#[test]
fn offerings_cover_three_zones_and_both_capacity_types_at_list_prices() {
    let types = resolve(&CatalogOptions::default());
    // (type, on-demand $/h by the rule, spot $/h = on-demand x 0.4)
    for (name, on_demand, spot) in [
        ("m5.large", 0.096, 0.0384),
        // 0.096 x 96 / 2 = 4.608; metal = the 24xlarge's 96 vCPUs.
        ("m5.metal", 4.608, 1.8432),
        ("m5.24xlarge", 4.608, 1.8432),
        // 0.0104 $/GiB x 4 GiB = 0.0416
        ("t3.medium", 0.0416, 0.01664),
        // 0.077 x 1 / 2 = 0.0385
        ("m6g.medium", 0.0385, 0.0154),
        ("g5.xlarge", 1.006, 0.4024),
    ] {
        let info = get(&types, name);
        assert_eq!(info.offerings.len(), 6, "{name}");
        for offering in &info.offerings {
            let expected = match offering.capacity_type {
                CapacityType::OnDemand => (on_demand, false),
                CapacityType::Spot => (spot, true),
                CapacityType::Reserved => panic!("a price table has no reservations: {offering:?}"),
            };
            assert_eq!(
                (offering.price_per_hour, offering.price_is_estimate),
                expected,
                "{name} {offering:?}"
            );
            assert!(offering.available);
        }
        let zones: Vec<&str> = info.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(
            zones,
            [
                "us-east-1a",
                "us-east-1a",
                "us-east-1b",
                "us-east-1b",
                "us-east-1c",
                "us-east-1c"
            ]
        );
    }
}

#[test]
fn the_embedded_catalog_holds_only_priced_types() {
    let catalog = embedded();
    assert_eq!(catalog.shapes().len(), 481);
    assert_eq!(catalog.header().instance_types, Some(481));
    assert!(
        catalog
            .header()
            .source
            .as_deref()
            .is_some_and(|source| source.starts_with("moto==5.2.5 "))
    );
    assert!(catalog.shapes().iter().all(|shape| shape.price.is_some()));
    assert_eq!(catalog.prices().len(), 481);
    assert_eq!(resolve(&CatalogOptions::default()).len(), 481);
    // Unpriced families (and p3.2xlarge, which moto does not describe) are absent.
    for name in ["x2idn.large", "g4dn.4xlarge", "p3.2xlarge", "a1.large"] {
        assert!(catalog.shape(name).is_none(), "{name}");
    }
}

#[test]
fn bare_metal_has_the_vcpus_of_the_size_it_mirrors() {
    // `.metal` mirrors the family's largest size, `.metal-24xl` the `.24xlarge`; so the linear
    // rule prices each metal like that size.
    let catalog = embedded();
    for metal in catalog.shapes().iter().filter(|shape| shape.bare_metal) {
        let mirrored = match metal.size().strip_prefix("metal-") {
            Some(size) => {
                let name = format!("{}.{}arge", metal.family(), size);
                catalog.shape(&name).map(|shape| shape.vcpus)
            }
            None => catalog
                .shapes()
                .iter()
                .filter(|shape| shape.family() == metal.family() && !shape.bare_metal)
                .map(|shape| shape.vcpus)
                .max(),
        };
        assert_eq!(mirrored, Some(metal.vcpus), "{}", metal.name);
        assert_eq!(
            catalog.prices().on_demand(&metal.name),
            mirrored.and_then(|vcpus| {
                catalog
                    .shapes()
                    .iter()
                    .find(|shape| {
                        shape.family() == metal.family()
                            && shape.vcpus == vcpus
                            && !shape.bare_metal
                    })
                    .and_then(|shape| catalog.prices().on_demand(&shape.name))
            }),
            "{}",
            metal.name
        );
    }
}

#[test]
fn a_catalog_renders_back_to_the_embedded_file() {
    let catalog = embedded();
    let rendered = match catalog.render() {
        Ok(text) => text,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(rendered, include_str!("../data/ec2-catalog.jsonl"));
}

#[cfg(feature = "scheduling")]
#[test]
fn every_type_converts_to_the_solvers_input_with_the_same_allocatable() {
    use karpenter_scheduling::{InstanceType, Quantity};

    let types = resolve(&CatalogOptions::default());
    for info in types.values() {
        let converted = InstanceType::from(info);
        let ours = info.allocatable();
        let theirs = converted.allocatable();
        assert_eq!(
            theirs.get("cpu"),
            Quantity::from_millis(i128::from(ours.cpu_millis)),
            "{}",
            info.name
        );
        assert_eq!(
            theirs.get("memory"),
            Quantity::from_units(i128::from(ours.memory_bytes)),
            "{}",
            info.name
        );
        assert_eq!(
            theirs.get("pods"),
            Quantity::from_units(i128::from(ours.pods)),
            "{}",
            info.name
        );
        assert_eq!(
            converted.offerings.len(),
            info.offerings.len(),
            "{}",
            info.name
        );
    }
}
