//! The consolidation benchmark cluster: upstream's diverse workload (`makeDiversePods`) spread
//! round-robin over `nodes` nodes of the `fake.InstanceTypes(400)` catalog, each node sized to
//! about four times its pods' requests (low utilisation), on-demand, zones round-robin, one
//! NodePool with default disruption settings (`consolidateAfter: 0s`, budget 10%).
//!
//! The diverse mix has `pods / 5` pods with required hostname anti-affinity to each other; a
//! cluster cannot hold more of them than it has nodes, so those beyond one per node lose their
//! anti-affinity (they stay as generic pods).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use karpenter_api::labels as l;
use karpenter_api::v1::NodePool;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::PreferencePolicy;
use karpenter_scheduling::fixtures::{Workload, benchmark_input};
use karpenter_scheduling::pod::pod_requests;
use karpenter_scheduling::{InstanceType, Quantity, ResourceList};

use crate::snapshot::{NodeState, Snapshot};

/// The benchmark's `now` (a Monday, 10:00 UTC).
pub fn bench_now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_795_428_000, 0).unwrap_or_default()
}

const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

fn node_pool() -> Option<NodePool> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {
            "metadata": {"labels": {"testing/cluster": "unspecified"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }
        }}
    }))
    .ok()
}

fn is_anti_affine(pod: &PodRecord) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .is_some_and(|a| a.pod_anti_affinity.is_some())
}

/// The smallest type with at least `factor` times the requests (the largest if none).
fn size_for<'a>(
    catalog: &'a [InstanceType],
    requests: &ResourceList,
    factor: i128,
) -> Option<&'a InstanceType> {
    let cpu = requests.get("cpu").millis_i64() as i128 * factor;
    let mem = requests.get("memory").value() * factor;
    catalog
        .iter()
        .find(|it| {
            let alloc = it.allocatable();
            alloc.get("cpu").millis_i64() as i128 >= cpu && alloc.get("memory").value() >= mem
        })
        .or_else(|| catalog.last())
}

/// The benchmark snapshot: `nodes` nodes, `pods` diverse pods, 400 instance types.
pub fn consolidation_cluster(nodes: usize, pods: usize, seed: u64, now: DateTime<Utc>) -> Snapshot {
    let input = benchmark_input(
        Workload::Diverse,
        pods,
        400,
        seed,
        PreferencePolicy::Respect,
    );
    let catalog = input.default_instance_types;
    let mut workload: Vec<PodRecord> = input.pods.into_iter().map(Arc::unwrap_or_clone).collect();
    let mut anti = 0usize;
    for pod in &mut workload {
        if is_anti_affine(pod) {
            anti += 1;
            if anti > nodes
                && let Some(spec) = pod.spec.as_mut()
            {
                Arc::make_mut(spec).affinity = None;
            }
        }
    }
    let nodes = nodes.max(1);
    let mut per_node: Vec<Vec<PodRecord>> = vec![Vec::new(); nodes];
    // anti-affine pods first, one per node, then the rest round-robin
    let (first, rest): (Vec<PodRecord>, Vec<PodRecord>) =
        workload.into_iter().partition(is_anti_affine);
    for (i, mut pod) in first.into_iter().chain(rest).enumerate() {
        let n = i % nodes;
        pod.node_name = Some(format!("node-{n:05}"));
        per_node[n].push(pod);
    }
    let created = now - chrono::Duration::hours(24);
    let mut states = Vec::with_capacity(nodes);
    for (n, pods) in per_node.into_iter().enumerate() {
        let name = format!("node-{n:05}");
        let mut requests = ResourceList::new();
        for p in &pods {
            if let Ok(r) = pod_requests(p.spec.as_deref()) {
                requests.add(&r);
            }
        }
        let Some(it) = size_for(&catalog, &requests, 4) else {
            continue;
        };
        let mut s = NodeState::new(&name, created);
        s.node_claim = Some(format!("claim-{n:05}"));
        for (k, v) in [
            (l::NODEPOOL, "default"),
            (l::INSTANCE_TYPE, &*it.name),
            (l::CAPACITY_TYPE, "on-demand"),
            (l::ZONE, ZONES[n % ZONES.len()]),
            (l::ARCH, "amd64"),
            (l::OS, "linux"),
            ("testing/cluster", "unspecified"),
        ] {
            s.labels.insert(k.to_owned(), v.to_owned());
        }
        s.capacity = it.capacity.clone();
        s.allocatable = it.allocatable();
        if s.allocatable.get("pods").is_zero() {
            s.allocatable.set("pods", Quantity::from_units(110));
        }
        s.pods = pods.into_iter().map(Arc::new).collect();
        states.push(s);
    }
    let node_pools: Vec<NodePool> = node_pool().into_iter().collect();
    Snapshot {
        node_pools,
        instance_types: [("default".to_owned(), catalog)]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
            .into(),
        nodes: states,
        ..Default::default()
    }
}
