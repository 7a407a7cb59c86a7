//! The instance types each NodePool may launch: the catalog resolved for the NodePool's
//! EC2NodeClass, then narrowed by the NodePool's requirements.
//!
//! From the EC2NodeClass the simulation uses the AMI family (`amiFamily`, else the alias in
//! `amiSelectorTerms`; it decides which types can run and some overhead rules) and the kubelet
//! `maxPods` and `podsPerCore`. Subnets, security groups, AMI selectors other than the alias,
//! block devices and the rest are not simulated. Windows families get no instance types (the
//! catalog is Linux-only). A NodePool whose `nodeClassRef` names no given EC2NodeClass uses
//! [`crate::nodepool::DEFAULT_NODECLASS_YAML`] (AL2023), with a note in the output.
//!
//! Requirements narrow types by the labels the catalog defines (arch, os, instance-* facts,
//! instance type, ...) and offerings by zone and capacity type; keys no instance type defines
//! (custom labels) do not narrow anything here, the solver handles them.

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_api::v1::{AmiFamily as ApiAmiFamily, EC2NodeClass, NodePool};
use karpenter_cloud::to_scheduling::INSTANCE_FACT_KEYS;
use karpenter_cloud::{AmiFamily, Catalog, CatalogOptions, InstanceTypeInfo};
use karpenter_scheduling::{InstanceType, Operator, RequirementSpec};

use crate::error::SimulateError;
use crate::nodepool::{default_nodeclass, name_of};

/// Region and prices shared by every NodePool.
#[derive(Debug, Clone, PartialEq)]
pub struct PricingOptions {
    pub region: String,
    pub spot_discount: f64,
}

impl Default for PricingOptions {
    fn default() -> Self {
        let defaults = CatalogOptions::default();
        Self {
            region: defaults.region,
            spot_discount: defaults.spot_discount,
        }
    }
}

/// The instance types of one NodePool.
#[derive(Debug, Clone, Default)]
pub struct PoolTypes {
    /// Types the NodePool's requirements allow, with only the allowed offerings.
    pub infos: Vec<InstanceTypeInfo>,
    /// The same, as solver input.
    pub scheduling: Vec<InstanceType>,
    by_name: BTreeMap<String, usize>,
}

impl PoolTypes {
    pub fn info(&self, name: &str) -> Option<&InstanceTypeInfo> {
        self.by_name.get(name).and_then(|i| self.infos.get(*i))
    }
}

/// Resolves catalogs once per distinct set of node-class options.
#[derive(Debug)]
pub struct CatalogCache<'a> {
    catalog: &'a Catalog,
    resolved: Vec<(CatalogOptions, Vec<InstanceTypeInfo>)>,
}

impl<'a> CatalogCache<'a> {
    pub fn new(catalog: &'a Catalog) -> Self {
        Self {
            catalog,
            resolved: Vec::new(),
        }
    }

    pub fn instance_types(
        &mut self,
        options: &CatalogOptions,
    ) -> Result<&[InstanceTypeInfo], SimulateError> {
        let index = match self.resolved.iter().position(|(o, _)| o == options) {
            Some(index) => index,
            None => {
                let infos = self.catalog.instance_types(options)?;
                self.resolved.push((options.clone(), infos));
                self.resolved.len() - 1
            }
        };
        Ok(self
            .resolved
            .get(index)
            .map_or(&[], |(_, infos)| infos.as_slice()))
    }
}

/// The catalog options for a NodePool: pricing plus what its EC2NodeClass decides. Notes say
/// what was assumed.
pub fn options_for(
    pool: &NodePool,
    classes: &[EC2NodeClass],
    pricing: &PricingOptions,
    notes: &mut Vec<String>,
) -> Result<Option<CatalogOptions>, SimulateError> {
    let reference = &pool.spec.template.spec.node_class_ref;
    let given = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(reference.name.as_str()));
    let class = match given {
        Some(class) => class.clone(),
        None => {
            notes.push(format!(
                "NodePool {}: EC2NodeClass {} is not in the manifests; assuming AL2023 defaults",
                name_of(pool),
                reference.name
            ));
            default_nodeclass()?
        }
    };
    let ami_family = match class.spec.resolved_ami_family() {
        Some(ApiAmiFamily::AL2) => AmiFamily::Al2,
        Some(ApiAmiFamily::Bottlerocket) => AmiFamily::Bottlerocket,
        Some(ApiAmiFamily::Custom) => AmiFamily::Custom,
        Some(ApiAmiFamily::AL2023) | None => AmiFamily::Al2023,
        Some(windows) => {
            notes.push(format!(
                "NodePool {}: AMI family {} is not simulated (the catalog is Linux-only); the NodePool gets no instance types",
                name_of(pool),
                windows.as_str()
            ));
            return Ok(None);
        }
    };
    let mut options = CatalogOptions {
        region: pricing.region.clone(),
        spot_discount: pricing.spot_discount,
        ami_family,
        ..CatalogOptions::default()
    };
    if let Some(kubelet) = &class.spec.kubelet {
        let number = |key: &str| {
            kubelet
                .get(key)
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        options.kubelet.max_pods = number("maxPods");
        options.kubelet.pods_per_core = number("podsPerCore");
    }
    Ok(Some(options))
}

/// The types and offerings `requirements` allow out of `infos`.
pub fn narrow(infos: &[InstanceTypeInfo], requirements: &[RequirementSpec]) -> PoolTypes {
    let mut out = PoolTypes::default();
    for info in infos {
        if !requirements.iter().all(|r| type_allows(info, r)) {
            continue;
        }
        let mut info = info.clone();
        info.offerings.retain(|o| {
            requirements.iter().all(|r| match r.key.as_str() {
                labels::ZONE => allows(r, Some(&o.zone)),
                labels::CAPACITY_TYPE => allows(r, Some(o.capacity_type.as_str())),
                _ => true,
            })
        });
        if info.offerings.is_empty() {
            continue;
        }
        out.by_name.insert(info.name.clone(), out.infos.len());
        out.scheduling.push(InstanceType::from(&info));
        out.infos.push(info);
    }
    out
}

fn type_allows(info: &InstanceTypeInfo, requirement: &RequirementSpec) -> bool {
    let key = requirement.key.as_str();
    if key == labels::ZONE || key == labels::CAPACITY_TYPE {
        return true;
    }
    match info.labels.get(key) {
        Some(value) => allows(requirement, Some(value)),
        None if INSTANCE_FACT_KEYS.contains(&key) => allows(requirement, None),
        None => true,
    }
}

/// Whether a label value (`None`: the label is absent) satisfies a requirement.
pub fn allows(requirement: &RequirementSpec, value: Option<&str>) -> bool {
    let contains = |v: &str| requirement.values.iter().any(|x| x == v);
    let number = |v: &str| v.parse::<i64>().ok();
    let bound = requirement.values.first().and_then(|v| number(v));
    let compare = |ok: fn(i64, i64) -> bool| match (value.and_then(number), bound) {
        (Some(v), Some(b)) => ok(v, b),
        _ => false,
    };
    match requirement.operator {
        Operator::In => value.is_some_and(contains),
        Operator::NotIn => !value.is_some_and(contains),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt => compare(|v, b| v > b),
        Operator::Lt => compare(|v, b| v < b),
        Operator::Gte => compare(|v, b| v >= b),
        Operator::Lte => compare(|v, b| v <= b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_operators_compare_integers_and_fail_on_absent_labels() {
        let gt = RequirementSpec::new("g", Operator::Gt, &["2"]);
        assert!(allows(&gt, Some("3")));
        assert!(!allows(&gt, Some("2")));
        assert!(!allows(&gt, None));
        let not_in = RequirementSpec::new("k", Operator::NotIn, &["a"]);
        assert!(allows(&not_in, None));
        assert!(!allows(&not_in, Some("a")));
    }

    #[test]
    fn narrowing_keeps_only_allowed_types_and_offerings() {
        let Ok(catalog) = Catalog::embedded() else {
            panic!("embedded catalog")
        };
        let Ok(infos) = catalog.instance_types(&CatalogOptions::default()) else {
            panic!("instance types")
        };
        let types = narrow(
            &infos,
            &[
                RequirementSpec::is_in(labels::INSTANCE_FAMILY, &["m5"]),
                RequirementSpec::is_in(labels::CAPACITY_TYPE, &["on-demand"]),
                RequirementSpec::is_in(labels::ZONE, &["us-east-1b"]),
            ],
        );
        assert!(!types.infos.is_empty());
        assert!(types.infos.iter().all(|i| i.name.starts_with("m5.")));
        assert!(types.infos.iter().all(|i| i.offerings.len() == 1
            && i.offerings[0].zone == "us-east-1b"
            && i.offerings[0].capacity_type.as_str() == "on-demand"));
        assert!(types.info("m5.large").is_some());
    }
}
