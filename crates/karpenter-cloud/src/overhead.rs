//! Overhead formulas, as upstream computes them (karpenter-aws.md section 3.3):
//! kube-reserved, system-reserved and the eviction threshold.

use serde::{Deserialize, Serialize};

use crate::capacity;
use crate::options::{CatalogOptions, ReservedOverrides, Threshold};
use crate::resources::{GIB, MIB, Resources};
use crate::shape::InstanceShape;

/// The memory eviction threshold kubelet uses by default (`memory.available<100Mi`).
pub const DEFAULT_EVICTION_MEMORY_BYTES: i64 = 100 * MIB;
/// The default kube-reserved ephemeral storage.
pub const DEFAULT_KUBE_RESERVED_EPHEMERAL_BYTES: i64 = GIB;

/// The part of a node's capacity pods cannot use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overhead {
    pub kube_reserved: Resources,
    pub system_reserved: Resources,
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// kube-reserved + system-reserved + eviction threshold.
    pub fn total(&self) -> Resources {
        self.kube_reserved
            .plus(&self.system_reserved)
            .plus(&self.eviction_threshold)
    }
}

/// The overhead of one type, given its capacity.
pub fn overhead(shape: &InstanceShape, capacity: &Resources, options: &CatalogOptions) -> Overhead {
    let kubelet = &options.kubelet;
    Overhead {
        kube_reserved: kube_reserved(
            capacity.cpu_millis,
            capacity::pods_for_memory_overhead(shape, options),
            &kubelet.kube_reserved,
        ),
        system_reserved: system_reserved(&kubelet.system_reserved),
        eviction_threshold: eviction_threshold(capacity, options),
    }
}

/// Kube-reserved CPU in millicores: 6% of the first core, 1% of the second, 0.5% of cores 3-4 and
/// 0.25% of the rest, each range's share truncated to whole millicores.
pub fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const RANGES: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    RANGES
        .iter()
        .filter(|(start, _, _)| cpu_millis >= *start)
        .map(|(start, end, percentage)| {
            let span = if cpu_millis < *end {
                cpu_millis - start
            } else {
                end - start
            };
            (span as f64 * percentage) as i64
        })
        .sum()
}

/// Kube-reserved memory: `(11 x pods + 255)` MiB.
pub fn kube_reserved_memory_bytes(pods: i64) -> i64 {
    pods.saturating_mul(11)
        .saturating_add(255)
        .saturating_mul(MIB)
}

/// Kube-reserved: the tiered CPU formula, `11 x pods + 255` MiB of memory and 1Gi of ephemeral
/// storage; each key set in `overrides` replaces the computed value.
pub fn kube_reserved(cpu_millis: i64, pods: i64, overrides: &ReservedOverrides) -> Resources {
    Resources {
        cpu_millis: overrides
            .cpu_millis
            .unwrap_or_else(|| kube_reserved_cpu_millis(cpu_millis)),
        memory_bytes: overrides
            .memory_bytes
            .unwrap_or_else(|| kube_reserved_memory_bytes(pods)),
        ephemeral_storage_bytes: overrides
            .ephemeral_storage_bytes
            .unwrap_or(DEFAULT_KUBE_RESERVED_EPHEMERAL_BYTES),
        ..Resources::default()
    }
}

/// System-reserved: only what the user sets (no defaults).
pub fn system_reserved(overrides: &ReservedOverrides) -> Resources {
    Resources {
        cpu_millis: overrides.cpu_millis.unwrap_or(0),
        memory_bytes: overrides.memory_bytes.unwrap_or(0),
        ephemeral_storage_bytes: overrides.ephemeral_storage_bytes.unwrap_or(0),
        ..Resources::default()
    }
}

/// Eviction threshold: 100Mi of memory and `ceil(10%)` of ephemeral storage, each replaced by
/// `evictionHard` `memory.available` / `nodefs.available` when set.
pub fn eviction_threshold(capacity: &Resources, options: &CatalogOptions) -> Resources {
    let eviction = &options.kubelet.eviction_hard;
    let storage = capacity.ephemeral_storage_bytes;
    Resources {
        memory_bytes: eviction
            .memory_available
            .map_or(DEFAULT_EVICTION_MEMORY_BYTES, |t| {
                threshold_bytes(capacity.memory_bytes, t)
            }),
        // Upstream: ceil(float64(storage) / 100 * 10), in this order.
        ephemeral_storage_bytes: eviction
            .nodefs_available
            .map_or((storage as f64 / 100.0 * 10.0).ceil() as i64, |t| {
                threshold_bytes(storage, t)
            }),
        ..Resources::default()
    }
}

/// A threshold against a capacity: `N%` is `ceil(capacity / 100 x N)` (100% counts as 0).
fn threshold_bytes(capacity: i64, threshold: Threshold) -> i64 {
    match threshold {
        Threshold::Bytes(bytes) => bytes,
        Threshold::Percent(percent) => {
            let percent = if percent == 100.0 { 0.0 } else { percent };
            (capacity as f64 / 100.0 * percent).ceil() as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_follows_the_tiered_formula() {
        // (vCPUs, millicores): 1 core = 60; 2 = 60+10; 4 = 60+10+10;
        // 8 = 80 + 4000 x 0.25% = 90; 96 = 80 + 92000 x 0.25% = 310.
        for (vcpus, expected) in [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (96, 310)] {
            assert_eq!(
                kube_reserved_cpu_millis(vcpus * 1000),
                expected,
                "{vcpus} vCPUs"
            );
        }
        // Half a core: 500 x 6% = 30.
        assert_eq!(kube_reserved_cpu_millis(500), 30);
    }

    #[test]
    fn kube_reserved_memory_is_eleven_mib_per_pod_plus_255() {
        // 29 pods: 11 x 29 + 255 = 574 MiB.
        assert_eq!(kube_reserved_memory_bytes(29), 574 * MIB);
    }

    #[test]
    fn kube_reserved_overrides_replace_single_keys() {
        let overrides = ReservedOverrides {
            memory_bytes: Some(MIB),
            ..ReservedOverrides::default()
        };
        let reserved = kube_reserved(2000, 29, &overrides);
        assert_eq!(
            (
                reserved.cpu_millis,
                reserved.memory_bytes,
                reserved.ephemeral_storage_bytes
            ),
            (70, MIB, GIB)
        );
    }

    #[test]
    fn percentage_thresholds_round_up_and_100_percent_disables() {
        assert_eq!(threshold_bytes(1000, Threshold::Percent(5.0)), 50);
        assert_eq!(threshold_bytes(1001, Threshold::Percent(10.0)), 101);
        assert_eq!(threshold_bytes(1000, Threshold::Percent(100.0)), 0);
        assert_eq!(threshold_bytes(1000, Threshold::Bytes(7)), 7);
    }
}
