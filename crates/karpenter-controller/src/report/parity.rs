//! The metrics parity test: what the controller exports against what upstream documents.
//!
//! `upstream-metrics.txt` (next to this file, written by `scripts/upstream-metrics` from
//! upstream's own docs generator) lists the metrics upstream Karpenter v1.15 documents, each
//! with its type and label names. [`exported`] registers every metric the controller exports
//! into a fresh registry, records one sample through each recording method (so every family has
//! a series), encodes the registry as the `/metrics` endpoint does and reads back, per metric,
//! the name Prometheus shows (a counter's `_total`; a histogram's or summary's base name), its
//! type and its label names (without `le` and `quantile`).
//!
//! Every upstream metric must be exported with the same type and label names, or be listed in
//! [`NOT_YET`] with the reason (and the issue that will bring it). The list only shrinks: an
//! entry that is exported fails the test. A metric exported under a name upstream does not
//! document fails unless [`KARPENTER_RS_ONLY`] says why it is there. [`RUNTIME_LABELS`] are
//! the labels upstream adds at run time, which its generator cannot see.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use karpenter_api::v1::NodeClaim;
use karpenter_state::Object;

use crate::cluster::index::ClusterCache;
use crate::controllers::deletion_cost::DeletionCostMetrics;
use crate::controllers::gauges::{NODE_LABELS, StateMetrics};
use crate::controllers::interruption::InterruptionMetrics;
use crate::http::Metrics;
use crate::report::metrics::{ControllerMetrics, Disrupted, Labels, Reconciled};

/// The upstream list.
const UPSTREAM: &str = include_str!("upstream-metrics.txt");

/// Upstream metrics karpenter-rs does not export (yet), with why. Only shrinks.
pub const NOT_YET: &[(&str, &str)] = &[];

/// Metrics karpenter-rs exports that upstream does not document, with why.
pub const KARPENTER_RS_ONLY: &[(&str, &str)] = &[];

/// Labels upstream's metrics carry that its generator does not list (they are computed when
/// the controller starts): `(metric, labels, where upstream adds them)`.
pub fn runtime_labels(metric: &str) -> Option<(Vec<&'static str>, &'static str)> {
    RUNTIME_LABELS
        .iter()
        .find(|(name, _, _)| *name == metric)
        .map(|(_, labels, why)| (labels(), *why))
}

type LabelsFn = fn() -> Vec<&'static str>;

/// The metric label of each well-known node label (upstream's `metrics.node` adds one label
/// per `v1.WellKnownLabels` key, the provider's included, when the controller starts).
fn node_labels() -> Vec<&'static str> {
    NODE_LABELS.iter().map(|(_, label)| *label).collect()
}

/// A NodeClaim's node class and NodePool labels (core's controllers.go gives its status
/// controller `WithLabels` of the provider's node class label key and the NodePool label key).
fn node_claim_labels() -> Vec<&'static str> {
    vec!["karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"]
}

const NODE_CLAIM_STATUS: &str =
    "the NodeClaim's node class and NodePool labels (core's controllers.go, status.WithLabels)";

const NODE_GAUGE: &str =
    "one label per well-known node label (core's metrics/node/controller.go, nodeLabelNames)";

/// See [`runtime_labels`].
const RUNTIME_LABELS: &[(&str, LabelsFn, &str)] = &[
    ("karpenter_nodes_allocatable", node_labels, NODE_GAUGE),
    (
        "karpenter_nodes_total_pod_requests",
        node_labels,
        NODE_GAUGE,
    ),
    ("karpenter_nodes_total_pod_limits", node_labels, NODE_GAUGE),
    (
        "karpenter_nodes_total_daemon_requests",
        node_labels,
        NODE_GAUGE,
    ),
    (
        "karpenter_nodes_total_daemon_limits",
        node_labels,
        NODE_GAUGE,
    ),
    ("karpenter_nodes_system_overhead", node_labels, NODE_GAUGE),
    (
        "karpenter_nodes_current_lifetime_seconds",
        node_labels,
        NODE_GAUGE,
    ),
    (
        "operator_nodeclaim_status_condition_count",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
    (
        "operator_nodeclaim_status_condition_current_status_seconds",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
    (
        "operator_nodeclaim_status_condition_transition_seconds",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
    (
        "operator_nodeclaim_status_condition_transitions_total",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
    (
        "operator_nodeclaim_termination_current_time_seconds",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
    (
        "operator_nodeclaim_termination_duration_seconds",
        node_claim_labels,
        NODE_CLAIM_STATUS,
    ),
];

/// One metric as the registry exports it, or as upstream documents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub kind: String,
    pub labels: BTreeSet<String>,
}

/// Upstream's metrics by name.
pub fn upstream() -> BTreeMap<String, Family> {
    UPSTREAM
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 4, "upstream-metrics.txt: {line}");
            let labels = if fields[3] == "-" {
                BTreeSet::new()
            } else {
                fields[3].split(',').map(str::to_owned).collect()
            };
            (
                fields[0].to_owned(),
                Family {
                    kind: fields[1].to_owned(),
                    labels,
                },
            )
        })
        .collect()
}

/// Splits a sample line into its series name and label names.
fn sample(line: &str) -> (String, BTreeSet<String>) {
    let Some(open) = line.find('{') else {
        let name = line.split_whitespace().next().unwrap_or_default();
        return (name.to_owned(), BTreeSet::new());
    };
    let name = line[..open].to_owned();
    let mut labels = BTreeSet::new();
    let mut rest = &line[open + 1..];
    loop {
        rest = rest.trim_start_matches(',');
        if rest.starts_with('}') || rest.is_empty() {
            break;
        }
        let Some(eq) = rest.find('=') else { break };
        labels.insert(rest[..eq].to_owned());
        // The quoted value, escapes included.
        let value = &rest[eq + 2..];
        let mut end = 0;
        let mut escaped = false;
        for (i, c) in value.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        rest = &value[end + 1..];
    }
    (name, labels)
}

/// Per exported metric: its type and its label names (`None`: no series).
pub type Exposition = BTreeMap<String, (String, Option<BTreeSet<String>>)>;

/// What an OpenMetrics exposition exports: per metric (as Prometheus names it) its type and
/// label names; a family without series has no label set (`None`), a family whose series
/// differ in label names is an error.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut fields = rest.split_whitespace();
            let (Some(name), Some(kind)) = (fields.next(), fields.next()) else {
                return Err(format!("bad TYPE line: {line}"));
            };
            let exported = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            if out.contains_key(&exported) {
                return Err(format!("{exported} is exported twice"));
            }
            out.insert(exported.clone(), (kind.to_owned(), None));
            current = Some((name.to_owned(), exported));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((base, exported)) = &current else {
            return Err(format!("a sample before any TYPE: {line}"));
        };
        let (series, mut labels) = sample(line);
        let suffix = series.strip_prefix(base.as_str()).unwrap_or("?");
        let kind = out.get(exported).map(|(k, _)| k.as_str()).unwrap_or("");
        let allowed: &[&str] = match kind {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            "summary" => &["", "_sum", "_count", "_created"],
            _ => &[""],
        };
        if !allowed.contains(&suffix) {
            return Err(format!("{series} does not belong to {kind} {base}"));
        }
        labels.remove("le");
        labels.remove("quantile");
        if let Some((_, known)) = out.get_mut(exported) {
            match known {
                Some(known) if *known != labels => {
                    return Err(format!(
                        "{exported}: series with labels {known:?} and {labels:?}"
                    ));
                }
                Some(_) => {}
                None => *known = Some(labels),
            }
        }
    }
    Ok(out)
}

/// Compares `text` (an OpenMetrics exposition) with upstream's list; every difference the
/// lists do not excuse, one line each.
pub fn compare(text: &str) -> Vec<String> {
    compare_with(text, NOT_YET, KARPENTER_RS_ONLY)
}

fn compare_with(
    text: &str,
    not_yet_list: &[(&str, &str)],
    only_list: &[(&str, &str)],
) -> Vec<String> {
    let exported = match parse(text) {
        Ok(exported) => exported,
        Err(e) => return vec![e],
    };
    let upstream = upstream();
    let not_yet: BTreeMap<&str, &str> = not_yet_list.iter().copied().collect();
    let only: BTreeMap<&str, &str> = only_list.iter().copied().collect();
    let mut problems = Vec::new();
    for (name, reason) in not_yet_list.iter().chain(only_list) {
        if reason.trim().is_empty() {
            problems.push(format!("{name}: listed without a reason"));
        }
    }
    if not_yet.len() != not_yet_list.len() || only.len() != only_list.len() {
        problems.push("a metric is listed twice".to_owned());
    }
    for name in not_yet.keys() {
        if !upstream.contains_key(*name) {
            problems.push(format!(
                "{name}: in NOT_YET but upstream does not document it"
            ));
        }
    }
    for name in only.keys() {
        if upstream.contains_key(*name) {
            problems.push(format!(
                "{name}: in KARPENTER_RS_ONLY but upstream documents it"
            ));
        }
    }
    for (name, want) in &upstream {
        let got = exported.get(name);
        if not_yet.contains_key(name.as_str()) {
            if got.is_some() {
                problems.push(format!(
                    "{name}: exported now, remove it from NOT_YET (the list only shrinks)"
                ));
            }
            continue;
        }
        let Some((kind, labels)) = got else {
            problems.push(format!(
                "{name}: not exported (export it, or list it in NOT_YET with the reason)"
            ));
            continue;
        };
        if *kind != want.kind {
            problems.push(format!(
                "{name}: exported as a {kind}, upstream's is a {}",
                want.kind
            ));
        }
        let Some(labels) = labels else {
            problems.push(format!(
                "{name}: no series (record a sample in the parity test)"
            ));
            continue;
        };
        let mut wanted = want.labels.clone();
        if let Some((extra, _)) = runtime_labels(name) {
            wanted.extend(extra.into_iter().map(str::to_owned));
        }
        if *labels != wanted {
            let missing: Vec<&String> = wanted.difference(labels).collect();
            let extra: Vec<&String> = labels.difference(&wanted).collect();
            problems.push(format!(
                "{name}: labels differ from upstream's: missing {missing:?}, not upstream's {extra:?}"
            ));
        }
    }
    for (name, (_, labels)) in &exported {
        if upstream.contains_key(name) {
            continue;
        }
        if !only.contains_key(name.as_str()) {
            problems.push(format!(
                "{name}: upstream does not document it (list it in KARPENTER_RS_ONLY with why)"
            ));
        } else if labels.is_none() {
            problems.push(format!(
                "{name}: no series (record a sample in the parity test)"
            ));
        }
    }
    problems
}

/// Every metric the controller exports, registered into a fresh registry, each with a sample.
pub fn exported() -> Metrics {
    let registry = Metrics::new();
    let m = ControllerMetrics::register(&registry);
    m.nodeclaim_created("provisioned", "general", false);
    m.nodeclaim_terminated("general", "spot", "us-east-1a");
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "general", "karpenter.sh/capacity-type": "spot"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}
    }))
    .expect("a NodeClaim");
    m.nodeclaim_disrupted(&Disrupted::of("launch_timeout", Some(&claim)));
    m.disrupted(&Disrupted::of("expired", Some(&claim)), 3);
    m.unhealthy_disrupted("Ready", "general", "spot", "ami-1", "forceful");
    m.node_created("general", "us-east-1a");
    m.node_drained("general");
    m.node_terminated("general", "us-east-1a");
    m.eviction_request(200);
    m.scheduling_duration("provisioner", 0.1);
    m.unschedulable_pods("provisioner", 1);
    let pool = |resource: &str| {
        vec![
            ("nodepool", "general".to_owned()),
            ("resource_type", resource.to_owned()),
        ]
    };
    m.nodepool_usage.get_or_create(&pool("cpu")).set(4.0);
    m.nodepool_limit.get_or_create(&pool("cpu")).set(100.0);
    let offering = vec![
        ("instance_type", "m5.large".to_owned()),
        ("capacity_type", "spot".to_owned()),
        ("zone", "us-east-1a".to_owned()),
    ];
    m.instance_type_offering_available
        .get_or_create(&offering)
        .set(1.0);
    m.instance_type_offering_price
        .get_or_create(&offering)
        .set(0.04);
    let it = vec![("instance_type", "m5.large".to_owned())];
    m.instance_type_cpu_cores.get_or_create(&it).set(2.0);
    m.instance_type_memory_bytes.get_or_create(&it).set(8.0e9);
    let aws = karpenter_aws_provider::metrics::metrics();
    aws.sdk_request(&karpenter_aws_provider::metrics::SdkRequest {
        service: "EC2".into(),
        action: "CreateFleet".into(),
        attempts: vec![(200, 0.1)],
        seconds: 0.2,
    });
    aws.launch_failure("us-east-1a", "use1-az1", "spot", "LaunchFailed");
    aws.termination_failure("us-east-1a", "use1-az1");
    aws.userdata_bytes("default", 1234);
    aws.batch_window("create_fleet", 0.035);
    aws.batch_size("create_fleet", 3);
    m.nodepools_cost
        .get_or_create(&vec![("nodepool", "general".to_owned())])
        .set(0.34);
    m.nodepools_cost_tracker_errors
        .get_or_create(&vec![("nodepool", "general".to_owned())])
        .inc();
    m.cluster_state_synced.set(1);
    m.cluster_state_node_count.set(3);
    m.disruption_evaluated("Emptiness", "empty", 0.2);
    m.disruption_decision("delete", "empty", "empty", None, ["general", "general"]);
    m.disruption_decision(
        "terminate-first",
        "drifted",
        "",
        Some("static-at-limit"),
        ["general"],
    );
    m.disruption_failed_validation("single");
    m.disruption_queue_failure("replace", "underutilized", "single");
    m.allowed_disruptions("general", "Underutilized", 1, 0);
    m.pod_drained("underutilized");
    m.reboot_ended("succeeded", 40.0);
    m.reboot_recovered(30.0);
    m.node_termination_duration("general", 12.0);
    m.node_lifetime("general", 3600.0);
    m.nodeclaim_termination_duration("general", 30.0);
    m.instance_termination_duration("general", 5.0);
    m.cluster_state_unsynced_time_seconds.set(0.0);
    m.cloudprovider_call("nodeclaim.lifecycle", "Create", "aws", 1.2);
    m.cloudprovider_error(
        "nodeclaim.lifecycle",
        "Create",
        "aws",
        "InsufficientCapacityError",
        "general",
    );
    m.pod_startup_duration(4.0);
    m.eligible_nodes("underutilized", 2);
    m.consolidation_move(&karpenter_disruption::ConsolidationMove {
        node_pool: "default".into(),
        policy: karpenter_api::v1::ConsolidationPolicy::Balanced,
        approved: true,
        score: Some(karpenter_disruption::BalancedScore {
            node_pool: "default".into(),
            score: 0.8,
            savings_fraction: 0.4,
            disruption_fraction: 0.5,
        }),
    });
    m.loop_started("provisioner");
    m.runtime.added("provisioner");
    drop(m.runtime.working("provisioner", 0.001));
    m.runtime.retried("provisioner");
    m.runtime.panicked("provisioner");
    m.reconciled("provisioner", Reconciled::Success, 0.01);
    m.active_workers("provisioner", 1);
    m.max_concurrent_reconciles("provisioner", 1);
    // The node and pod gauges as their loops build them, from an index with one node running a
    // DaemonSet pod.
    let cache = ClusterCache::new();
    for object in cluster_objects() {
        cache.apply(object);
    }
    let mut state = StateMetrics::new(m.clone(), Utc::now());
    // A pending pod the provisioner saw and found a place for, and another it has not
    // decided about yet.
    state.pod_times.ack("shop/waiting", Utc::now());
    state.pod_times.ack("shop/undecided", Utc::now());
    state.pod_times.decided(["shop/waiting"], [], Utc::now());
    state.update(&cache);
    m.pod_bound(false, 3.0, Some(2.0));
    m.pod_provisioning_startup(5.0);
    m.pod_scheduling_decision(1.0);
    m.ignored_pods(0);
    // A simulation that ended, with what its solver observed, and one in progress while the
    // registry is read.
    m.solving("provisioner")
        .finished(&karpenter_scheduling::SolveStats {
            queue_depth: 1,
            pending_by_effective_zone: [("flexible".to_owned(), 2)].into(),
        });
    std::mem::forget(m.solving("provisioner"));
    let leader = crate::leader::LeaderMetrics::register(&registry);
    leader.leading("karpenter-leader-election", true);
    leader.slowpath("karpenter-leader-election").inc();
    exercise_conditions(&m);
    let client = crate::client::ClientMetrics::default();
    client.register(&registry);
    client.request("GET", "/api/v1/nodes", Some(200), 0.01);
    let deletion_cost = DeletionCostMetrics::register(&registry);
    deletion_cost.pending(&[karpenter_disruption::deletion_cost::NodeWrites {
        node: "n".into(),
        node_pool: "general".into(),
        group: karpenter_disruption::deletion_cost::Group::Consolidatable,
        desired: karpenter_disruption::deletion_cost::Desired::Cost(-1),
        pods: Vec::new(),
    }]);
    deletion_cost.written("updated");
    let interruption = InterruptionMetrics::register(&registry);
    interruption.received("spot_interrupted");
    interruption.deleted();
    interruption.queued_for(1.0);
    crate::controllers::instance_status::InstanceStatusMetrics::register(&registry)
        .unhealthy(karpenter_aws::interruption::instance_status::Category::SystemStatus);
    registry
}

/// Each kind's status-condition metrics: an object seen with a condition, then again with the
/// condition changed and being deleted, then gone.
fn exercise_conditions(m: &ControllerMetrics) {
    use crate::report::status::{Condition, ConditionKind, Conditions, Observed};
    let at = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .expect("a time")
            .with_timezone(&Utc)
    };
    let object = |status: &str, deleted: bool, labels: Labels| Observed {
        namespace: String::new(),
        name: "x".into(),
        deleted: deleted.then(|| at("2026-01-01T00:01:00Z")),
        conditions: vec![Condition {
            kind: "Ready".into(),
            status: status.into(),
            reason: status.into(),
            last_transition: Some(at("2026-01-01T00:00:00Z")),
        }],
        labels,
    };
    for kind in [
        ConditionKind::NodeClaim,
        ConditionKind::NodePool,
        ConditionKind::EC2NodeClass,
    ] {
        let labels = if kind == ConditionKind::NodeClaim {
            vec![
                ("karpenter_k8s_aws_ec2nodeclass", "default".to_owned()),
                ("karpenter_sh_nodepool", "general".to_owned()),
            ]
        } else {
            Labels::new()
        };
        let mut conditions = Conditions::new(kind, m.conditions.clone());
        conditions.observe(
            object("True", false, labels.clone()),
            at("2026-01-01T00:00:10Z"),
        );
        conditions.observe(
            object("False", true, labels.clone()),
            at("2026-01-01T00:01:10Z"),
        );
        // Another object stays, so every gauge keeps a series.
        let mut other = object("True", true, labels);
        other.name = "y".into();
        conditions.observe(other, at("2026-01-01T00:01:10Z"));
        let present = [(String::new(), "y".to_owned())].into_iter().collect();
        conditions.forget_all_but(&present, at("2026-01-01T00:02:00Z"));
    }
}

/// A NodeClaim, its Node and a DaemonSet pod on it.
fn cluster_objects() -> Vec<Object> {
    let node = serde_json::json!({
        "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"karpenter.sh/nodepool": "general", "topology.kubernetes.io/zone": "us-east-1a"}},
        "spec": {"providerID": "kwok://n1"},
        "status": {"phase": "Running",
                   "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                   "allocatable": {"cpu": "1930m", "memory": "3Gi", "pods": "29"}}
    });
    let claim = serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"providerID": "kwok://n1"}
    });
    let pod = serde_json::json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u1",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running"}
    });
    let pending = |name: &str| {
        serde_json::from_value::<Pod>(serde_json::json!({
            "metadata": {"name": name, "namespace": "shop", "uid": name,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending"}
        }))
        .expect("a pod")
    };
    vec![
        Object::Pod(pending("waiting")),
        Object::Pod(pending("undecided")),
        Object::Node(serde_json::from_value(node).expect("a node")),
        Object::NodeClaim(serde_json::from_value(claim).expect("a NodeClaim")),
        Object::Pod(serde_json::from_value::<Pod>(pod).expect("a pod")),
    ]
}

/// Where the metrics reference lives, and the markers around its generated part.
const DOCS: &str = "docs/controller.md";
const DOCS_BEGIN: &str = "<!-- metrics: generated from crates/karpenter-controller/src/report/parity.rs (UPDATE_METRICS_DOCS=1 cargo test -p karpenter-controller --lib metrics_reference rewrites it) -->";
const DOCS_END: &str = "<!-- end of generated metrics -->";

/// The generated part of the metrics reference: what is exported, what is not yet and why.
pub fn reference() -> String {
    let upstream = upstream();
    let not_yet: BTreeMap<&str, &str> = NOT_YET.iter().copied().collect();
    let exported: Vec<&String> = upstream
        .keys()
        .filter(|n| !not_yet.contains_key(n.as_str()))
        .collect();
    let mut out = String::new();
    out.push_str(DOCS_BEGIN);
    out.push_str(&format!(
        "\n\n**Exported** with upstream's type and label names ({} of the {} upstream v1.15 documents):\n",
        exported.len(),
        upstream.len()
    ));
    for name in &exported {
        let family = &upstream[name.as_str()];
        let mut labels: Vec<String> = family.labels.iter().cloned().collect();
        if let Some((extra, _)) = runtime_labels(name) {
            labels.push(format!("+{} at run time", extra.len()));
        }
        out.push_str(&format!(
            "- `{name}` ({}){}\n",
            family.kind,
            if labels.is_empty() {
                String::new()
            } else {
                format!(": {}", labels.join(", "))
            }
        ));
    }
    if NOT_YET.is_empty() {
        out.push_str("\n**Not yet**: none.\n");
    } else {
        out.push_str(&format!(
            "\n**Not yet** ({}), and why (the issue that brings it, in brackets):\n\n| metric | why |\n|---|---|\n",
            NOT_YET.len()
        ));
        for (name, why) in NOT_YET {
            out.push_str(&format!("| `{name}` | {why} |\n"));
        }
    }
    if !KARPENTER_RS_ONLY.is_empty() {
        out.push_str("\n**karpenter-rs only:**\n\n| metric | why |\n|---|---|\n");
        for (name, why) in KARPENTER_RS_ONLY {
            out.push_str(&format!("| `{name}` | {why} |\n"));
        }
    }
    out.push('\n');
    out.push_str(DOCS_END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_reference_in_the_docs_is_the_one_this_test_derives() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(DOCS);
        let docs = std::fs::read_to_string(&path).expect("the docs");
        let (Some(begin), Some(end)) = (docs.find(DOCS_BEGIN), docs.find(DOCS_END)) else {
            panic!("{DOCS} has no generated metrics section");
        };
        let current = &docs[begin..end + DOCS_END.len()];
        let wanted = reference();
        if current == wanted {
            return;
        }
        if std::env::var_os("UPDATE_METRICS_DOCS").is_some() {
            let updated = docs.replace(current, &wanted);
            std::fs::write(&path, updated).expect("the docs are written");
            return;
        }
        panic!(
            "{DOCS}'s metrics section is out of date: run `UPDATE_METRICS_DOCS=1 cargo test -p karpenter-controller --lib metrics_reference`"
        );
    }

    #[test]
    fn every_upstream_metric_is_exported_with_its_type_and_labels_or_listed_as_not_yet() {
        let text = exported().encode().expect("encodes");
        let problems = compare(&text);
        assert!(
            problems.is_empty(),
            "{} problem(s):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    #[test]
    fn a_renamed_label_a_missing_series_and_a_stale_not_yet_entry_fail() {
        let text = exported().encode().expect("encodes");
        let broken = text.replace("commit=", "git_commit=");
        assert!(
            compare(&broken)
                .iter()
                .any(|p| p.starts_with("karpenter_build_info: labels differ")),
            "{:?}",
            compare(&broken)
        );
        let gone: String = text
            .lines()
            .filter(|l| !l.starts_with("karpenter_build_info"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            compare(&gone)
                .iter()
                .any(|p| p.starts_with("karpenter_build_info: no series")),
            "{:?}",
            compare(&gone)
        );
        let stale = compare_with(&text, &[("karpenter_build_info", "not yet")], &[]);
        assert!(
            stale
                .iter()
                .any(|p| p.starts_with("karpenter_build_info: exported now")),
            "{stale:?}"
        );
        let unlisted = compare_with(
            &text.replace("karpenter_build_info", "karpenter_extra_info"),
            NOT_YET,
            &[],
        );
        assert!(
            unlisted
                .iter()
                .any(|p| p.starts_with("karpenter_extra_info: upstream does not document it")),
            "{unlisted:?}"
        );
    }

    #[test]
    fn the_exposition_is_read_as_prometheus_names_it() {
        let text = "# TYPE a counter\na_total{x=\"1\",y=\"a\\\"b,c=d\"} 1\n\
                    # TYPE h histogram\nh_bucket{z=\"1\",le=\"0.5\"} 1\nh_sum{z=\"1\"} 1\nh_count{z=\"1\"} 1\n\
                    # TYPE s summary\ns{quantile=\"0.5\"} 1\ns_count 1\n\
                    # TYPE g gauge\n# EOF\n";
        let parsed = parse(text).expect("parses");
        let labels = |name: &str| {
            parsed[name]
                .1
                .clone()
                .map(|l| l.into_iter().collect::<Vec<_>>())
        };
        assert_eq!(
            labels("a_total"),
            Some(vec!["x".to_owned(), "y".to_owned()])
        );
        assert_eq!(labels("h"), Some(vec!["z".to_owned()]));
        assert_eq!(labels("s"), Some(vec![]));
        assert_eq!(labels("g"), None);
        assert_eq!(parsed["h"].0, "histogram");
    }
}
