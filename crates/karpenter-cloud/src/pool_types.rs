//! The instance types each NodePool may launch (NodePool x EC2NodeClass): the catalog resolved
//! for the NodePool's EC2NodeClass, then narrowed by the NodePool's requirements. The simulator
//! and the simulated (KWOK) cloud provider both use it.
//!
//! From the EC2NodeClass this uses the AMI family (`amiFamily`, else the alias in
//! `amiSelectorTerms`; it decides which types can run and some overhead rules) and the kubelet
//! `maxPods` and `podsPerCore`. Subnets, security groups, AMI selectors other than the alias,
//! block devices and the rest are the EC2 provider's business. Windows families get no instance
//! types (the catalog is Linux-only). Which EC2NodeClass applies (given, or a default when the
//! `nodeClassRef` names none) is the caller's decision.
//!
//! Requirements narrow types by the labels the catalog defines (arch, os, instance-* facts,
//! instance type, ...) and offerings by zone and capacity type; keys no instance type defines
//! (custom labels) do not narrow anything here, the solver handles them.

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_api::v1::{EC2NodeClass, NodePool};
use karpenter_scheduling::{InstanceType, RequirementSpec};

use crate::error::OptionsError;
use crate::to_scheduling::INSTANCE_FACT_KEYS;
use crate::{AmiFamily, Catalog, CatalogOptions, InstanceTypeInfo};

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

    /// The solver's form of type `name` (NodeOverlays applied, when a caller applied them to
    /// [`Self::scheduling`]).
    pub fn scheduling_type(&self, name: &str) -> Option<&InstanceType> {
        self.by_name.get(name).and_then(|i| self.scheduling.get(*i))
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
    ) -> Result<&[InstanceTypeInfo], OptionsError> {
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

/// The catalog options for a NodePool: pricing plus what its EC2NodeClass `class` decides;
/// `None` for AMI families the catalog cannot serve (Windows). Notes say what was assumed.
pub fn options_for(
    pool: &NodePool,
    class: &EC2NodeClass,
    pricing: &PricingOptions,
    notes: &mut Vec<String>,
) -> Option<CatalogOptions> {
    let ami_family = match class.spec.resolved_ami_family() {
        Some(
            family @ (AmiFamily::AL2
            | AmiFamily::AL2023
            | AmiFamily::Bottlerocket
            | AmiFamily::Custom),
        ) => family,
        None => AmiFamily::AL2023,
        Some(windows) => {
            notes.push(format!(
                "NodePool {}: AMI family {} is not simulated (the catalog is Linux-only); the NodePool gets no instance types",
                pool.metadata.name.as_deref().unwrap_or_default(),
                windows.as_str()
            ));
            return None;
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
    Some(options)
}

/// The types and offerings `requirements` allow out of `infos`.
pub fn narrow(infos: &[InstanceTypeInfo], requirements: &[RequirementSpec]) -> PoolTypes {
    let mut out = PoolTypes::default();
    for info in infos {
        if !requirements.iter().all(|r| type_allows(info, r)) {
            continue;
        }
        let mut info = info.clone();
        info.offerings.retain(|o| o.allowed_by(requirements));
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
    if let Some(values) = info.label_choices.get(key) {
        return values.iter().any(|value| requirement.matches(Some(value)));
    }
    match info.labels.get(key) {
        Some(value) => requirement.matches(Some(value)),
        None if INSTANCE_FACT_KEYS.contains(&key) => requirement.matches(None),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::Operator;

    #[test]
    fn numeric_operators_compare_integers_and_fail_on_absent_labels() {
        let gt = RequirementSpec::new("g", Operator::Gt, &["2"]);
        assert!(gt.matches(Some("3")));
        assert!(!gt.matches(Some("2")));
        assert!(!gt.matches(Some("x")));
        assert!(!gt.matches(None));
        let not_in = RequirementSpec::new("k", Operator::NotIn, &["a"]);
        assert!(not_in.matches(None));
        assert!(!not_in.matches(Some("a")));
        let gte = RequirementSpec::new("g", Operator::Gte, &["2"]);
        assert!(gte.matches(Some("2")));
        assert!(!RequirementSpec::new("k", Operator::DoesNotExist, &[]).matches(Some("a")));
    }

    #[test]
    fn a_type_with_a_label_choice_is_kept_when_one_of_its_values_is_allowed() {
        let Ok(catalog) = Catalog::embedded() else {
            panic!("embedded catalog")
        };
        let Ok(mut infos) = catalog.instance_types(&CatalogOptions::default()) else {
            panic!("instance types")
        };
        infos.truncate(1);
        let key = "karpenter.k8s.aws/instance-tenancy";
        let dedicated = [RequirementSpec::new(key, Operator::In, &["dedicated"])];
        infos[0]
            .label_choices
            .insert(key.into(), vec!["default".into()]);
        assert!(narrow(&infos, &dedicated).infos.is_empty());
        infos[0]
            .label_choices
            .insert(key.into(), vec!["default".into(), "dedicated".into()]);
        assert_eq!(narrow(&infos, &dedicated).infos.len(), 1);
        let neither = [RequirementSpec::new(
            key,
            Operator::NotIn,
            &["default", "dedicated"],
        )];
        assert!(narrow(&infos, &neither).infos.is_empty());
        let absent = [RequirementSpec::new(key, Operator::DoesNotExist, &[])];
        assert!(narrow(&infos, &absent).infos.is_empty());
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
