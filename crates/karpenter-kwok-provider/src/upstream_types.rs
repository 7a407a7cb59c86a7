//! Upstream's KWOK instance-type file, read as instance types.
//!
//! Upstream's KWOK provider takes `INSTANCE_TYPES_FILE_PATH` as a JSON array of
//! `{name, offerings: [{Price, Available, Requirements}], architecture, operatingSystems,
//! resources}` (its embedded default is `kwok/cloudprovider/instance_types.json`). The same file
//! given to `karpenter controller --cloud-provider kwok` makes the same instance types upstream
//! makes of it (`kwok/cloudprovider/helpers.go`): every offering available, its zone and
//! capacity type from its requirements, capacity from `resources` with 110 pods unless given,
//! kube-reserved 100m CPU and 10Mi memory and nothing else reserved, and the labels
//! `karpenter.kwok.sh/instance-{size,family,cpu,memory}` beside the well-known ones. So a
//! KWOK setup made for upstream runs unchanged, and the two controllers can be compared on one
//! catalog. These types are used as they are for every NodePool: an EC2NodeClass's settings
//! do not apply to them.

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_cloud::{CapacityType, InstanceTypeInfo, Offering, Overhead, Resources};
use karpenter_scheduling::Quantity;
use serde::Deserialize;

/// Labels upstream's KWOK provider gives its instance types.
pub const KWOK_INSTANCE_SIZE: &str = "karpenter.kwok.sh/instance-size";
pub const KWOK_INSTANCE_FAMILY: &str = "karpenter.kwok.sh/instance-family";
pub const KWOK_INSTANCE_CPU: &str = "karpenter.kwok.sh/instance-cpu";
pub const KWOK_INSTANCE_MEMORY: &str = "karpenter.kwok.sh/instance-memory";

/// Pods per node when the file gives none (upstream: the Kubernetes default).
const DEFAULT_PODS: i64 = 110;

/// An upstream KWOK file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KwokTypesError {
    #[error("{origin}: not upstream's KWOK instance-type format: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: instance type {entry}: field `{field}`: {message}")]
    Entry {
        origin: String,
        entry: String,
        field: String,
        message: String,
    },
}

/// Whether `text` is in upstream's format (a JSON array) rather than the catalog format (JSON
/// lines that start with a header object).
pub fn is_upstream_format(text: &str) -> bool {
    text.trim_start().starts_with('[')
}

// Go's encoding/json matches field names case-insensitively; upstream's own file writes the
// offering's fields capitalised and the rest in camelCase. Both spellings are accepted.
#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    #[serde(default)]
    offerings: Vec<KwokOffering>,
    #[serde(default, alias = "Architecture")]
    architecture: String,
    #[serde(default, rename = "operatingSystems", alias = "OperatingSystems")]
    operating_systems: Vec<String>,
    #[serde(default, alias = "Resources")]
    resources: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct KwokOffering {
    #[serde(rename = "Price", alias = "price")]
    price: f64,
    #[serde(default, rename = "Requirements", alias = "requirements")]
    requirements: Vec<SelectorRequirement>,
}

#[derive(Debug, Deserialize)]
struct SelectorRequirement {
    key: String,
    #[serde(default)]
    values: Vec<String>,
}

/// Reads upstream's KWOK instance-type file; `origin` names it in errors.
pub fn parse(origin: &str, text: &str) -> Result<Vec<InstanceTypeInfo>, KwokTypesError> {
    // serde_json's message names the field and the line and column of the value.
    let entries: Vec<Entry> =
        serde_json::from_str(text).map_err(|error| KwokTypesError::Parse {
            origin: origin.to_owned(),
            message: error.to_string(),
        })?;
    entries
        .into_iter()
        .map(|entry| convert(origin, entry))
        .collect()
}

fn convert(origin: &str, entry: Entry) -> Result<InstanceTypeInfo, KwokTypesError> {
    let error = |field: &str, message: String| KwokTypesError::Entry {
        origin: origin.to_owned(),
        entry: entry.name.clone(),
        field: field.to_owned(),
        message,
    };
    let quantity = |name: &str| -> Result<Option<Quantity>, KwokTypesError> {
        entry
            .resources
            .get(name)
            .map(|text| {
                Quantity::parse(text)
                    .map_err(|e| error(&format!("resources.{name}"), e.to_string()))
            })
            .transpose()
    };
    let units = |q: Option<Quantity>| q.map_or(0, |q| i64::try_from(q.value()).unwrap_or(i64::MAX));
    let cpu = quantity("cpu")?;
    let memory = quantity("memory")?;
    let mut extended = BTreeMap::new();
    for name in entry.resources.keys() {
        if !["cpu", "memory", "ephemeral-storage", "pods"].contains(&name.as_str()) {
            extended.insert(name.clone(), units(quantity(name)?));
        }
    }
    let capacity = Resources {
        cpu_millis: cpu.map_or(0, Quantity::millis_i64),
        memory_bytes: units(memory),
        ephemeral_storage_bytes: units(quantity("ephemeral-storage")?),
        pods: quantity("pods")?.map_or(DEFAULT_PODS, |q| units(Some(q))),
        extended,
    };
    if entry.name.is_empty() {
        return Err(error("name", "empty".to_owned()));
    }
    let mut offerings = Vec::new();
    for (index, offering) in entry.offerings.iter().enumerate() {
        let value = |key: &str| {
            offering
                .requirements
                .iter()
                .find(|r| r.key == key)
                .and_then(|r| r.values.first())
        };
        let field = |key: &str| format!("offerings[{index}].requirements.{key}");
        let zone =
            value(labels::ZONE).ok_or_else(|| error(&field(labels::ZONE), "missing".to_owned()))?;
        let capacity_type = match value(labels::CAPACITY_TYPE).map(String::as_str) {
            Some(labels::CAPACITY_TYPE_SPOT) => CapacityType::Spot,
            Some(labels::CAPACITY_TYPE_ON_DEMAND) => CapacityType::OnDemand,
            other => {
                return Err(error(
                    &field(labels::CAPACITY_TYPE),
                    format!("{other:?}: the kwok cloud offers on-demand and spot"),
                ));
            }
        };
        if !offering.price.is_finite() || offering.price < 0.0 {
            return Err(error(
                &format!("offerings[{index}].Price"),
                format!("{} is not a price", offering.price),
            ));
        }
        offerings.push(Offering {
            zone: zone.clone(),
            capacity_type,
            price_per_hour: offering.price,
            // Upstream makes every offering of the file available.
            available: true,
            price_is_estimate: false,
            reservation: None,
        });
    }
    // Quantities as Go's `Quantity.String()` writes them: the canonical form, which is what
    // `Quantity`'s Display writes too.
    let cpu_text = cpu.map(|q| q.to_string()).unwrap_or_default();
    let mut type_labels = BTreeMap::from([
        (labels::INSTANCE_TYPE.to_owned(), entry.name.clone()),
        (labels::ARCH.to_owned(), entry.architecture.clone()),
        (KWOK_INSTANCE_SIZE.to_owned(), size(&entry.name, &cpu_text)),
        (KWOK_INSTANCE_FAMILY.to_owned(), family(&entry.name)),
        (KWOK_INSTANCE_CPU.to_owned(), cpu_text),
        (
            KWOK_INSTANCE_MEMORY.to_owned(),
            memory.map(|q| q.to_string()).unwrap_or_default(),
        ),
    ]);
    if let Some(os) = entry.operating_systems.first() {
        type_labels.insert(labels::OS.to_owned(), os.clone());
    }
    Ok(InstanceTypeInfo {
        name: entry.name,
        labels: type_labels,
        capacity,
        overhead: Overhead {
            kube_reserved: Resources {
                cpu_millis: 100,
                memory_bytes: 10 * 1024 * 1024,
                ..Resources::default()
            },
            ..Overhead::default()
        },
        offerings,
        label_choices: BTreeMap::new(),
    })
}

/// Upstream's `parseSizeFromType`: the size of an AWS-style name (`m5.2xlarge` -> `2xlarge`),
/// otherwise the CPU count.
fn size(name: &str, cpu: &str) -> String {
    const SIZES: [&str; 6] = ["nano", "micro", "small", "medium", "large", "metal"];
    if let Some((family, size)) = name.split_once('.') {
        let word = !family.is_empty() && family.chars().all(|c| c.is_alphanumeric() || c == '_');
        let xlarge = size
            .strip_suffix("xlarge")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
        if word && (SIZES.contains(&size) || xlarge) {
            return size.to_owned();
        }
    }
    cpu.to_owned()
}

/// Upstream's `parseFamilyFromType`: the name up to its first `.` or `-`, or its first
/// character.
fn family(name: &str) -> String {
    match name.split_once(['.', '-']) {
        Some((family, _)) => family.to_owned(),
        None => name.chars().next().map(String::from).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM_ENTRY: &str = r#"[{
        "name": "c-4x-amd64-linux",
        "offerings": [
            {"Price": 0.076, "Available": true, "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]}]},
            {"Price": 0.108, "Available": false, "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-b"]}]}
        ],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "ephemeral-storage": "20Gi", "memory": "8Gi", "pods": "16"}
    }]"#;

    fn parsed(text: &str) -> Vec<InstanceTypeInfo> {
        parse("types.json", text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_upstream_entry_becomes_the_type_upstream_makes_of_it() {
        let types = parsed(UPSTREAM_ENTRY);
        let [t] = types.as_slice() else {
            panic!("one type: {types:?}")
        };
        assert_eq!(t.name, "c-4x-amd64-linux");
        assert_eq!(t.capacity.cpu_millis, 4000);
        assert_eq!(t.capacity.memory_bytes, 8 << 30);
        assert_eq!(t.capacity.ephemeral_storage_bytes, 20 << 30);
        assert_eq!(t.capacity.pods, 16);
        assert_eq!(t.overhead.total().cpu_millis, 100);
        assert_eq!(t.overhead.total().memory_bytes, 10 << 20);
        let label = |k: &str| t.labels.get(k).map(String::as_str);
        assert_eq!(label(labels::ARCH), Some("amd64"));
        assert_eq!(label(labels::OS), Some("linux"));
        assert_eq!(label(labels::INSTANCE_TYPE), Some("c-4x-amd64-linux"));
        assert_eq!(label(KWOK_INSTANCE_FAMILY), Some("c"));
        assert_eq!(label(KWOK_INSTANCE_SIZE), Some("4"));
        assert_eq!(label(KWOK_INSTANCE_CPU), Some("4"));
        assert_eq!(label(KWOK_INSTANCE_MEMORY), Some("8Gi"));
        let offerings: Vec<_> = t
            .offerings
            .iter()
            .map(|o| {
                (
                    o.zone.as_str(),
                    o.capacity_type,
                    o.price_per_hour,
                    o.available,
                )
            })
            .collect();
        assert_eq!(
            offerings,
            [
                ("test-zone-a", CapacityType::Spot, 0.076, true),
                // Upstream makes every offering of the file available.
                ("test-zone-b", CapacityType::OnDemand, 0.108, true),
            ]
        );
    }

    #[test]
    fn pods_default_to_110_and_aws_style_names_give_their_size() {
        let text = UPSTREAM_ENTRY
            .replace("c-4x-amd64-linux", "m5.2xlarge")
            .replace(r#", "pods": "16""#, "");
        let types = parsed(&text);
        assert_eq!(types[0].capacity.pods, 110);
        assert_eq!(types[0].labels[KWOK_INSTANCE_SIZE], "2xlarge");
        assert_eq!(types[0].labels[KWOK_INSTANCE_FAMILY], "m5");
    }

    #[test]
    fn the_format_is_told_from_the_catalog_format_by_its_first_character() {
        assert!(is_upstream_format("  \n[{\"name\": \"x\"}]"));
        assert!(!is_upstream_format(
            "{\"format\": \"karpenter-rs-catalog\"}\n{}"
        ));
    }

    #[test]
    fn bad_entries_name_the_file_the_type_and_the_field() {
        let bad_memory = UPSTREAM_ENTRY.replace("\"8Gi\"", "\"eight\"");
        let error = parse("types.json", &bad_memory)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "types.json: instance type c-4x-amd64-linux: field `resources.memory`"
            ),
            "{error}"
        );
        let reserved = UPSTREAM_ENTRY.replacen("[\"spot\"]", "[\"reserved\"]", 1);
        let error = parse("types.json", &reserved)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("offerings[0].requirements.karpenter.sh/capacity-type"),
            "{error}"
        );
        let error = parse("types.json", "[{\"offerings\": []}]")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("missing field `name`") && error.contains("line 1"),
            "{error}"
        );
    }

    #[test]
    fn upstreams_embedded_file_shape_parses_whole() {
        // Every size upstream's generator writes, in its format.
        let mut entries = Vec::new();
        for cpu in [1, 2, 4, 8, 16, 32, 48, 64, 96, 192, 256] {
            entries.push(format!(
                r#"{{"name": "m-{cpu}x-arm64-linux", "offerings": [{{"Price": 0.5, "Available": true, "Requirements": [
                    {{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}},
                    {{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-d"]}}]}}],
                  "architecture": "arm64", "operatingSystems": ["linux", "windows"],
                  "resources": {{"cpu": "{cpu}", "memory": "{}Gi", "ephemeral-storage": "20Gi", "pods": "110"}}}}"#,
                cpu * 8
            ));
        }
        let types = parsed(&format!("[{}]", entries.join(",")));
        assert_eq!(types.len(), 11);
        assert!(types.iter().all(|t| t.labels[labels::ARCH] == "arm64"));
        assert_eq!(types[10].labels[KWOK_INSTANCE_MEMORY], "2Ti");
    }
}
