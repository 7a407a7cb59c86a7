//! Instance types from `DescribeInstanceTypes`-shaped input (fixtures written after the EC2
//! CLI's output for real types) resolve to the same capacity and allocatable as the embedded
//! catalog gives for the same types, for every modelled AMI family and with kubelet overrides.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeMap;

use karpenter_api::v1::AmiFamily;
use karpenter_aws::instance_types::{
    DescribeInstanceTypeOfferingsOutput, DescribeInstanceTypesOutput, Resolved, offering_zones,
    resolve,
};
use karpenter_aws::pricing::{Prices, latest_spot_prices, spot::SpotPriceRecord};
use karpenter_cloud::{Catalog, CatalogOptions, InstanceTypeInfo, ReservedOverrides};
use pretty_assertions::assert_eq;

const TYPES: [&str; 4] = ["c6g.xlarge", "g4dn.xlarge", "m5.large", "t3.micro"];

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/ec2/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn described() -> DescribeInstanceTypesOutput {
    serde_json::from_str(&fixture("describe_instance_types.json")).unwrap_or_else(|e| panic!("{e}"))
}

fn offerings() -> DescribeInstanceTypeOfferingsOutput {
    serde_json::from_str(&fixture("describe_instance_type_offerings.json"))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn resolve_live(options: &CatalogOptions) -> Resolved {
    let zones = offering_zones(&offerings().instance_type_offerings);
    let prices =
        Prices::with_embedded_fallback(options.region.clone()).unwrap_or_else(|e| panic!("{e}"));
    resolve(&described().instance_types, &zones, &prices, options).unwrap_or_else(|e| panic!("{e}"))
}

fn embedded(options: &CatalogOptions) -> BTreeMap<String, InstanceTypeInfo> {
    let catalog = Catalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    catalog
        .instance_types(options)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter(|it| TYPES.contains(&it.name.as_str()))
        .map(|it| (it.name.clone(), it))
        .collect()
}

fn assert_same_as_embedded(options: &CatalogOptions) {
    let live = resolve_live(options);
    let catalog = embedded(options);
    let names: Vec<&str> = live
        .instance_types
        .iter()
        .map(|it| it.name.as_str())
        .collect();
    assert_eq!(names, TYPES);
    for it in &live.instance_types {
        let Some(expected) = catalog.get(&it.name) else {
            panic!("{} missing from the embedded catalog", it.name);
        };
        assert_eq!(it.capacity, expected.capacity, "{} capacity", it.name);
        assert_eq!(
            it.allocatable(),
            expected.allocatable(),
            "{} allocatable",
            it.name
        );
        assert_eq!(it.labels, expected.labels, "{} labels", it.name);
    }
}

#[test]
fn described_types_match_the_embedded_catalog_for_al2023() {
    assert_same_as_embedded(&CatalogOptions::default());
}

#[test]
fn described_types_match_the_embedded_catalog_for_bottlerocket_and_al2() {
    for family in [AmiFamily::Bottlerocket, AmiFamily::AL2] {
        assert_same_as_embedded(&CatalogOptions {
            ami_family: family,
            ..CatalogOptions::default()
        });
    }
}

#[test]
fn described_types_match_the_embedded_catalog_with_kubelet_overrides() {
    let mut options = CatalogOptions {
        vm_memory_overhead_percent: 0.05,
        reserved_enis: 1,
        instance_store_raid0: true,
        ..CatalogOptions::default()
    };
    options.kubelet.pods_per_core = Some(8);
    options.kubelet.kube_reserved = ReservedOverrides {
        cpu_millis: Some(250),
        ..ReservedOverrides::default()
    };
    assert_same_as_embedded(&options);
}

#[test]
fn the_formulas_give_known_values_for_m5_large() {
    let live = resolve_live(&CatalogOptions::default());
    let m5 = live.instance_types.iter().find(|it| it.name == "m5.large");
    let m5 = m5.unwrap_or_else(|| panic!("m5.large resolved"));
    // 3 ENIs x (10 - 1) + 2 = 29 pods; 8192 MiB less ceil(7.5%) = 7577 MiB.
    assert_eq!(m5.capacity.pods, 29);
    assert_eq!(m5.capacity.memory_bytes, 7577 * 1024 * 1024);
    // kube-reserved: 70m CPU and (11 x 29 + 255) = 574 MiB; eviction 100 MiB.
    let allocatable = m5.allocatable();
    assert_eq!(allocatable.cpu_millis, 1930);
    assert_eq!(allocatable.memory_bytes, (7577 - 574 - 100) * 1024 * 1024);
}

#[test]
fn offerings_are_limited_to_the_zones_ec2_offers_and_the_caller_allows() {
    let live = resolve_live(&CatalogOptions::default());
    let g4dn = live
        .instance_types
        .iter()
        .find(|it| it.name == "g4dn.xlarge");
    let zones: Vec<&str> = g4dn
        .map(|it| it.offerings.iter().map(|o| o.zone.as_str()).collect())
        .unwrap_or_default();
    // Offered in 1b and 1d; the caller allows 1a-1c; region offerings are ignored.
    assert_eq!(zones, ["us-east-1b", "us-east-1b"]);
}

#[test]
fn filtered_and_malformed_types_are_skipped_with_a_reason() {
    let live = resolve_live(&CatalogOptions::default());
    let skipped: Vec<(&str, &str)> = live
        .skipped
        .iter()
        .map(|s| (s.instance_type.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            (
                "mac1.metal",
                "not HVM on x86_64/arm64 with on-demand or spot"
            ),
            (
                "m5.broken",
                "DescribeInstanceTypes m5.broken: vcpus: must be between 1 and 1048576, got 0"
            ),
        ]
    );
}

#[test]
fn observed_spot_prices_reach_the_offerings() {
    let zones = offering_zones(&offerings().instance_type_offerings);
    let mut prices = Prices::with_embedded_fallback("us-east-1").unwrap_or_else(|e| panic!("{e}"));
    let record = SpotPriceRecord {
        availability_zone: Some("us-east-1a".into()),
        instance_type: Some("m5.large".into()),
        product_description: Some("Linux/UNIX".into()),
        spot_price: Some("0.0351".into()),
        timestamp: Some("2026-11-25T00:00:00Z".into()),
    };
    let spot = latest_spot_prices(&[record]);
    assert_eq!(prices.update_spot(&spot), Ok(()));
    let options = CatalogOptions::default();
    let live = resolve(&described().instance_types, &zones, &prices, &options)
        .unwrap_or_else(|e| panic!("{e}"));
    let m5 = live.instance_types.iter().find(|it| it.name == "m5.large");
    let spot_1a = m5.and_then(|it| {
        it.offerings
            .iter()
            .find(|o| o.zone == "us-east-1a" && o.capacity_type.as_str() == "spot")
    });
    assert_eq!(
        spot_1a.map(|o| (o.price_per_hour, o.price_is_estimate)),
        Some((0.0351, false))
    );
}

fn node_class_spec(enclave_options: serde_json::Value) -> karpenter_api::v1::EC2NodeClassSpec {
    serde_json::from_value(serde_json::json!({
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "enclaveOptions": enclave_options,
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn enclave_options_keep_only_types_ec2_says_support_nitro_enclaves() {
    let mut types = described().instance_types;
    assert!(
        types
            .iter()
            .all(|t| t.nitro_enclaves_support.as_deref() == Some("unsupported")),
        "the fixture reads NitroEnclavesSupport"
    );
    types[0].nitro_enclaves_support = Some("supported".into());
    types[1].nitro_enclaves_support = None;
    let names = |kept: &[&karpenter_aws::instance_types::Ec2InstanceType]| {
        kept.iter()
            .map(|t| t.instance_type.clone())
            .collect::<Vec<_>>()
    };
    let (kept, skipped) = karpenter_aws::instance_types::compatible_with_node_class(
        &types,
        &node_class_spec(serde_json::json!({"enabled": true})),
    );
    assert_eq!(names(&kept), [types[0].instance_type.clone()]);
    assert_eq!(skipped.len(), types.len() - 1);
    assert!(
        skipped[0]
            .reason
            .contains("does not support Nitro Enclaves"),
        "{skipped:?}"
    );
    for off in [
        serde_json::json!({"enabled": false}),
        serde_json::Value::Null,
    ] {
        let (kept, skipped) = karpenter_aws::instance_types::compatible_with_node_class(
            &types,
            &node_class_spec(off),
        );
        assert_eq!(kept.len(), types.len());
        assert!(skipped.is_empty());
    }
    // What is kept resolves as the full list does.
    let (kept, _) = karpenter_aws::instance_types::compatible_with_node_class(
        &types,
        &node_class_spec(serde_json::json!({"enabled": true})),
    );
    let options = CatalogOptions::default();
    let prices =
        Prices::with_embedded_fallback(options.region.clone()).unwrap_or_else(|e| panic!("{e}"));
    let resolved = resolve(
        &kept,
        &offering_zones(&offerings().instance_type_offerings),
        &prices,
        &options,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let resolved: Vec<&str> = resolved
        .instance_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(resolved, [types[0].instance_type.as_str()]);
}
