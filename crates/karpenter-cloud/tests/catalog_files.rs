//! User catalog and price files: loading, replacing prices, and errors that name the file, line,
//! entry and field.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_cloud::{CapacityType, Catalog, CatalogOptions, PriceTable};

const HEADER: &str = r#"{"format":"karpenter-rs/ec2-catalog/v1"}"#;
const M5_LARGE: &str = r#"{"name":"m5.large","vcpus":2,"memory_mib":8192,"architectures":["x86_64"],"cpu_manufacturer":"Intel","max_enis":3,"ipv4_per_eni":10,"usage_classes":["on-demand","spot"],"price":0.096}"#;
const M5_XLARGE_UNPRICED: &str = r#"{"name":"m5.xlarge","vcpus":4,"memory_mib":16384,"architectures":["x86_64"],"cpu_manufacturer":"Intel","max_enis":4,"ipv4_per_eni":15,"usage_classes":["on-demand"]}"#;

fn parse(text: &str) -> Catalog {
    match Catalog::parse("my-catalog.jsonl", text) {
        Ok(catalog) => catalog,
        Err(error) => panic!("{error}"),
    }
}

fn error_of(text: &str) -> String {
    match Catalog::parse("my-catalog.jsonl", text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn bad_catalog_files_name_the_file_line_entry_and_field() {
    let cases = [
        (
            String::new(),
            "my-catalog.jsonl: line 1: invalid catalog header: field `format`: the file is empty",
        ),
        (
            r#"{"format":"v0"}"#.to_string(),
            r#"my-catalog.jsonl: line 1: invalid catalog header: field `format`: expected "karpenter-rs/ec2-catalog/v1", got "v0""#,
        ),
        (
            r#"{"format":"karpenter-rs/ec2-catalog/v1","colour":"red"}"#.to_string(),
            "my-catalog.jsonl: line 1: invalid catalog header: field `colour`: unknown field `colour`",
        ),
        (
            format!(
                "{HEADER}\n{}",
                M5_LARGE.replace(r#""vcpus":2"#, r#""vcpus":"two""#)
            ),
            "my-catalog.jsonl: line 2: instance type m5.large: field `vcpus`: invalid type: string \"two\"",
        ),
        (
            format!("{HEADER}\n{}", M5_LARGE.replace(r#""vcpus":2,"#, "")),
            "my-catalog.jsonl: line 2: instance type m5.large: field `vcpus`: missing field `vcpus`",
        ),
        (
            format!("{HEADER}\n{}", M5_LARGE.replace("x86_64", "sparc")),
            "my-catalog.jsonl: line 2: instance type m5.large: field `architectures[0]`: unknown variant `sparc`",
        ),
        (
            format!(
                "{HEADER}\n{}",
                M5_LARGE.replace(r#""ipv4_per_eni":10"#, r#""ipv4_per_eni":0"#)
            ),
            "my-catalog.jsonl: line 2: instance type m5.large: field `ipv4_per_eni`: must be between 1 and",
        ),
        (
            format!("{HEADER}\n\n{M5_LARGE}\n{{not json"),
            "my-catalog.jsonl: line 4: instance type <unreadable>: field `<json>`: key must be a string",
        ),
        (
            format!("{HEADER}\n{M5_LARGE}\n{M5_LARGE}"),
            "my-catalog.jsonl: line 3: instance type m5.large is listed twice (first on line 2)",
        ),
        (
            format!(
                "{}\n{M5_LARGE}",
                r#"{"format":"karpenter-rs/ec2-catalog/v1","instance_types":2}"#
            ),
            "my-catalog.jsonl: the header says 2 instance types but the file has 1",
        ),
    ];
    for (text, expected) in cases {
        let message = error_of(&text);
        assert!(
            message.starts_with(expected),
            "got: {message}\nwanted: {expected}"
        );
    }
}

#[test]
fn a_missing_file_names_the_path() {
    let path = std::env::temp_dir().join("karpenter-cloud-test-no-such-catalog.jsonl");
    let message = Catalog::from_file(&path).err().map(|e| e.to_string());
    assert_eq!(
        message,
        Some(format!("cannot read catalog file {}", path.display()))
    );
}

#[test]
fn a_user_catalog_loads_from_a_file_and_unpriced_types_are_left_out() {
    let path = std::env::temp_dir().join(format!(
        "karpenter-cloud-test-catalog-{}.jsonl",
        std::process::id()
    ));
    let text = format!("{HEADER}\n{M5_XLARGE_UNPRICED}\n{M5_LARGE}\n");
    if let Err(error) = std::fs::write(&path, &text) {
        panic!("{error}");
    }
    let loaded = Catalog::from_file(&path);
    let _ = std::fs::remove_file(&path);
    let catalog = match loaded {
        Ok(catalog) => catalog,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(catalog.shapes().len(), 2);
    let types = catalog.instance_types(&CatalogOptions::default());
    let names: Vec<String> = types
        .map(|types| types.into_iter().map(|t| t.name).collect())
        .unwrap_or_default();
    assert_eq!(names, ["m5.large"]);
}

#[test]
fn replacing_the_price_table_changes_prices_and_which_types_are_offered() {
    let catalog = parse(&format!("{HEADER}\n{M5_LARGE}\n{M5_XLARGE_UNPRICED}"));
    let mut prices = PriceTable::new("us-east-1", "a test price file");
    prices.set_on_demand("m5.xlarge", 0.2);
    let catalog = catalog.with_prices(prices);
    let types = match catalog.instance_types(&CatalogOptions::default()) {
        Ok(types) => types,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(types.len(), 1);
    let info = &types[0];
    assert_eq!(info.name, "m5.xlarge");
    // m5.xlarge supports on-demand only: 3 offerings.
    assert_eq!(info.offerings.len(), 3);
    assert!(
        info.offerings
            .iter()
            .all(|o| o.capacity_type == CapacityType::OnDemand)
    );
    assert_eq!(
        info.cheapest_offering(None).map(|o| o.price_per_hour),
        Some(0.2)
    );
    // Rendering writes the new prices back into the entries.
    let rendered = catalog.render().unwrap_or_default();
    assert!(rendered.contains(r#""name":"m5.xlarge""#) && rendered.contains(r#""price":0.2}"#));
    assert!(rendered.contains(r#""price_source":"a test price file""#));
}

#[test]
fn invalid_options_are_rejected_before_any_work() {
    let catalog = parse(&format!("{HEADER}\n{M5_LARGE}"));
    let options = CatalogOptions {
        spot_discount: 1.5,
        ..CatalogOptions::default()
    };
    let message = catalog
        .instance_types(&options)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        message.as_deref(),
        Some("invalid catalog option `spot_discount`: must be at least 0 and below 1, got 1.5")
    );
}

fn m5_large_shape() -> karpenter_cloud::InstanceShape {
    match serde_json::from_str(M5_LARGE) {
        Ok(shape) => shape,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn shapes_built_in_code_are_validated_too() {
    let header = parse(HEADER).header().clone();
    let mut bad = m5_large_shape();
    bad.vcpus = 0;
    let message = Catalog::from_shapes("generator", header.clone(), vec![bad])
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        message.as_deref(),
        Some(
            "generator: line 2: instance type m5.large: field `vcpus`: must be between 1 and 1048576, got 0"
        )
    );
    let duplicate = Catalog::from_shapes(
        "generator",
        header,
        vec![m5_large_shape(), m5_large_shape()],
    )
    .err()
    .map(|e| e.to_string());
    assert_eq!(
        duplicate.as_deref(),
        Some("generator: line 3: instance type m5.large is listed twice (first on line 2)")
    );
}

#[test]
fn extreme_shapes_saturate_instead_of_overflowing() {
    let mut shape = m5_large_shape();
    shape.max_enis = u32::MAX;
    shape.ipv4_per_eni = u32::MAX;
    shape.memory_mib = u64::MAX;
    let mut prices = PriceTable::new("us-east-1", "test");
    prices.set_on_demand("m5.large", 0.096);
    let options = CatalogOptions {
        kubelet: karpenter_cloud::KubeletSettings {
            pods_per_core: Some(u32::MAX),
            ..Default::default()
        },
        ..CatalogOptions::default()
    };
    let info = karpenter_cloud::InstanceTypeInfo::resolve(&shape, &prices, &options);
    assert!(info.is_some_and(|info| info.capacity.pods > 0 && info.allocatable().pods > 0));
}
