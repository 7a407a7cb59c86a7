//! What `top` shows, computed from the index (values in, values out; no I/O, `now` given).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::events::v1::Event;
use karpenter_api::labels as l;
use karpenter_cloud::PriceTable;
use karpenter_scheduling::pod::pod_requests;
use karpenter_scheduling::{Quantity, ResourceList};
use karpenter_state::Cluster;
use serde::Serialize;

use crate::explained::Explained;
use crate::list::Listed;
use crate::seen::last_seen;

/// How the nodes are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    /// Oldest first (eks-node-viewer's default).
    #[default]
    Creation,
    Name,
    /// The first resource's request share, highest first.
    Usage,
    /// Price per hour, highest first.
    Price,
}

/// What to show.
#[derive(Debug, Clone)]
pub struct Options {
    /// Resources with a column and a header line (`cpu`, `memory`, ...).
    pub resources: Vec<String>,
    /// Only nodes carrying all these labels (`key=value`, or `key` for any value).
    pub node_selector: Vec<(String, Option<String>)>,
    /// Label values shown as extra columns.
    pub extra_labels: Vec<String>,
    pub sort: Sort,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            resources: vec!["cpu".into(), "memory".into()],
            node_selector: Vec::new(),
            extra_labels: Vec::new(),
            sort: Sort::default(),
        }
    }
}

/// Prices per hour.
pub trait Prices {
    fn price(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64>;

    /// Where the prices come from, as the header tells it (`None`: not told).
    fn source(&self) -> Option<String> {
        None
    }
}

/// No prices (`--disable-pricing`).
impl Prices for () {
    fn price(&self, _: &str, _: &str, _: &str) -> Option<f64> {
        None
    }
}

/// A price table: on-demand as listed; spot as observed in the zone, else on-demand times
/// `1 - spot_discount` (an estimate).
#[derive(Debug, Clone)]
pub struct TablePrices {
    pub table: PriceTable,
    pub spot_discount: f64,
}

impl TablePrices {
    /// The embedded catalog's prices.
    pub fn embedded(spot_discount: f64) -> Result<Self, karpenter_cloud::CatalogError> {
        Ok(TablePrices {
            table: karpenter_cloud::Catalog::embedded()?.prices().clone(),
            spot_discount,
        })
    }
}

impl Prices for TablePrices {
    fn source(&self) -> Option<String> {
        Some(format!(
            "embedded catalog (on-demand: {} list prices; spot: on-demand x {:.2})",
            self.table.region(),
            1.0 - self.spot_discount
        ))
    }

    fn price(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64> {
        match capacity_type {
            "spot" => self.table.observed_spot(instance_type, zone).or_else(|| {
                self.table
                    .on_demand(instance_type)
                    .map(|p| p * (1.0 - self.spot_discount))
            }),
            _ => self.table.on_demand(instance_type),
        }
    }
}

/// One resource: requested by the pods against allocatable.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub resource: String,
    pub requested: f64,
    pub allocatable: f64,
}

impl Usage {
    /// Requested share, 0..=1 (0 when nothing is allocatable).
    pub fn share(&self) -> f64 {
        if self.allocatable > 0.0 {
            self.requested / self.allocatable
        } else {
            0.0
        }
    }
}

/// One node (or a NodeClaim whose Node has not registered yet).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub name: String,
    pub usage: Vec<Usage>,
    pub pods: usize,
    pub max_pods: u64,
    pub instance_type: String,
    /// `on-demand`, `spot`, `reserved`, or `fargate`.
    pub capacity_type: String,
    pub zone: String,
    pub node_pool: String,
    pub price: Option<f64>,
    /// `Cordoned`, `Deleting`, `Disrupting` (Karpenter's `karpenter.sh/disrupted` taint).
    pub status: Vec<String>,
    /// `Ready`, `NotReady`, or `Launching` (no Node yet).
    pub ready: String,
    /// Seconds since creation.
    pub age_seconds: i64,
    /// The `extra_labels` values, in order (empty when absent).
    pub extra: Vec<String>,
    /// The controller's last disruption pass on it, in a word ([`Explained::verdicts`]);
    /// `None` when the controller was not asked or did not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

/// How many more nodes of a NodePool may be disrupted now for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetRow {
    /// `Empty`, `Drifted`, `Underutilized`, `Unhealthy`.
    pub reason: String,
    pub allowed: u32,
}

/// One NodePool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRow {
    pub name: String,
    /// Its `Ready` condition status (`Unknown` when absent).
    pub ready: String,
    /// Its nodes (and NodeClaims still launching) among the rows shown.
    pub nodes: u64,
    /// `(resource, used, limit)` for each limited resource.
    pub limits: Vec<(String, String, String)>,
    /// Its NodeClaims among the rows shown that are `Drifted=True`.
    pub drifted: u64,
    /// Per disruption reason, how many more nodes may be disrupted now (the controller's last
    /// pass, [`Explained::budgets`]); `None` when the controller was not asked or did not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<BudgetRow>>,
}

/// A pod waiting for a node, and why (kube-scheduler's `PodScheduled` message).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRow {
    pub pod: String,
    pub age_seconds: i64,
    pub reason: String,
}

/// One of Karpenter's events (a launch, a disruption, an interruption, a repair, a pod
/// nominated or failing to schedule, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    /// Seconds since it was last seen ([`last_seen`]).
    pub age_seconds: i64,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Upstream's reason (`Nominated`, `DisruptionBlocked`, `SpotInterrupted`, ...).
    pub reason: String,
    /// What it is about: `Kind/name`, or `Kind/namespace/name` for a namespaced object.
    pub object: String,
    /// How many times it happened (its series' count; 1 without a series).
    pub count: u32,
    pub note: String,
}

/// Pods by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    pub pending: usize,
    pub bound: usize,
    pub running: usize,
}

/// Everything `top` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// The shown nodes' totals per resource.
    pub totals: Vec<Usage>,
    /// Summed price of the shown nodes with a known price.
    pub cost_per_hour: Option<f64>,
    /// Where the prices come from ([`Prices::source`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pricing: Option<String>,
    pub pods: PodCounts,
    pub nodes: Vec<NodeRow>,
    pub node_pools: Vec<PoolRow>,
    pub pending: Vec<PendingRow>,
    /// Karpenter's events, newest first.
    pub events: Vec<EventRow>,
    /// Why Karpenter's events could not be listed (the rest of the view stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_problem: Option<String>,
    /// What the controller's next consolidation saves per hour ([`Explained::saving_per_hour`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saving_per_hour: Option<f64>,
}

/// Adds what the controller told to `view`: each node's verdict, each NodePool's budgets now,
/// the next consolidation's saving.
pub fn explain(view: &mut View, explained: &Explained) {
    for node in &mut view.nodes {
        node.verdict = explained.verdicts.get(&node.name).cloned();
    }
    for pool in &mut view.node_pools {
        pool.budgets = explained.budgets.get(&pool.name).map(|budgets| {
            budgets
                .iter()
                .map(|(reason, allowed)| BudgetRow {
                    reason: reason.clone(),
                    allowed: *allowed,
                })
                .collect()
        });
    }
    view.saving_per_hour = explained.saving_per_hour;
}

fn amount(q: Quantity) -> f64 {
    q.millis() as f64 / 1000.0
}

fn matches(labels: &BTreeMap<String, String>, selector: &[(String, Option<String>)]) -> bool {
    selector.iter().all(|(k, v)| match v {
        Some(v) => labels.get(k) == Some(v),
        None => labels.contains_key(k),
    })
}

fn age(created: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    created.map_or(0, |c| (now - c).num_seconds().max(0))
}

/// `event` as a row at `now`.
fn event_row(event: &Event, now: DateTime<Utc>) -> EventRow {
    let regarding = event.regarding.as_ref();
    let kind = regarding
        .and_then(|r| r.kind.as_deref())
        .unwrap_or_default();
    let name = regarding
        .and_then(|r| r.name.as_deref())
        .unwrap_or_default();
    let object = match regarding.and_then(|r| r.namespace.as_deref()) {
        Some(namespace) if !namespace.is_empty() => format!("{kind}/{namespace}/{name}"),
        _ => format!("{kind}/{name}"),
    };
    let count = event
        .series
        .as_ref()
        .map(|s| s.count)
        .or(event.deprecated_count)
        .and_then(|c| u32::try_from(c).ok())
        .unwrap_or(1)
        .max(1);
    EventRow {
        age_seconds: age(last_seen(event), now),
        type_: event.type_.clone().unwrap_or_default(),
        reason: event.reason.clone().unwrap_or_default(),
        object,
        count,
        note: event.note.clone().unwrap_or_default(),
    }
}

/// `events` as rows at `now`, newest first (equal ages in their listed order).
pub fn events(events: &[Event], now: DateTime<Utc>) -> Vec<EventRow> {
    let mut rows: Vec<EventRow> = events.iter().map(|e| event_row(e, now)).collect();
    rows.sort_by_key(|r| r.age_seconds);
    rows
}

/// The view of `listed` at `now`.
pub fn view(listed: &Listed, prices: &dyn Prices, options: &Options, now: DateTime<Utc>) -> View {
    let cluster: &Cluster = &listed.cluster;
    let mut nodes = Vec::new();
    let mut drifted_by_pool: BTreeMap<String, u64> = BTreeMap::new();
    for state in cluster.state_nodes() {
        let labels = state.labels();
        if !matches(&labels, &options.node_selector) {
            continue;
        }
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let allocatable = state.allocatable();
        let pods: Vec<_> = state.pods.iter().filter(|p| !p.is_terminal()).collect();
        let mut requested = ResourceList::new();
        for pod in &pods {
            if let Ok(r) = pod_requests(pod.spec.as_deref()) {
                requested.add(&r);
            }
        }
        let usage = options
            .resources
            .iter()
            .map(|r| Usage {
                resource: r.clone(),
                requested: amount(requested.get(r)),
                allocatable: amount(allocatable.get(r)),
            })
            .collect();
        let taints = state.taints();
        let mut status = Vec::new();
        if state
            .node
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
        {
            status.push("Cordoned".to_owned());
        }
        if state.deleting() {
            status.push("Deleting".to_owned());
        }
        if taints.iter().any(|t| t.key == l::DISRUPTED_TAINT_KEY) {
            status.push("Disrupting".to_owned());
        }
        let drifted = state
            .node_claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == karpenter_api::v1::nodeclaim::conditions::DRIFTED
                        && c.status == "True"
                })
            });
        if drifted {
            *drifted_by_pool.entry(label(l::NODEPOOL)).or_insert(0) += 1;
        }
        let (instance_type, zone) = (label(l::INSTANCE_TYPE), label(l::ZONE));
        let capacity_type = match label(l::CAPACITY_TYPE) {
            c if !c.is_empty() => c,
            _ if labels
                .get("eks.amazonaws.com/compute-type")
                .map(String::as_str)
                == Some("fargate") =>
            {
                "fargate".to_owned()
            }
            _ => String::new(),
        };
        nodes.push(NodeRow {
            name: state.name().to_owned(),
            usage,
            pods: pods.len(),
            max_pods: u64::try_from(allocatable.get("pods").value()).unwrap_or_default(),
            price: prices.price(&instance_type, &zone, &capacity_type),
            instance_type,
            capacity_type,
            zone,
            node_pool: label(l::NODEPOOL),
            status,
            ready: match (state.node.is_some(), state.ready()) {
                (false, _) => "Launching",
                (true, true) => "Ready",
                (true, false) => "NotReady",
            }
            .to_owned(),
            age_seconds: age(state.created(), now),
            extra: options.extra_labels.iter().map(|k| label(k)).collect(),
            verdict: None,
        });
    }
    match options.sort {
        Sort::Creation => nodes.sort_by(|a, b| {
            b.age_seconds
                .cmp(&a.age_seconds)
                .then_with(|| a.name.cmp(&b.name))
        }),
        Sort::Name => nodes.sort_by(|a, b| a.name.cmp(&b.name)),
        Sort::Usage => nodes.sort_by(|a, b| {
            let share = |n: &NodeRow| n.usage.first().map_or(0.0, Usage::share);
            share(b)
                .total_cmp(&share(a))
                .then_with(|| a.name.cmp(&b.name))
        }),
        Sort::Price => nodes.sort_by(|a, b| {
            b.price
                .unwrap_or(0.0)
                .total_cmp(&a.price.unwrap_or(0.0))
                .then_with(|| a.name.cmp(&b.name))
        }),
    }
    let totals = options
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| Usage {
            resource: r.clone(),
            requested: nodes.iter().map(|n| n.usage[i].requested).sum(),
            allocatable: nodes.iter().map(|n| n.usage[i].allocatable).sum(),
        })
        .collect();
    let priced: Vec<f64> = nodes.iter().filter_map(|n| n.price).collect();
    let cost_per_hour = (!priced.is_empty()).then(|| priced.iter().sum());
    let mut counts = PodCounts::default();
    let mut pending = Vec::new();
    for pod in cluster.pods().filter(|p| !p.is_terminal()) {
        if pod.node_name().is_some() {
            counts.bound += 1;
            counts.running += usize::from(pod.phase() == "Running");
        } else if pod.phase() == "Pending" || pod.phase().is_empty() {
            counts.pending += 1;
            let key = pod.key();
            pending.push(PendingRow {
                reason: listed.scheduling.get(&key).cloned().unwrap_or_default(),
                age_seconds: age(
                    pod.metadata
                        .creation_timestamp
                        .as_ref()
                        .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0)),
                    now,
                ),
                pod: key,
            });
        }
    }
    pending.sort_by(|a, b| {
        b.age_seconds
            .cmp(&a.age_seconds)
            .then_with(|| a.pod.cmp(&b.pod))
    });
    let node_pools = cluster
        .node_pools()
        .filter_map(|pool| {
            let name = pool.metadata.name.clone()?;
            let usage = cluster.node_pool_usage(&name);
            let ready = pool
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone());
            let limits = pool
                .spec
                .limits
                .iter()
                .flatten()
                .map(|(resource, limit)| {
                    let used = if resource == l::RESOURCE_NODES {
                        usage.nodes.to_string()
                    } else {
                        format_quantity(resource, amount(usage.resources.get(resource)))
                    };
                    (resource.clone(), used, limit.0.clone())
                })
                .collect();
            Some(PoolRow {
                nodes: nodes.iter().filter(|n| n.node_pool == name).count() as u64,
                drifted: drifted_by_pool.get(&name).copied().unwrap_or(0),
                name,
                ready,
                limits,
                budgets: None,
            })
        })
        .collect();
    View {
        totals,
        cost_per_hour,
        pricing: prices.source(),
        pods: counts,
        nodes,
        node_pools,
        pending,
        events: events(&listed.events, now),
        events_problem: listed.events_problem.clone(),
        saving_per_hour: None,
    }
}

/// A resource amount for people: cpu in cores (`1.5`), memory and storage in `Gi`/`Mi`,
/// anything else as a number.
pub fn format_quantity(resource: &str, value: f64) -> String {
    let bytes =
        resource == "memory" || resource.contains("storage") || resource.starts_with("hugepages");
    if bytes {
        let gi = value / f64::from(1u32 << 30);
        if gi >= 1.0 {
            return format!("{}Gi", trim(gi));
        }
        return format!("{}Mi", trim(value / f64::from(1u32 << 20)));
    }
    trim(value)
}

fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
pub(crate) mod tests {
    use karpenter_state::object::Object;
    use pretty_assertions::assert_eq;

    use super::*;

    pub(crate) fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    pub(crate) fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("a test object")
    }

    /// Two nodes of pool `general` (one on-demand, one spot and being disrupted), a NodeClaim
    /// still launching, pods bound and one pending with kube-scheduler's reason.
    pub(crate) fn listed() -> Listed {
        let mut listed = Listed::default();
        let node = |name: &str, it: &str, ct: &str, created: &str, taints: serde_json::Value| {
            Object::Node(object(serde_json::json!({
                "metadata": {"name": name, "creationTimestamp": created, "labels": {
                    "node.kubernetes.io/instance-type": it,
                    "karpenter.sh/capacity-type": ct,
                    "topology.kubernetes.io/zone": "us-east-1a",
                    "karpenter.sh/nodepool": "general",
                    "team": "shop"
                }},
                "spec": {"providerID": format!("aws:///us-east-1a/i-{name}"), "taints": taints},
                "status": {
                    "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                    "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }
            })))
        };
        listed.cluster.apply(node(
            "node-a",
            "c5.large",
            "on-demand",
            "2026-11-27T08:00:00Z",
            serde_json::json!([]),
        ));
        listed.cluster.apply(node(
            "node-b",
            "m5.large",
            "spot",
            "2026-11-27T09:30:00Z",
            serde_json::json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        ));
        listed.cluster.apply(Object::NodeClaim(object(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "general-x7", "creationTimestamp": "2026-11-27T09:59:30Z",
                "labels": {"karpenter.sh/nodepool": "general",
                    "node.kubernetes.io/instance-type": "c5.large",
                    "karpenter.sh/capacity-type": "on-demand",
                    "topology.kubernetes.io/zone": "us-east-1b"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}
        }))));
        listed.cluster.apply(Object::NodePool(object(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {"limits": {"cpu": "100"}, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                "message": "", "lastTransitionTime": "2026-11-27T08:00:00Z"}]}
        }))));
        let pod = |name: &str, node: Option<&str>, cpu: &str, phase: &str| {
            Object::Pod(object(serde_json::json!({
                "metadata": {"name": name, "namespace": "shop", "uid": name,
                    "creationTimestamp": "2026-11-27T09:58:00Z"},
                "spec": {"nodeName": node, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"phase": phase}
            })))
        };
        listed
            .cluster
            .apply(pod("web-1", Some("node-a"), "500m", "Running"));
        listed
            .cluster
            .apply(pod("web-2", Some("node-a"), "1", "Running"));
        listed
            .cluster
            .apply(pod("api-1", Some("node-b"), "250m", "Pending"));
        listed.cluster.apply(pod("huge", None, "64", "Pending"));
        listed.scheduling.insert(
            "shop/huge".into(),
            "0/2 nodes are available: 2 Insufficient cpu.".into(),
        );
        listed.events = events_of_karpenter();
        listed
    }

    /// Karpenter's events of [`listed`], not in order: a pod nominated, a pod failing to
    /// schedule three times, node-b being disrupted, a spot interruption.
    pub(crate) fn events_of_karpenter() -> Vec<Event> {
        let event = |type_: &str,
                     reason: &str,
                     regarding: serde_json::Value,
                     at: &str,
                     series: Option<(i32, &str)>,
                     note: &str| {
            let mut event = serde_json::json!({
                "metadata": {"name": format!("{reason}.{at}"), "namespace": "default"},
                "eventTime": at, "reportingController": "karpenter",
                "reportingInstance": "karpenter-0", "action": reason,
                "type": type_, "reason": reason, "regarding": regarding, "note": note
            });
            if let Some((count, last)) = series {
                event["series"] = serde_json::json!({"count": count, "lastObservedTime": last});
            }
            object::<Event>(event)
        };
        let pod =
            |name: &str| serde_json::json!({"kind": "Pod", "namespace": "shop", "name": name});
        vec![
            event(
                "Warning",
                "SpotInterrupted",
                serde_json::json!({"kind": "NodeClaim", "name": "general-b2"}),
                "2026-11-27T09:55:00.000000Z",
                None,
                "Spot interruption warning was triggered",
            ),
            event(
                "Normal",
                "Nominated",
                pod("web-1"),
                "2026-11-27T09:59:30.000000Z",
                None,
                "Pod should schedule on: nodeclaim/general-x7",
            ),
            event(
                "Warning",
                "FailedScheduling",
                pod("huge"),
                "2026-11-27T09:58:10.000000Z",
                Some((3, "2026-11-27T09:59:50.000000Z")),
                "Failed to schedule pod, incompatible with nodepool \"general\", daemonset \
                 overhead={\"cpu\":\"0\"}, no instance type satisfied resources \
                 {\"cpu\":\"64\",\"memory\":\"1Gi\",\"pods\":\"1\"}",
            ),
            event(
                "Normal",
                "DisruptionTerminating",
                serde_json::json!({"kind": "Node", "name": "node-b"}),
                "2026-11-27T09:58:00.000000Z",
                None,
                "Disrupting Node: Drifted",
            ),
        ]
    }

    pub(crate) struct Flat;

    impl Prices for Flat {
        fn price(&self, it: &str, _: &str, ct: &str) -> Option<f64> {
            match (it, ct) {
                ("c5.large", "on-demand") => Some(0.085),
                ("m5.large", "spot") => Some(0.04),
                _ => None,
            }
        }
    }

    #[test]
    fn each_node_shows_its_requests_price_disruption_state_and_age() {
        let view = view(
            &listed(),
            &Flat,
            &Options {
                extra_labels: vec!["team".into()],
                ..Options::default()
            },
            at("2026-11-27T10:00:00Z"),
        );
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["node-a", "node-b", "general-x7"], "oldest first");
        let a = &view.nodes[0];
        assert_eq!(a.usage[0].requested, 1.5);
        assert_eq!(a.usage[0].allocatable, 2.0);
        assert_eq!((a.pods, a.max_pods), (2, 29));
        assert_eq!(a.price, Some(0.085));
        assert_eq!(a.ready, "Ready");
        assert_eq!(a.age_seconds, 7200);
        assert_eq!(a.extra, ["shop"]);
        let b = &view.nodes[1];
        assert_eq!(
            b.status,
            ["Disrupting"],
            "the v1 taint, not the v1beta1 one"
        );
        assert_eq!(b.capacity_type, "spot");
        let launching = &view.nodes[2];
        assert_eq!(launching.ready, "Launching");
        assert_eq!(view.cost_per_hour, Some(0.085 + 0.04 + 0.085));
        assert_eq!(
            view.pods,
            PodCounts {
                pending: 1,
                bound: 3,
                running: 2
            }
        );
        assert_eq!(view.pending.len(), 1);
        assert!(view.pending[0].reason.contains("Insufficient cpu"));
        assert_eq!(view.node_pools.len(), 1);
        assert_eq!(view.node_pools[0].ready, "True");
        assert_eq!(view.node_pools[0].limits[0].0, "cpu");
    }

    #[test]
    fn karpenters_events_come_newest_first_with_their_object_and_count() {
        let view = view(
            &listed(),
            &Flat,
            &Options::default(),
            at("2026-11-27T10:00:00Z"),
        );
        let rows: Vec<(i64, &str, &str, &str, u32)> = view
            .events
            .iter()
            .map(|e| {
                (
                    e.age_seconds,
                    e.type_.as_str(),
                    e.reason.as_str(),
                    e.object.as_str(),
                    e.count,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (10, "Warning", "FailedScheduling", "Pod/shop/huge", 3),
                (30, "Normal", "Nominated", "Pod/shop/web-1", 1),
                (120, "Normal", "DisruptionTerminating", "Node/node-b", 1),
                (300, "Warning", "SpotInterrupted", "NodeClaim/general-b2", 1),
            ],
            "a series is as old as its last observation"
        );
        assert_eq!(view.events_problem, None);
        let json = serde_json::to_value(&view).unwrap_or_default();
        assert_eq!(json["events"][0]["type"], "Warning");
        assert_eq!(json["events"][0]["count"], 3);
        assert_eq!(json["events"][1]["object"], "Pod/shop/web-1");
        assert_eq!(
            json["events"][1]["note"],
            "Pod should schedule on: nodeclaim/general-x7"
        );
        assert!(json.get("eventsProblem").is_none());
    }

    #[test]
    fn events_that_cannot_be_listed_leave_the_rest_of_the_view_and_say_why() {
        let mut listed = listed();
        listed.events.clear();
        listed.events_problem = Some("listing Events: forbidden".into());
        let view = view(
            &listed,
            &Flat,
            &Options::default(),
            at("2026-11-27T10:00:00Z"),
        );
        assert_eq!(view.nodes.len(), 3);
        assert!(view.events.is_empty());
        let json = serde_json::to_value(&view).unwrap_or_default();
        assert_eq!(json["eventsProblem"], "listing Events: forbidden");
    }

    /// [`listed`] with node-a's NodeClaim, `Drifted=True`.
    pub(crate) fn listed_with_a_drifted_node() -> Listed {
        let mut listed = listed();
        listed.cluster.apply(Object::NodeClaim(object(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "general-a1", "creationTimestamp": "2026-11-27T08:00:00Z",
                "labels": {"karpenter.sh/nodepool": "general",
                    "node.kubernetes.io/instance-type": "c5.large",
                    "karpenter.sh/capacity-type": "on-demand",
                    "topology.kubernetes.io/zone": "us-east-1a"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []},
            "status": {"providerID": "aws:///us-east-1a/i-node-a", "nodeName": "node-a",
                "conditions": [{"type": "Drifted", "status": "True", "reason": "AMIDrift",
                    "message": "", "lastTransitionTime": "2026-11-27T09:00:00Z"}]}
        }))));
        listed
    }

    #[test]
    fn a_nodepool_counts_its_drifted_nodes_and_takes_the_controllers_budgets_and_verdicts() {
        let mut view = view(
            &listed_with_a_drifted_node(),
            &Flat,
            &Options::default(),
            at("2026-11-27T10:00:00Z"),
        );
        assert_eq!(view.node_pools[0].drifted, 1, "node-a's NodeClaim drifted");
        assert_eq!(view.node_pools[0].budgets, None, "not told yet");
        let explained = Explained {
            verdicts: [("node-a".to_owned(), "Drift".to_owned())].into(),
            saving_per_hour: Some(0.085),
            budgets: [(
                "general".to_owned(),
                vec![("Drifted".to_owned(), 0), ("Underutilized".to_owned(), 1)],
            )]
            .into(),
            ..Explained::default()
        };
        explain(&mut view, &explained);
        assert_eq!(view.nodes[0].verdict.as_deref(), Some("Drift"));
        assert_eq!(view.nodes[1].verdict, None);
        assert_eq!(view.saving_per_hour, Some(0.085));
        assert_eq!(
            view.node_pools[0].budgets,
            Some(vec![
                BudgetRow {
                    reason: "Drifted".into(),
                    allowed: 0
                },
                BudgetRow {
                    reason: "Underutilized".into(),
                    allowed: 1
                }
            ])
        );
        let json = serde_json::to_value(&view).unwrap_or_default();
        assert_eq!(json["nodes"][0]["verdict"], "Drift");
        assert_eq!(json["nodePools"][0]["drifted"], 1);
        assert_eq!(json["nodePools"][0]["budgets"][1]["allowed"], 1);
        assert_eq!(json["savingPerHour"], 0.085);
    }

    #[test]
    fn a_node_selector_and_a_sort_by_price_choose_and_order_the_rows() {
        let options = Options {
            node_selector: vec![(
                "karpenter.sh/capacity-type".into(),
                Some("on-demand".into()),
            )],
            sort: Sort::Price,
            ..Options::default()
        };
        let view = view(&listed(), &Flat, &options, at("2026-11-27T10:00:00Z"));
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["general-x7", "node-a"], "equal prices go by name");
        assert_eq!(view.totals[0].allocatable, 2.0 + 0.0);
    }
}
