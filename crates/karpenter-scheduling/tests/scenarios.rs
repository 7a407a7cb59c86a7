//! Data-driven scheduling scenarios: every `tests/scenarios/*.yaml` file describes NodePools
//! (v1 YAML), instance types (compact), existing nodes, DaemonSets, pods (compact or full YAML)
//! and the expected outcome. Each file is its own test, named by its path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, Pod, PodTemplateSpec, Taint, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_scheduling::builders::{PodBuilder, match_labels};
use karpenter_scheduling::fixtures::fake_instance_types;
use karpenter_scheduling::{
    ExistingNode, InstanceType, MinValuesPolicy, NodePool, Offering, Operator, Overhead,
    PreferencePolicy, Quantity, RequirementSpec, ResourceList, SolveCache, SolveInput,
    SolveOptions, SolveResult, solve, solve_cached,
};
use serde::Deserialize;

// ------------------------------------------------------------------------------------------
// NodePool as users write it (karpenter.sh/v1)
// ------------------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct V1NodePool {
    metadata: Meta,
    #[serde(default)]
    spec: V1NodePoolSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct V1NodePoolSpec {
    #[serde(default)]
    weight: Option<i32>,
    #[serde(default)]
    limits: BTreeMap<String, Quantity>,
    #[serde(default)]
    template: V1Template,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct V1Template {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: V1TemplateSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct V1TemplateSpec {
    #[serde(default)]
    requirements: Vec<RequirementSpec>,
    #[serde(default)]
    taints: Vec<Taint>,
    #[serde(default)]
    startup_taints: Vec<Taint>,
}

impl V1NodePool {
    fn into_pool(self) -> NodePool {
        NodePool {
            name: self.metadata.name,
            weight: self.spec.weight.unwrap_or(0),
            requirements: self.spec.template.spec.requirements,
            labels: self.spec.template.metadata.labels,
            taints: self.spec.template.spec.taints,
            startup_taints: self.spec.template.spec.startup_taints,
            limits: ResourceList(self.spec.limits),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Compact instance types
// ------------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactOffering {
    zone: String,
    capacity_type: String,
    price: Option<f64>,
    #[serde(default = "yes")]
    available: bool,
    /// A `reserved` offering's reservation (`karpenter.k8s.aws/capacity-reservation-id`).
    reservation_id: Option<String>,
    /// Its free slots.
    #[serde(default)]
    reservation_capacity: u32,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactIt {
    #[serde(default)]
    name: String,
    /// `fake`: upstream's `fake.InstanceTypes(count)`.
    generate: Option<String>,
    count: Option<usize>,
    #[serde(default)]
    cpu: Option<Quantity>,
    #[serde(default)]
    memory: Option<Quantity>,
    #[serde(default)]
    pods: Option<Quantity>,
    #[serde(default)]
    resources: BTreeMap<String, Quantity>,
    arch: Option<String>,
    os: Option<Vec<String>>,
    zones: Option<Vec<String>>,
    capacity_types: Option<Vec<String>>,
    price: Option<f64>,
    spot_price: Option<f64>,
    #[serde(default)]
    labels: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    requirements: Vec<RequirementSpec>,
    #[serde(default)]
    unavailable: Vec<CompactOffering>,
    offerings: Option<Vec<CompactOffering>>,
    #[serde(default)]
    kube_reserved: BTreeMap<String, Quantity>,
}

const DEFAULT_ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn compact_its(list: Vec<CompactIt>) -> Vec<InstanceType> {
    use karpenter_api::labels as l;
    let mut out = Vec::new();
    for c in list {
        if c.generate.as_deref() == Some("fake") {
            out.extend(fake_instance_types(c.count.unwrap_or(10)));
            continue;
        }
        let price = c.price.unwrap_or(1.0);
        let zones = c
            .zones
            .clone()
            .unwrap_or_else(|| DEFAULT_ZONES.iter().map(|s| s.to_string()).collect());
        let cts = c
            .capacity_types
            .clone()
            .unwrap_or_else(|| vec!["on-demand".into(), "spot".into()]);
        let offerings: Vec<Offering> = match c.offerings {
            Some(list) => list
                .into_iter()
                .map(|o| Offering {
                    zone: o.zone,
                    capacity_type: o.capacity_type,
                    price: o.price.unwrap_or(price),
                    available: o.available,
                    requirements: o
                        .reservation_id
                        .iter()
                        .map(|id| RequirementSpec::is_in(l::CAPACITY_RESERVATION_ID, &[id]))
                        .collect(),
                    reservation_capacity: o.reservation_capacity,
                })
                .collect(),
            None => {
                let mut v = Vec::new();
                for ct in &cts {
                    for z in &zones {
                        let p = if ct == "spot" {
                            c.spot_price.unwrap_or(price * 0.7)
                        } else {
                            price
                        };
                        let available = !c
                            .unavailable
                            .iter()
                            .any(|u| &u.zone == z && &u.capacity_type == ct);
                        v.push(Offering {
                            zone: z.clone(),
                            capacity_type: ct.clone(),
                            price: p,
                            available,
                            requirements: Vec::new(),
                            reservation_capacity: 0,
                        });
                    }
                }
                v
            }
        };
        let mut zs: Vec<String> = offerings.iter().map(|o| o.zone.clone()).collect();
        zs.sort();
        zs.dedup();
        let mut cs: Vec<String> = offerings.iter().map(|o| o.capacity_type.clone()).collect();
        cs.sort();
        cs.dedup();
        let mut requirements = vec![
            RequirementSpec::is_in(l::INSTANCE_TYPE, &[&c.name]),
            RequirementSpec::is_in(l::ARCH, &[c.arch.as_deref().unwrap_or("amd64")]),
            RequirementSpec::is_in(
                l::OS,
                &strs(&c.os.clone().unwrap_or_else(|| vec!["linux".into()])),
            ),
            RequirementSpec::is_in(l::ZONE, &strs(&zs)),
            RequirementSpec::is_in(l::CAPACITY_TYPE, &strs(&cs)),
        ];
        for (k, v) in &c.labels {
            requirements.push(RequirementSpec::is_in(k.clone(), &strs(v)));
        }
        requirements.extend(c.requirements);
        let mut capacity = ResourceList::new()
            .with("cpu", c.cpu.unwrap_or(Quantity::from_units(4)))
            .with("memory", c.memory.unwrap_or(Quantity::from_units(16 << 30)))
            .with("pods", c.pods.unwrap_or(Quantity::from_units(110)));
        for (k, v) in c.resources {
            capacity.set(&k, v);
        }
        out.push(InstanceType {
            name: c.name,
            requirements,
            offerings,
            capacity,
            overhead: Overhead {
                kube_reserved: ResourceList(c.kube_reserved),
                ..Default::default()
            },
        });
    }
    out
}

// ------------------------------------------------------------------------------------------
// Compact pods
// ------------------------------------------------------------------------------------------

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Expr {
    key: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

#[derive(Deserialize, Clone)]
struct Preferred {
    weight: i32,
    terms: Vec<Expr>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct AffinitySpec {
    #[serde(default)]
    selector: BTreeMap<String, String>,
    topology_key: String,
    #[serde(default)]
    anti: bool,
    weight: Option<i32>,
    namespaces: Option<Vec<String>>,
    namespace_selector: Option<LabelSelector>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct SpreadSpec {
    key: String,
    #[serde(default = "one")]
    max_skew: i32,
    #[serde(default)]
    selector: BTreeMap<String, String>,
    when_unsatisfiable: Option<String>,
    min_domains: Option<i32>,
    node_affinity_policy: Option<String>,
    node_taints_policy: Option<String>,
    match_label_keys: Option<Vec<String>>,
}

fn one() -> i32 {
    1
}

#[derive(Deserialize, Clone)]
struct InitSpec {
    #[serde(default)]
    cpu: Option<String>,
    #[serde(default)]
    memory: Option<String>,
    #[serde(default)]
    sidecar: bool,
}

#[derive(Deserialize, Clone, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactPod {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    count: Option<usize>,
    cpu: Option<String>,
    memory: Option<String>,
    #[serde(default)]
    resources: BTreeMap<String, String>,
    #[serde(default)]
    limits: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    required_terms: Vec<Vec<Expr>>,
    #[serde(default)]
    preferred_terms: Vec<Preferred>,
    #[serde(default)]
    tolerations: Vec<Toleration>,
    #[serde(default)]
    affinity: Vec<AffinitySpec>,
    #[serde(default)]
    spread: Vec<SpreadSpec>,
    #[serde(default)]
    host_ports: Vec<i32>,
    #[serde(default)]
    pvcs: Vec<String>,
    #[serde(default)]
    init_containers: Vec<InitSpec>,
    #[serde(default)]
    overhead: BTreeMap<String, String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    phase: Option<String>,
    /// A full Pod manifest instead of the compact fields.
    pod: Option<Pod>,
}

fn build_pod(c: &CompactPod, name: &str, seq: usize) -> Pod {
    if let Some(p) = &c.pod {
        let mut p = p.clone();
        if p.metadata.name.is_none() {
            p.metadata.name = Some(name.to_string());
        }
        if p.metadata.uid.is_none() {
            p.metadata.uid = p.metadata.name.clone();
        }
        if p.metadata.namespace.is_none() {
            p.metadata.namespace = Some("default".into());
        }
        return p;
    }
    let mut b = PodBuilder::new(name).created_nanos(1_000_000 + seq as i64);
    if let Some(ns) = &c.namespace {
        b = b.namespace(ns).uid(&format!("{ns}/{name}"));
    }
    if let Some(cpu) = &c.cpu {
        b = b.cpu(cpu);
    }
    if let Some(m) = &c.memory {
        b = b.memory(m);
    }
    for (k, v) in &c.resources {
        b = b.request(k, v);
    }
    for (k, v) in &c.limits {
        b = b.limit(k, v);
    }
    for (k, v) in &c.labels {
        b = b.label(k, v);
    }
    for (k, v) in &c.node_selector {
        b = b.node_selector(k, v);
    }
    let exprs = |e: &[Expr]| -> Vec<(String, String, Vec<String>)> {
        e.iter()
            .map(|x| (x.key.clone(), x.operator.clone(), x.values.clone()))
            .collect()
    };
    for term in &c.required_terms {
        let owned = exprs(term);
        let values: Vec<Vec<&str>> = owned
            .iter()
            .map(|(_, _, v)| v.iter().map(String::as_str).collect())
            .collect();
        let refs: Vec<(&str, &str, &[&str])> = owned
            .iter()
            .zip(&values)
            .map(|((k, o, _), v)| (k.as_str(), o.as_str(), v.as_slice()))
            .collect();
        b = b.required_term(&refs);
    }
    for p in &c.preferred_terms {
        let owned = exprs(&p.terms);
        let values: Vec<Vec<&str>> = owned
            .iter()
            .map(|(_, _, v)| v.iter().map(String::as_str).collect())
            .collect();
        let refs: Vec<(&str, &str, &[&str])> = owned
            .iter()
            .zip(&values)
            .map(|((k, o, _), v)| (k.as_str(), o.as_str(), v.as_slice()))
            .collect();
        b = b.preferred_term(p.weight, &refs);
    }
    for t in &c.tolerations {
        b = b.toleration(t.clone());
    }
    for a in &c.affinity {
        let sel: Vec<(&str, &str)> = a
            .selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let term = k8s_openapi::api::core::v1::PodAffinityTerm {
            label_selector: Some(match_labels(&sel)),
            topology_key: a.topology_key.clone(),
            namespaces: a.namespaces.clone(),
            namespace_selector: a.namespace_selector.clone(),
            ..Default::default()
        };
        b = b.pod_affinity_term(a.anti, term, a.weight);
    }
    for s in &c.spread {
        let sel: Vec<(&str, &str)> = s
            .selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        b = b.spread(TopologySpreadConstraint {
            topology_key: s.key.clone(),
            max_skew: s.max_skew,
            when_unsatisfiable: s
                .when_unsatisfiable
                .clone()
                .unwrap_or_else(|| "DoNotSchedule".into()),
            label_selector: Some(match_labels(&sel)),
            min_domains: s.min_domains,
            node_affinity_policy: s.node_affinity_policy.clone(),
            node_taints_policy: s.node_taints_policy.clone(),
            match_label_keys: s.match_label_keys.clone(),
        });
    }
    for p in &c.host_ports {
        b = b.host_port(*p);
    }
    for p in &c.pvcs {
        b = b.pvc(p);
    }
    for i in &c.init_containers {
        let mut r = Vec::new();
        if let Some(cpu) = &i.cpu {
            r.push(("cpu", cpu.as_str()));
        }
        if let Some(m) = &i.memory {
            r.push(("memory", m.as_str()));
        }
        b = b.init_container(&r, i.sidecar);
    }
    if !c.overhead.is_empty() {
        let o: Vec<(&str, &str)> = c
            .overhead
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        b = b.overhead(&o);
    }
    if let Some(owner) = &c.owner {
        b = b.owned_by(owner, "owner");
    }
    let mut pod = b.build();
    if let Some(phase) = &c.phase {
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some(phase.clone()),
            ..Default::default()
        });
    }
    pod
}

fn expand_pods(list: &[CompactPod], seq: &mut usize) -> Vec<Pod> {
    let mut out = Vec::new();
    for c in list {
        match c.count {
            Some(n) => {
                for i in 0..n {
                    *seq += 1;
                    out.push(build_pod(c, &format!("{}-{i}", c.name), *seq));
                }
            }
            None => {
                *seq += 1;
                out.push(build_pod(c, &c.name, *seq));
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Existing nodes, DaemonSets, scenario file
// ------------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactNode {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<Taint>,
    allocatable: BTreeMap<String, Quantity>,
    capacity: Option<BTreeMap<String, Quantity>>,
    #[serde(default = "yes")]
    initialized: bool,
    #[serde(default)]
    deleting: bool,
    #[serde(default)]
    pods: Vec<CompactPod>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Scenario {
    #[allow(dead_code)]
    description: String,
    #[serde(default)]
    node_pools: Vec<V1NodePool>,
    #[serde(default)]
    instance_types: Vec<CompactIt>,
    /// Per-NodePool catalogs (pool name -> compact instance types).
    #[serde(default)]
    pool_instance_types: BTreeMap<String, Vec<CompactIt>>,
    #[serde(default)]
    existing_nodes: Vec<CompactNode>,
    #[serde(default)]
    daemon_sets: Vec<CompactPod>,
    #[serde(default)]
    pods: Vec<CompactPod>,
    #[serde(default)]
    pvcs: Vec<PersistentVolumeClaim>,
    #[serde(default)]
    pvs: Vec<PersistentVolume>,
    #[serde(default)]
    storage_classes: Vec<StorageClass>,
    #[serde(default)]
    namespaces: Vec<Meta>,
    #[serde(default)]
    options: ScenarioOptions,
    /// `karpenter.sh/v1alpha1` NodeOverlays (full YAML), applied to every NodePool's types.
    #[serde(default)]
    node_overlays: Vec<karpenter_api::v1alpha1::NodeOverlay>,
    /// Where an earlier batch planned pending pods: pod name -> existing node
    /// (`SolveInput::planned`).
    #[serde(default)]
    planned: BTreeMap<String, String>,
    expect: Expect,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ScenarioOptions {
    preference_policy: Option<PreferencePolicy>,
    min_values_policy: Option<MinValuesPolicy>,
    max_instance_types: Option<usize>,
    /// `false`: upstream's unpinned NodeClaims for zone-level anti-affinity.
    pin_anti_affinity_domains: Option<bool>,
    /// `Strict`: a disruption simulation's handling of reserved offerings.
    reserved_offering_mode: Option<karpenter_scheduling::ReservedOfferingMode>,
    /// `true`: existing nodes ranked as kube-scheduler's `LeastAllocated` ranks them.
    spread_over_existing: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    /// Number of pods placed (new claims + existing nodes).
    scheduled: Option<usize>,
    /// Pods (names) that must be unschedulable; when given, all others must be scheduled.
    unschedulable: Option<Vec<String>>,
    /// Substring every unschedulable reason of these pods must contain.
    #[serde(default)]
    reasons: BTreeMap<String, String>,
    /// New NodeClaims.
    nodes: Option<usize>,
    /// Pods placed on existing nodes: pod -> node name.
    #[serde(default)]
    existing: BTreeMap<String, String>,
    /// Number of pods placed on existing nodes.
    on_existing: Option<usize>,
    /// Instance types every claim's options must be drawn from.
    allowed_instance_types: Option<Vec<String>>,
    /// Instance types no claim may offer.
    #[serde(default)]
    forbidden_instance_types: Vec<String>,
    /// Cheapest option of the claim holding each pod.
    #[serde(default)]
    cheapest: BTreeMap<String, String>,
    /// Label (single-valued requirement) of the node holding each pod: pod -> {key: value}.
    #[serde(default)]
    node_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Pods that must share a node.
    #[serde(default)]
    together: Vec<Vec<String>>,
    /// Pods that must all be on different nodes.
    #[serde(default)]
    apart: Vec<Vec<String>>,
    /// Sorted pod counts per domain of `key` among pods matching `selector`.
    #[serde(default)]
    spread: Vec<SpreadExpect>,
    /// Every new claim's requirement on a key must be a subset of these values.
    #[serde(default)]
    claim_values: BTreeMap<String, Vec<String>>,
    /// Sorted pod counts per new claim.
    pods_per_node: Option<Vec<usize>>,
    /// Claim requests must include these (pod -> resource -> quantity).
    #[serde(default)]
    claim_requests: BTreeMap<String, BTreeMap<String, Quantity>>,
    min_values_relaxed: Option<bool>,
    /// Number of instance-type options of the claim holding each pod.
    #[serde(default)]
    option_count: BTreeMap<String, usize>,
    /// Claims per NodePool.
    #[serde(default)]
    pools: BTreeMap<String, usize>,
    /// NodeOverlays that must not apply (invalid or conflicting); all others must.
    #[serde(default)]
    overlays_not_applied: Vec<String>,
    /// Pending pods per effective zone: a zone, `flexible` or `none`
    /// (`karpenter_scheduler_pending_pods_by_effective_zone_count`).
    effective_zones: Option<BTreeMap<String, usize>>,
    /// Pods left in the solver's queue when it stopped (`karpenter_scheduler_queue_depth`).
    queue_depth: Option<usize>,
    /// New claims per capacity type, for claims whose `karpenter.sh/capacity-type` is one value
    /// (`mixed` counts the others).
    claims_by_capacity_type: Option<BTreeMap<String, usize>>,
    /// Pods deferred for reserved capacity (`Unschedulable.deferred`); every other
    /// unschedulable pod must not be.
    deferred: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct SpreadExpect {
    key: String,
    #[serde(default)]
    selector: BTreeMap<String, String>,
    counts: Vec<usize>,
}

fn build_input(s: Scenario) -> (SolveInput, Expect, Vec<Pod>) {
    let mut seq = 0;
    let mut pods = expand_pods(&s.pods, &mut seq);
    // The batch is what the provisioner gives the solver: pending pods, unless a phase is set.
    for pod in &mut pods {
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase.get_or_insert_with(|| "Pending".into());
    }
    let existing_nodes: Vec<ExistingNode> = s
        .existing_nodes
        .iter()
        .map(|n| ExistingNode {
            name: n.name.clone(),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            allocatable: ResourceList(n.allocatable.clone()),
            capacity: ResourceList(n.capacity.clone().unwrap_or_else(|| n.allocatable.clone())),
            pods: expand_pods(&n.pods, &mut seq)
                .into_iter()
                .map(|p| Arc::new(p.into()))
                .collect(),
            initialized: n.initialized,
            deleting: n.deleting,
            volume_limits: BTreeMap::new(),
            refuses_relocated_pods: false,
        })
        .collect();
    let daemonsets = s
        .daemon_sets
        .iter()
        .map(|d| {
            let pod = build_pod(d, &d.name, 0);
            DaemonSet {
                metadata: ObjectMeta {
                    name: Some(d.name.clone()),
                    ..Default::default()
                },
                spec: DaemonSetSpec {
                    template: PodTemplateSpec {
                        metadata: Some(pod.metadata),
                        spec: pod.spec,
                    },
                    ..Default::default()
                },
                status: None,
            }
        })
        .collect();
    let mut input = SolveInput {
        node_pools: s
            .node_pools
            .into_iter()
            .map(V1NodePool::into_pool)
            .collect(),
        default_instance_types: compact_its(s.instance_types),
        instance_types: s
            .pool_instance_types
            .into_iter()
            .map(|(k, v)| (k, compact_its(v)))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into(),
        existing_nodes,
        daemonsets,
        pods: pods.iter().cloned().map(|p| Arc::new(p.into())).collect(),
        persistent_volume_claims: s.pvcs,
        persistent_volumes: s.pvs,
        storage_classes: s.storage_classes,
        namespaces: s
            .namespaces
            .into_iter()
            .map(|m| Namespace {
                metadata: ObjectMeta {
                    name: Some(m.name),
                    labels: Some(m.labels),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect(),
        options: SolveOptions::default(),
        relocating: Default::default(),
        planned: Default::default(),
    };
    for (pod, node) in &s.planned {
        let uid = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod.as_str()))
            .map(|p| karpenter_scheduling::PodRecord::from(p.clone()).uid_or_key())
            .unwrap_or_else(|| panic!("planned: no pod named {pod}"));
        input.planned.insert(uid, node.clone());
    }
    if let Some(p) = s.options.preference_policy {
        input.options.preference_policy = p;
    }
    if let Some(p) = s.options.min_values_policy {
        input.options.min_values_policy = p;
    }
    if let Some(m) = s.options.max_instance_types {
        input.options.max_instance_types = m;
    }
    if let Some(mode) = s.options.reserved_offering_mode {
        input.options.reserved_offering_mode = mode;
    }
    if let Some(pin) = s.options.pin_anti_affinity_domains {
        input.options.pin_anti_affinity_domains = pin;
    }
    if let Some(spread) = s.options.spread_over_existing {
        input.options.spread_over_existing = spread;
    }
    if !s.node_overlays.is_empty() {
        // Overlays apply per NodePool: every pool gets its own copy of the default types.
        let mut types = (*input.instance_types).clone();
        for pool in &input.node_pools {
            types
                .entry(pool.name.clone())
                .or_insert_with(|| input.default_instance_types.clone());
        }
        let outcome =
            karpenter_scheduling::overlay::apply(&s.node_overlays, &input.node_pools, &mut types);
        for (name, verdict) in &outcome.verdicts {
            let applied = verdict.is_applied();
            let expected = !s.expect.overlays_not_applied.contains(name);
            assert_eq!(applied, expected, "overlay {name}: {verdict:?}");
        }
        input.instance_types = types.into();
    }
    (input, s.expect, pods)
}

// ------------------------------------------------------------------------------------------
// Checking
// ------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Claim(usize),
    Node(String),
}

fn check(input: &SolveInput, result: &SolveResult, expect: &Expect, pods: &[Pod]) -> Vec<String> {
    let mut errs = Vec::new();
    let mut place: BTreeMap<String, Place> = BTreeMap::new();
    for (i, c) in result.new_node_claims.iter().enumerate() {
        for p in &c.pods {
            place.insert(p.name.clone(), Place::Claim(i));
        }
    }
    for e in &result.existing_placements {
        place.insert(e.pod.name.clone(), Place::Node(e.node.clone()));
    }
    let unsched: BTreeMap<String, String> = result
        .unschedulable
        .iter()
        .map(|u| (u.pod.name.clone(), u.reason.clone()))
        .collect();
    let describe_unsched = || format!("{unsched:?}");
    if let Some(want) = &expect.effective_zones {
        let got = &result.stats.pending_by_effective_zone;
        if got != want {
            errs.push(format!(
                "pending pods by effective zone {got:?}, expected {want:?}"
            ));
        }
    }
    if let Some(want) = expect.queue_depth
        && result.stats.queue_depth != want
    {
        errs.push(format!(
            "queue depth {}, expected {want}",
            result.stats.queue_depth
        ));
    }
    if let Some(n) = expect.scheduled
        && result.scheduled_pods() != n
    {
        errs.push(format!(
            "scheduled {} pods, expected {n}; unschedulable: {}",
            result.scheduled_pods(),
            describe_unsched()
        ));
    }
    if let Some(list) = &expect.unschedulable {
        let want: BTreeSet<&String> = list.iter().collect();
        let got: BTreeSet<&String> = unsched.keys().collect();
        if want != got {
            errs.push(format!(
                "unschedulable pods {got:?}, expected {want:?}; reasons: {}",
                describe_unsched()
            ));
        }
    }
    for (pod, substring) in &expect.reasons {
        match unsched.get(pod) {
            Some(r) if r.contains(substring.as_str()) => {}
            Some(r) => errs.push(format!(
                "reason for {pod} is {r:?}, expected to contain {substring:?}"
            )),
            None => errs.push(format!(
                "{pod} was scheduled, expected reason {substring:?}"
            )),
        }
    }
    if let Some(n) = expect.nodes
        && result.new_node_claims.len() != n
    {
        errs.push(format!(
            "{} new nodeclaims, expected {n}: {:?}",
            result.new_node_claims.len(),
            result
                .new_node_claims
                .iter()
                .map(|c| (
                    c.pods.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                    c.instance_type_options.first().map(|o| o.name.clone())
                ))
                .collect::<Vec<_>>()
        ));
    }
    for (pod, node) in &expect.existing {
        if place.get(pod) != Some(&Place::Node(node.clone())) {
            errs.push(format!(
                "{pod} placed at {:?}, expected existing node {node}",
                place.get(pod)
            ));
        }
    }
    if let Some(n) = expect.on_existing
        && result.existing_placements.len() != n
    {
        errs.push(format!(
            "{} pods on existing nodes, expected {n}",
            result.existing_placements.len()
        ));
    }
    for c in &result.new_node_claims {
        let names: Vec<&str> = c.instance_type_options.iter().map(|o| &*o.name).collect();
        if let Some(allowed) = &expect.allowed_instance_types
            && let Some(bad) = names.iter().find(|n| !allowed.iter().any(|a| a == *n))
        {
            errs.push(format!("claim offers {bad}, allowed only {allowed:?}"));
        }
        if let Some(bad) = names
            .iter()
            .find(|n| expect.forbidden_instance_types.iter().any(|f| f == *n))
        {
            errs.push(format!("claim offers forbidden {bad}"));
        }
        for (key, allowed) in &expect.claim_values {
            let all = c.requirements_with_instance_types();
            let req = all.iter().find(|r| &r.key == key);
            match req {
                Some(r)
                    if r.operator == Operator::In
                        && r.values.iter().all(|v| allowed.contains(v)) => {}
                other => errs.push(format!(
                    "claim requirement on {key} is {other:?}, expected values within {allowed:?}"
                )),
            }
        }
        if let Some(relaxed) = expect.min_values_relaxed
            && c.min_values_relaxed != relaxed
        {
            errs.push(format!(
                "claim minValues relaxed = {}, expected {relaxed}",
                c.min_values_relaxed
            ));
        }
    }
    if let Some(want) = &expect.deferred {
        let got: BTreeSet<String> = result
            .unschedulable
            .iter()
            .filter(|u| u.deferred)
            .map(|u| u.pod.name.clone())
            .collect();
        let want: BTreeSet<String> = want.iter().cloned().collect();
        if got != want {
            errs.push(format!("deferred pods {got:?}, expected {want:?}"));
        }
    }
    if let Some(want) = &expect.claims_by_capacity_type {
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for c in &result.new_node_claims {
            let ct = c
                .requirements
                .iter()
                .find(|r| r.key == karpenter_api::labels::CAPACITY_TYPE)
                .filter(|r| r.operator == Operator::In && r.values.len() == 1)
                .map_or_else(|| "mixed".to_owned(), |r| r.values[0].clone());
            *got.entry(ct).or_default() += 1;
        }
        if &got != want {
            errs.push(format!(
                "claims by capacity type {got:?}, expected {want:?}"
            ));
        }
    }
    let claim_of = |pod: &str| match place.get(pod) {
        Some(Place::Claim(i)) => result.new_node_claims.get(*i),
        _ => None,
    };
    for (pod, it) in &expect.cheapest {
        match claim_of(pod).and_then(|c| c.instance_type_options.first()) {
            Some(o) if &*o.name == it.as_str() => {}
            other => errs.push(format!(
                "cheapest option for {pod} is {:?}, expected {it}",
                other.map(|o| &o.name)
            )),
        }
    }
    for (pod, n) in &expect.option_count {
        match claim_of(pod) {
            Some(c) if c.instance_type_options.len() == *n => {}
            other => errs.push(format!(
                "{pod}'s claim has {:?} options, expected {n}",
                other.map(|c| c.instance_type_options.len())
            )),
        }
    }
    for (pod, want) in &expect.claim_requests {
        match claim_of(pod) {
            Some(c) => {
                for (k, q) in want {
                    if c.requests.get(k) != *q {
                        errs.push(format!(
                            "{pod}'s claim requests {k}={}, expected {q}",
                            c.requests.get(k)
                        ));
                    }
                }
            }
            None => errs.push(format!("{pod} is not on a new claim")),
        }
    }
    let node_label = |pod: &str, key: &str| -> Option<String> {
        match place.get(pod)? {
            Place::Claim(i) => {
                let c = result.new_node_claims.get(*i)?;
                if key == karpenter_api::labels::HOSTNAME {
                    return Some(format!("claim-{i}"));
                }
                let r = c.requirements.iter().find(|r| r.key == key)?;
                (r.operator == Operator::In && r.values.len() == 1).then(|| r.values[0].clone())
            }
            Place::Node(n) => {
                let node = input.existing_nodes.iter().find(|e| &e.name == n)?;
                if key == karpenter_api::labels::HOSTNAME {
                    return Some(node.labels.get(key).cloned().unwrap_or_else(|| n.clone()));
                }
                node.labels.get(key).cloned()
            }
        }
    };
    for (pod, labels) in &expect.node_labels {
        for (k, v) in labels {
            let got = node_label(pod, k);
            if got.as_deref() != Some(v.as_str()) {
                errs.push(format!("{pod}'s node has {k}={got:?}, expected {v}"));
            }
        }
    }
    for group in &expect.together {
        let places: BTreeSet<Option<&Place>> = group.iter().map(|p| place.get(p)).collect();
        if places.len() != 1 || places.contains(&None) {
            errs.push(format!("pods {group:?} should share a node: {places:?}"));
        }
    }
    for group in &expect.apart {
        let places: Vec<Option<&Place>> = group.iter().map(|p| place.get(p)).collect();
        let distinct: BTreeSet<&Option<&Place>> = places.iter().collect();
        if distinct.len() != places.len() || places.contains(&None) {
            errs.push(format!(
                "pods {group:?} should be on different nodes: {places:?}"
            ));
        }
    }
    for s in &expect.spread {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let all_pods = pods.iter().map(|p| (&p.metadata, p.status.as_ref())).chain(
            input
                .existing_nodes
                .iter()
                .flat_map(|n| n.pods.iter().map(|p| (&p.metadata, p.status.as_ref()))),
        );
        for (metadata, status) in all_pods {
            let phase = status.and_then(|st| st.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let labels = metadata.labels.clone().unwrap_or_default();
            if !s.selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                continue;
            }
            let name = metadata.name.clone().unwrap_or_default();
            let domain = if place.contains_key(&name) {
                node_label(&name, &s.key)
            } else {
                input
                    .existing_nodes
                    .iter()
                    .find(|n| n.pods.iter().any(|q| q.metadata.name == metadata.name))
                    .and_then(|n| n.labels.get(&s.key).cloned())
            };
            match domain {
                Some(d) => *counts.entry(d).or_default() += 1,
                None if place.contains_key(&name) => {
                    errs.push(format!("{name} has no single {} domain", s.key));
                }
                None => {}
            }
        }
        let mut got: Vec<usize> = counts.values().copied().collect();
        got.sort_unstable();
        if got != s.counts {
            errs.push(format!(
                "spread over {} is {got:?} ({counts:?}), expected {:?}",
                s.key, s.counts
            ));
        }
    }
    if let Some(want) = &expect.pods_per_node {
        let mut got: Vec<usize> = result
            .new_node_claims
            .iter()
            .map(|c| c.pods.len())
            .collect();
        got.sort_unstable();
        if &got != want {
            errs.push(format!("pods per new node {got:?}, expected {want:?}"));
        }
    }
    for (pool, n) in &expect.pools {
        let got = result
            .new_node_claims
            .iter()
            .filter(|c| &c.node_pool == pool)
            .count();
        if got != *n {
            errs.push(format!("{got} claims from nodepool {pool}, expected {n}"));
        }
    }
    errs
}

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let scenario: Scenario = serde_saphyr::from_str(&text).map_err(|e| format!("parse: {e}"))?;
    let (input, expect, pods) = build_input(scenario);
    let result = solve(&input);
    let mut errs = check(&input, &result, &expect, &pods);
    // The same input through a cache a first solve filled (a disruption pass's simulations):
    // interned strings, dimensions, shapes and existing pods reused give the same answer.
    let mut cache = SolveCache::default();
    for round in ["filling", "filled"] {
        if solve_cached(&input, &mut cache) != result {
            errs.push(format!(
                "a solve through a {round} cache answers differently"
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n    "))
    }
}

/// One test per `tests/scenarios/*.yaml` file, named by its path from the crate root, so
/// `cargo test -p karpenter-scheduling --test scenarios -- --list` shows each and a filter such
/// as `-- affinity-arch` runs one.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    let mut trials: Vec<libtest_mimic::Trial> = files
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            libtest_mimic::Trial::test(name, move || run_file(&path).map_err(Into::into))
        })
        .collect();
    if trials.is_empty() {
        let message = format!("no scenario files found in {}", dir.display());
        trials.push(libtest_mimic::Trial::test(
            "tests/scenarios holds scenario files",
            move || Err(message.into()),
        ));
    }
    libtest_mimic::run(&args, trials).exit();
}
