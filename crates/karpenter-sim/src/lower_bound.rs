//! The cost lower bound: no set of nodes the NodePools may launch can hold the pods for less.
//!
//! ```text
//! lower bound = max( total CPU requests (vCPU)   x cheapest price per allocatable vCPU-hour,
//!                    total memory requests (GiB) x cheapest price per allocatable GiB-hour )
//! ```
//!
//! Each cheapest unit price is the minimum of `offering price / allocatable amount` over every
//! instance type and offering some NodePool allows. Every node costs at least its allocatable
//! CPU (and memory) times the cheapest unit price, and the nodes' allocatable must add up to at
//! least the requests, so the bound holds; using allocatable rather than capacity makes it
//! tighter. Requests are those of the pods placed on new nodes (DaemonSet pods, which need no
//! room of their own in this bound, and unschedulable pods are left out).

use karpenter_cloud::InstanceTypeInfo;
use serde::Serialize;

use crate::resources::{GIB, round_price};
use karpenter_cloud::pool_types::PoolTypes;

/// The cheapest price of one unit of a resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnitPrice {
    /// USD per allocatable vCPU-hour or GiB-hour.
    pub price: f64,
    pub instance_type: String,
    pub capacity_type: String,
}

/// The bound and how it was computed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LowerBound {
    pub per_hour: f64,
    pub cpu_requests: f64,
    pub memory_requests_gib: f64,
    pub cheapest_per_vcpu_hour: Option<UnitPrice>,
    pub cheapest_per_gib_hour: Option<UnitPrice>,
    /// `cpu` or `memory`: which term is the larger.
    pub bound_by: String,
}

/// The lower bound for `cpu_millis` and `memory_bytes` of requests over the NodePools' types.
pub fn lower_bound<'a>(
    cpu_millis: i64,
    memory_bytes: i64,
    pools: impl IntoIterator<Item = &'a PoolTypes>,
) -> LowerBound {
    let mut cpu_best: Option<UnitPrice> = None;
    let mut memory_best: Option<UnitPrice> = None;
    for types in pools {
        for info in &types.infos {
            consider(info, &mut cpu_best, &mut memory_best);
        }
    }
    let cpu = cpu_millis as f64 / 1000.0;
    let memory = memory_bytes as f64 / GIB as f64;
    let cpu_term = cpu_best.as_ref().map_or(0.0, |u| cpu * u.price);
    let memory_term = memory_best.as_ref().map_or(0.0, |u| memory * u.price);
    LowerBound {
        per_hour: round_price(cpu_term.max(memory_term)),
        cpu_requests: cpu,
        memory_requests_gib: (memory * 1000.0).round() / 1000.0,
        cheapest_per_vcpu_hour: cpu_best,
        cheapest_per_gib_hour: memory_best,
        bound_by: if cpu_term >= memory_term {
            "cpu"
        } else {
            "memory"
        }
        .to_string(),
    }
}

fn consider(info: &InstanceTypeInfo, cpu: &mut Option<UnitPrice>, memory: &mut Option<UnitPrice>) {
    let allocatable = info.allocatable();
    if allocatable.cpu_millis <= 0 || allocatable.memory_bytes <= 0 {
        return;
    }
    let vcpus = allocatable.cpu_millis as f64 / 1000.0;
    let gib = allocatable.memory_bytes as f64 / GIB as f64;
    for offering in info.offerings.iter().filter(|o| o.available) {
        let candidate = |per_unit: f64| UnitPrice {
            price: per_unit,
            instance_type: info.name.clone(),
            capacity_type: offering.capacity_type.as_str().to_string(),
        };
        let per_cpu = offering.price_per_hour / vcpus;
        if cpu.as_ref().is_none_or(|best| per_cpu < best.price) {
            *cpu = Some(candidate(per_cpu));
        }
        let per_gib = offering.price_per_hour / gib;
        if memory.as_ref().is_none_or(|best| per_gib < best.price) {
            *memory = Some(candidate(per_gib));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloud::{Catalog, CatalogOptions};
    use karpenter_scheduling::RequirementSpec;

    fn m5_large_on_demand() -> PoolTypes {
        let Ok(catalog) = Catalog::embedded() else {
            panic!("embedded catalog")
        };
        let Ok(infos) = catalog.instance_types(&CatalogOptions::default()) else {
            panic!("instance types")
        };
        karpenter_cloud::pool_types::narrow(
            &infos,
            &[
                RequirementSpec::is_in("node.kubernetes.io/instance-type", &["m5.large"]),
                RequirementSpec::is_in("karpenter.sh/capacity-type", &["on-demand"]),
            ],
        )
    }

    #[test]
    fn the_bound_is_the_larger_of_cpu_and_memory_requests_times_their_unit_prices() {
        let types = m5_large_on_demand();
        // m5.large: $0.096/h, allocatable 1930m CPU and 6903Mi memory.
        let per_cpu = 0.096 / 1.93;
        let per_gib = 0.096 / (6903.0 / 1024.0);
        let bound = lower_bound(4000, 4 * GIB, [&types]);
        assert!(
            (bound.per_hour - round_price(4.0 * per_cpu)).abs() < 1e-9,
            "{bound:?}"
        );
        assert_eq!(bound.bound_by, "cpu");
        let bound = lower_bound(1000, 32 * GIB, [&types]);
        assert!(
            (bound.per_hour - round_price(32.0 * per_gib)).abs() < 1e-9,
            "{bound:?}"
        );
        assert_eq!(bound.bound_by, "memory");
    }

    #[test]
    fn no_requests_bound_to_zero() {
        assert_eq!(lower_bound(0, 0, [&m5_large_on_demand()]).per_hour, 0.0);
    }
}
