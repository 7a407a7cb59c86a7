//! The disruption controller (upstream `disruption`, `disruption.queue` and
//! `nodeclaim.expiration`): every [`PASS_INTERVAL`] (sooner once what a pass decides from has
//! changed and stood still for 2 s: [`PassTiming`], over [`inputs_stamp`]) the index becomes a
//! [`karpenter_disruption::Snapshot`], [`karpenter_disruption::decide`] picks the commands, and
//! the orchestration queue ([`karpenter_disruption::Queue`], the same one `simulate --timeline`
//! drives) says what to do with each; this module only performs the steps:
//!
//! - **hold**: a graceful command (emptiness, consolidation) waits 15 s, then is validated
//!   against the cluster as it is then, and started or dropped; no new pass decides meanwhile
//!   (upstream validates inside its pass);
//! - **start**: the candidates are tainted `karpenter.sh/disrupted:NoSchedule` and get
//!   `DisruptionReason`, the replacements are created, then the candidates are marked for
//!   deletion in the index (launch before terminate; in that order, so the provisioner never
//!   sees their pods as homeless while the replacements are not known yet);
//! - **delete**: once every replacement is initialized (or at once when there are none) the
//!   candidates' NodeClaims are deleted, and the termination controller drains them;
//! - **abandon**: a replacement that is gone or not initialized in time untaints the
//!   candidates; they stay.
//!
//! Node repair (gate `NodeRepair`) is the pass's first method: a repair command starts at once
//! like drift; before its candidate's NodeClaim is deleted, the policy's drain bound is stamped
//! as `karpenter.sh/nodeclaim-termination-timestamp` (tightening, never extending, one already
//! there), and `karpenter_nodeclaims_unhealthy_disrupted_total` counts it. A node repair
//! withholds because too much of its pool is unhealthy gets upstream's `NodeRepairBlocked`
//! warning, on the Node, its NodeClaim and the NodePool.
//!
//! Expiration is forceful and outside budgets: a NodeClaim past `expireAfter` is deleted on the
//! next pass. A `karpenter.sh/disrupted` taint on a node no command holds (a restart mid-command)
//! is removed, as upstream does. Every node a pass leaves alone gets its reason in a
//! `DisruptionBlocked` event and a log line, when the reason changes (and at most every
//! [`BLOCKED_REPEAT`] for the same one).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_api::v1::nodeclaim::conditions::DISRUPTION_REASON;
use karpenter_api::v1::{DisruptionReason, NodeClaim};
use karpenter_cloud::CloudProvider;
use karpenter_cloud::RepairMatcher;
use karpenter_disruption::pass_timing::PassTiming;
use karpenter_disruption::reason::NODE_REPAIR_BLOCKED;
use karpenter_disruption::reboot_history::RebootHistory;
use karpenter_disruption::settle;
use karpenter_disruption::{
    BudgetMap, Code, Command, Decision, Method, Queue, RepairSettings, Replacement, Snapshot, Step,
    TerminateFirst,
};
use karpenter_scheduling::PoolInstanceTypes;
use karpenter_state::Cluster;
use tokio::time::Instant;

use super::provisioner::{create_node_claim, solve_options};
use crate::cluster::index::ClusterCache;
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::{Disrupted, consolidation_policy, termination_mode};
use crate::settings::Settings;

pub use karpenter_disruption::PASS_INTERVAL;
/// How often the queue is looked at (replacements ready, commands due for validation).
pub const TICK: Duration = Duration::from_secs(1);
/// A command's candidates written (tainted, marked, deleted, untainted) this many at a time.
const WRITES_AT_ONCE: usize = 16;
/// A node left alone for the same reason is told again after this long.
pub const BLOCKED_REPEAT: Duration = Duration::from_secs(15 * 60);

/// The cluster as disruption sees it at `now`, with `queued` nodes held by the orchestration
/// queue. NodePools carry the hash their template has now (their annotation may lag a template
/// change by a moment, and a lagging one must not read as drift).
pub fn snapshot(
    cache: &ClusterCache,
    settings: &Settings,
    instance_types: PoolInstanceTypes,
    queued: &BTreeSet<&str>,
    now: chrono::DateTime<Utc>,
) -> Snapshot {
    snapshot_of(&cache.lock(), settings, instance_types, queued, now)
}

/// [`snapshot`] of an index already locked (a scan's).
pub fn snapshot_of(
    cluster: &Cluster,
    settings: &Settings,
    instance_types: PoolInstanceTypes,
    queued: &BTreeSet<&str>,
    now: chrono::DateTime<Utc>,
) -> Snapshot {
    let features = settings.feature_gates.disruption_features();
    let mut snapshot = cluster.disruption_snapshot(
        now,
        instance_types,
        queued,
        features,
        solve_options(settings),
    );
    for pool in &mut snapshot.node_pools {
        if let Some(stamp) = karpenter_api::hash::pool_annotations(pool) {
            pool.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .extend(stamp);
        }
    }
    snapshot
}

/// What a disruption pass decides from, as a number that changes when it does
/// ([`PassTiming`] brings the pass forward once it has): pod events on nodes (bound, finished,
/// deleted), the nodes, the NodeClaims with their `Consolidatable` and `Drifted` conditions and
/// whether they are being deleted, the NodePools' generations. Order-independent (a sum of
/// one hash per object), so the index's iteration order does not matter.
pub fn inputs_stamp(cluster: &Cluster) -> u64 {
    let mut stamp = hash_one(cluster.pod_event_max());
    for node in cluster.nodes() {
        stamp = stamp.wrapping_add(hash_one(("node", &node.metadata.name)));
    }
    for claim in cluster.node_claims() {
        let conditions = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
        let flags = (
            karpenter_api::conditions::is_true(conditions, conditions::CONSOLIDATABLE),
            karpenter_api::conditions::is_true(conditions, conditions::DRIFTED),
            claim.metadata.deletion_timestamp.is_some(),
        );
        stamp = stamp.wrapping_add(hash_one(("claim", &claim.metadata.name, flags)));
    }
    for pool in cluster.node_pools() {
        let key = ("pool", &pool.metadata.name, pool.metadata.generation);
        stamp = stamp.wrapping_add(hash_one(key));
    }
    stamp
}

/// `value`'s hash under fixed keys (the same from one scan to the next).
fn hash_one(value: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Node repair cannot start: the gate is on but the cloud's policies are missing or invalid.
#[derive(Debug, thiserror::Error)]
pub enum RepairStartError {
    #[error(
        "node repair (NodeRepair=true) requires the {cloud} cloud provider to define repair policies, but it defines none"
    )]
    NoPolicies { cloud: &'static str },
    #[error(
        "node repair (NodeRepair=true) requires valid repair policies of the {cloud} cloud provider"
    )]
    Invalid {
        cloud: &'static str,
        #[source]
        source: karpenter_cloud::repair::InvalidRepairPolicies,
    },
}

/// The repair settings of a pass: `None` with the `NodeRepair` gate off; the cloud's policies
/// compiled once (upstream `NewRepairPolicyMatcher`) and the threshold setting.
pub fn repair_settings(
    settings: &Settings,
    cloud: &impl CloudProvider,
) -> Result<Option<RepairSettings>, RepairStartError> {
    if !settings.feature_gates.node_repair {
        return Ok(None);
    }
    let policies = cloud.repair_policies();
    if policies.is_empty() {
        return Err(RepairStartError::NoPolicies {
            cloud: cloud.name(),
        });
    }
    let matcher = RepairMatcher::new(&policies).map_err(|source| RepairStartError::Invalid {
        cloud: cloud.name(),
        source,
    })?;
    Ok(Some(RepairSettings {
        matcher: Arc::new(matcher),
        unhealthy_threshold: settings.node_repair_unhealthy_threshold.clone(),
    }))
}

/// The disruption loop: the orchestration queue every [`TICK`] (upstream's
/// `disruption.queue`), and a pass every [`PASS_INTERVAL`] (upstream's `disruption`).
#[derive(Debug)]
pub struct Disruption<C> {
    pub ctx: Context<C>,
    /// Node repair's settings; `None` with the gate off.
    repair: Option<RepairSettings>,
    state: Arc<tokio::sync::Mutex<LoopState>>,
    /// Reboots committed per NodeClaim (in memory, as upstream's): repair replaces a node
    /// rebooted twice within a day.
    reboots: Arc<std::sync::Mutex<RebootHistory>>,
}

impl<C> Disruption<C> {
    pub fn new(ctx: Context<C>, repair: Option<RepairSettings>) -> Self {
        Disruption {
            ctx,
            repair,
            state: Arc::default(),
            reboots: Arc::default(),
        }
    }

    fn reboots(&self) -> std::sync::MutexGuard<'_, RebootHistory> {
        match self.reboots.lock() {
            Ok(history) => history,
            // Timestamps only: keep using them.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// What the loop remembers between ticks.
#[derive(Debug)]
struct LoopState {
    queue: Queue,
    /// Node (or `nodepool/<name>` for NodePool events) -> the reason last told, and when.
    told: HashMap<String, (String, Instant)>,
    /// When the next pass is due ([`PassTiming`]).
    timing: PassTiming<Instant>,
    /// Replacements told `DisruptionWaitingReadiness` while they are still pending.
    waiting_told: BTreeSet<String>,
    /// When the last deletion started, until its pods landed ([`settle`]).
    settling_since: Option<Instant>,
    /// When the pass began waiting for nodes about to become consolidatable
    /// ([`settle::ripening`]), until it decides.
    ripening_since: Option<Instant>,
}

impl Default for LoopState {
    fn default() -> Self {
        LoopState {
            queue: Queue::default(),
            told: HashMap::new(),
            timing: PassTiming::new(Instant::now()),
            waiting_told: BTreeSet::new(),
            settling_since: None,
            ripening_since: None,
        }
    }
}

impl LoopState {
    /// `step` starts a deletion: the next pass waits for its pods to land.
    fn deleting(&mut self, step: &Step) {
        if matches!(step, Step::Delete { .. }) {
            self.settling_since = Some(Instant::now());
        }
    }
}

/// One run of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisruptionStep {
    /// Look after the queue: replacements ready, commands due for validation, stale taints.
    Tick,
    /// The same, then a disruption pass if the queue allows one.
    Pass,
}

/// A pass could not decide. (A write that fails is logged, and the queue abandons, and
/// untaints, what it cannot finish: that is not a failed pass.)
#[derive(Debug, thiserror::Error)]
pub enum DisruptionError {
    #[error("the disruption decision task failed")]
    Decide(#[source] tokio::task::JoinError),
}

impl<C: CloudProvider + 'static> Reconciler for Disruption<C> {
    type Step = DisruptionStep;
    type Error = DisruptionError;
    const NAME: &'static str = "disruption";

    fn shape(&self) -> Shape {
        Shape::periodic(TICK)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<DisruptionStep> {
        let mut scan = Scan::new();
        if busy.contains(Self::NAME) {
            return scan;
        }
        let now = Instant::now();
        let pass = self.state.try_lock().is_ok_and(|mut state| {
            state.timing.observe(inputs_stamp(cluster), now);
            state.timing.due(now)
        });
        scan.step(
            Self::NAME,
            if pass {
                DisruptionStep::Pass
            } else {
                DisruptionStep::Tick
            },
        );
        scan
    }

    async fn execute(&self, step: DisruptionStep) -> Result<Action, DisruptionError> {
        let mut state = self.state.lock().await;
        self.tick(&mut state, step == DisruptionStep::Pass).await?;
        Ok(Action::RequeueAfter(TICK))
    }

    fn error_policy(&self, _: &DisruptionError) -> Retry {
        Retry::Backoff
    }

    fn step_name(step: &DisruptionStep) -> &'static str {
        match step {
            DisruptionStep::Tick => "tick",
            DisruptionStep::Pass => "pass",
        }
    }

    fn controller(step: &DisruptionStep) -> &'static str {
        match step {
            DisruptionStep::Tick => "disruption.queue",
            DisruptionStep::Pass => "disruption",
        }
    }
}

/// `consolidation_type` label of a method (upstream's `ConsolidationType()`: `empty`, `multi`,
/// `single`, or empty for drift).
fn consolidation_type(method: Method) -> &'static str {
    match method {
        Method::Emptiness => "empty",
        Method::MultiNodeConsolidation => "multi",
        Method::SingleNodeConsolidation => "single",
        _ => "",
    }
}

/// `reason` label of a command (upstream lowercases the disruption reason).
fn reason_label(reason: DisruptionReason) -> String {
    reason.as_str().to_lowercase()
}

/// Single- and multi-node consolidation (upstream publishes `ConsolidationCandidate` and, at
/// validation, `ConsolidationRejected` for their commands only).
fn is_consolidation(method: Method) -> bool {
    matches!(
        method,
        Method::SingleNodeConsolidation | Method::MultiNodeConsolidation
    )
}

fn decision_label(command: &Command) -> &'static str {
    if command.terminate_first.is_some() {
        "terminate-first"
    } else if command.is_delete() {
        "delete"
    } else {
        "replace"
    }
}

impl<C: CloudProvider + 'static> Disruption<C> {
    async fn tick(&self, state: &mut LoopState, pass: bool) -> Result<(), DisruptionError> {
        self.clear_stale_taints(&state.queue).await;
        let now = Utc::now();
        let mut pending = BTreeSet::new();
        let steps = state.queue.poll(now, |name| {
            let replacement = self.replacement(name);
            if replacement == Replacement::Pending {
                pending.insert(name.to_owned());
            }
            replacement
        });
        self.tell_waiting(&mut state.waiting_told, pending).await;
        for step in steps {
            state.deleting(&step);
            self.execute(&mut state.queue, step).await;
        }
        let validation_due = state.queue.next_validation().is_some_and(|at| at <= now);
        let pass_due = pass && state.timing.due(Instant::now());
        if !validation_due && !pass_due {
            return Ok(());
        }
        let instance_types = self.instance_types().await;
        // The commands of one pass are due together and validated together, as they were
        // decided (sharing budgets, each consolidation's moves taken into the next one's).
        let due = state.queue.take_due(now);
        if !due.is_empty() {
            let snapshot = self.snapshot(&instance_types, &state.queue, now).await;
            for step in state.queue.validate(due, &snapshot, now) {
                state.deleting(&step);
                self.execute(&mut state.queue, step).await;
            }
        }
        // Like upstream, whose pass waits out a command's validation before it decides again:
        // a pass while a command is held would decide around the held nodes, whose fate is
        // open, and its command would mostly be dropped at validation.
        if !pass_due || !state.queue.may_decide() {
            return Ok(());
        }
        let snapshot = self.snapshot(&instance_types, &state.queue, now).await;
        // After a deletion, the pass waits (a tick at a time) for the pods it moves to land.
        if let Some(since) = state.settling_since {
            let moving = settle::pods_in_flight(&snapshot);
            if moving > 0 && since.elapsed() < settle::SETTLE_AT_MOST {
                return Ok(());
            }
            state.settling_since = None;
        }
        // While a scale-down's nodes become consolidatable one after another, emptiness and
        // consolidation wait for them (at most `RIPEN_AT_MOST`), to decide on all of them at
        // once; drift, repair and expiration do not wait. The pass still runs (at its usual
        // times: the ripening nodes' conditions change its inputs), and acts only when its
        // commands do not wait.
        let ripe_at = settle::ripening(&snapshot, now);
        let ripening = ripe_at.is_some() && {
            let since = *state.ripening_since.get_or_insert_with(Instant::now);
            since.elapsed() < settle::RIPEN_AT_MOST
        };
        if !ripening {
            state.ripening_since = None;
        }
        state.timing.passed(Instant::now(), false);
        self.expire(&snapshot, now).await;
        self.report_budgets(&snapshot, now);
        let decided = tokio::task::spawn_blocking(move || {
            let decision = karpenter_disruption::decide(&snapshot, now);
            (decision, snapshot)
        })
        .await;
        let (decision, snapshot) = decided.map_err(DisruptionError::Decide)?;
        if ripening
            && decision
                .commands
                .first()
                .is_some_and(|c| settle::waits_for_ripening(c.method))
        {
            tracing::debug!(
                commands = decision.commands.len(),
                "disruption: waiting for nodes about to become consolidatable"
            );
            // Again when the next of them is (or earlier, when the inputs change).
            if let Some(at) = ripe_at {
                let wait = (at - now).to_std().unwrap_or_default();
                state.timing.due_by(Instant::now() + wait);
            }
            return Ok(());
        }
        // Kept for removal simulations on request (`/explain/consolidation/node/{name}`).
        self.ctx
            .explanations
            .snapshot_observed(now, std::sync::Arc::new(snapshot));
        for (method, took) in &decision.evaluated {
            self.ctx.metrics.disruption_evaluated(
                &reason_label(method.reason()),
                consolidation_type(*method),
                took.as_secs_f64(),
            );
        }
        // Each method run sets its reason's figure; a later one of the same reason wins, as
        // upstream's gauge is set method by method.
        for mv in &decision.moves {
            self.ctx.metrics.consolidation_move(mv);
        }
        for (reason, count) in &decision.eligible {
            self.ctx
                .metrics
                .eligible_nodes(&reason_label(*reason), *count);
        }
        if !decision.commands.is_empty() {
            // Upstream goes again at once after acting: more may be possible.
            state.timing.passed(Instant::now(), true);
        }
        self.ctx
            .explanations
            .disruption_decided(Utc::now(), &decision);
        self.report_blocked(&decision, &mut state.told).await;
        for command in decision.commands {
            tracing::info!(
                method = command.method.as_str(),
                nodes = ?command.candidate_names(),
                replacements = command.replacements.len(),
                savings_per_hour = command.savings_per_hour,
                "disruption decided: {}",
                command.explanation
            );
            if is_consolidation(command.method) {
                let note = format!(
                    "Consolidation candidate: {} (savings: ${:.2})",
                    command.explanation, command.savings_per_hour
                );
                self.tell_candidates(&command, "ConsolidationCandidate", &note)
                    .await;
                self.tell_approved(&command).await;
            }
            if command.repair.as_ref().is_some_and(|r| r.reboot) {
                self.commit_reboot(&command).await;
                continue;
            }
            let step = state.queue.submit(command, now);
            state.deleting(&step);
            self.execute(&mut state.queue, step).await;
        }
        Ok(())
    }

    /// Instance types per NodePool, as the provisioner lists them.
    async fn instance_types(&self) -> PoolInstanceTypes {
        self.ctx
            .catalogs
            .instance_types(&self.ctx.cache, &*self.ctx.cloud, &self.ctx.events)
            .await
    }

    /// The cluster as disruption sees it at `now`, the held commands' nodes queued, with
    /// `SCHEDULER_CONFIG`'s default spread constraints on the pods the simulation may move
    /// (as upstream's, which shares the provisioner's scheduler).
    async fn snapshot(
        &self,
        instance_types: &PoolInstanceTypes,
        queue: &Queue,
        now: chrono::DateTime<Utc>,
    ) -> Snapshot {
        let mut snapshot = snapshot(
            &self.ctx.cache,
            &self.ctx.settings,
            instance_types.clone(),
            &queue.held_nodes(),
            now,
        );
        snapshot.repair = self.repair.clone();
        {
            let reboots = self.reboots();
            for node in &mut snapshot.nodes {
                if let Some(claim) = &node.node_claim {
                    node.committed_reboots = reboots.recent(claim, now);
                }
            }
        }
        super::default_spread::inject_snapshot(
            &self.ctx.client,
            self.ctx.settings.default_spread_constraints(),
            snapshot,
        )
        .await
    }

    /// What became of a replacement NodeClaim.
    fn replacement(&self, name: &str) -> Replacement {
        let cluster = self.ctx.cache.lock();
        let Some(claim) = cluster.node_claim(name) else {
            return Replacement::Gone;
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Replacement::Gone;
        }
        let initialized = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == conditions::INITIALIZED))
            .is_some_and(|c| c.status == "True");
        if initialized {
            Replacement::Ready
        } else {
            Replacement::Pending
        }
    }

    /// Performs one step of the orchestration queue.
    async fn execute(&self, queue: &mut Queue, step: Step) {
        match step {
            Step::Hold { until } => {
                tracing::info!(until = %until, "disruption command held for validation");
            }
            Step::Start { id, command } => {
                let launched = self.start(&command).await;
                queue.launched(id, launched);
            }
            Step::Delete { command } => self.delete(&command).await,
            Step::Abandon { command, reason } => self.abandon(&command, &reason).await,
            Step::Drop { command, rejection } => {
                tracing::info!(
                    method = command.method.as_str(),
                    nodes = ?command.candidate_names(),
                    %rejection,
                    "disruption command dropped at validation"
                );
                self.ctx
                    .metrics
                    .disruption_failed_validation(consolidation_type(command.method));
                if is_consolidation(command.method) {
                    let note = format!(
                        "Consolidation rejected: {}, reason: {rejection} (savings: ${:.2})",
                        command.explanation, command.savings_per_hour
                    );
                    self.tell_candidates(&command, "ConsolidationRejected", &note)
                        .await;
                }
            }
        }
    }

    /// Hands a repair's reboot to the reboot loop (upstream's `commitReboot`): the drain bound
    /// (the policy's, else the NodeClaim's `terminationGracePeriod`, else none) in
    /// `karpenter.sh/reboot-termination-grace-period`, `DisruptionReason`, and
    /// `Rebooting=True/RebootRequested`. Nothing when it is rebooting or being deleted already.
    async fn commit_reboot(&self, command: &Command) {
        let Some(repair) = &command.repair else {
            return;
        };
        for candidate in &command.candidates {
            let Some(claim) = self
                .ctx
                .cache
                .lock()
                .node_claim(&candidate.node_claim)
                .cloned()
            else {
                continue;
            };
            if karpenter_lifecycle::reboot::is_rebooting(&claim)
                || claim.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let bound = repair.termination_grace_period.or_else(|| {
                claim
                    .spec
                    .termination_grace_period
                    .as_ref()
                    .map(|g| g.as_duration())
            });
            let now = Utc::now();
            let writer = self.ctx.writer();
            let committed = async {
                writer
                    .merge_metadata::<NodeClaim>(
                        &candidate.node_claim,
                        serde_json::json!({"annotations": {
                            karpenter_api::labels::REBOOT_TERMINATION_GRACE_PERIOD:
                                bound.map(karpenter_api::duration::format_go_duration)
                        }}),
                        "recording the reboot's drain bound",
                    )
                    .await?;
                writer
                    .set_claim_condition(
                        &candidate.node_claim,
                        DISRUPTION_REASON,
                        Some(("True", command.reason.as_str(), "")),
                        now,
                    )
                    .await?;
                writer
                    .set_claim_condition(
                        &candidate.node_claim,
                        karpenter_api::v1::nodeclaim::conditions::REBOOTING,
                        Some((
                            "True",
                            karpenter_api::v1::nodeclaim::conditions::rebooting::REQUESTED,
                            &format!("rebooting for {}/{}", repair.condition, repair.reason),
                        )),
                        now,
                    )
                    .await
            }
            .await;
            match committed {
                Ok(()) => {
                    self.reboots().record(&candidate.node_claim, now);
                    tracing::info!(nodeclaim = %candidate.node_claim, "committed node reboot")
                }
                Err(error) => {
                    tracing::warn!(%error, nodeclaim = %candidate.node_claim, "committing a node reboot failed; the next pass retries");
                }
            }
        }
    }

    /// Taints the candidates and sets their `DisruptionReason`, [`WRITES_AT_ONCE`] candidates
    /// at a time; false (candidates untainted again) when one of them could not be marked.
    async fn mark(&self, command: &Command) -> bool {
        let reason = command.reason.as_str();
        let now = Utc::now();
        let marks: Vec<_> = command.candidates.iter().map(|candidate| async move {
            let marked = async {
                self.ctx
                    .writer()
                    .set_disrupted_taint(&candidate.node, true)
                    .await?;
                self.ctx
                    .writer()
                    .set_claim_condition(
                        &candidate.node_claim,
                        DISRUPTION_REASON,
                        Some(("True", reason, "")),
                        now,
                    )
                    .await
            }
            .await;
            if let Err(error) = &marked {
                tracing::warn!(%error, node = %candidate.node, "marking a disruption candidate failed; command not started");
            }
            marked.is_ok()
        }).collect();
        let marked: Vec<bool> = futures::stream::iter(marks)
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        if marked.iter().all(|ok| *ok) {
            return true;
        }
        self.unmark(command).await;
        false
    }

    /// Removes the taint and `DisruptionReason` from the candidates and their deletion mark.
    async fn unmark(&self, command: &Command) {
        let now = Utc::now();
        let unmarks: Vec<_> = command
            .candidates
            .iter()
            .map(|candidate| async move {
                self.ctx
                    .cache
                    .lock()
                    .mark_for_deletion(&candidate.node_claim, false);
                if let Err(error) = self
                    .ctx
                    .writer()
                    .set_disrupted_taint(&candidate.node, false)
                    .await
                {
                    tracing::warn!(%error, "untainting a candidate failed; the next pass retries");
                }
                if let Err(error) = self
                    .ctx
                    .writer()
                    .set_claim_condition(&candidate.node_claim, DISRUPTION_REASON, None, now)
                    .await
                {
                    tracing::warn!(%error, "clearing DisruptionReason failed");
                }
            })
            .collect();
        futures::stream::iter(unmarks)
            .buffer_unordered(WRITES_AT_ONCE)
            .collect::<Vec<()>>()
            .await;
    }

    /// Starts a command with replacements: marks the candidates, creates the replacements,
    /// then marks the candidates for deletion in the index. The replacements' names; none
    /// (the queue abandons the command) when marking or any creation failed.
    async fn start(&self, command: &Command) -> Vec<String> {
        if !self.mark(command).await {
            return Vec::new();
        }
        // A static pool's candidates count as pending disruption before their replacements
        // exist (upstream `MarkNodeClaimPendingDisruption`): the static pool loop must not
        // read a replacement as one node too many and remove a node for it. (A failed start is
        // abandoned, which unmarks them.) Other candidates are marked after, as upstream.
        if command.method == Method::StaticDrift {
            self.mark_for_deletion(command);
        }
        let reason = reason_label(command.reason);
        let mut created = Vec::new();
        for replacement in &command.replacements {
            let pool = self
                .ctx
                .cache
                .lock()
                .node_pool(&replacement.node_pool)
                .cloned();
            let result = match pool {
                Some(pool) => create_node_claim(&self.ctx, replacement, &pool, &reason)
                    .await
                    .map_err(|e| e.to_string()),
                None => Err(format!("nodepool {} is gone", replacement.node_pool)),
            };
            match result {
                Ok(name) => created.push(name),
                Err(error) => {
                    tracing::warn!(%error, nodes = ?command.candidate_names(), "creating a replacement failed; command abandoned");
                    for name in &created {
                        if let Err(error) = self
                            .ctx
                            .writer()
                            .delete::<NodeClaim>(name, "deleting")
                            .await
                        {
                            tracing::warn!(%error, "deleting an unused replacement failed");
                        }
                    }
                    return Vec::new();
                }
            }
        }
        self.mark_for_deletion(command);
        self.record_decision(command);
        for candidate in &command.candidates {
            self.node_event(
                &candidate.node,
                "DisruptionLaunching",
                &format!(
                    "Launching NodeClaim: {} ({})",
                    command.reason.as_str(),
                    created.join(", ")
                ),
            )
            .await;
        }
        tracing::info!(
            method = command.method.as_str(),
            nodes = ?command.candidate_names(),
            replacements = ?created,
            "disruption started: candidates tainted, replacements launched"
        );
        created
    }

    fn mark_for_deletion(&self, command: &Command) {
        let mut cluster = self.ctx.cache.lock();
        for candidate in &command.candidates {
            cluster.mark_for_deletion(&candidate.node_claim, true);
        }
    }

    /// A command started (its replacements created, or its deletion begun when it has none):
    /// upstream counts a decision once its command is under way.
    fn record_decision(&self, command: &Command) {
        self.ctx.metrics.disruption_decision(
            decision_label(command),
            &reason_label(command.reason),
            consolidation_type(command.method),
            command.terminate_first.map(TerminateFirst::as_str),
            command.candidates.iter().map(|c| c.node_pool.as_str()),
        );
    }

    /// Deletes the candidates' NodeClaims (a command without replacements is marked first).
    async fn delete(&self, command: &Command) {
        if command.is_delete() {
            if !self.mark(command).await {
                return;
            }
            self.mark_for_deletion(command);
        }
        let reason = reason_label(command.reason);
        if command.is_delete() {
            // A command with replacements was counted when it started.
            self.record_decision(command);
        }
        // [`WRITES_AT_ONCE`] candidates at a time: a 46-node command deleted one after
        // another took 2.4 s of round trips before its last node began to drain.
        let reason = &reason;
        let deletes: Vec<_> = command.candidates.iter().map(|candidate| async move {
            // Repair stamps its drain bound after the replacements are ready, just before the
            // deletion, so launch latency does not eat into it (as upstream).
            if let Some(bound) = command
                .repair
                .as_ref()
                .and_then(|r| r.termination_grace_period)
            {
                self.stamp_repair_deadline(&candidate.node_claim, bound)
                    .await;
            }
            if let Err(error) = self
                .ctx
                .writer()
                .delete::<NodeClaim>(&candidate.node_claim, "deleting")
                .await
            {
                tracing::warn!(%error, "deleting a disrupted NodeClaim failed; the next pass retries");
                return;
            }
            let (claim, policy) = {
                let cluster = self.ctx.cache.lock();
                (
                    cluster.node_claim(&candidate.node_claim).cloned(),
                    cluster
                        .node_pool(&candidate.node_pool)
                        .map(|p| p.spec.disruption.consolidation_policy),
                )
            };
            self.ctx.metrics.disrupted(
                &Disrupted {
                    reason,
                    nodepool: &candidate.node_pool,
                    capacity_type: &candidate.capacity_type,
                    // Drift goes through the same queue: only a consolidation has a policy.
                    consolidation_policy: match (consolidation_type(command.method), policy) {
                        ("", _) | (_, None) => "",
                        (_, Some(policy)) => consolidation_policy(policy),
                    },
                    termination_mode: termination_mode(claim.as_ref()),
                },
                candidate.pods,
            );
            if let Some(repair) = &command.repair {
                // The drain bound repair applied decides the mode; none inherits the NodeClaim's.
                let mode = match repair.termination_grace_period {
                    Some(bound) if bound.is_zero() => "forceful",
                    Some(_) => "eventual",
                    None => termination_mode(claim.as_ref()),
                };
                let image = claim
                    .as_ref()
                    .and_then(|c| c.status.as_ref())
                    .and_then(|s| s.image_id.clone())
                    .unwrap_or_default();
                self.ctx.metrics.unhealthy_disrupted(
                    &repair.condition,
                    &candidate.node_pool,
                    &candidate.capacity_type,
                    &image,
                    mode,
                );
            }
            self.node_event(
                &candidate.node,
                "DisruptionTerminating",
                &format!("Disrupting Node: {}", command.reason.as_str()),
            )
            .await;
        }).collect();
        futures::stream::iter(deletes)
            .buffer_unordered(WRITES_AT_ONCE)
            .collect::<Vec<()>>()
            .await;
        tracing::info!(
            method = command.method.as_str(),
            nodes = ?command.candidate_names(),
            "disruption: candidates deleted"
        );
    }

    async fn abandon(&self, command: &Command, reason: &str) {
        tracing::warn!(
            method = command.method.as_str(),
            nodes = ?command.candidate_names(),
            reason,
            "disruption command abandoned; candidates untainted"
        );
        self.ctx.metrics.disruption_queue_failure(
            decision_label(command),
            &reason_label(command.reason),
            consolidation_type(command.method),
        );
        self.unmark(command).await;
    }

    /// Untaints nodes carrying `karpenter.sh/disrupted` that no command holds and nothing
    /// deletes (left by a command this process did not finish, e.g. before a restart).
    async fn clear_stale_taints(&self, queue: &Queue) {
        let stale = {
            let cluster = self.ctx.cache.lock();
            stale_disrupted(&cluster.state_nodes(), |name| queue.is_queued(name))
        };
        for (node, claim) in stale {
            tracing::info!(%node, "removing a stale karpenter.sh/disrupted taint");
            let cleared = async {
                self.ctx.writer().set_disrupted_taint(&node, false).await?;
                self.ctx
                    .writer()
                    .set_claim_condition(&claim, DISRUPTION_REASON, None, Utc::now())
                    .await?;
                Ok::<(), WriteError>(())
            }
            .await;
            if let Err(error) = cleared {
                tracing::warn!(%error, "clearing a stale disruption mark failed");
            }
        }
    }

    /// Deletes expired NodeClaims (forceful: no budget, no validation).
    async fn expire(&self, snapshot: &Snapshot, now: chrono::DateTime<Utc>) {
        for expired in karpenter_disruption::expired(snapshot, now) {
            tracing::info!(node = %expired.node, nodeclaim = %expired.node_claim, "{}", expired.reason);
            if let Err(error) = self
                .ctx
                .writer()
                .delete::<NodeClaim>(&expired.node_claim, "deleting")
                .await
            {
                tracing::warn!(%error, "deleting an expired NodeClaim failed; the next pass retries");
                continue;
            }
            let (claim, pods) = {
                let cluster = self.ctx.cache.lock();
                (
                    cluster.node_claim(&expired.node_claim).cloned(),
                    cluster
                        .state_node_named(&expired.node)
                        .map_or(0, |n| n.reschedulable_pods().count()),
                )
            };
            self.ctx
                .metrics
                .disrupted(&Disrupted::of("expired", claim.as_ref()), pods);
            self.node_event(
                &expired.node,
                "DisruptionTerminating",
                &format!("Disrupting Node: Expired ({})", expired.reason),
            )
            .await;
        }
    }

    /// `karpenter_nodepools_allowed_disruptions` and `karpenter_nodepools_nodes_consuming_budgets`
    /// (`{nodepool, reason}`) for every pool and reason.
    fn report_budgets(&self, snapshot: &Snapshot, now: chrono::DateTime<Utc>) {
        let maps = BudgetMap::for_pass(snapshot, now);
        for map in &maps {
            for (pool, allowance) in &map.pools {
                // Upstream labels these two with the reason as written in the budget.
                self.ctx.metrics.allowed_disruptions(
                    pool,
                    map.reason.as_str(),
                    allowance.budget,
                    allowance.disrupting,
                );
            }
        }
        let at = crate::explain::rfc3339(now);
        self.ctx
            .explanations
            .node_pools_observed(crate::explain::node_pools(snapshot, &maps, &at));
    }

    /// Tells, per node left alone, why: an event and a log line when the reason is new for
    /// the node (or was last told [`BLOCKED_REPEAT`] ago).
    async fn report_blocked(
        &self,
        decision: &Decision,
        told: &mut HashMap<String, (String, Instant)>,
    ) {
        let present: BTreeSet<&str> = decision
            .considered
            .iter()
            .map(|c| c.node.as_str())
            .collect();
        // NodePool keys (`nodepool/<name>`: no node name has a `/`) are kept until they repeat.
        told.retain(|key, _| key.starts_with("nodepool/") || present.contains(key.as_str()));
        for considered in &decision.considered {
            // Nodes Karpenter does not manage (a managed node group's) are not its to explain.
            if considered.reason.codes().contains(&Code::Unmanaged) {
                continue;
            }
            let text = considered.reason.to_string();
            let fresh = match told.get(&considered.node) {
                Some((last, at)) => *last != text || at.elapsed() >= BLOCKED_REPEAT,
                None => true,
            };
            if !fresh {
                continue;
            }
            tracing::info!(node = %considered.node, reason = %text, "not disrupted");
            // Upstream's event reasons: `DisruptionBlocked`, `Unconsolidatable`,
            // `ConsolidationRejected`, on the Node and its NodeClaim.
            for (event, note) in considered.reason.by_event_reason() {
                if event == NODE_REPAIR_BLOCKED {
                    self.tell_repair_blocked(&considered.node, &note, told)
                        .await;
                } else {
                    self.node_event(&considered.node, event, &note).await;
                }
            }
            told.insert(considered.node.clone(), (text, Instant::now()));
        }
    }

    /// Upstream's `NodeRepairBlocked` warning on the Node, its NodeClaim and (once per
    /// [`BLOCKED_REPEAT`] and message) its NodePool.
    async fn tell_repair_blocked(
        &self,
        node: &str,
        note: &str,
        told: &mut HashMap<String, (String, Instant)>,
    ) {
        let (node, claim, pool) = {
            let cluster = self.ctx.cache.lock();
            let state = cluster.state_node_named(node);
            let node = state.as_ref().and_then(|s| s.node.cloned());
            let claim = state.as_ref().and_then(|s| s.node_claim.cloned());
            let pool = node
                .as_ref()
                .and_then(|n| n.metadata.labels.as_ref())
                .and_then(|l| l.get(karpenter_api::labels::NODEPOOL))
                .and_then(|name| cluster.node_pool(name).cloned());
            (node, claim, pool)
        };
        if let Some(node) = node {
            self.ctx
                .events
                .warn_node(&node, NODE_REPAIR_BLOCKED, note)
                .await;
        }
        if let Some(claim) = claim {
            self.ctx
                .events
                .warn_node_claim(&claim, NODE_REPAIR_BLOCKED, note)
                .await;
        }
        if let Some(pool) = pool {
            let key = format!(
                "nodepool/{}",
                pool.metadata.name.as_deref().unwrap_or_default()
            );
            let fresh = match told.get(&key) {
                Some((last, at)) => last != note || at.elapsed() >= BLOCKED_REPEAT,
                None => true,
            };
            if fresh {
                self.ctx
                    .events
                    .warn_node_pool(&pool, NODE_REPAIR_BLOCKED, note)
                    .await;
                told.insert(key, (note.to_owned(), Instant::now()));
            }
        }
    }

    /// Before a repaired NodeClaim is deleted: its drain deadline, `now + bound`, unless one
    /// already there is sooner (upstream `TightenTerminationTimestampAnnotation`).
    async fn stamp_repair_deadline(&self, node_claim: &str, bound: Duration) {
        let deadline = Utc::now() + chrono::Duration::from_std(bound).unwrap_or_default();
        let existing = self
            .ctx
            .cache
            .lock()
            .node_claim(node_claim)
            .and_then(|c| c.metadata.annotations.as_ref())
            .and_then(|a| a.get(karpenter_api::labels::NODECLAIM_TERMINATION_TIMESTAMP))
            .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&Utc));
        if existing.is_some_and(|t| t <= deadline) {
            return;
        }
        let value = karpenter_lifecycle::termination::deadline_annotation(deadline);
        if let Err(error) = self
            .ctx
            .writer()
            .merge_metadata::<NodeClaim>(
                node_claim,
                serde_json::json!({"annotations": {
                    karpenter_api::labels::NODECLAIM_TERMINATION_TIMESTAMP: value,
                }}),
                "annotating the repair drain deadline",
            )
            .await
        {
            tracing::warn!(%error, nodeclaim = %node_claim, "stamping the repair drain deadline failed; the NodeClaim's own bound applies");
        }
    }

    /// An event on every candidate of `command` (its Node and NodeClaim).
    async fn tell_candidates(&self, command: &Command, reason: &str, note: &str) {
        for candidate in &command.candidates {
            self.node_event(&candidate.node, reason, note).await;
        }
    }

    /// `ConsolidationApproved` for the Balanced pools that approved `command`: on each candidate
    /// of a single-node move, on the NodePool of a multi-node one (as upstream).
    async fn tell_approved(&self, command: &Command) {
        for verdict in &command.balanced {
            let note = verdict.message();
            if command.method == Method::SingleNodeConsolidation {
                for candidate in command
                    .candidates
                    .iter()
                    .filter(|c| c.node_pool == verdict.node_pool)
                {
                    self.node_event(&candidate.node, "ConsolidationApproved", &note)
                        .await;
                }
            } else {
                let pool = self.ctx.cache.lock().node_pool(&verdict.node_pool).cloned();
                if let Some(pool) = pool {
                    self.ctx
                        .events
                        .normal_node_pool(&pool, "ConsolidationApproved", &note)
                        .await;
                }
            }
        }
    }

    /// `DisruptionWaitingReadiness` on each replacement NodeClaim the queue waits for, once
    /// per replacement (upstream publishes it at every look, deduplicated).
    async fn tell_waiting(&self, told: &mut BTreeSet<String>, pending: BTreeSet<String>) {
        told.retain(|name| pending.contains(name));
        for name in pending {
            if told.contains(&name) {
                continue;
            }
            let claim = self.ctx.cache.lock().node_claim(&name).cloned();
            if let Some(claim) = claim {
                self.ctx
                    .events
                    .normal_node_claim(
                        &claim,
                        "DisruptionWaitingReadiness",
                        "Waiting on readiness to continue disruption",
                    )
                    .await;
            }
            told.insert(name);
        }
    }

    /// An event on Node `node` and on its NodeClaim, as upstream publishes disruption events.
    async fn node_event(&self, node: &str, reason: &str, note: &str) {
        let (node, claim) = {
            let cluster = self.ctx.cache.lock();
            let state = cluster.state_node_named(node);
            (
                state.as_ref().and_then(|s| s.node.cloned()),
                state.as_ref().and_then(|s| s.node_claim.cloned()),
            )
        };
        if let Some(node) = node {
            self.ctx.events.normal_node(&node, reason, note).await;
        }
        if let Some(claim) = claim {
            self.ctx
                .events
                .normal_node_claim(&claim, reason, note)
                .await;
        }
    }
}

/// The nodes whose `karpenter.sh/disrupted` taint is stale: tainted, not deleting, not marked
/// for deletion, held by no queued command, with their NodeClaim's name. Only nodes with a
/// NodeClaim: a node Karpenter does not own keeps whatever taints it has (upstream's
/// `RequireNoScheduleTaint` skips them too).
fn stale_disrupted(
    nodes: &[karpenter_state::StateNode<'_>],
    queued: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    nodes
        .iter()
        .filter(|n| !n.deleting() && !n.marked_for_deletion)
        .filter(|n| {
            n.node
                .is_some_and(karpenter_lifecycle::termination::is_tainted)
        })
        .filter(|n| !queued(n.name()))
        .filter_map(|n| Some((n.name().to_owned(), n.node_claim?.metadata.name.clone()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_stamp_moves_with_what_a_pass_decides_from_and_only_with_it() {
        use karpenter_state::Object;
        let claim = |consolidatable: bool| -> NodeClaim {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c1"},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
                "status": {"conditions": [{"type": "Consolidatable",
                    "status": if consolidatable { "True" } else { "False" },
                    "reason": "", "message": "", "lastTransitionTime": "2026-11-29T00:00:00Z"}]}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let node = |name: &str| -> k8s_openapi::api::core::v1::Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut cluster = Cluster::new();
        cluster.apply(Object::NodeClaim(claim(false)));
        cluster.apply(Object::Node(node("n1")));
        cluster.apply(Object::Node(node("n2")));
        let first = inputs_stamp(&cluster);
        assert_eq!(
            inputs_stamp(&cluster),
            first,
            "the same cluster, the same stamp"
        );

        let mut labelled = node("n1");
        labelled.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        cluster.apply(Object::Node(labelled));
        assert_eq!(
            inputs_stamp(&cluster),
            first,
            "a node's labels are not an input"
        );

        cluster.apply(Object::NodeClaim(claim(true)));
        let consolidatable = inputs_stamp(&cluster);
        assert_ne!(consolidatable, first, "a NodeClaim became Consolidatable");

        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "shop", "uid": "u"},
            "spec": {"nodeName": "n2", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        cluster.apply(Object::Pod(pod));
        assert_ne!(
            inputs_stamp(&cluster),
            consolidatable,
            "a pod was bound to a node"
        );
    }

    #[test]
    fn each_method_has_upstreams_consolidation_type_label() {
        assert_eq!(consolidation_type(Method::Emptiness), "empty");
        assert_eq!(consolidation_type(Method::MultiNodeConsolidation), "multi");
        assert_eq!(
            consolidation_type(Method::SingleNodeConsolidation),
            "single"
        );
        assert_eq!(consolidation_type(Method::Drift), "");
    }

    #[test]
    fn a_stale_disrupted_taint_is_cleared_only_from_karpenters_own_idle_nodes() {
        let node = |name: &str| -> k8s_openapi::api::core::v1::Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
            }))
            .unwrap_or_default()
        };
        let claim = |name: &str| -> NodeClaim {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let (owned, queued, unowned) = (node("owned"), node("queued"), node("unowned"));
        let (owned_claim, queued_claim) = (claim("owned"), claim("queued"));
        let state = |node, node_claim| karpenter_state::StateNode {
            node: Some(node),
            node_claim,
            pods: Vec::new(),
            nominated_until: None,
            marked_for_deletion: false,
        };
        let nodes = [
            state(&owned, Some(&owned_claim)),
            state(&queued, Some(&queued_claim)),
            state(&unowned, None),
        ];
        assert_eq!(
            stale_disrupted(&nodes, |n| n == "queued"),
            [("owned".to_owned(), "owned".to_owned())],
            "a node without a NodeClaim keeps its taint; a queued one keeps it too"
        );
    }

    #[test]
    fn only_consolidation_commands_are_told_as_consolidation_candidates() {
        assert!(is_consolidation(Method::SingleNodeConsolidation));
        assert!(is_consolidation(Method::MultiNodeConsolidation));
        assert!(!is_consolidation(Method::Emptiness));
        assert!(!is_consolidation(Method::Drift));
        assert!(!is_consolidation(Method::StaticDrift));
    }
}
