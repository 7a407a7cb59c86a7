//! `--compare-nodegroup TYPE`: what a fixed node group of one instance type would need for the
//! same pods, and what it would cost (on-demand, as node groups usually run).
//!
//! First-fit decreasing: pods sorted by CPU then memory requests, largest first, each put on the
//! first node with room, a new node opened when none has. A node's room is its allocatable less
//! the DaemonSets that would run on it, and its pod slots are max pods less those DaemonSet
//! pods. Scheduling constraints (affinity, spread, taints, volumes) are not applied: the
//! comparison is a capacity estimate, and a kinder one than the real node group gets.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use karpenter_api::labels;
use karpenter_cloud::{CapacityType, InstanceTypeInfo};
use serde::Serialize;

use crate::daemonsets;
use crate::error::SimulateError;
use crate::resources::{HOURS_PER_MONTH, cpu_millis, memory_bytes, pod_requests, round_price};

/// The fixed node group's size and cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeGroupComparison {
    pub instance_type: String,
    pub nodes: usize,
    pub pods: usize,
    /// `namespace/name` of pods larger than an empty node.
    pub pods_not_fitting: Vec<String>,
    /// On-demand price of one node.
    pub price_per_node_per_hour: f64,
    pub total_per_hour: f64,
    pub total_per_month: f64,
    /// Requests (pods and DaemonSets) over allocatable of the whole group, 0..1.
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
}

#[derive(Debug, Clone, Copy)]
struct Room {
    cpu: i64,
    memory: i64,
    pods: i64,
}

/// Sizes a node group of `instance_type` for `pods`.
pub fn compare(
    instance_type: &str,
    types: &[InstanceTypeInfo],
    daemonsets: &[DaemonSet],
    pods: &[Pod],
) -> Result<NodeGroupComparison, SimulateError> {
    let info = types
        .iter()
        .find(|t| t.name == instance_type)
        .ok_or_else(|| unknown(instance_type, types))?;
    let offering = info
        .cheapest_offering(Some(CapacityType::OnDemand))
        .or_else(|| info.cheapest_offering(None))
        .ok_or_else(|| unknown(instance_type, types))?;
    let mut labels = info.labels.clone();
    labels.insert(labels::ZONE.to_string(), offering.zone.clone());
    labels.insert(
        labels::CAPACITY_TYPE.to_string(),
        offering.capacity_type.as_str().to_string(),
    );
    let allocatable = info.allocatable();
    let mut empty = Room {
        cpu: allocatable.cpu_millis,
        memory: allocatable.memory_bytes,
        pods: allocatable.pods,
    };
    for ds in daemonsets
        .iter()
        .filter(|ds| daemonsets::runs_on(ds, &labels, &[]))
    {
        let requests = daemonsets::pod_requests(ds);
        empty.cpu -= cpu_millis(&requests);
        empty.memory -= memory_bytes(&requests);
        empty.pods -= 1;
    }
    let mut sized: Vec<(i64, i64, String)> = pods
        .iter()
        .map(|pod| {
            let requests = pod_requests(pod.spec.as_ref());
            let name = karpenter_scheduling::pod_record::key(&pod.metadata);
            (cpu_millis(&requests), memory_bytes(&requests), name)
        })
        .collect();
    sized.sort_by_key(|b| std::cmp::Reverse((b.0, b.1)));
    let mut nodes: Vec<Room> = Vec::new();
    let mut not_fitting = Vec::new();
    let mut placed = 0usize;
    for (cpu, memory, name) in sized {
        if cpu > empty.cpu || memory > empty.memory || empty.pods < 1 {
            not_fitting.push(name);
            continue;
        }
        let slot = nodes
            .iter_mut()
            .find(|room| room.cpu >= cpu && room.memory >= memory && room.pods >= 1);
        let room = match slot {
            Some(room) => room,
            None => {
                nodes.push(empty);
                let last = nodes.len() - 1;
                &mut nodes[last]
            }
        };
        room.cpu -= cpu;
        room.memory -= memory;
        room.pods -= 1;
        placed += 1;
    }
    let count = nodes.len();
    let used = |per_node: i64, free: i64| {
        let all = per_node.saturating_mul(i64::try_from(count).unwrap_or(i64::MAX));
        if all > 0 {
            (((all - free) as f64 / all as f64) * 1000.0).round() / 1000.0
        } else {
            0.0
        }
    };
    let cpu_free: i64 = nodes.iter().map(|r| r.cpu).sum();
    let memory_free: i64 = nodes.iter().map(|r| r.memory).sum();
    let total_per_hour = round_price(offering.price_per_hour * count as f64);
    Ok(NodeGroupComparison {
        instance_type: info.name.clone(),
        nodes: count,
        pods: placed,
        pods_not_fitting: not_fitting,
        price_per_node_per_hour: offering.price_per_hour,
        total_per_hour,
        total_per_month: round_price(total_per_hour * HOURS_PER_MONTH),
        cpu_utilisation: used(allocatable.cpu_millis, cpu_free),
        memory_utilisation: used(allocatable.memory_bytes, memory_free),
    })
}

fn unknown(instance_type: &str, types: &[InstanceTypeInfo]) -> SimulateError {
    let family = instance_type.split('.').next().unwrap_or_default();
    let mut similar: Vec<&str> = types
        .iter()
        .filter(|t| t.name.split('.').next() == Some(family))
        .map(|t| t.name.as_str())
        .take(6)
        .collect();
    similar.sort_unstable();
    SimulateError::UnknownInstanceType {
        instance_type: instance_type.to_string(),
        hint: if similar.is_empty() {
            String::new()
        } else {
            format!(" (did you mean one of: {})", similar.join(", "))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloud::{Catalog, CatalogOptions};
    use karpenter_scheduling::builders::PodBuilder;

    fn types() -> Vec<InstanceTypeInfo> {
        Catalog::embedded()
            .ok()
            .and_then(|c| c.instance_types(&CatalogOptions::default()).ok())
            .unwrap_or_default()
    }

    #[test]
    fn first_fit_decreasing_packs_pods_onto_as_few_nodes_as_fit() {
        // m5.large: 1930m allocatable CPU; three 1-CPU pods need three nodes, three 700m two.
        let big: Vec<Pod> = (0..3)
            .map(|i| PodBuilder::new(&format!("big-{i}")).cpu("1").build())
            .collect();
        let small: Vec<Pod> = (0..3)
            .map(|i| {
                PodBuilder::new(&format!("s-{i}"))
                    .cpu("700m")
                    .memory("1Gi")
                    .build()
            })
            .collect();
        let Ok(group) = compare("m5.large", &types(), &[], &big) else {
            panic!("m5.large is in the catalog")
        };
        assert_eq!(group.nodes, 3);
        assert_eq!(group.total_per_hour, round_price(3.0 * 0.096));
        let Ok(group) = compare("m5.large", &types(), &[], &small) else {
            panic!("m5.large is in the catalog")
        };
        assert_eq!(group.nodes, 2);
    }

    #[test]
    fn pods_larger_than_a_node_are_listed_as_not_fitting() {
        let pods = vec![PodBuilder::new("huge").cpu("8").build()];
        let Ok(group) = compare("m5.large", &types(), &[], &pods) else {
            panic!("m5.large is in the catalog")
        };
        assert_eq!(group.nodes, 0);
        assert_eq!(group.pods_not_fitting, ["default/huge"]);
    }

    #[test]
    fn an_unknown_instance_type_is_an_error_with_suggestions() {
        let err = compare("m5.huge", &types(), &[], &[])
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("m5.huge") && e.contains("did you mean one of: m5.")),
            "{err:?}"
        );
    }
}
