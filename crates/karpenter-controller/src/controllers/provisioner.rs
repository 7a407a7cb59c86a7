//! The provisioner (upstream `provisioner` + `provisioner.trigger.pod`): pods the
//! kube-scheduler marked unschedulable open a batch ([`karpenter_lifecycle::Batcher`], 1 s
//! idle / 10 s max) when first seen, when changed and every 10 s while pending
//! ([`PodTriggers`]); when it closes, the solver runs over the cluster as the index holds it
//! (existing nodes, in-flight NodeClaims, NodePools by weight) and the result is executed:
//! NodeClaims created as upstream shapes them (after the NodePool limit check), existing nodes
//! nominated, and every pod nothing can hold told why in a `FailedScheduling` event, one line
//! per NodePool, the text `simulate` prints.
//!
//! Like upstream, a batch is solved only once the index is synced and every NodeClaim it holds
//! has launched, so a NodeClaim whose capacity is not known yet cannot cause a duplicate.
//!
//! CapacityBuffers (feature gate `CapacityBuffer`): their virtual pods (the index holds them,
//! [`super::capacity_buffers`] resolves them) join every batch and open one when they change
//! and every [`BUFFER_RESYNC`]. NodeClaims are launched for them as for pending pods; they are
//! never bound, and get no events and no pod metrics (upstream filters them likewise). Where the
//! batch put them goes back to the index: per buffer for its `Provisioning` condition, and the
//! nodes holding them, which emptiness leaves alone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use karpenter_api::labels;
use karpenter_api::v1::NodePool;
use karpenter_cloud::CloudProvider;
use karpenter_lifecycle::{Batcher, PodTriggers, limits, nodeclaim};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::capacity_buffer;
use karpenter_scheduling::{
    MinValuesPolicy, NewNodeClaim, PreferencePolicy, ResourceList, SolveOptions, SolveResult,
};
use karpenter_state::Cluster;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::settings::{self, Settings};

/// How long an existing node stays nominated for the pods placed on it (upstream: the larger
/// of two batch max durations and 10 s).
pub fn nomination_window(settings: &Settings) -> Duration {
    karpenter_lifecycle::batcher::nomination_window(settings.batch_max_duration)
}

/// The provisioning loop looks for pods to provision at most this often (each look scans every
/// pod the index holds; the batch windows are 1 s and 10 s, so 100 ms is invisible).
const SCAN_INTERVAL: Duration = Duration::from_millis(100);

/// How often the pod times of pods that are gone are forgotten.
const FORGET_INTERVAL: chrono::Duration = chrono::Duration::seconds(10);

/// What a pod with DRA requirements is told while `IGNORE_DRA_REQUESTS` is on (upstream's
/// `FailedScheduling` message).
pub const DRA_NOT_SUPPORTED: &str = "Failed to schedule pod, pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter";

/// CapacityBuffers' virtual pods open a batch at least this often (upstream: each buffer's
/// 30 s requeue triggers the provisioner).
pub const BUFFER_RESYNC: Duration = Duration::from_secs(30);

/// NodeClaims of one batch created at once (the client's QPS limit still applies).
const CREATE_CONCURRENCY: usize = 32;

/// The solver's options from the settings (`PREFERENCE_POLICY`, `MIN_VALUES_POLICY`, zone
/// pinning).
pub fn solve_options(settings: &Settings) -> SolveOptions {
    SolveOptions {
        preference_policy: match settings.preference_policy {
            settings::PreferencePolicy::Respect => PreferencePolicy::Respect,
            settings::PreferencePolicy::Ignore => PreferencePolicy::Ignore,
        },
        min_values_policy: match settings.min_values_policy {
            settings::MinValuesPolicy::Strict => MinValuesPolicy::Strict,
            settings::MinValuesPolicy::BestEffort => MinValuesPolicy::BestEffort,
        },
        pin_anti_affinity_domains: settings.zone_pinning,
        ..SolveOptions::default()
    }
}

/// The batch window and the pods' last triggers (one lock: they are used together).
type Window = (Batcher<DateTime<Utc>>, PodTriggers<DateTime<Utc>>);

/// The provisioning loop.
#[derive(Debug)]
pub struct Provisioner<C> {
    pub ctx: Context<C>,
    batcher: Mutex<Window>,
    /// The virtual pods (uids) that last opened a batch, and when.
    buffers_seen: Mutex<(Vec<String>, Option<DateTime<Utc>>)>,
    /// When the times of pods that are gone were last forgotten.
    forgot_at: Mutex<Option<DateTime<Utc>>>,
}

/// What one batch did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    pub pods: usize,
    pub created: Vec<String>,
    pub nominated: usize,
    pub unschedulable: usize,
}

/// The one step: solve the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provision;

/// No NodeClaim waits for its launch (one whose capacity is not known yet could make the
/// solver launch a duplicate).
fn launches_settled(cluster: &Cluster) -> bool {
    cluster.node_claims().all(|c| {
        c.metadata.deletion_timestamp.is_some()
            || c.status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some()
    })
}

/// What one look at the pending pods found.
#[derive(Debug)]
pub struct Polled<'a> {
    /// The batch closed: solve it now.
    pub solve: bool,
    /// When the open batch closes, if one is open.
    pub wake: Option<Duration>,
    /// The pods that triggered the window at this look (new, changed, or pending another
    /// 10 s): the ones to acknowledge, since every pod triggers when first seen.
    pub triggered: Vec<&'a Arc<PodRecord>>,
}

/// Feeds the batch window with the pods waiting at `now` (`pending`: the cluster's
/// provisionable pods; those [`PodTriggers`] finds due: new, changed, or pending for another
/// 10 s, as upstream's pod trigger controller); whether a batch is to be solved now, and when
/// to look again. A batch that closes while a NodeClaim is still launching is deferred by one
/// idle window (its pods still wait).
pub fn poll_batch<'a>(
    batcher: &mut Batcher<DateTime<Utc>>,
    triggers: &mut PodTriggers<DateTime<Utc>>,
    cluster: &Cluster,
    pending: &[&'a Arc<PodRecord>],
    now: DateTime<Utc>,
) -> Polled<'a> {
    let mut triggered = Vec::new();
    for &pod in pending {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let version = karpenter_state::cluster::revision_of(&pod.metadata).unwrap_or_default();
        if triggers.due(uid, version, now) {
            batcher.trigger(uid, now);
            triggered.push(pod);
        }
    }
    // Every pod still provisionable was just seen; the others are forgotten.
    triggers.forget_unseen(now);
    let mut solve = false;
    if batcher.poll(now) {
        if launches_settled(cluster) {
            solve = true;
        } else {
            batcher.trigger("deferred", now);
        }
    }
    let wake = batcher
        .deadline()
        .map(|deadline| (deadline - now).to_std().unwrap_or_default());
    Polled {
        solve,
        wake,
        triggered,
    }
}

impl<C> Provisioner<C> {
    pub fn new(ctx: Context<C>) -> Self {
        let batcher = Batcher::new(
            ctx.settings.batch_idle_duration,
            ctx.settings.batch_max_duration,
        );
        Provisioner {
            ctx,
            batcher: Mutex::new((batcher, PodTriggers::default())),
            buffers_seen: Mutex::new((Vec::new(), None)),
            forgot_at: Mutex::new(None),
        }
    }

    /// Whether the CapacityBuffers' virtual pods (`uids`) open a batch at `now`: when they
    /// changed, or [`BUFFER_RESYNC`] after they last did.
    fn buffers_due(&self, uids: Vec<String>, now: DateTime<Utc>) -> bool {
        let mut seen = match self.buffers_seen.lock() {
            Ok(seen) => seen,
            Err(poisoned) => poisoned.into_inner(),
        };
        let resync = chrono::Duration::from_std(BUFFER_RESYNC).unwrap_or_default();
        let due = uids != seen.0 || seen.1.is_none_or(|last| now - last >= resync);
        if due && !uids.is_empty() {
            *seen = (uids, Some(now));
        } else if uids.is_empty() {
            *seen = (Vec::new(), None);
        }
        due && !seen.0.is_empty()
    }

    fn batcher(&self) -> MutexGuard<'_, Window> {
        match self.batcher.lock() {
            Ok(batcher) => batcher,
            // The window's timestamps only: keep using them.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl<C: CloudProvider + 'static> Reconciler for Provisioner<C> {
    type Step = Provision;
    type Error = ProvisionError;
    const NAME: &'static str = "provisioner";

    fn shape(&self) -> Shape {
        Shape::new(SCAN_INTERVAL, Duration::from_secs(10))
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<Provision> {
        let mut scan = Scan::new();
        // While a batch is solved and its NodeClaims created, its pods are still pending:
        // they are looked at once it is done.
        if busy.contains(Self::NAME) {
            return scan;
        }
        let buffer_uids: Vec<String> = cluster
            .buffer_pods()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        if self.buffers_due(buffer_uids, now) {
            self.batcher().0.trigger("capacity-buffers", now);
        }
        let pending = cluster.provisionable_pods();
        let Polled {
            solve,
            wake,
            triggered,
        } = {
            let mut window = self.batcher();
            let (batcher, triggers) = &mut *window;
            poll_batch(batcher, triggers, cluster, &pending, now)
        };
        // Every pending pod is acknowledged when first seen (upstream's `AckPods`), so the time
        // until a decision about it counts from then: a pod first seen triggers, so only the
        // pods that triggered are looked at (a key per pod per scan was a few percent of the
        // CPU while thousands waited); the pods gone are forgotten, at most
        // every `FORGET_INTERVAL` (a lookup of every remembered pod, up to 10 scans a second).
        self.ctx
            .pod_times
            .ack_all(triggered.iter().map(|p| p.key()), now);
        let forget = {
            let mut forgot = match self.forgot_at.lock() {
                Ok(at) => at,
                Err(poisoned) => poisoned.into_inner(),
            };
            let due = forgot.is_none_or(|at| now - at >= FORGET_INTERVAL);
            if due {
                *forgot = Some(now);
            }
            due
        };
        if forget {
            self.ctx.pod_times.retain(|key| {
                key.split_once('/')
                    .is_some_and(|(namespace, name)| cluster.pod(namespace, name).is_some())
            });
        }
        if solve {
            scan.step(Self::NAME, Provision);
        }
        if let Some(wake) = wake {
            scan.requeue_after(wake);
        }
        scan
    }

    async fn execute(&self, _: Provision) -> Result<Action, ProvisionError> {
        let outcome = self.provision().await?;
        if outcome.pods > 0 || !outcome.created.is_empty() {
            tracing::info!(
                pods = outcome.pods,
                nodeclaims = ?outcome.created,
                nominated = outcome.nominated,
                unschedulable = outcome.unschedulable,
                "provisioned a batch"
            );
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, _: &ProvisionError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Provision) -> &'static str {
        "provision"
    }
}

impl<C: CloudProvider + 'static> Provisioner<C> {
    /// One batch: solve the provisionable pods and act on the result.
    pub async fn provision(&self) -> Result<BatchOutcome, ProvisionError> {
        let (any_pending, pools, not_ready) = {
            let cluster = self.ctx.cache.lock();
            let (pools, not_ready) = launchable_pools(&cluster);
            let any =
                !cluster.provisionable_pods().is_empty() || cluster.buffer_pods().next().is_some();
            (any, pools, not_ready)
        };
        if !any_pending {
            return Ok(BatchOutcome::default());
        }
        let catalogs = self
            .ctx
            .catalogs
            .get(&self.ctx.cache, &*self.ctx.cloud, &self.ctx.events)
            .await;
        // Static NodePools keep their own replica count; the solver never launches for them.
        let solver_pools: Vec<karpenter_scheduling::NodePool> = catalogs
            .solver_pools
            .iter()
            .filter(|p| pools.contains(&p.name))
            .cloned()
            .collect();
        let by_name = &catalogs.by_name;
        // `SCHEDULER_CONFIG`'s default spread constraints: the selectors are looked up before
        // the one look at the index below (lookups wait on the API server).
        let defaults = self.ctx.settings.default_spread_constraints();
        let selectors = if defaults.is_empty() {
            Default::default()
        } else {
            let pending: Vec<Arc<PodRecord>> = self
                .ctx
                .cache
                .lock()
                .provisionable_pods()
                .into_iter()
                .cloned()
                .collect();
            super::default_spread::selectors(&self.ctx.client, &pending).await
        };
        // Pending pods and nodes from one look at the index: a pod bound while the instance
        // types were fetched must not count both as pending and on its node (the solver would
        // see it twice and launch a NodeClaim for it).
        let (input, dra) = {
            let cluster = self.ctx.cache.lock();
            let (dra, pods) = batch_pods(&cluster, &self.ctx.settings);
            let mut pods = super::default_spread::apply(pods, defaults, &selectors);
            pods.extend(cluster.buffer_pods().cloned());
            let input = cluster.solve_input(
                pods,
                solver_pools,
                catalogs.instance_types.clone(),
                solve_options(&self.ctx.settings),
            );
            (input, dra)
        };
        // Upstream (`IGNORE_DRA_REQUESTS=true`, its default): pods asking for DRA devices are
        // not provisioned for, and told so.
        for pod in &dra {
            self.ctx
                .events
                .pod_failed_to_schedule(pod, DRA_NOT_SUPPORTED)
                .await;
        }
        // Virtual pods (pod key -> buffer key): never bound, no events, no pod metrics.
        let virtual_pods: BTreeMap<String, String> = input
            .pods
            .iter()
            .filter_map(|p| Some((p.key(), capacity_buffer::buffer_of(p)?)))
            .collect();
        if input.pods.is_empty() {
            self.decided(&SolveResult::default(), &dra, &not_ready);
            return Ok(BatchOutcome {
                pods: dra.len(),
                unschedulable: dra.len(),
                ..BatchOutcome::default()
            });
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            for node in &input.existing_nodes {
                tracing::debug!(
                    node = %node.name,
                    initialized = node.initialized,
                    deleting = node.deleting,
                    pods = node.pods.len(),
                    taints = ?node.taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(),
                    "existing node in the solver's input"
                );
            }
        }
        // The input comes back with the result: its pods are the batch's (no second copy).
        let solving = self.ctx.metrics.solving(Self::NAME);
        let (result, input): (SolveResult, _) = tokio::task::spawn_blocking(move || {
            let result = karpenter_scheduling::solve(&input);
            (result, input)
        })
        .await
        .map_err(ProvisionError::Solver)?;
        solving.finished(&result.stats);
        let pods = input.pods;
        if self.ctx.settings.feature_gates.capacity_buffer {
            let (by_buffer, nodes) = capacity_buffer::placements(&result, &virtual_pods);
            self.ctx
                .cache
                .lock()
                .set_buffer_placements(by_buffer, nodes);
        }
        // NodeClaims launched for virtual pods hold buffer headroom from their creation on
        // (before a later batch finds the virtual pods on their nodes).
        let buffer_claims: Vec<bool> = result
            .new_node_claims
            .iter()
            .map(|c| {
                c.pods
                    .iter()
                    .any(|p| virtual_pods.contains_key(&p.to_string()))
            })
            .collect();
        let result = if virtual_pods.is_empty() {
            result
        } else {
            capacity_buffer::without_virtual(&result, &virtual_pods)
        };
        self.decided(&result, &dra, &not_ready);
        self.ctx
            .explanations
            .closest_types(&pods, &catalogs.instance_types);
        self.ctx.explanations.unavailable_offerings(
            Utc::now(),
            &self.ctx.cloud.unavailable_offerings(),
            &result,
            &pods,
            &catalogs.instance_types,
        );
        let mut outcome = BatchOutcome {
            pods: pods.len() - virtual_pods.len() + dra.len(),
            unschedulable: dra.len(),
            ..BatchOutcome::default()
        };
        let pods_by_key: BTreeMap<String, &PodRecord> =
            pods.iter().map(|p| (p.key(), &**p)).collect();
        // A pool with limits gets its NodeClaims one at a time, each checked against the usage
        // the ones before it added; the others are created concurrently (a batch of 500
        // hostname anti-affinity pods is 500 NodeClaims).
        // Where this batch places each pod (`Cluster::set_plans`).
        let mut plans: HashMap<String, String> = HashMap::new();
        let (limited, free): (Vec<_>, Vec<_>) = result
            .new_node_claims
            .iter()
            .zip(buffer_claims)
            .filter_map(|(claim, buffer)| {
                by_name
                    .get(&claim.node_pool)
                    .map(|pool| (claim, pool, buffer))
            })
            .partition(|(_, pool, _)| pool.spec.limits.is_some());
        for (claim, pool, buffer) in limited {
            if let Some(why) = self.limit_exceeded(pool) {
                self.ctx
                    .events
                    .warn_node_pool(
                        pool,
                        "NodePoolLimitExceeded",
                        &format!("not launching a NodeClaim: limit exceeded, {why}"),
                    )
                    .await;
                continue;
            }
            if let Some(name) = self.create_for(claim, pool, buffer, &pods_by_key).await {
                plan(&mut plans, claim, &name);
                outcome.created.push(name);
            }
        }
        // The futures are built first: with a stream that maps through a closure borrowing
        // `self`, rustc cannot prove the spawned task `Send` ("FnOnce is not general enough").
        let free_claims: Vec<&NewNodeClaim> = free.iter().map(|(claim, _, _)| *claim).collect();
        let creations: Vec<_> = free
            .into_iter()
            .map(|(claim, pool, buffer)| self.create_for(claim, pool, buffer, &pods_by_key))
            .collect();
        let created: Vec<Option<String>> = futures::stream::iter(creations)
            .buffered(CREATE_CONCURRENCY)
            .collect()
            .await;
        for (claim, name) in free_claims.into_iter().zip(created) {
            if let Some(name) = name {
                plan(&mut plans, claim, &name);
                outcome.created.push(name);
            }
        }
        let until = chrono::Utc::now()
            + chrono::Duration::from_std(nomination_window(&self.ctx.settings)).unwrap_or_default();
        // Upstream's `NominatePodEvent` names the NodeClaim and the Node a pod is nominated to.
        let targets: HashMap<String, String> = if result.existing_placements.is_empty() {
            HashMap::new()
        } else {
            self.ctx
                .cache
                .lock()
                .bare_state_nodes()
                .iter()
                .map(|n| (n.name().to_owned(), nomination_target(n)))
                .collect()
        };
        for placement in &result.existing_placements {
            plans.insert(placement.pod.uid.clone(), placement.node.clone());
            self.ctx.cache.lock().nominate(&placement.node, until);
            outcome.nominated += 1;
            if let (Some(pod), Some(target)) = (
                pods_by_key.get(&placement.pod.to_string()),
                targets.get(&placement.node),
            ) {
                self.ctx.events.nominated_pod(pod, target).await;
            }
        }
        // The next batch keeps this one's plan for the pods still pending then.
        self.ctx.cache.lock().set_plans(plans);
        let deferred: Vec<String> = result
            .unschedulable
            .iter()
            .filter(|u| u.deferred)
            .map(|u| u.pod.to_string())
            .collect();
        if !deferred.is_empty() {
            tracing::debug!(
                pods = ?deferred,
                "deferring scheduling decision for provisionable pod(s) to future simulation due to limited reserved offering capacity"
            );
        }
        for unschedulable in result.unschedulable.iter().filter(|u| !u.deferred) {
            outcome.unschedulable += 1;
            if let Some(pod) = pods_by_key.get(&unschedulable.pod.to_string()) {
                let mut lines = unschedulable.reason_lines();
                lines.extend(
                    not_ready
                        .iter()
                        .map(|(pool, why)| format!("nodepool {pool}: {why}")),
                );
                let message = format!("Failed to schedule pod, {}", lines.join("; "));
                self.ctx.events.pod_failed_to_schedule(pod, &message).await;
            }
        }
        Ok(outcome)
    }

    /// What the simulation decided about each pod, for the pod and scheduler metrics: where
    /// each pod was placed (or not), how many pods it left out (`dra`, and those failing
    /// validation) and how many it could not place.
    fn decided(
        &self,
        result: &SolveResult,
        dra: &[Arc<PodRecord>],
        not_ready: &[(String, String)],
    ) {
        let ignored = dra_ignored(dra);
        self.ctx
            .explanations
            .batch_decided(Utc::now(), result, not_ready, &ignored);
        let validation = result
            .unschedulable
            .iter()
            .filter(|u| u.reasons.iter().any(|(k, _)| k == "validation"))
            .count();
        let metrics = &self.ctx.metrics;
        metrics.ignored_pods(dra.len() + validation);
        // A pod deferred for reserved capacity is not unschedulable, only not decided yet.
        let deferred = result.unschedulable.iter().filter(|u| u.deferred).count();
        metrics.unschedulable_pods(
            Self::NAME,
            result.unschedulable.len() - validation - deferred,
        );
        let placed: Vec<String> = result
            .new_node_claims
            .iter()
            .flat_map(|c| c.pods.iter().map(ToString::to_string))
            .chain(result.existing_placements.iter().map(|p| p.pod.to_string()))
            .collect();
        let unplaced: Vec<String> = result
            .unschedulable
            .iter()
            .map(|u| u.pod.to_string())
            .chain(dra.iter().map(|p| p.key()))
            .collect();
        for seconds in self.ctx.pod_times.decided(
            placed.iter().map(String::as_str),
            unplaced.iter().map(String::as_str),
            Utc::now(),
        ) {
            metrics.pod_scheduling_decision(seconds);
        }
    }

    /// The pool's current usage against its limits (upstream `Limits.ExceededBy`).
    fn limit_exceeded(&self, pool: &NodePool) -> Option<String> {
        let limits = pool.spec.limits.as_ref()?;
        let limits = ResourceList::from_k8s(limits).ok()?;
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let usage = self.ctx.cache.lock().node_pool_usage(name);
        let mut used = usage.resources.clone();
        used.set(
            labels::RESOURCE_NODES,
            karpenter_scheduling::Quantity::from_units(i128::from(usage.nodes)),
        );
        limits::exceeded(&limits, &used)
    }

    /// Creates the NodeClaim for `claim` and nominates its pods; its name, or `None` (logged)
    /// when the API server refused it.
    async fn create_for(
        &self,
        claim: &NewNodeClaim,
        pool: &NodePool,
        holds_buffer: bool,
        pods_by_key: &BTreeMap<String, &PodRecord>,
    ) -> Option<String> {
        let name = match create_node_claim(&self.ctx, claim, pool, "provisioned").await {
            Ok(name) => name,
            Err(error) => {
                tracing::error!(nodepool = %claim.node_pool, %error, "creating a NodeClaim failed");
                return None;
            }
        };
        if holds_buffer {
            self.ctx.cache.lock().add_buffer_node(&name);
        }
        self.ctx.explanations.node_claim_created(&name, claim);
        for pod in &claim.pods {
            if let Some(p) = pods_by_key.get(&pod.to_string()) {
                self.ctx
                    .events
                    .nominated_pod(p, &format!("nodeclaim/{name}"))
                    .await;
            }
        }
        Some(name)
    }
}

/// The pods a batch solves, and those it leaves out for their DRA requirements
/// (`IGNORE_DRA_REQUESTS`): the index's provisionable pods, split `(dra, pods)`.
pub fn batch_pods(
    cluster: &Cluster,
    settings: &Settings,
) -> (Vec<Arc<PodRecord>>, Vec<Arc<PodRecord>>) {
    cluster
        .provisionable_pods()
        .into_iter()
        .cloned()
        .partition(|p| settings.ignore_dra_requests && p.has_dra_requirements())
}

/// The pods a batch left out for their DRA requirements, and what they are told
/// ([`Explanations::batch_decided`]'s `ignored`).
///
/// [`Explanations::batch_decided`]: crate::explain::Explanations::batch_decided
pub fn dra_ignored(dra: &[Arc<PodRecord>]) -> Vec<(String, &'static str)> {
    dra.iter().map(|p| (p.key(), DRA_NOT_SUPPORTED)).collect()
}

/// What a `Nominated` event names for an existing node: `nodeclaim/C, node/N` as upstream
/// writes it, either part left out when the node has none.
fn nomination_target(node: &karpenter_state::StateNode<'_>) -> String {
    let claim = node
        .node_claim
        .and_then(|c| c.metadata.name.as_deref())
        .map(|c| format!("nodeclaim/{c}"));
    let node = node
        .node
        .and_then(|n| n.metadata.name.as_deref())
        .map(|n| format!("node/{n}"));
    claim.into_iter().chain(node).collect::<Vec<_>>().join(", ")
}

/// Records that `claim`'s pods were placed on the NodeClaim `name`.
fn plan(plans: &mut HashMap<String, String>, claim: &NewNodeClaim, name: &str) {
    for pod in &claim.pods {
        plans.insert(pod.uid.clone(), name.to_owned());
    }
}

/// The NodePools the provisioner may launch for (live, not static, `Ready`), and why each
/// other live dynamic pool may not (its conditions, for the pods' `FailedScheduling` events).
pub fn launchable_pools(cluster: &Cluster) -> (BTreeSet<String>, Vec<(String, String)>) {
    let mut launchable = BTreeSet::new();
    let mut not_ready = Vec::new();
    for pool in cluster
        .node_pools()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !karpenter_scheduling::v1::is_static(p))
    {
        let Some(name) = pool.metadata.name.clone() else {
            continue;
        };
        match karpenter_lifecycle::nodepool_status::not_ready_reason(pool) {
            None => {
                launchable.insert(name);
            }
            Some(why) => not_ready.push((name, why)),
        }
    }
    (launchable, not_ready)
}

/// Creates the NodeClaim upstream would write for `claim` from `pool`, counts it in
/// `karpenter_nodeclaims_created_total{reason}` and puts it in the index; its name.
pub async fn create_node_claim<C>(
    ctx: &Context<C>,
    claim: &NewNodeClaim,
    pool: &NodePool,
    reason: &str,
) -> Result<String, WriteError> {
    let mut shaped = nodeclaim::node_claim(claim, pool);
    // The conversion the decision was made from (a newer one only if the catalogs changed
    // meanwhile).
    if let Some(catalogs) = ctx.catalogs.latest() {
        nodeclaim::annotate_overlays(&mut shaped, claim, &catalogs.overlays);
    }
    let created = ctx.writer().create(&shaped, "creating").await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    ctx.metrics
        .nodeclaim_created(reason, &claim.node_pool, claim.min_values_relaxed);
    Ok(name)
}

/// A batch could not be provisioned.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("the solver task failed")]
    Solver(#[source] tokio::task::JoinError),
}

#[cfg(test)]
#[path = "provisioner_tests.rs"]
mod tests;
