//! Data-driven disruption scenarios: every `tests/scenarios/*.yaml` file describes a cluster
//! (NodePools as v1 YAML, a compact instance-type catalog, nodes with their pods, PDBs, `now`)
//! and what one disruption pass must decide, or why it must do nothing. Optional sections
//! change the cluster and re-validate the command, or list the NodeClaims that expired. Each file
//! is its own test, named by its path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels as l;
use karpenter_api::v1::NodePool;
use karpenter_disruption::{Decision, DriftMark, Features, NodeState, Pdb, Snapshot};
use karpenter_scheduling::builders::{InstanceTypeBuilder, PodBuilder};
use karpenter_scheduling::{InstanceType, Operator, ResourceList};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Scenario {
    description: String,
    #[serde(deserialize_with = "rfc3339")]
    now: DateTime<Utc>,
    #[serde(default)]
    features: FeaturesSpec,
    #[serde(default)]
    node_pools: Option<Vec<Value>>,
    instance_types: Vec<TypeSpec>,
    #[serde(default)]
    nodes: Vec<NodeSpec>,
    #[serde(default)]
    pending_pods: Vec<PodSpec>,
    /// Nodes the provisioner's last batch placed CapacityBuffer virtual pods on.
    #[serde(default)]
    buffer_nodes: Vec<String>,
    #[serde(default)]
    pdbs: Vec<PdbSpec>,
    expect: Expect,
    #[serde(default)]
    validate: Option<ValidateSpec>,
    #[serde(default)]
    expired: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FeaturesSpec {
    #[serde(default)]
    spot_to_spot_consolidation: bool,
    #[serde(default)]
    terminate_first_drift: bool,
}

fn default_zones() -> Vec<String> {
    vec!["zone-a".into(), "zone-b".into()]
}

fn default_pods() -> u32 {
    110
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TypeSpec {
    name: String,
    cpu: String,
    memory: String,
    #[serde(default = "default_pods")]
    pods: u32,
    /// On-demand price (no on-demand offering when absent).
    #[serde(default)]
    od: Option<f64>,
    /// Spot price (no spot offering when absent).
    #[serde(default)]
    spot: Option<f64>,
    #[serde(default = "default_zones")]
    zones: Vec<String>,
    /// Pools offering the type (all when absent).
    #[serde(default)]
    pools: Option<Vec<String>>,
    /// Capacity reservations of the type (`reserved` offerings).
    #[serde(default)]
    reserved: Vec<ReservedSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReservedSpec {
    /// `karpenter.k8s.aws/capacity-reservation-id`.
    id: String,
    price: f64,
    /// Free slots.
    slots: u32,
    #[serde(default = "zone_a")]
    zone: String,
}

fn yes() -> bool {
    true
}

fn default_pool() -> Option<String> {
    Some("default".into())
}

fn on_demand() -> String {
    "on-demand".into()
}

fn zone_a() -> String {
    "zone-a".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeSpec {
    name: String,
    /// NodePool; `null` for a node Karpenter does not manage.
    #[serde(default = "default_pool")]
    pool: Option<String>,
    #[serde(rename = "type")]
    instance_type: String,
    #[serde(default = "on_demand")]
    capacity_type: String,
    #[serde(default = "zone_a")]
    zone: String,
    #[serde(default = "yes")]
    initialized: bool,
    #[serde(default = "yes")]
    ready: bool,
    #[serde(default)]
    marked_for_deletion: bool,
    #[serde(default)]
    deleting: bool,
    #[serde(default)]
    queued: bool,
    /// Nominated for this long after `now`.
    #[serde(default)]
    nominated_for: Option<String>,
    #[serde(default)]
    drifted: Option<DriftSpec>,
    /// Last pod event this long before `now`.
    #[serde(default)]
    last_pod_event_ago: Option<String>,
    /// Age (default 24h).
    #[serde(default)]
    age: Option<String>,
    #[serde(default)]
    expire_after: Option<String>,
    #[serde(default)]
    termination_grace_period: Option<String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    price: Option<f64>,
    #[serde(default)]
    pods: Vec<PodSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DriftSpec {
    #[serde(default = "drift_reason")]
    reason: String,
    /// Drifted this long before `now`.
    ago: String,
}

fn drift_reason() -> String {
    "NodePoolDrifted".into()
}

fn default_ns() -> String {
    "default".into()
}

fn default_cpu() -> String {
    "100m".into()
}

fn default_mem() -> String {
    "128Mi".into()
}

fn default_owner() -> String {
    "ReplicaSet".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodSpec {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    #[serde(default = "default_cpu")]
    cpu: String,
    #[serde(default = "default_mem")]
    memory: String,
    /// Owner kind (`ReplicaSet`, `StatefulSet`, `DaemonSet`, `Node` for mirror pods, `none`).
    #[serde(default = "default_owner")]
    owner: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    deleting: bool,
    #[serde(default = "yes")]
    ready: bool,
    /// Started this long before `now` (default: the node's age).
    #[serde(default)]
    started_ago: Option<String>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    /// Required anti-affinity to pods with these labels, on this topology key.
    #[serde(default)]
    anti_affinity: Option<AntiAffinitySpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AntiAffinitySpec {
    labels: BTreeMap<String, String>,
    topology_key: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PdbSpec {
    name: String,
    #[serde(default = "default_ns")]
    namespace: String,
    selector: BTreeMap<String, String>,
    allowed: i32,
    #[serde(default)]
    unhealthy_pod_eviction_policy: Option<String>,
    #[serde(default)]
    max_unavailable: Option<String>,
    #[serde(default)]
    min_available: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    /// A method name, or `none`.
    method: String,
    #[serde(default)]
    candidates: Option<Vec<String>>,
    /// Each command's candidates, in the order the pass decided them.
    #[serde(default)]
    commands: Option<Vec<Vec<String>>>,
    #[serde(default)]
    candidate_count: Option<usize>,
    /// `delete` or `replace`.
    #[serde(default)]
    action: Option<String>,
    /// The command's terminate-first reason (`no-reserved-capacity`, `static-at-limit`), or
    /// `none`.
    #[serde(default)]
    terminate_first: Option<String>,
    #[serde(default)]
    replacements: Option<usize>,
    /// Every replacement option is one of these.
    #[serde(default)]
    allowed_types: Option<Vec<String>>,
    #[serde(default)]
    forbidden_types: Vec<String>,
    #[serde(default)]
    includes_types: Vec<String>,
    #[serde(default)]
    option_count: Option<usize>,
    /// The replacement's capacity-type requirement values.
    #[serde(default)]
    capacity_types: Option<Vec<String>>,
    #[serde(default)]
    min_savings: Option<f64>,
    /// Node -> a substring of why it was not disrupted.
    #[serde(default)]
    reasons: BTreeMap<String, String>,
    #[serde(default)]
    explanation_contains: Option<String>,
    /// The Balanced NodePools whose scores approved the command (upstream's
    /// `ConsolidationApproved`).
    #[serde(default)]
    approved_by: Option<Vec<String>>,
    /// The consolidation moves counted (`karpenter_consolidation_moves_total`), each
    /// `<approved|rejected> <nodepool> <policy>` and, for a Balanced pool,
    /// ` score <s> <its own verdict>` (`karpenter_consolidation_score`).
    #[serde(default)]
    moves: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ValidateSpec {
    /// Time between the decision and validation (default 15s).
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    changes: Vec<Change>,
    /// `ok`, or a substring of the rejection.
    expect: String,
    /// With `ok`: the candidates the validated command still holds (emptiness keeps survivors).
    #[serde(default)]
    survivors: Option<Vec<String>>,
    /// The verdicts of the pass's later commands, validated together with the first
    /// (`ok`, or a substring of the rejection), in order.
    #[serde(default)]
    then: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum Change {
    AddPod {
        node: String,
        pod: PodSpec,
    },
    AnnotatePod {
        node: String,
        pod: String,
        key: String,
        value: String,
    },
    AnnotateNode {
        node: String,
        key: String,
        value: String,
    },
    Nominate {
        node: String,
        r#for: String,
    },
    AddPdb(PdbSpec),
    MarkForDeletion {
        node: String,
    },
    SetNotReady {
        node: String,
    },
    RemoveInstanceTypes(Vec<String>),
    SetBudgets {
        pool: String,
        budgets: Value,
    },
    AddPendingPod(PodSpec),
}

fn rfc3339<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let s = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(serde::de::Error::custom)
}

fn dur(s: &str) -> Result<chrono::Duration, String> {
    if let Some(positive) = s.strip_prefix('-') {
        return dur(positive).map(|d| -d);
    }
    let d = karpenter_api::duration::parse_go_duration(s).map_err(|e| format!("{s}: {e}"))?;
    chrono::Duration::from_std(d).map_err(|e| e.to_string())
}

fn time(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn instance_type(t: &TypeSpec) -> InstanceType {
    let mut b = InstanceTypeBuilder::new(&t.name)
        .resource("cpu", &t.cpu)
        .resource("memory", &t.memory)
        .resource("pods", &t.pods.to_string())
        .requirement(l::ARCH, Operator::In, &["amd64"])
        .requirement(l::OS, Operator::In, &["linux"]);
    for z in &t.zones {
        if let Some(p) = t.spot {
            b = b.offering(z, "spot", p, true);
        }
        if let Some(p) = t.od {
            b = b.offering(z, "on-demand", p, true);
        }
    }
    for r in &t.reserved {
        b = b.reserved_offering(&r.zone, r.price, &r.id, r.slots);
    }
    b.build()
}

fn pool(v: &Value) -> Result<NodePool, String> {
    let mut v = v.clone();
    v["apiVersion"] = json!("karpenter.sh/v1");
    v["kind"] = json!("NodePool");
    if v["spec"].is_null() {
        v["spec"] = json!({});
    }
    if v["spec"]["template"].is_null() {
        v["spec"]["template"] = json!({});
    }
    if v["spec"]["template"]["spec"].is_null() {
        v["spec"]["template"]["spec"] = json!({});
    }
    let spec = &mut v["spec"]["template"]["spec"];
    if spec["nodeClassRef"].is_null() {
        spec["nodeClassRef"] =
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"});
    }
    if spec["requirements"].is_null() {
        spec["requirements"] = json!([]);
    }
    serde_json::from_value(v).map_err(|e| format!("nodePool: {e}"))
}

fn default_pools() -> Vec<Value> {
    vec![json!({
        "metadata": {"name": "default"},
        "spec": {"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}}
    })]
}

fn build_pod(
    p: &PodSpec,
    node: Option<&str>,
    now: DateTime<Utc>,
    default_start: DateTime<Utc>,
) -> Result<Pod, String> {
    let mut b = PodBuilder::new(&p.name)
        .namespace(&p.namespace)
        .uid(&format!("{}/{}", p.namespace, p.name))
        .cpu(&p.cpu)
        .memory(&p.memory);
    if p.owner != "none" {
        b = b.owned_by(&p.owner, &format!("{}-owner", p.name));
    }
    for (k, v) in &p.labels {
        b = b.label(k, v);
    }
    for (k, v) in &p.node_selector {
        b = b.node_selector(k, v);
    }
    if let Some(a) = &p.anti_affinity {
        let sel: Vec<(&str, &str)> = a
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        b = b.anti_affinity_to(&sel, &a.topology_key);
    }
    let mut pod = b.build();
    if !p.annotations.is_empty() {
        pod.metadata.annotations = Some(p.annotations.clone());
    }
    if p.deleting {
        pod.metadata.deletion_timestamp = Some(time(now));
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.priority = p.priority;
        spec.node_name = node.map(str::to_owned);
    }
    let started = match &p.started_ago {
        Some(a) => now - dur(a)?,
        None => default_start,
    };
    pod.status = Some(PodStatus {
        phase: Some(
            p.phase
                .clone()
                .unwrap_or_else(|| if node.is_some() { "Running" } else { "Pending" }.to_owned()),
        ),
        start_time: node.map(|_| time(started)),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if p.ready && node.is_some() {
                "True"
            } else {
                "False"
            }
            .into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    Ok(pod)
}

fn pdb(p: &PdbSpec) -> Pdb {
    Pdb {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        selector: LabelSelector {
            match_labels: Some(p.selector.clone()),
            match_expressions: None,
        },
        disruptions_allowed: p.allowed,
        unhealthy_pod_eviction_policy: p.unhealthy_pod_eviction_policy.clone(),
        max_unavailable: p.max_unavailable.clone(),
        min_available: p.min_available.clone(),
    }
}

fn node(n: &NodeSpec, types: &[TypeSpec], now: DateTime<Utc>) -> Result<NodeState, String> {
    let created = now - dur(n.age.as_deref().unwrap_or("24h"))?;
    let mut s = NodeState::new(&n.name, created);
    let t = types
        .iter()
        .find(|t| t.name == n.instance_type)
        .ok_or_else(|| format!("node {}: unknown type {}", n.name, n.instance_type))?;
    let capacity = ResourceList::parse([
        ("cpu", t.cpu.as_str()),
        ("memory", t.memory.as_str()),
        ("pods", t.pods.to_string().as_str()),
    ])
    .map_err(|e| e.to_string())?;
    s.capacity = capacity.clone();
    s.allocatable = capacity;
    s.labels
        .insert(l::INSTANCE_TYPE.into(), n.instance_type.clone());
    s.labels
        .insert(l::CAPACITY_TYPE.into(), n.capacity_type.clone());
    s.labels.insert(l::ZONE.into(), n.zone.clone());
    s.labels.insert(l::ARCH.into(), "amd64".into());
    s.labels.insert(l::OS.into(), "linux".into());
    if let Some(p) = &n.pool {
        s.labels.insert(l::NODEPOOL.into(), p.clone());
        s.node_claim = Some(format!("{}-claim", n.name));
    }
    s.labels.extend(n.labels.clone());
    s.annotations = n.annotations.clone();
    s.price = n.price;
    s.initialized = n.initialized;
    s.ready = n.ready;
    s.marked_for_deletion = n.marked_for_deletion;
    s.deleting = n.deleting;
    s.queued = n.queued;
    s.nominated_until = n
        .nominated_for
        .as_deref()
        .map(dur)
        .transpose()?
        .map(|d| now + d);
    s.drifted = match &n.drifted {
        Some(d) => Some(DriftMark {
            reason: d.reason.clone(),
            since: now - dur(&d.ago)?,
        }),
        None => None,
    };
    s.last_pod_event = n
        .last_pod_event_ago
        .as_deref()
        .map(dur)
        .transpose()?
        .map(|d| now - d);
    s.expire_after = n
        .expire_after
        .as_deref()
        .map(karpenter_api::duration::parse_go_duration)
        .transpose()
        .map_err(|e| e.to_string())?;
    s.termination_grace_period = n
        .termination_grace_period
        .as_deref()
        .map(karpenter_api::duration::parse_go_duration)
        .transpose()
        .map_err(|e| e.to_string())?;
    for p in &n.pods {
        s.pods.push(std::sync::Arc::new(
            build_pod(p, Some(&n.name), now, created)?.into(),
        ));
    }
    Ok(s)
}

fn snapshot(sc: &Scenario) -> Result<Snapshot, String> {
    let pools: Vec<NodePool> = sc
        .node_pools
        .clone()
        .unwrap_or_else(default_pools)
        .iter()
        .map(pool)
        .collect::<Result<_, _>>()?;
    let mut instance_types: BTreeMap<String, Vec<InstanceType>> = BTreeMap::new();
    for p in &pools {
        let name = p.metadata.name.clone().unwrap_or_default();
        let offered = sc
            .instance_types
            .iter()
            .filter(|t| t.pools.as_ref().is_none_or(|ps| ps.contains(&name)))
            .map(instance_type)
            .collect();
        instance_types.insert(name, offered);
    }
    Ok(Snapshot {
        node_pools: pools,
        instance_types: instance_types.into(),
        nodes: sc
            .nodes
            .iter()
            .map(|n| node(n, &sc.instance_types, sc.now))
            .collect::<Result<_, _>>()?,
        pdbs: sc.pdbs.iter().map(pdb).collect(),
        pending_pods: sc
            .pending_pods
            .iter()
            .map(|p| build_pod(p, None, sc.now, sc.now).map(|p| std::sync::Arc::new(p.into())))
            .collect::<Result<_, _>>()?,
        features: Features {
            spot_to_spot_consolidation: sc.features.spot_to_spot_consolidation,
            terminate_first_drift: sc.features.terminate_first_drift,
            ..Features::default()
        },
        buffer_nodes: sc.buffer_nodes.iter().cloned().collect(),
        ..Default::default()
    })
}

fn check(sc: &Scenario, d: &Decision) -> Vec<String> {
    let mut errs = Vec::new();
    let e = &sc.expect;
    let cmd = d.commands.first();
    let method = cmd.map_or("none", |c| c.method.as_str());
    if method != e.method {
        errs.push(format!("method: want {}, got {method}", e.method));
    }
    if let Some(want) = &e.candidates {
        let mut want = want.clone();
        want.sort();
        let mut got: Vec<String> = d
            .commands
            .iter()
            .flat_map(|c| c.candidates.iter().map(|c| c.node.clone()))
            .collect();
        got.sort();
        if want != got {
            errs.push(format!("candidates: want {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.approved_by {
        let got: Vec<String> = cmd
            .iter()
            .flat_map(|c| c.balanced.iter().map(|b| b.node_pool.clone()))
            .collect();
        if *want != got {
            errs.push(format!("approved by: want {want:?}, got {got:?}"));
        }
        if cmd.is_some_and(|c| c.balanced.iter().any(|b| b.score < 0.5)) {
            errs.push("an approving score is below the threshold".to_owned());
        }
    }
    if let Some(want) = &e.moves {
        let verdict = |approved: bool| if approved { "approved" } else { "rejected" };
        let got: Vec<String> = d
            .moves
            .iter()
            .map(|m| {
                let mut line = format!(
                    "{} {} {}",
                    verdict(m.approved),
                    m.node_pool,
                    m.policy.as_str()
                );
                if let Some(s) = &m.score {
                    line.push_str(&format!(" score {:.2} {}", s.score, verdict(s.approved())));
                }
                line
            })
            .collect();
        if *want != got {
            errs.push(format!("moves: want {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.commands {
        let got: Vec<Vec<String>> = d
            .commands
            .iter()
            .map(|c| c.candidate_names().into_iter().map(str::to_owned).collect())
            .collect();
        if *want != got {
            errs.push(format!("commands: want {want:?}, got {got:?}"));
        }
    }
    if let Some(n) = e.candidate_count {
        let got: usize = d.commands.iter().map(|c| c.candidates.len()).sum();
        if got != n {
            errs.push(format!("candidate count: want {n}, got {got}"));
        }
    }
    if let (Some(a), Some(c)) = (&e.action, cmd) {
        let got = if c.is_delete() { "delete" } else { "replace" };
        if a != got {
            errs.push(format!("action: want {a}, got {got}"));
        }
    }
    if let Some(want) = &e.terminate_first {
        let got = cmd
            .and_then(|c| c.terminate_first)
            .map_or("none", |t| t.as_str());
        if want != got {
            errs.push(format!("terminateFirst: want {want}, got {got}"));
        }
    }
    if let (Some(n), Some(c)) = (e.replacements, cmd)
        && c.replacements.len() != n
    {
        errs.push(format!(
            "replacements: want {n}, got {}",
            c.replacements.len()
        ));
    }
    let options: Vec<&str> = cmd
        .iter()
        .flat_map(|c| c.replacements.iter())
        .flat_map(|r| r.instance_type_options.iter().map(|o| &*o.name))
        .collect();
    if let Some(allowed) = &e.allowed_types
        && let Some(bad) = options.iter().find(|o| !allowed.iter().any(|a| a == *o))
    {
        errs.push(format!("option {bad} not allowed (options {options:?})"));
    }
    for f in &e.forbidden_types {
        if options.contains(&f.as_str()) {
            errs.push(format!("option {f} is forbidden (options {options:?})"));
        }
    }
    for i in &e.includes_types {
        if !options.contains(&i.as_str()) {
            errs.push(format!("option {i} missing (options {options:?})"));
        }
    }
    if let Some(n) = e.option_count
        && options.len() != n
    {
        errs.push(format!(
            "option count: want {n}, got {} ({options:?})",
            options.len()
        ));
    }
    if let (Some(want), Some(r)) = (&e.capacity_types, cmd.and_then(|c| c.replacements.first())) {
        let got: Vec<String> = r
            .requirements
            .iter()
            .filter(|r| r.key == l::CAPACITY_TYPE)
            .flat_map(|r| r.values.clone())
            .collect();
        if &got != want {
            errs.push(format!("capacity types: want {want:?}, got {got:?}"));
        }
    }
    if let (Some(min), Some(c)) = (e.min_savings, cmd)
        && c.savings_per_hour + 1e-9 < min
    {
        errs.push(format!(
            "savings: want >= {min}, got {}",
            c.savings_per_hour
        ));
    }
    if let Some(s) = &e.explanation_contains {
        let got = cmd.map_or("", |c| c.explanation.as_str());
        if !got.contains(s.as_str()) {
            errs.push(format!("explanation {got:?} lacks {s:?}"));
        }
    }
    for (node, want) in &e.reasons {
        match d.reason_for(node) {
            Some(got) if got.contains(want.as_str()) => {}
            got => errs.push(format!("reason for {node}: want {want:?}, got {got:?}")),
        }
    }
    errs
}

fn apply(sc: &mut Scenario, changes: &[Change]) -> Result<(), String> {
    let find = |nodes: &mut Vec<NodeSpec>, name: &str| -> Result<usize, String> {
        nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| format!("no node {name}"))
    };
    for c in changes {
        match c {
            Change::AddPod { node, pod } => {
                let i = find(&mut sc.nodes, node)?;
                sc.nodes[i].pods.push(pod.clone());
            }
            Change::AnnotatePod {
                node,
                pod,
                key,
                value,
            } => {
                let i = find(&mut sc.nodes, node)?;
                let p = sc.nodes[i]
                    .pods
                    .iter_mut()
                    .find(|p| &p.name == pod)
                    .ok_or_else(|| format!("no pod {pod}"))?;
                p.annotations.insert(key.clone(), value.clone());
            }
            Change::AnnotateNode { node, key, value } => {
                let i = find(&mut sc.nodes, node)?;
                sc.nodes[i].annotations.insert(key.clone(), value.clone());
            }
            Change::Nominate { node, r#for } => {
                let i = find(&mut sc.nodes, node)?;
                sc.nodes[i].nominated_for = Some(r#for.clone());
            }
            Change::AddPdb(p) => sc.pdbs.push(p.clone()),
            Change::MarkForDeletion { node } => {
                let i = find(&mut sc.nodes, node)?;
                sc.nodes[i].marked_for_deletion = true;
            }
            Change::SetNotReady { node } => {
                let i = find(&mut sc.nodes, node)?;
                sc.nodes[i].ready = false;
            }
            Change::RemoveInstanceTypes(names) => {
                for t in &mut sc.instance_types {
                    if names.contains(&t.name) {
                        t.pools = Some(Vec::new());
                    }
                }
            }
            Change::SetBudgets { pool, budgets } => {
                let pools = sc.node_pools.get_or_insert_with(default_pools);
                let p = pools
                    .iter_mut()
                    .find(|p| p["metadata"]["name"] == json!(pool))
                    .ok_or_else(|| format!("no pool {pool}"))?;
                p["spec"]["disruption"]["budgets"] = budgets.clone();
            }
            Change::AddPendingPod(p) => sc.pending_pods.push(p.clone()),
        }
    }
    Ok(())
}

fn run(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut sc: Scenario = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    if sc.description.trim().is_empty() {
        return Err("description is empty".into());
    }
    let snap = snapshot(&sc)?;
    let decision = karpenter_disruption::decide(&snap, sc.now);
    let mut errs = check(&sc, &decision);
    if let Some(want) = &sc.expired {
        let mut got: Vec<String> = karpenter_disruption::expired(&snap, sc.now)
            .into_iter()
            .map(|e| e.node)
            .collect();
        got.sort();
        let mut want = want.clone();
        want.sort();
        if got != want {
            errs.push(format!("expired: want {want:?}, got {got:?}"));
        }
    }
    if let Some(v) = sc.validate.take() {
        let Some(cmd) = decision.commands.first() else {
            return Ok(vec!["validate: no command to validate".into()]);
        };
        let later = sc.now + dur(v.after.as_deref().unwrap_or("15s"))?;
        // the newer snapshot is described relative to the validation time
        sc.now = later;
        apply(&mut sc, &v.changes)?;
        let newer = snapshot(&sc)?;
        let mut verdicts =
            karpenter_disruption::validation::validate_all(&decision.commands, &newer, later)
                .into_iter();
        let Some(result) = verdicts.next() else {
            return Ok(vec!["validate: no verdict".into()]);
        };
        if let Some(want) = &v.then {
            let got: Vec<String> = verdicts
                .map(|r| r.map_or_else(|e| e.to_string(), |_| "ok".to_owned()))
                .collect();
            let matches = want.len() == got.len()
                && want.iter().zip(&got).all(|(w, g)| {
                    if w == "ok" {
                        g == "ok"
                    } else {
                        g.contains(w.as_str())
                    }
                });
            if !matches {
                errs.push(format!(
                    "validate: later commands want {want:?}, got {got:?}"
                ));
            }
        }
        match (v.expect.as_str(), result) {
            ("ok", Ok(validated)) => {
                let got: Vec<String> = validated
                    .candidate_names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect();
                let want = v.survivors.clone().unwrap_or_else(|| {
                    cmd.candidate_names()
                        .into_iter()
                        .map(str::to_owned)
                        .collect()
                });
                if got != want {
                    errs.push(format!("validate: survivors want {want:?}, got {got:?}"));
                }
            }
            ("ok", Err(r)) => errs.push(format!("validate: want ok, got {r}")),
            (want, Ok(_)) => errs.push(format!("validate: want rejection {want:?}, got ok")),
            (want, Err(r)) if r.to_string().contains(want) => {}
            (want, Err(r)) => errs.push(format!("validate: want {want:?}, got {r}")),
        }
    }
    if !errs.is_empty() {
        errs.push(format!("decision: {:#?}", summary(&decision)));
    }
    Ok(errs)
}

fn summary(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d
        .commands
        .iter()
        .map(|c| {
            format!(
                "{} {:?}: {}",
                c.method.as_str(),
                c.candidate_names(),
                c.explanation
            )
        })
        .collect();
    out.extend(
        d.considered
            .iter()
            .map(|c| format!("{}: {}", c.node, c.reason)),
    );
    out
}

fn scenario_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Runs one scenario file: `Err` lists what the pass decided differently, or why it could not run.
fn scenario_decides_what_it_expects(path: &Path) -> Result<(), String> {
    match run(path) {
        Ok(errs) if errs.is_empty() => Ok(()),
        Ok(errs) => Err(errs.join("\n  ")),
        Err(e) => Err(format!("could not run: {e}")),
    }
}

/// One test per `tests/scenarios/*.yaml` file, named by its path from the crate root, so
/// `cargo test -p karpenter-disruption --test scenarios -- --list` shows each and a filter such
/// as `-- budget-` runs some.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut trials: Vec<libtest_mimic::Trial> = scenario_files(&root.join("tests/scenarios"))
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            libtest_mimic::Trial::test(name, move || {
                scenario_decides_what_it_expects(&path).map_err(Into::into)
            })
        })
        .collect();
    if trials.is_empty() {
        trials.push(libtest_mimic::Trial::test(
            "tests/scenarios holds scenario files",
            || Err("no scenarios found".into()),
        ));
    }
    libtest_mimic::run(&args, trials).exit();
}
