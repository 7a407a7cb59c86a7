//! Resource lists (`cpu`, `memory`, `pods`, extended resources) and their arithmetic.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::quantity::{Quantity, QuantityError};

/// A named set of quantities, as in a pod's requests or a node's capacity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceList(pub BTreeMap<String, Quantity>);

/// A resource list entry could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {name}: {source}")]
pub struct ResourceParseError {
    pub name: String,
    #[source]
    pub source: QuantityError,
}

impl ResourceList {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from `(name, quantity string)` pairs.
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ResourceParseError> {
        let mut list = ResourceList::new();
        for (name, value) in entries {
            let q = Quantity::parse(value).map_err(|source| ResourceParseError {
                name: name.to_string(),
                source,
            })?;
            list.0.insert(name.to_string(), q);
        }
        Ok(list)
    }

    /// Converts a Kubernetes resource map.
    pub fn from_k8s(
        map: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> Result<Self, ResourceParseError> {
        Self::parse(map.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
    }

    /// The list as the API writes it (a NodeClaim's requests, a Node's capacity): the inverse
    /// of [`Self::from_k8s`].
    pub fn to_k8s(
        &self,
    ) -> BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
        self.0
            .iter()
            .map(|(name, q)| {
                (
                    name.clone(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string()),
                )
            })
            .collect()
    }

    pub fn get(&self, name: &str) -> Quantity {
        self.0.get(name).copied().unwrap_or(Quantity::ZERO)
    }

    pub fn set(&mut self, name: &str, q: Quantity) {
        self.0.insert(name.to_string(), q);
    }

    pub fn with(mut self, name: &str, q: Quantity) -> Self {
        self.set(name, q);
        self
    }

    /// Adds every entry of `other` to this list.
    pub fn add(&mut self, other: &ResourceList) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_default();
            *e = *e + *v;
        }
    }

    /// Subtracts every entry of `other` (missing entries count as zero).
    pub fn sub(&mut self, other: &ResourceList) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_default();
            *e = *e - *v;
        }
    }

    /// Raises every entry to at least the value in `other` (element-wise max).
    pub fn max_with(&mut self, other: &ResourceList) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_default();
            if *v > *e {
                *e = *v;
            }
        }
    }

    /// True when every requested quantity fits in `available` (missing means zero).
    pub fn fits_in(&self, available: &ResourceList) -> bool {
        self.0.iter().all(|(k, v)| *v <= available.get(k))
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(|q| q.is_zero())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Quantity)> {
        self.0.iter()
    }
}

impl fmt::Display for ResourceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        ResourceList::parse(entries.iter().copied()).unwrap_or_default()
    }

    #[test]
    fn a_list_written_for_the_api_reads_back_the_same() {
        let a = list(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "110")]);
        let written = a.to_k8s();
        assert_eq!(written["cpu"].0, "1500m");
        assert_eq!(ResourceList::from_k8s(&written), Ok(a));
    }

    #[test]
    fn adding_and_subtracting_is_exact() {
        let mut a = list(&[("cpu", "1500m"), ("memory", "1Gi")]);
        a.add(&list(&[("cpu", "500m"), ("pods", "1")]));
        assert_eq!(a, list(&[("cpu", "2"), ("memory", "1Gi"), ("pods", "1")]));
        a.sub(&list(&[("memory", "512Mi")]));
        assert_eq!(
            a.get("memory"),
            Quantity::parse("512Mi").unwrap_or_default()
        );
    }

    #[test]
    fn a_request_fits_only_when_every_resource_fits() {
        let alloc = list(&[("cpu", "2"), ("memory", "4Gi")]);
        assert!(list(&[("cpu", "2")]).fits_in(&alloc));
        assert!(!list(&[("cpu", "2001m")]).fits_in(&alloc));
        assert!(!list(&[("nvidia.com/gpu", "1")]).fits_in(&alloc));
    }

    #[test]
    fn bad_entries_name_the_resource() {
        let err = ResourceList::parse([("cpu", "lots")]).err();
        assert_eq!(err.map(|e| e.name), Some("cpu".to_string()));
    }
}
