//! The simulated cluster: a [`karpenter_state::Cluster`] fed as the API server feeds the
//! controller's, plus what only the virtual world knows.
//!
//! A launch creates a NodeClaim and its Node. The NodeClaim is the controller's own
//! (`karpenter_lifecycle::nodeclaim::node_claim`: labels, annotations, requirements, requests,
//! node class, taints, termination grace period) as the cloud returns it launched: named after
//! its node, with the offering's labels, provider id `sim://<name>`, Launched and Registered,
//! status capacity and allocatable, and no expiry (expiry is not simulated). The Node has the
//! offering's labels and the pool's taints and is not Ready yet; it boots
//! [`super::NODE_STARTUP`] later (Node `Ready`, NodeClaim `Initialized`). Placed pods are
//! applied with `spec.nodeName`; binding or removing one moves the NodeClaim's
//! `status.lastPodEventTime`. Readiness, last pod events, nominations and disruption marks are
//! read back from the index, and node shapes for the solver and disruption come from it
//! ([`karpenter_state::StateNode`]). A simulated NodeClaim carries its node's name.
//!
//! What stays here is bookkeeping of the virtual world: each node's price and its launch and
//! ready times (cost, pending times), and the launch order (manifest nodes first), which is the
//! order the solver and disruption see the nodes in, as they may break ties by it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::duration::NillableDuration;
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_api::v1::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
use karpenter_disruption::NodeState;
use karpenter_scheduling::{ExistingNode, ResourceList, pod_record};
use karpenter_state::conditions::{api_time, set_node_claim_condition, set_node_condition};
use karpenter_state::{Cluster, Kind, Object, ObjectRef, StateNode};

use super::disruption::instant;

/// What the virtual world knows of a node beyond the cluster's objects.
#[derive(Debug, Clone)]
struct Book {
    name: String,
    price_per_hour: f64,
    ready_at: Duration,
}

/// A node to launch.
#[derive(Debug, Clone)]
pub struct Launch {
    pub name: String,
    /// Its NodeClaim as the controller creates it (not launched yet).
    pub claim: NodeClaim,
    /// The node's labels: the offering's and the NodeClaim's.
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    pub price_per_hour: f64,
    /// Pods bound to it at launch.
    pub pods: Vec<Pod>,
}

/// A node that went away, with the pods that were on it (unbound again).
#[derive(Debug, Clone)]
pub struct Removed {
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub pods: Vec<Pod>,
}

/// The simulated cluster.
#[derive(Debug, Default)]
pub struct SimCluster {
    index: Cluster,
    /// In launch order.
    books: Vec<Book>,
    /// Nodes launched and not booted yet, with their boot time.
    booting: Vec<(Duration, String)>,
}

fn provider_id(name: &str) -> String {
    format!("sim://{name}")
}

fn default_node_class() -> NodeClassReference {
    NodeClassReference {
        group: "karpenter.k8s.aws".to_owned(),
        kind: "EC2NodeClass".to_owned(),
        name: "default".to_owned(),
    }
}

/// The NodeClaim of a manifest's node that no NodePool shaped: the default node class, no
/// taints, no expiry.
pub(crate) fn unshaped_claim(name: &str) -> NodeClaim {
    NodeClaim::new(
        name,
        NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: None,
            node_class_ref: default_node_class(),
            termination_grace_period: None,
            expire_after: NillableDuration::never(),
        },
    )
}

/// `claim` as the cloud returns it, launched and registered at `at` as node `name`: with the
/// node's `labels`, its provider id, capacity and allocatable, and no expiry (expiry is not
/// simulated).
fn registered(
    mut claim: NodeClaim,
    name: &str,
    provider: &str,
    labels: &BTreeMap<String, String>,
    capacity: BTreeMap<String, Quantity>,
    allocatable: BTreeMap<String, Quantity>,
    at: Duration,
) -> NodeClaim {
    claim.metadata.name = Some(name.to_owned());
    claim
        .metadata
        .labels
        .get_or_insert_default()
        .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    claim.spec.expire_after = NillableDuration::never();
    claim.metadata.creation_timestamp = api_time(instant(at));
    claim.status = Some(NodeClaimStatus {
        node_name: Some(name.to_owned()),
        provider_id: Some(provider.to_owned()),
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        last_pod_event_time: api_time(instant(at)),
        ..NodeClaimStatus::default()
    });
    set_node_claim_condition(
        &mut claim,
        conditions::LAUNCHED,
        "True",
        "Launched",
        "",
        instant(at),
    );
    set_node_claim_condition(
        &mut claim,
        conditions::REGISTERED,
        "True",
        "Registered",
        "",
        instant(at),
    );
    claim
}

impl SimCluster {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node of the manifests, running since 0 with `pods`, at price 0. A node labelled
    /// with a NodePool and an instance type is Karpenter's: it gets a NodeClaim.
    pub fn add_existing(&mut self, manifest: &Node, pods: Vec<Pod>) {
        let name = manifest.metadata.name.clone().unwrap_or_default();
        let mut node = manifest.clone();
        node.metadata.creation_timestamp = api_time(instant(Duration::ZERO));
        set_node_condition(
            &mut node,
            "Ready",
            true,
            "KubeletReady",
            instant(Duration::ZERO),
        );
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let label = |key: &str| node_labels.get(key).filter(|v| !v.is_empty());
        if label(labels::NODEPOOL).is_some() && label(labels::INSTANCE_TYPE).is_some() {
            let spec = node.spec.get_or_insert_with(NodeSpec::default);
            let provider = spec
                .provider_id
                .get_or_insert_with(|| provider_id(&name))
                .clone();
            let status = node.status.clone().unwrap_or_default();
            let capacity = status.capacity.unwrap_or_default();
            let allocatable = status.allocatable.unwrap_or_else(|| capacity.clone());
            let mut claim = registered(
                unshaped_claim(&name),
                &name,
                &provider,
                &node_labels,
                capacity,
                allocatable,
                Duration::ZERO,
            );
            set_node_claim_condition(
                &mut claim,
                conditions::INITIALIZED,
                "True",
                "Initialized",
                "",
                instant(Duration::ZERO),
            );
            self.index.apply(Object::NodeClaim(claim));
        }
        self.index.apply(Object::Node(node));
        for mut pod in pods {
            pod.spec.get_or_insert_with(Default::default).node_name = Some(name.clone());
            self.index.apply(Object::Pod(pod));
        }
        self.books.push(Book {
            name,
            price_per_hour: 0.0,
            ready_at: Duration::ZERO,
        });
    }

    /// Launches a node at `now`, with its pods bound; it boots at `ready_at`.
    pub fn launch(&mut self, launch: Launch, now: Duration, ready_at: Duration) {
        let provider = provider_id(&launch.name);
        let claim = registered(
            launch.claim,
            &launch.name,
            &provider,
            &launch.labels,
            launch.capacity.to_k8s(),
            launch.allocatable.to_k8s(),
            now,
        );
        let mut node = Node {
            metadata: ObjectMeta {
                name: Some(launch.name.clone()),
                labels: Some(launch.labels),
                creation_timestamp: api_time(instant(now)),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider),
                taints: Some(launch.taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(launch.capacity.to_k8s()),
                allocatable: Some(launch.allocatable.to_k8s()),
                ..NodeStatus::default()
            }),
        };
        set_node_condition(&mut node, "Ready", false, "KubeletNotReady", instant(now));
        self.index.apply(Object::NodeClaim(claim));
        self.index.apply(Object::Node(node));
        for mut pod in launch.pods {
            pod.spec.get_or_insert_with(Default::default).node_name = Some(launch.name.clone());
            self.index.apply(Object::Pod(pod));
        }
        self.books.push(Book {
            name: launch.name.clone(),
            price_per_hour: launch.price_per_hour,
            ready_at,
        });
        self.booting.push((ready_at, launch.name));
    }

    /// Boots the nodes whose startup is over at `now`: Node `Ready`, NodeClaim `Initialized`,
    /// both at their boot time.
    pub fn boot(&mut self, now: Duration) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.booting)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.booting = later;
        for (at, name) in due {
            if let Some(mut node) = self.index.node(&name).cloned() {
                set_node_condition(&mut node, "Ready", true, "KubeletReady", instant(at));
                self.index.apply(Object::Node(node));
            }
            if let Some(mut claim) = self.index.node_claim(&name).cloned() {
                set_node_claim_condition(
                    &mut claim,
                    conditions::INITIALIZED,
                    "True",
                    "Initialized",
                    "",
                    instant(at),
                );
                self.index.apply(Object::NodeClaim(claim));
            }
        }
    }

    /// Binds `pod` to `node` at `now` and nominates the node until `nominated_until`.
    pub fn bind(&mut self, node: &str, mut pod: Pod, now: Duration, nominated_until: Duration) {
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.to_owned());
        self.index.apply(Object::Pod(pod));
        self.pod_event(node, now);
        self.index.nominate(node, instant(nominated_until));
    }

    /// Moves the node's `status.lastPodEventTime` to `now`.
    fn pod_event(&mut self, node: &str, now: Duration) {
        if let Some(mut claim) = self.index.node_claim(node).cloned() {
            claim
                .status
                .get_or_insert_with(Default::default)
                .last_pod_event_time = api_time(instant(now));
            self.index.apply(Object::NodeClaim(claim));
        }
    }

    /// Deletes the bound pods named by `keys` (`namespace/name`) at `now`.
    pub fn remove_pods(&mut self, keys: &BTreeSet<String>, now: Duration) {
        let doomed: Vec<(ObjectRef, String)> = self
            .index
            .pods()
            .filter(|p| keys.contains(&pod_record::key(&p.metadata)))
            .map(|p| {
                let node = p.node_name().unwrap_or_default().to_owned();
                let reference = ObjectRef::new(
                    Kind::Pod,
                    Some(p.metadata.namespace.as_deref().unwrap_or("default")),
                    p.metadata.name.as_deref().unwrap_or_default(),
                );
                (reference, node)
            })
            .collect();
        let mut touched = BTreeSet::new();
        for (reference, node) in doomed {
            self.index.delete(&reference);
            touched.insert(node);
        }
        for node in touched {
            self.pod_event(&node, now);
        }
    }

    /// Removes a node, its NodeClaim and its pods, which come back unbound.
    pub fn remove_node(&mut self, name: &str) -> Option<Removed> {
        let index = self.books.iter().position(|b| b.name == name)?;
        self.books.remove(index);
        self.booting.retain(|(_, n)| n != name);
        let state = self.index.state_node_named(name)?;
        let labels = state.labels();
        let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
        let (instance_type, zone) = (label(labels::INSTANCE_TYPE), label(labels::ZONE));
        let pods: Vec<Pod> = state.pods.iter().map(|p| Pod::from(&***p)).collect();
        let claim = state.node_claim.and_then(|c| c.metadata.name.clone());
        for pod in &pods {
            self.index.delete(&ObjectRef::new(
                Kind::Pod,
                Some(pod.metadata.namespace.as_deref().unwrap_or("default")),
                pod.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
        if let Some(claim) = claim {
            self.index
                .delete(&ObjectRef::new(Kind::NodeClaim, None, &claim));
        }
        self.index.delete(&ObjectRef::new(Kind::Node, None, name));
        let pods = pods
            .into_iter()
            .map(|mut pod| {
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = None;
                }
                pod
            })
            .collect();
        Some(Removed {
            name: name.to_owned(),
            instance_type,
            zone,
            pods,
        })
    }

    /// Marks (or unmarks) nodes as chosen by a disruption command.
    pub fn mark_for_deletion(&mut self, names: &BTreeSet<String>, marked: bool) {
        for name in names {
            self.index.mark_for_deletion(name, marked);
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.books.iter().any(|b| b.name == name)
    }

    /// When the node is (or was) ready.
    pub fn ready_at(&self, name: &str) -> Option<Duration> {
        self.books
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.ready_at)
    }

    pub fn len(&self) -> usize {
        self.books.len()
    }

    /// The nodes as the index joins them, in launch order.
    fn state_nodes(&self) -> Vec<StateNode<'_>> {
        let order: Vec<&str> = self.books.iter().map(|b| b.name.as_str()).collect();
        self.index.state_nodes_in(&order)
    }

    /// Node names in launch order.
    pub fn launch_order(&self) -> Vec<String> {
        self.books.iter().map(|b| b.name.clone()).collect()
    }

    /// The first node (in launch order) for which `matches` holds on its name and labels.
    pub fn find(
        &self,
        matches: impl Fn(&str, &BTreeMap<String, String>) -> bool,
    ) -> Option<String> {
        self.state_nodes()
            .into_iter()
            .find(|n| matches(n.name(), &n.labels()))
            .map(|n| n.name().to_owned())
    }

    /// The solver's view of the nodes, in launch order.
    pub fn existing(&self) -> Vec<ExistingNode> {
        self.state_nodes()
            .iter()
            .map(StateNode::to_existing)
            .collect()
    }

    /// Disruption's view at `now`, in launch order, with each node's price; `queued` names the
    /// candidates the orchestration queue holds for validation.
    pub fn node_states(&self, now: Duration, queued: &BTreeSet<&str>) -> Vec<NodeState> {
        let prices: BTreeMap<&str, f64> = self
            .books
            .iter()
            .map(|b| (b.name.as_str(), b.price_per_hour))
            .collect();
        self.state_nodes()
            .iter()
            .map(|n| {
                let mut state = n.to_node_state(instant(now));
                state.price = prices.get(n.name()).copied();
                state.queued = queued.contains(n.name());
                state
            })
            .collect()
    }

    /// Bound pods, keyed `namespace/name`.
    pub fn pod_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.index.pods().map(|p| pod_record::key(&p.metadata))
    }

    pub fn pods_running(&self) -> usize {
        self.index.pods().count()
    }

    /// Summed prices, in launch order.
    pub fn cost_per_hour(&self) -> f64 {
        self.books.iter().fold(0.0, |sum, b| sum + b.price_per_hour)
    }

    /// (CPU requested by bound pods, CPU allocatable) in millicores, over all nodes.
    pub fn cpu(&self) -> (i64, i64) {
        self.state_nodes().iter().fold((0, 0), |(u, t), n| {
            let used: i64 = n
                .pods
                .iter()
                .map(|p| {
                    crate::resources::cpu_millis(&crate::resources::pod_requests(p.spec.as_deref()))
                })
                .sum();
            (u + used, t + crate::resources::cpu_millis(&n.allocatable()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(name: &str, price: f64, pods: Vec<Pod>) -> Launch {
        let resources = |cpu: &str| match ResourceList::parse([("cpu", cpu), ("pods", "29")]) {
            Ok(list) => list,
            Err(e) => panic!("test resources parse: {e}"),
        };
        Launch {
            name: name.to_owned(),
            claim: unshaped_claim(name),
            labels: BTreeMap::from([
                (labels::NODEPOOL.to_owned(), "general".to_owned()),
                (labels::INSTANCE_TYPE.to_owned(), "m5.large".to_owned()),
            ]),
            taints: Vec::new(),
            capacity: resources("2"),
            allocatable: resources("1930m"),
            price_per_hour: price,
            pods,
        }
    }

    fn pod(name: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("shop".to_owned());
        pod
    }

    fn seconds(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_launched_node_is_managed_and_initialized_only_once_it_has_booted() {
        let mut cluster = SimCluster::new();
        cluster.launch(
            launch("general-1", 0.1, vec![pod("web-1")]),
            seconds(1),
            seconds(61),
        );
        let states = cluster.node_states(seconds(30), &BTreeSet::new());
        let state = states.first().map(|s| {
            (
                s.node_claim.clone(),
                s.initialized,
                s.ready,
                s.price,
                s.pods.len(),
            )
        });
        assert_eq!(
            state,
            Some((Some("general-1".to_owned()), false, false, Some(0.1), 1))
        );
        cluster.boot(seconds(61));
        let states = cluster.node_states(seconds(61), &BTreeSet::new());
        assert_eq!(
            states
                .first()
                .map(|s| (s.initialized, s.ready, s.initialized_at)),
            Some((true, true, Some(instant(seconds(61)))))
        );
    }

    #[test]
    fn nodes_keep_their_launch_order_not_their_name_order() {
        let mut cluster = SimCluster::new();
        for n in [2, 10, 3] {
            cluster.launch(
                launch(&format!("general-{n}"), 0.1, Vec::new()),
                seconds(1),
                seconds(61),
            );
        }
        let names: Vec<String> = cluster.existing().into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["general-2", "general-10", "general-3"]);
        assert_eq!(cluster.launch_order(), names);
    }

    #[test]
    fn binding_a_pod_moves_the_last_pod_event_and_nominates_the_node() {
        let mut cluster = SimCluster::new();
        cluster.launch(
            launch("general-1", 0.1, Vec::new()),
            seconds(1),
            seconds(61),
        );
        cluster.bind("general-1", pod("web-1"), seconds(100), seconds(120));
        let states = cluster.node_states(seconds(110), &BTreeSet::new());
        assert_eq!(
            states
                .first()
                .map(|s| (s.last_pod_event, s.nominated_until, s.pods.len())),
            Some((Some(instant(seconds(100))), Some(instant(seconds(120))), 1))
        );
    }

    #[test]
    fn a_manifest_node_of_a_node_pool_is_managed_running_since_zero_and_free() {
        let mut karpenters = Node::default();
        karpenters.metadata.name = Some("old-1".to_owned());
        karpenters.metadata.labels = Some(launch("x", 0.0, Vec::new()).labels);
        let mut foreign = Node::default();
        foreign.metadata.name = Some("foreign-1".to_owned());
        let mut cluster = SimCluster::new();
        cluster.add_existing(&karpenters, vec![pod("web-1")]);
        cluster.add_existing(&foreign, Vec::new());
        let states: Vec<_> = cluster
            .node_states(seconds(5), &BTreeSet::new())
            .into_iter()
            .map(|s| {
                (
                    s.name,
                    s.node_claim,
                    s.ready && s.initialized,
                    s.created,
                    s.price,
                    s.pods.len(),
                )
            })
            .collect();
        let zero = instant(Duration::ZERO);
        assert_eq!(
            states,
            [
                (
                    "old-1".to_owned(),
                    Some("old-1".to_owned()),
                    true,
                    zero,
                    Some(0.0),
                    1
                ),
                ("foreign-1".to_owned(), None, true, zero, Some(0.0), 0),
            ]
        );
    }

    #[test]
    fn a_removed_node_gives_back_its_pods_unbound() {
        let mut cluster = SimCluster::new();
        cluster.launch(
            launch("general-1", 0.1, vec![pod("web-1")]),
            seconds(1),
            seconds(61),
        );
        let removed = cluster.remove_node("general-1");
        let unbound = removed.as_ref().map(|r| {
            r.pods
                .iter()
                .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
                .collect::<Vec<_>>()
        });
        assert_eq!(unbound, Some(vec![None]));
        assert_eq!((cluster.len(), cluster.pods_running()), (0, 0));
        assert!(!cluster.contains("general-1"));
    }
}
