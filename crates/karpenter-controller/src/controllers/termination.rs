//! Node termination (upstream `node.termination`): every Node being deleted that carries the
//! `karpenter.sh/termination` finalizer gets one pass at a time, decided by
//! [`karpenter_lifecycle::node_termination::decide_termination`] (its NodeClaim deleted, the
//! `karpenter.sh/disrupted:NoSchedule` taint, the drain through the Eviction API, the
//! `Drained`, `VolumesDetached` and `InstanceTerminating` conditions, the instance, the
//! finalizer) and performed here in order, stopping at the first failure. A PDB that refuses
//! an eviction is asked again on the next pass, never overridden; only the NodeClaim's
//! termination grace period deletes pods past it. Passes run on changes and at least every
//! [`RESYNC`]. Across the nodes that began draining in the last 10 s, larger pods are evicted
//! first ([`EvictionOrder`]), so kube-scheduler places their replacements before smaller ones
//! take the room they need. A pod evicted already is not asked for again while the watch has
//! not yet shown it terminating ([`Evicted`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions::DISRUPTION_REASON;
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_lifecycle::evicted::Evicted;
use karpenter_lifecycle::eviction_order::{EvictionOrder, ORDER_GAP, ordered, size_class};
use karpenter_lifecycle::node_termination::{
    TerminationPass, TerminationStep, TerminationView, decide_termination, is_terminating,
};
use karpenter_lifecycle::termination::{PodAction, attachments_to_await};
use karpenter_scheduling::PodRecord;
use karpenter_state::Cluster;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams};

use super::lock;
use crate::cluster::writes::{self, WriteError};
use crate::leader::Fenced;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// Changes are looked at at most this often.
const SCAN_INTERVAL: Duration = Duration::from_millis(200);
/// Every terminating node is looked at least this often (a PDB that refused an eviction is
/// asked again).
pub const RESYNC: Duration = Duration::from_secs(1);
/// Nodes terminated at once.
pub const CONCURRENCY: usize = 32;
/// Eviction requests in flight at once for one node (the client's rate limit still applies).
const EVICTIONS_AT_ONCE: usize = 64;

/// The termination loop.
#[derive(Debug)]
pub struct Termination<C> {
    pub ctx: Context<C>,
    /// Pod events already told (pod, reason, message): each once, not at every pass.
    told: std::sync::Mutex<std::collections::HashSet<(String, &'static str, String)>>,
    /// The last evictions by size class, across passes ([`EvictionOrder`]).
    order: std::sync::Mutex<EvictionOrder>,
    /// The pods evicted and not yet seen terminating ([`Evicted`]).
    evicted: std::sync::Mutex<Evicted>,
}

/// Told pod events remembered at most (then forgotten at once: a few repeats, no growth).
const TOLD_AT_MOST: usize = 4096;

impl<C> Termination<C> {
    pub fn new(ctx: Context<C>) -> Self {
        Termination {
            ctx,
            told: std::sync::Mutex::default(),
            order: std::sync::Mutex::default(),
            evicted: std::sync::Mutex::default(),
        }
    }

    /// Whether (pod, reason, message) is new; remembers it.
    fn first_telling(&self, pod: &str, reason: &'static str, message: &str) -> bool {
        let mut told = lock(&self.told);
        if told.len() >= TOLD_AT_MOST {
            told.clear();
        }
        told.insert((pod.to_owned(), reason, message.to_owned()))
    }

    /// Remembers a pod the Eviction API accepted.
    fn evicted(&self, pod: &PodRecord) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        lock(&self.evicted).record(uid, Utc::now());
    }
}

/// One pass over a terminating Node, with what it was decided from.
#[derive(Debug, Clone)]
pub struct NodePass {
    pub node: Node,
    pub claim: Option<NodeClaim>,
    /// The pods the pass's drain acts on or tells about, by `namespace/name`.
    pub pods: BTreeMap<String, Arc<PodRecord>>,
    pub pass: TerminationPass,
}

/// A step of a pass failed; the pass is tried again.
#[derive(Debug, thiserror::Error)]
pub enum TerminationError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{step} of node {node}: {source}")]
    Api {
        step: &'static str,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("terminating the instance of nodeclaim {claim}: {source}")]
    Cloud {
        claim: String,
        #[source]
        source: CloudError,
    },
    /// Leadership is not confirmed: nothing was evicted or terminated.
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

impl TerminationError {
    /// A conflicting write is tried again from a fresher copy at the next pass; anything else
    /// backs off (a pass that keeps failing against the cloud is not repeated every second).
    pub fn retry(&self) -> Retry {
        match self {
            TerminationError::Write(error) => error.retry(),
            TerminationError::Api { source, .. } => writes::retry(source),
            TerminationError::Cloud { .. } | TerminationError::Fenced(_) => Retry::Backoff,
        }
    }
}

/// The `reason` of `karpenter_pods_drained_total`: the disruption that deleted the NodeClaim
/// (its `DisruptionReason` condition), else `Forceful Termination` (deleted by a user or an
/// expiry), as upstream labels it.
fn drain_reason(claim: Option<&NodeClaim>) -> &str {
    claim
        .and_then(|c| c.status.as_ref()?.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == DISRUPTION_REASON && c.status == "True")
        })
        .map_or("Forceful Termination", |c| c.reason.as_str())
}

/// A pass for every Node being deleted with our finalizer and no pass in flight, its
/// evictions in `order` across the nodes draining together ([`EvictionOrder`]: larger pods
/// first), without the pods `evicted` already.
pub fn scan(
    cluster: &Cluster,
    now: DateTime<Utc>,
    busy: Busy<'_>,
    order: &mut EvictionOrder,
    evicted: &Evicted,
) -> Scan<NodePass> {
    let claims: BTreeMap<&str, &NodeClaim> = cluster
        .node_claims()
        .filter_map(|c| Some((c.status.as_ref()?.provider_id.as_deref()?, c)))
        .collect();
    let mut scan = Scan::new();
    // Every terminating node's pass first, those in flight too (their pods still awaiting
    // eviction hold smaller pods elsewhere), then the order across them.
    let mut looked = Vec::new();
    for node in cluster.nodes() {
        let Some(name) = node.metadata.name.as_deref() else {
            continue;
        };
        if !is_terminating(node) {
            continue;
        }
        let claim = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|id| claims.get(id).copied());
        let on_node = cluster.pods_on(name);
        let pods: Vec<&PodRecord> = on_node.iter().map(|p| &***p).collect();
        let attachments = cluster.volume_attachments_on(name);
        let volume_of = |namespace: &str, claim: &str| {
            cluster
                .persistent_volume_claim(namespace, claim)
                .and_then(|c| c.spec.as_ref()?.volume_name.clone())
        };
        let awaited = attachments_to_await(&attachments, &pods, volume_of, now);
        let mut pass = decide_termination(
            &TerminationView {
                node,
                claim,
                pods: &pods,
                attachments: &awaited,
            },
            now,
        );
        if let Some(plan) = pass.drain_mut().filter(|_| !evicted.is_empty()) {
            let uids: HashMap<String, &str> = on_node
                .iter()
                .filter_map(|p| Some((p.key(), p.metadata.uid.as_deref()?)))
                .collect();
            evicted.skip_in(plan, |key| uids.get(key).copied(), now);
        }
        let since = node
            .metadata
            .deletion_timestamp
            .as_ref()
            .and_then(karpenter_state::conditions::from_api_time)
            .unwrap_or(now);
        looked.push((name, node, claim, on_node, pass, since));
    }
    let mut classes: HashMap<String, i32> = HashMap::new();
    let mut awaiting = Vec::new();
    for (_, _, _, on_node, pass, since) in &looked {
        let Some(plan) = pass.drain().filter(|_| ordered(*since, now)) else {
            continue;
        };
        let evicting: std::collections::HashSet<&str> = plan
            .actions
            .iter()
            .filter(|(_, a)| *a == PodAction::Evict)
            .map(|(k, _)| k.as_str())
            .collect();
        for pod in on_node {
            let key = pod.key();
            // A DaemonSet pod is not placed elsewhere: it neither waits nor holds.
            if evicting.contains(key.as_str()) && !pod.is_daemonset() {
                let class = size_class(pod);
                awaiting.push(class);
                classes.insert(key, class);
            }
        }
    }
    let front = order.front(awaiting, now);
    for (name, node, claim, on_node, mut pass, since) in looked {
        if busy.contains(name) {
            continue;
        }
        if let Some(plan) = pass.drain_mut() {
            let held = order.admit(plan, |key| classes.get(key).copied(), front, since, now);
            if held > 0 {
                scan.requeue_after(front.recheck.unwrap_or(ORDER_GAP));
            }
        }
        if let Some(after) = pass.requeue_after {
            scan.requeue_after(after);
        }
        if pass.steps.is_empty() {
            continue;
        }
        let named: std::collections::BTreeSet<&str> = pass
            .drain()
            .map(|plan| {
                plan.actions
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .chain(plan.pod_events.iter().map(|(k, _)| k.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        let pods = on_node
            .iter()
            .map(|p| (p.key(), Arc::clone(p)))
            .filter(|(key, _)| named.contains(key.as_str()))
            .collect();
        scan.step(
            name,
            NodePass {
                node: node.clone(),
                claim: claim.cloned(),
                pods,
                pass,
            },
        );
    }
    scan
}

impl<C: CloudProvider + 'static> Reconciler for Termination<C> {
    type Step = NodePass;
    type Error = TerminationError;
    const NAME: &'static str = "node.termination";

    fn shape(&self) -> Shape {
        Shape::new(SCAN_INTERVAL, RESYNC)
            .concurrency(CONCURRENCY)
            .backoff(Duration::from_secs(1), Duration::from_secs(30))
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<NodePass> {
        let mut evicted = lock(&self.evicted);
        evicted.forget_old(now);
        scan(cluster, now, busy, &mut lock(&self.order), &evicted)
    }

    async fn execute(&self, pass: NodePass) -> Result<Action, TerminationError> {
        self.pass(pass).await.map(|()| Action::AwaitChange)
    }

    fn error_policy(&self, error: &TerminationError) -> Retry {
        error.retry()
    }

    fn step_name(_: &NodePass) -> &'static str {
        "pass"
    }
}

impl<C: CloudProvider + 'static> Termination<C> {
    /// Performs one pass's steps in order.
    async fn pass(&self, pass: NodePass) -> Result<(), TerminationError> {
        let NodePass {
            node,
            claim,
            pods,
            pass,
        } = pass;
        let name = node.metadata.name.clone().unwrap_or_default();
        let writer = self.ctx.writer();
        for step in &pass.steps {
            match step {
                TerminationStep::DeleteNodeClaim { claim } => {
                    writer.delete::<NodeClaim>(claim, "deleting").await?;
                }
                TerminationStep::Taint => writer.set_disrupted_taint(&name, true).await?,
                TerminationStep::Condition {
                    claim,
                    type_,
                    status,
                    reason,
                } => {
                    writer
                        .set_claim_condition(claim, type_, Some((status, reason, "")), Utc::now())
                        .await?;
                }
                TerminationStep::Drain(plan) => {
                    for (key, event) in &plan.pod_events {
                        let Some(pod) = pods.get(key) else { continue };
                        if !self.first_telling(key, event.reason, &event.message) {
                            continue;
                        }
                        if event.warning {
                            self.ctx
                                .events
                                .warn_pod(pod, event.reason, &event.message)
                                .await;
                        } else {
                            self.ctx
                                .events
                                .normal_pod(pod, event.reason, &event.message)
                                .await;
                        }
                    }
                    let reason = drain_reason(claim.as_ref());
                    // One tier's evictions at a time, as upstream's eviction queue makes
                    // them: a node of 170 pods drained one round trip after another took 17 s.
                    let requests: Vec<_> = plan
                        .actions
                        .iter()
                        .filter_map(|(key, action)| {
                            Some(self.act(&name, pods.get(key)?, action, reason))
                        })
                        .collect();
                    let outcomes: Vec<Result<bool, TerminationError>> =
                        futures::stream::iter(requests)
                            .buffer_unordered(EVICTIONS_AT_ONCE)
                            .collect()
                            .await;
                    let mut refused = 0usize;
                    for outcome in outcomes {
                        if !outcome? {
                            refused += 1;
                        }
                    }
                    if refused > 0 || !plan.do_not_disrupt.is_empty() {
                        tracing::info!(
                            node = %name,
                            waiting = plan.waiting,
                            refused,
                            do_not_disrupt = plan.do_not_disrupt.len(),
                            "draining"
                        );
                    }
                }
                TerminationStep::TerminateInstance { claim: claim_name } => {
                    let Some(claim) = claim.as_ref() else {
                        continue;
                    };
                    self.ctx.fence.check()?;
                    match self.ctx.cloud.delete(claim).await {
                        Ok(()) | Err(CloudError::NodeClaimNotFound { .. }) => {}
                        Err(source) => {
                            return Err(TerminationError::Cloud {
                                claim: claim_name.clone(),
                                source,
                            });
                        }
                    }
                }
                TerminationStep::RemoveFinalizer => {
                    writer
                        .set_finalizer(
                            &node,
                            labels::TERMINATION_FINALIZER,
                            false,
                            "removing the finalizer",
                        )
                        .await?;
                    self.terminated(&node);
                }
            }
        }
        if let Some(waiting_for) = &pass.waiting_for
            && pass.drain().is_none()
        {
            tracing::debug!(node = %name, %waiting_for, "terminating");
        }
        Ok(())
    }

    /// Counts a terminated Node (once its finalizer is gone, so a pass retried after a
    /// failure counts nothing twice).
    fn terminated(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let pool = node
            .labels()
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let metrics = &self.ctx.metrics;
        metrics.node_drained(&pool);
        metrics.node_terminated(
            &pool,
            node.labels().get(labels::ZONE).map_or("", String::as_str),
        );
        let now = Utc::now();
        let since = |time: Option<&Time>| {
            time.and_then(karpenter_state::conditions::from_api_time)
                .map(|t| (now - t).as_seconds_f64().max(0.0))
        };
        if let Some(seconds) = since(node.metadata.deletion_timestamp.as_ref()) {
            metrics.node_termination_duration(&pool, seconds);
        }
        if let Some(seconds) = since(node.metadata.creation_timestamp.as_ref()) {
            metrics.node_lifetime(&pool, seconds);
        }
        tracing::info!(node = %name, "drained and terminated");
    }

    /// Evicts or deletes one pod of `node`; `false` when a PodDisruptionBudget refused the
    /// eviction.
    pub(crate) async fn act(
        &self,
        node: &str,
        pod: &PodRecord,
        action: &PodAction,
        reason: &str,
    ) -> Result<bool, TerminationError> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), namespace);
        let failed = |step: &'static str| {
            let node = node.to_owned();
            move |source| TerminationError::Api { step, node, source }
        };
        let events = &self.ctx.events;
        match action {
            PodAction::Evict => {
                let params = EvictParams {
                    delete_options: Some(DeleteParams {
                        preconditions: pod.metadata.uid.clone().map(|uid| {
                            kube::api::Preconditions {
                                uid: Some(uid),
                                resource_version: None,
                            }
                        }),
                        ..DeleteParams::default()
                    }),
                    ..EvictParams::default()
                };
                self.ctx.fence.check()?;
                let answer = pods.evict(name, &params).await;
                self.ctx.metrics.eviction_request(match &answer {
                    Ok(_) => 200,
                    Err(kube::Error::Api(status)) => status.code,
                    Err(_) => 0,
                });
                match answer {
                    Ok(_) => {
                        self.evicted(pod);
                        self.ctx.metrics.pod_drained(reason);
                        events
                            .normal_pod(pod, "Evicted", "Evicted pod: the node is terminating")
                            .await;
                        Ok(true)
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                        Ok(true)
                    }
                    Err(kube::Error::Api(status)) if status.code == 429 || status.code == 500 => {
                        events
                            .warn_pod(
                                pod,
                                "FailedDraining",
                                &format!("Failed to evict pod: {}", status.message),
                            )
                            .await;
                        Ok(false)
                    }
                    Err(e) => Err(failed("evicting a pod")(e)),
                }
            }
            PodAction::ForceDelete {
                grace_period_seconds,
            } => {
                let params = DeleteParams {
                    grace_period_seconds: u32::try_from(*grace_period_seconds).ok(),
                    ..DeleteParams::default()
                };
                match pods.delete(name, &params).await {
                    Ok(_) => {
                        events
                            .normal_pod(
                                pod,
                                "Disrupted",
                                "Deleting the pod: the node's termination grace period ends",
                            )
                            .await;
                        Ok(true)
                    }
                    Err(e) if writes::is_not_found(&e) => Ok(true),
                    Err(e) => Err(failed("deleting a pod")(e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_state::Object;

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "message": "m", "reason": "r",
        }))
        .unwrap_or_else(|e| panic!("status: {e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_pass_that_conflicted_goes_again_and_a_failing_cloud_backs_off() {
        let conflict = TerminationError::Write(WriteError {
            step: "removing the finalizer",
            kind: "node",
            name: "n1".into(),
            source: api_error(409).into(),
        });
        assert_eq!(conflict.retry(), Retry::Now);
        let eviction = TerminationError::Api {
            step: "evicting a pod",
            node: "n1".into(),
            source: api_error(503),
        };
        assert_eq!(eviction.retry(), Retry::Backoff);
        let cloud = TerminationError::Cloud {
            claim: "c1".into(),
            source: CloudError::Provider {
                operation: "TerminateInstances",
                message: "throttled".into(),
                retryable: true,
            },
        };
        assert_eq!(cloud.retry(), Retry::Backoff);
        assert!(cloud.to_string().contains("nodeclaim c1"));
    }

    fn draining_node(name: &str, since: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "deletionTimestamp": since,
                         "finalizers": ["karpenter.sh/termination"]},
            "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn bound_pod(name: &str, node: &str, cpu: &str, memory: &str, evicted: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                         "deletionTimestamp": evicted, "deletionGracePeriodSeconds": 30,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web-1", "uid": "r", "controller": true}]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "c", "resources": {"requests":
                         {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn time(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_timezone(&Utc)
    }

    /// The pods each scanned node's pass evicts, by node.
    fn evictions(scan: &Scan<NodePass>) -> BTreeMap<String, Vec<String>> {
        scan.steps()
            .iter()
            .map(|(node, pass)| {
                let evicted = pass.pass.drain().map_or_else(Vec::new, |plan| {
                    plan.actions
                        .iter()
                        .filter(|(_, a)| *a == PodAction::Evict)
                        .map(|(k, _)| k.clone())
                        .collect()
                });
                (node.clone(), evicted)
            })
            .collect()
    }

    /// Nodes `a` (a 900m/3100Mi pod) and `b` (a 3500m/28Gi pod), both draining since the
    /// time returned.
    fn small_and_large_draining() -> (Cluster, &'static str) {
        let mut cluster = Cluster::new();
        let since = "2026-11-29T00:00:00Z";
        for node in ["a", "b"] {
            cluster.apply(Object::Node(draining_node(node, since)));
        }
        cluster.apply(Object::Pod(bound_pod("small", "a", "900m", "3100Mi", None)));
        cluster.apply(Object::Pod(bound_pod("large", "b", "3500m", "28Gi", None)));
        (cluster, since)
    }

    #[test]
    fn the_nodes_draining_together_evict_their_large_pods_first_then_the_small_ones() {
        let (mut cluster, since) = small_and_large_draining();
        let mut order = EvictionOrder::default();

        let first = scan(
            &cluster,
            time(since),
            Busy::none(),
            &mut order,
            &Evicted::default(),
        );
        let evicted = evictions(&first);
        assert_eq!(evicted["a"], Vec::<String>::new(), "{evicted:?}");
        assert_eq!(evicted["b"], ["shop/large"]);
        assert_eq!(first.requeue(), Some(ORDER_GAP));

        // The large pod is terminating: the small one waits out the gap after its eviction.
        cluster.apply(Object::Pod(bound_pod(
            "large",
            "b",
            "3500m",
            "28Gi",
            Some("2026-11-29T00:00:30Z"),
        )));
        let held = scan(
            &cluster,
            time("2026-11-29T00:00:00.400Z"),
            Busy::none(),
            &mut order,
            &Evicted::default(),
        );
        assert_eq!(evictions(&held)["a"], Vec::<String>::new());
        assert_eq!(held.requeue(), Some(Duration::from_millis(600)));
        let after = scan(
            &cluster,
            time("2026-11-29T00:00:01Z"),
            Busy::none(),
            &mut order,
            &Evicted::default(),
        );
        assert_eq!(evictions(&after)["a"], ["shop/small"]);
    }

    #[test]
    fn a_pod_evicted_already_is_not_asked_for_again_before_the_watch_shows_it_terminating() {
        let (cluster, since) = small_and_large_draining();
        let mut evicted = Evicted::default();
        evicted.record("uid-large", time(since));
        // Ten seconds in, the order holds nobody: only the small pod is asked for; the large
        // one still looks running in the copy, and its node's drain still waits for it.
        let now = time("2026-11-29T00:00:10Z");
        let scan = scan(
            &cluster,
            now,
            Busy::none(),
            &mut EvictionOrder::default(),
            &evicted,
        );
        let evicted = evictions(&scan);
        assert_eq!(evicted["a"], ["shop/small"]);
        assert_eq!(evicted["b"], Vec::<String>::new());
        let waiting = scan
            .steps()
            .iter()
            .find(|(node, _)| node == "b")
            .and_then(|(_, pass)| pass.pass.drain())
            .map(|plan| plan.waiting);
        assert_eq!(waiting, Some(1));
    }

    #[test]
    fn a_node_in_flight_still_holds_the_small_pods_of_the_others_and_the_hold_ends() {
        let (cluster, _) = small_and_large_draining();
        let mut order = EvictionOrder::default();
        let in_flight: std::collections::HashSet<String> = ["b".to_owned()].into();
        let busy = Busy::new(&in_flight);
        let held = scan(
            &cluster,
            time("2026-11-29T00:00:09Z"),
            busy,
            &mut order,
            &Evicted::default(),
        );
        assert_eq!(evictions(&held).get("b"), None);
        assert_eq!(evictions(&held)["a"], Vec::<String>::new());
        // Ten seconds into its drain, a node's pods go whatever waits elsewhere (a PDB
        // refusing the large pod holds nobody longer).
        let busy = Busy::new(&in_flight);
        let later = scan(
            &cluster,
            time("2026-11-29T00:00:10Z"),
            busy,
            &mut order,
            &Evicted::default(),
        );
        assert_eq!(evictions(&later)["a"], ["shop/small"]);
    }

    #[test]
    fn pods_drained_by_a_disruption_are_labelled_with_its_reason() {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                      "name": "d"}, "requirements": []},
            "status": {"conditions": [{"type": "DisruptionReason", "status": "True",
                                       "reason": "Underutilized", "message": "",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(drain_reason(Some(&claim)), "Underutilized");
        assert_eq!(drain_reason(None), "Forceful Termination");
    }
}
