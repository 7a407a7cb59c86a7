//! The generated cluster of `karpenter-bench scale`: two NodePools (`general`, on-demand and
//! spot, and `batch`, tainted), managed nodes with their NodeClaims, Deployments' pods (owned by
//! a ReplicaSet; plain, spread over zones, spread over hostnames, required or preferred
//! hostname anti-affinity), two DaemonSets with a pod on every node, PDBs over a third of the
//! Deployments, and pending pods of the same mix (new Deployments and scale-ups of existing
//! ones).
//!
//! Objects are produced one at a time ([`Generator::bound_objects`], [`Generator::pending_objects`]) so the caller can time only what
//! the index does with them and never holds the whole cluster twice. Bound pods go to
//! consecutive nodes of their pool (so a Deployment's replicas land on distinct hostnames and
//! evenly over the zones, respecting its spread and anti-affinity); each node is then sized to
//! its pods with headroom (a tenth of the nodes four times their requests, the rest 1.15 times),
//! so the disruption pass finds some underutilised nodes among many full ones.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_api::labels as l;
use karpenter_scheduling::InstanceType;
use karpenter_scheduling::builders::PodBuilder;
use karpenter_scheduling::fixtures::Rng;
use karpenter_state::Object;
use serde_json::{Value, json};

/// The catalog's zones (upstream's `fake.InstanceTypes`); spot is offered in the first two.
pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
/// The tainted pool's taint, tolerated by its Deployments.
const BATCH_TAINT: &str = "example.com/batch";
/// DaemonSets (namespace `kube-system`): name, cpu, memory.
const DAEMONSETS: [(&str, &str, &str); 2] = [
    ("node-exporter", "100m", "128Mi"),
    ("log-agent", "50m", "64Mi"),
];
const CPUS: [(&str, i64); 4] = [("100m", 100), ("250m", 250), ("500m", 500), ("1", 1000)];
const MEMS: [(&str, i64); 5] = [
    ("128Mi", 128),
    ("256Mi", 256),
    ("512Mi", 512),
    ("1Gi", 1024),
    ("2Gi", 2048),
];

/// How a Deployment's pods constrain their placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Plain,
    ZoneSpread,
    HostnameSpread,
    RequiredAntiAffinity,
    PreferredAntiAffinity,
}

impl Shape {
    fn draw(rng: &mut Rng) -> Self {
        match rng.intn(100) {
            0..40 => Shape::Plain,
            40..60 => Shape::ZoneSpread,
            60..75 => Shape::HostnameSpread,
            75..85 => Shape::RequiredAntiAffinity,
            _ => Shape::PreferredAntiAffinity,
        }
    }
}

/// One generated Deployment (its ReplicaSet owns the pods).
#[derive(Debug, Clone)]
pub struct Deployment {
    pub name: String,
    pub namespace: String,
    pub shape: Shape,
    /// Runs in the tainted `batch` pool.
    pub batch: bool,
    pub cpu: usize,
    pub mem: usize,
    /// Replicas generated so far (bound, then pending scale-ups).
    pub replicas: usize,
    pub pdb: bool,
}

impl Deployment {
    fn draw(index: usize, prefix: &str, rng: &mut Rng) -> Self {
        let shape = Shape::draw(rng);
        Deployment {
            name: format!("{prefix}-{index:05}"),
            namespace: format!("team-{}", index % 10),
            shape,
            batch: rng.intn(10) == 0,
            cpu: rng.intn(CPUS.len()),
            mem: rng.intn(MEMS.len()),
            replicas: 0,
            pdb: rng.intn(3) == 0,
        }
    }

    /// Replicas of one Deployment: required anti-affinity ones stay small.
    fn draw_size(&self, rng: &mut Rng) -> usize {
        match self.shape {
            Shape::RequiredAntiAffinity => [2, 3, 5][rng.intn(3)],
            _ => [3, 5, 10, 20, 50][rng.intn(5)],
        }
    }

    fn replica_set(&self) -> String {
        format!("{}-5d8f9c", self.name)
    }

    /// CPU millis and memory MiB of one pod.
    fn requests(&self) -> (i64, i64) {
        (CPUS[self.cpu].1, MEMS[self.mem].1)
    }

    /// Pod `replica` of this Deployment, bound to `node` or pending (`PodScheduled=False`).
    fn pod(&self, replica: usize, node: Option<&str>, now: DateTime<Utc>) -> Pod {
        let name = format!("{}-{replica:05}", self.replica_set());
        let app = [("app", self.name.as_str())];
        let mut b = PodBuilder::new(&name)
            .namespace(&self.namespace)
            .uid(&format!("{}/{name}", self.namespace))
            .label("app", &self.name)
            .label("pod-template-hash", "5d8f9c")
            .cpu(CPUS[self.cpu].0)
            .memory(MEMS[self.mem].0);
        b = match self.shape {
            Shape::Plain => b,
            Shape::ZoneSpread => b.spread_over(l::ZONE, 1, &app),
            Shape::HostnameSpread => b.spread_over(l::HOSTNAME, 1, &app),
            Shape::RequiredAntiAffinity => b.anti_affinity_to(&app, l::HOSTNAME),
            Shape::PreferredAntiAffinity => b.preferred_anti_affinity_to(100, &app, l::HOSTNAME),
        };
        if self.batch {
            b = b.tolerate(BATCH_TAINT).node_selector(l::NODEPOOL, "batch");
        }
        let mut pod = b.build();
        pod.metadata.owner_references = Some(vec![controller("ReplicaSet", &self.replica_set())]);
        place(&mut pod, node, now);
        pod
    }
}

fn controller(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("{kind}/{name}"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Binds `pod` to `node` (`Running`), or leaves it as the kube-scheduler leaves a pod it
/// cannot place.
fn place(pod: &mut Pod, node: Option<&str>, now: DateTime<Utc>) {
    let time = karpenter_state::conditions::api_time(now);
    let status = match node {
        Some(node) => {
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(node.to_owned());
            }
            json!({"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"}
            ]})
        }
        None => json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/5000 nodes are available"}
        ]}),
    };
    pod.status = serde_json::from_value(status).ok();
    if let Some(c) = pod
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .and_then(|c| c.first_mut())
    {
        c.last_transition_time = time;
    }
}

/// The sizes of the generated cluster.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub nodes: usize,
    /// Bound pods, DaemonSet pods included.
    pub bound_pods: usize,
    pub pending_pods: usize,
    pub seed: u64,
}

/// What was generated, for the report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Counts {
    pub nodes: usize,
    pub bound_pods: usize,
    pub daemonset_pods: usize,
    pub pending_pods: usize,
    pub pending_scale_ups: usize,
    pub deployments: usize,
    pub pdbs: usize,
    pub shapes: BTreeMap<String, usize>,
}

/// One node's plan: its pool and the Deployment pods bound to it (Deployment index, replica).
#[derive(Debug, Clone, Default)]
struct NodePlan {
    batch: bool,
    pods: Vec<(u32, u32)>,
}

/// The generator: the plan of the cluster (small: indices only); objects come from
/// [`Generator::bound_objects`] and [`Generator::pending_objects`].
#[derive(Debug)]
pub struct Generator {
    now: DateTime<Utc>,
    catalog: Vec<InstanceType>,
    deployments: Vec<Deployment>,
    nodes: Vec<NodePlan>,
    /// Pending pods: Deployment index and replica.
    pending: Vec<(u32, u32)>,
    pub counts: Counts,
}

impl Generator {
    pub fn new(sizes: Sizes, catalog: Vec<InstanceType>, now: DateTime<Utc>) -> Self {
        let mut rng = Rng::new(sizes.seed);
        let nodes_n = sizes.nodes.max(1);
        // A tenth of the nodes (at least one) are the tainted pool's.
        let batch_nodes = (nodes_n / 10).max(1).min(nodes_n);
        let mut nodes: Vec<NodePlan> = (0..nodes_n)
            .map(|i| NodePlan {
                batch: i >= nodes_n - batch_nodes,
                pods: Vec::new(),
            })
            .collect();
        let general: Vec<usize> = (0..nodes_n).filter(|&i| !nodes[i].batch).collect();
        let batch: Vec<usize> = (0..nodes_n).filter(|&i| nodes[i].batch).collect();
        let mut cursors = [0usize; 2];
        let daemonset_pods = nodes_n * DAEMONSETS.len();
        let mut to_bind = sizes.bound_pods.saturating_sub(daemonset_pods);
        let mut deployments = Vec::new();
        while to_bind > 0 {
            let mut d = Deployment::draw(deployments.len(), "app", &mut rng);
            let pool = if d.batch { &batch } else { &general };
            // Required anti-affinity cannot have more replicas than its pool has nodes.
            let mut size = d.draw_size(&mut rng).min(to_bind);
            if d.shape == Shape::RequiredAntiAffinity {
                size = size.min(pool.len());
            }
            let cursor = &mut cursors[usize::from(d.batch)];
            for r in 0..size {
                let node = pool[(*cursor + r) % pool.len()];
                nodes[node].pods.push((deployments.len() as u32, r as u32));
            }
            *cursor += size;
            d.replicas = size;
            to_bind -= size;
            deployments.push(d);
        }
        // Pending: a fifth are scale-ups of existing Deployments, the rest new Deployments.
        let mut pending = Vec::with_capacity(sizes.pending_pods);
        let mut scale_ups = 0;
        let existing = deployments.len();
        let mut fresh = 0usize;
        while pending.len() < sizes.pending_pods {
            let left = sizes.pending_pods - pending.len();
            let index = if existing > 0 && rng.intn(5) == 0 {
                rng.intn(existing)
            } else {
                let d = Deployment::draw(fresh, "new", &mut rng);
                fresh += 1;
                deployments.push(d);
                deployments.len() - 1
            };
            let d = &mut deployments[index];
            let size = d.draw_size(&mut rng).min(left);
            for _ in 0..size {
                pending.push((index as u32, d.replicas as u32));
                d.replicas += 1;
            }
            if index < existing {
                scale_ups += size;
            }
        }
        let mut shapes = BTreeMap::new();
        for d in &deployments {
            *shapes.entry(format!("{:?}", d.shape)).or_insert(0) += d.replicas;
        }
        let counts = Counts {
            nodes: nodes_n,
            bound_pods: daemonset_pods + nodes.iter().map(|n| n.pods.len()).sum::<usize>(),
            daemonset_pods,
            pending_pods: pending.len(),
            pending_scale_ups: scale_ups,
            deployments: deployments.len(),
            pdbs: deployments.iter().filter(|d| d.pdb).count(),
            shapes,
        };
        Generator {
            now,
            catalog,
            deployments,
            nodes,
            pending,
            counts,
        }
    }

    /// The catalog every pool offers.
    pub fn catalog(&self) -> &[InstanceType] {
        &self.catalog
    }

    /// The API NodePools (`Ready`, default disruption settings but `consolidateAfter: 30s`).
    pub fn node_pools(&self) -> Vec<karpenter_api::v1::NodePool> {
        let ready = |mut pool: karpenter_api::v1::NodePool| {
            let time = karpenter_state::conditions::api_time(self.now - chrono::Duration::days(1));
            if let Some(time) = time {
                let conditions = pool
                    .status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new);
                for type_ in ["ValidationSucceeded", "NodeClassReady", "Ready"] {
                    karpenter_api::conditions::set(
                        conditions,
                        pool.metadata.generation,
                        type_,
                        "True",
                        type_,
                        "",
                        time.clone(),
                    );
                }
            }
            pool
        };
        let pool = |name: &str, capacity_types: &[&str], taints: Value| {
            serde_json::from_value::<karpenter_api::v1::NodePool>(json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name, "generation": 1},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": l::CAPACITY_TYPE, "operator": "In", "values": capacity_types}
                        ],
                        "taints": taints,
                        "expireAfter": "720h"
                    }},
                    "disruption": {
                        "consolidationPolicy": "WhenEmptyOrUnderutilized",
                        "consolidateAfter": "30s",
                        "budgets": [{"nodes": "10%"}]
                    }
                }
            }))
            .ok()
            .map(ready)
        };
        [
            pool("general", &["on-demand", "spot"], json!([])),
            pool(
                "batch",
                &["on-demand"],
                json!([{"key": BATCH_TAINT, "value": "true", "effect": "NoSchedule"}]),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The bound cluster in the order the controller's first relist applies it (pools,
    /// namespaces, DaemonSets, PDBs, then each node's NodeClaim, Node and pods), one object at
    /// a time.
    pub fn bound_objects(&self) -> impl Iterator<Item = Object> + '_ {
        let pools = self.node_pools().into_iter().map(Object::NodePool);
        let namespaces = (0..10).chain([10]).map(|i| {
            let name = if i == 10 {
                "kube-system".to_owned()
            } else {
                format!("team-{i}")
            };
            Object::Namespace(k8s_openapi::api::core::v1::Namespace {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([(
                        "kubernetes.io/metadata.name".to_owned(),
                        name,
                    )])),
                    ..Default::default()
                },
                ..Default::default()
            })
        });
        let daemonsets = DAEMONSETS
            .iter()
            .filter_map(|(name, cpu, mem)| daemonset(name, cpu, mem))
            .map(Object::DaemonSet);
        let pdbs = self
            .deployments
            .iter()
            .filter(|d| d.pdb)
            .filter_map(pdb)
            .map(Object::PodDisruptionBudget);
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(move |(i, plan)| self.node_objects(i, plan));
        pools
            .chain(namespaces)
            .chain(daemonsets)
            .chain(pdbs)
            .chain(nodes)
    }

    /// The pending pods, one at a time.
    pub fn pending_objects(&self) -> impl Iterator<Item = Object> + '_ {
        self.pending.iter().map(move |&(d, r)| {
            Object::Pod(self.deployments[d as usize].pod(r as usize, None, self.now))
        })
    }

    /// Node `i`'s NodeClaim, Node, DaemonSet pods and Deployment pods.
    fn node_objects(&self, i: usize, plan: &NodePlan) -> Vec<Object> {
        let name = format!("node-{i:05}");
        let mut cpu = 0i64;
        let mut mem = 0i64;
        for (_, c, m) in DAEMONSETS {
            cpu += millis(c);
            mem += mebibytes(m);
        }
        for &(d, _) in &plan.pods {
            let (c, m) = self.deployments[d as usize].requests();
            cpu += c;
            mem += m;
        }
        let pods = plan.pods.len() + DAEMONSETS.len();
        let factor = if i.is_multiple_of(10) { 4.0 } else { 1.15 };
        let it = size_for(&self.catalog, cpu, mem, pods, factor);
        let zone = ZONES[i % ZONES.len()];
        let capacity_type = if plan.batch || zone == ZONES[2] || i.is_multiple_of(2) {
            "on-demand"
        } else {
            "spot"
        };
        let pool = if plan.batch { "batch" } else { "general" };
        let mut out = Vec::with_capacity(pods + 2);
        out.extend(self.node_and_claim(&name, pool, it, zone, capacity_type));
        for (ds, c, m) in DAEMONSETS {
            out.push(Object::Pod(daemon_pod(ds, c, m, &name, self.now)));
        }
        for &(d, r) in &plan.pods {
            out.push(Object::Pod(self.deployments[d as usize].pod(
                r as usize,
                Some(&name),
                self.now,
            )));
        }
        out
    }

    fn node_and_claim(
        &self,
        name: &str,
        pool: &str,
        it: Option<&InstanceType>,
        zone: &str,
        capacity_type: &str,
    ) -> Vec<Object> {
        let Some(it) = it else {
            return Vec::new();
        };
        let created = self.now - chrono::Duration::days(1);
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let capacity: BTreeMap<String, String> = it
            .capacity
            .0
            .iter()
            .map(|(k, q)| (k.clone(), q.to_string()))
            .collect();
        let allocatable: BTreeMap<String, String> = it
            .allocatable()
            .0
            .iter()
            .map(|(k, q)| (k.clone(), q.to_string()))
            .collect();
        let provider_id = format!("kwok://{name}");
        let claim_name = format!("{pool}-{}", &name[5..]);
        let taints = if pool == "batch" {
            json!([{"key": BATCH_TAINT, "value": "true", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let labels = json!({
            l::NODEPOOL: pool,
            l::INSTANCE_TYPE: it.name,
            l::CAPACITY_TYPE: capacity_type,
            l::ZONE: zone,
            l::ARCH: "amd64",
            l::OS: "linux",
            l::HOSTNAME: name,
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
        });
        let condition = |type_: &str| {
            json!({"type": type_, "status": "True", "reason": type_, "message": "",
                   "lastTransitionTime": at(created)})
        };
        let claim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": claim_name,
                "creationTimestamp": at(created),
                "labels": labels,
                "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "name": pool, "uid": pool, "blockOwnerDeletion": true}]
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": l::NODEPOOL, "operator": "In", "values": [pool]},
                    {"key": l::INSTANCE_TYPE, "operator": "In", "values": [it.name]},
                    {"key": l::CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
                    {"key": l::ZONE, "operator": "In", "values": [zone]}
                ],
                "taints": taints,
                "expireAfter": "720h"
            },
            "status": {
                "providerID": provider_id,
                "nodeName": name,
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": [condition("Launched"), condition("Registered"), condition("Initialized")],
                "lastPodEventTime": at(self.now - chrono::Duration::hours(2))
            }
        }));
        let node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": at(created), "labels": labels},
            "spec": {"providerID": provider_id, "taints": taints},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "lastTransitionTime": at(created)}]
            }
        }));
        match (claim, node) {
            (Ok(claim), Ok(node)) => vec![Object::NodeClaim(claim), Object::Node(node)],
            _ => Vec::new(),
        }
    }
}

fn millis(cpu: &str) -> i64 {
    CPUS.iter()
        .find(|(c, _)| *c == cpu)
        .map(|(_, m)| *m)
        .unwrap_or_else(|| cpu.trim_end_matches('m').parse().unwrap_or(0))
}

fn mebibytes(mem: &str) -> i64 {
    mem.trim_end_matches("Mi").parse().unwrap_or(0)
}

/// The smallest type whose allocatable holds `factor` times the requests and the pods (the
/// largest if none does).
fn size_for(
    catalog: &[InstanceType],
    cpu: i64,
    mem: i64,
    pods: usize,
    factor: f64,
) -> Option<&InstanceType> {
    let cpu = (cpu as f64 * factor) as i64;
    let mem = (mem as f64 * factor) as i128 * (1 << 20);
    catalog
        .iter()
        .find(|it| {
            let a = it.allocatable();
            a.get("cpu").millis_i64() >= cpu
                && a.get("memory").value() >= mem
                && a.get("pods").value() >= pods as i128
        })
        .or_else(|| catalog.last())
}

fn daemonset(name: &str, cpu: &str, mem: &str) -> Option<k8s_openapi::api::apps::v1::DaemonSet> {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "main", "image": "x",
                        "resources": {"requests": {"cpu": cpu, "memory": mem}}}]
                }
            }
        }
    }))
    .ok()
}

fn daemon_pod(ds: &str, cpu: &str, mem: &str, node: &str, now: DateTime<Utc>) -> Pod {
    let name = format!("{ds}-{node}");
    let mut pod = PodBuilder::new(&name)
        .namespace("kube-system")
        .uid(&format!("kube-system/{name}"))
        .label("app", ds)
        .cpu(cpu)
        .memory(mem)
        .toleration(k8s_openapi::api::core::v1::Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        })
        .build();
    pod.metadata.owner_references = Some(vec![controller("DaemonSet", ds)]);
    place(&mut pod, Some(node), now);
    pod
}

/// A PDB over the Deployment's pods: one may be disrupted at a time.
fn pdb(d: &Deployment) -> Option<k8s_openapi::api::policy::v1::PodDisruptionBudget> {
    serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": d.name, "namespace": d.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": d.name}}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": d.replicas,
                   "desiredHealthy": d.replicas.saturating_sub(1), "expectedPods": d.replicas}
    }))
    .ok()
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        reason = "test code: a failed expectation is the panic it should be"
    )]

    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn generator(nodes: usize, bound_pods: usize, pending_pods: usize) -> Generator {
        let sizes = Sizes {
            nodes,
            bound_pods,
            pending_pods,
            seed: 7,
        };
        Generator::new(
            sizes,
            karpenter_scheduling::fixtures::fake_instance_types(400),
            karpenter_disruption::fixtures::bench_now(),
        )
    }

    #[test]
    fn the_cluster_has_the_sizes_asked_for() {
        let g = generator(40, 600, 150);
        let objects: Vec<Object> = g.bound_objects().collect();
        let nodes = objects
            .iter()
            .filter(|o| matches!(o, Object::Node(_)))
            .count();
        let claims = objects
            .iter()
            .filter(|o| matches!(o, Object::NodeClaim(_)))
            .count();
        let bound = objects
            .iter()
            .filter(|o| matches!(o, Object::Pod(p) if p.spec.as_ref().is_some_and(|s| s.node_name.is_some())))
            .count();
        assert_eq!((nodes, claims, bound), (40, 40, 600));
        assert_eq!(g.pending_objects().count(), 150);
        assert_eq!(g.counts.daemonset_pods, 80);
        assert!(g.counts.pending_scale_ups > 0, "{:?}", g.counts);
        assert!(g.counts.pdbs > 0, "{:?}", g.counts);
    }

    #[test]
    fn bound_replicas_with_required_anti_affinity_are_on_distinct_nodes_of_their_pool() {
        let g = generator(40, 2000, 0);
        let mut pool_of: BTreeMap<String, String> = BTreeMap::new();
        let mut hosts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut replicas: BTreeMap<String, usize> = BTreeMap::new();
        for object in g.bound_objects() {
            match object {
                Object::Node(n) => {
                    let labels = n.metadata.labels.unwrap_or_default();
                    pool_of.insert(
                        n.metadata.name.unwrap_or_default(),
                        labels[l::NODEPOOL].clone(),
                    );
                }
                Object::Pod(p) if p.metadata.namespace.as_deref() != Some("kube-system") => {
                    let spec = p.spec.as_ref().unwrap();
                    let anti = spec
                        .affinity
                        .as_ref()
                        .and_then(|a| a.pod_anti_affinity.as_ref())
                        .is_some_and(|a| {
                            a.required_during_scheduling_ignored_during_execution
                                .is_some()
                        });
                    let node = spec.node_name.clone().unwrap();
                    let wants_batch = spec.node_selector.is_some();
                    assert_eq!(
                        pool_of[&node] == "batch",
                        wants_batch,
                        "{:?}",
                        p.metadata.name
                    );
                    if anti {
                        let app = p.metadata.labels.as_ref().unwrap()["app"].clone();
                        *replicas.entry(app.clone()).or_default() += 1;
                        hosts.entry(app).or_default().insert(node);
                    }
                }
                _ => {}
            }
        }
        assert!(!replicas.is_empty());
        for (app, n) in replicas {
            assert_eq!(hosts[&app].len(), n, "{app}: replicas share a node");
        }
    }
}
