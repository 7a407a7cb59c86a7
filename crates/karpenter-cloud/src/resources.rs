//! Integer resource amounts: the units capacity, overhead and allocatable are expressed in.

use std::collections::BTreeMap;

use karpenter_api::labels;
use serde::{Deserialize, Serialize};

/// One MiB in bytes.
pub const MIB: i64 = 1024 * 1024;
/// One GiB in bytes.
pub const GIB: i64 = 1024 * MIB;

/// A set of resource amounts in integer units: CPU in millicores, memory and ephemeral storage in
/// bytes, pods as a count, extended resources (`nvidia.com/gpu`, ...) as counts.
///
/// Amounts are signed because upstream computes allocatable as a plain subtraction: a type whose
/// overhead exceeds its capacity has a negative allocatable amount, and nothing fits on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
    pub pods: i64,
    /// Extended resources by name; zero amounts are left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, i64>,
}

impl Resources {
    /// Adds `other` to `self`, resource by resource (saturating).
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut extended = self.extended.clone();
        for (name, amount) in &other.extended {
            let entry = extended.entry(name.clone()).or_insert(0);
            *entry = entry.saturating_add(*amount);
        }
        extended.retain(|_, amount| *amount != 0);
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            ephemeral_storage_bytes: self
                .ephemeral_storage_bytes
                .saturating_add(other.ephemeral_storage_bytes),
            pods: self.pods.saturating_add(other.pods),
            extended,
        }
    }

    /// Subtracts `other` from `self`, resource by resource (saturating; the result may be
    /// negative).
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut extended = self.extended.clone();
        for (name, amount) in &other.extended {
            let entry = extended.entry(name.clone()).or_insert(0);
            *entry = entry.saturating_sub(*amount);
        }
        extended.retain(|_, amount| *amount != 0);
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            ephemeral_storage_bytes: self
                .ephemeral_storage_bytes
                .saturating_sub(other.ephemeral_storage_bytes),
            pods: self.pods.saturating_sub(other.pods),
            extended,
        }
    }

    /// Every amount by its Kubernetes resource name (`cpu` in millicores, `memory` in bytes, ...),
    /// zero amounts left out.
    pub fn by_name(&self) -> BTreeMap<String, i64> {
        let mut amounts = BTreeMap::new();
        for (name, amount) in [
            (labels::RESOURCE_CPU, self.cpu_millis),
            (labels::RESOURCE_MEMORY, self.memory_bytes),
            (
                labels::RESOURCE_EPHEMERAL_STORAGE,
                self.ephemeral_storage_bytes,
            ),
            (labels::RESOURCE_PODS, self.pods),
        ] {
            if amount != 0 {
                amounts.insert(name.to_string(), amount);
            }
        }
        for (name, amount) in &self.extended {
            if *amount != 0 {
                amounts.insert(name.clone(), *amount);
            }
        }
        amounts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtraction_is_per_resource_and_may_go_negative() {
        let capacity = Resources {
            cpu_millis: 2000,
            memory_bytes: 10,
            pods: 29,
            extended: BTreeMap::from([("nvidia.com/gpu".to_string(), 1)]),
            ..Resources::default()
        };
        let overhead = Resources {
            cpu_millis: 70,
            memory_bytes: 20,
            ..Resources::default()
        };
        let left = capacity.minus(&overhead);
        assert_eq!(left.cpu_millis, 1930);
        assert_eq!(left.memory_bytes, -10);
        assert_eq!(left.pods, 29);
        assert_eq!(left.extended.get("nvidia.com/gpu"), Some(&1));
        assert_eq!(left.plus(&overhead), capacity);
    }

    #[test]
    fn amounts_by_name_use_kubernetes_resource_names_and_skip_zeros() {
        let amounts = Resources {
            cpu_millis: 1500,
            pods: 0,
            ..Resources::default()
        }
        .by_name();
        assert_eq!(amounts, BTreeMap::from([("cpu".to_string(), 1500)]));
    }
}
