//! The in-place reboot of a node (upstream `nodeclaim.reboot`, v1.15): every NodeClaim with
//! `Rebooting=True` gets one pass at a time, decided by
//! [`karpenter_lifecycle::reboot::decide_reboot`] and performed here in order, stopping at the
//! first failure: the `karpenter.sh/rebooting:NoSchedule` fence, the drain (the termination's
//! evictions, never forced), the pre-boot id, the cloud's [`CloudProvider::reboot`], the
//! `RebootIssued` and `Initialized=Unknown` conditions, the fence's removal on the new boot and
//! the terminal `RebootSucceeded`, or a failure that replaces the node (the NodeClaim deleted,
//! its drain bounded by the reboot's) or, for an invalid request, ends it `RebootFailed`.
//! Events `RebootObserved` and `RebootFailed` on the NodeClaim, and the
//! `karpenter_nodes_reboot*` metrics, as upstream.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions::{self, rebooting};
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_lifecycle::reboot::{
    RebootPass, RebootResult, RebootStep, RebootView, decide_reboot, is_rebooting, issued_at,
    rebooting_taint, requested_at, termination_grace_period,
};
use karpenter_lifecycle::termination::deadline_annotation;
use karpenter_scheduling::PodRecord;
use karpenter_state::Cluster;
use serde_json::json;

use crate::cluster::writes::WriteError;
use crate::controllers::termination::{Termination, TerminationError};
use crate::leader::Fenced;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// Reboots in flight handled at once.
const CONCURRENCY: usize = 10;

/// The reboot loop.
#[derive(Debug)]
pub struct Reboot<C> {
    pub ctx: Context<C>,
    /// The drain's evictions, as the termination makes them.
    drain: Termination<C>,
    /// What this process remembers of the reboots in flight.
    memory: Mutex<Memory>,
}

/// The loop's in-memory state, behind one lock (upstream keeps the same in memory).
#[derive(Debug, Default)]
struct Memory {
    /// When this process first tried to issue each reboot (by NodeClaim uid): the issuance
    /// timeout runs from it.
    issuing: HashMap<String, DateTime<Utc>>,
    /// Reboots whose new boot was told (`RebootObserved` once per reboot).
    observed: HashSet<String>,
}

impl<C> Reboot<C> {
    pub fn new(ctx: Context<C>) -> Self {
        Reboot {
            drain: Termination::new(ctx.clone()),
            ctx,
            memory: Mutex::default(),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The issuance clock of the reboot of NodeClaim `uid` starts (once).
    fn issuing(&self, uid: &str) {
        self.memory()
            .issuing
            .entry(uid.to_owned())
            .or_insert_with(Utc::now);
    }

    /// The reboot of NodeClaim `uid` is over: its issuance clock is dropped.
    fn forget(&self, uid: &str) {
        self.memory().issuing.remove(uid);
    }
}

/// One pass over a rebooting NodeClaim, with what it was decided from.
#[derive(Debug, Clone)]
pub struct RebootWork {
    pub claim: NodeClaim,
    pub node: Option<Node>,
    pub pods: BTreeMap<String, Arc<PodRecord>>,
    pub pass: RebootPass,
}

/// A step of a reboot pass failed; the pass is tried again.
#[derive(Debug, thiserror::Error)]
pub enum RebootError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Drain(#[from] TerminationError),
    #[error("rebooting the instance of nodeclaim {claim}: {source}")]
    Cloud {
        claim: String,
        #[source]
        source: CloudError,
    },
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

fn episode(claim: &NodeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.uid.as_deref().unwrap_or_default(),
        requested_at(claim)
            .map(|t| t.to_rfc3339())
            .unwrap_or_default()
    )
}

impl<C: CloudProvider + 'static> Reconciler for Reboot<C> {
    type Step = RebootWork;
    type Error = RebootError;
    const NAME: &'static str = "nodeclaim.reboot";

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_millis(200), Duration::from_secs(15)).concurrency(CONCURRENCY)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<RebootWork> {
        let mut scan = Scan::new();
        let issuing = self.memory().issuing.clone();
        for claim in cluster.node_claims().filter(|c| is_rebooting(c)) {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if busy.contains(&name) {
                continue;
            }
            let node = claim
                .status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .and_then(|n| cluster.node(n));
            let pods: Vec<Arc<PodRecord>> = node
                .and_then(|n| n.metadata.name.as_deref())
                .map(|n| cluster.pods_on(n).into_iter().cloned().collect())
                .unwrap_or_default();
            let refs: Vec<&PodRecord> = pods.iter().map(|p| &**p).collect();
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            let pass = decide_reboot(
                &RebootView {
                    claim,
                    node,
                    pods: &refs,
                    issuance_started: issuing.get(&uid).copied(),
                },
                now,
            );
            if let Some(after) = pass.requeue_after {
                scan.requeue_after(after);
            }
            if pass.steps.is_empty() {
                continue;
            }
            scan.step(
                name,
                RebootWork {
                    claim: claim.clone(),
                    node: node.cloned(),
                    pods: pods.into_iter().map(|p| (p.key(), p)).collect(),
                    pass,
                },
            );
        }
        scan
    }

    async fn execute(&self, work: RebootWork) -> Result<Action, RebootError> {
        let RebootWork {
            claim,
            node,
            pods,
            pass,
        } = work;
        let name = claim.metadata.name.clone().unwrap_or_default();
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let node_name = node
            .as_ref()
            .and_then(|n| n.metadata.name.clone())
            .unwrap_or_default();
        let writer = self.ctx.writer();
        let message = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == conditions::REBOOTING))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        let mark_issued = || async {
            writer
                .set_claim_condition(
                    &name,
                    conditions::REBOOTING,
                    Some(("True", rebooting::ISSUED, &message)),
                    Utc::now(),
                )
                .await?;
            writer
                .set_claim_condition(
                    &name,
                    conditions::INITIALIZED,
                    Some(("Unknown", rebooting::REBOOTING, "node is rebooting")),
                    Utc::now(),
                )
                .await?;
            if node
                .as_ref()
                .and_then(|n| n.metadata.labels.as_ref())
                .is_some_and(|l| l.contains_key(labels::INITIALIZED))
            {
                writer
                    .merge_metadata::<Node>(
                        &node_name,
                        json!({"labels": {labels::INITIALIZED: null}}),
                        "removing the initialized label",
                    )
                    .await?;
            }
            Ok::<(), RebootError>(())
        };
        for step in &pass.steps {
            match step {
                RebootStep::Fence => {
                    writer
                        .set_taint(&node_name, rebooting_taint(), true)
                        .await?
                }
                RebootStep::Unfence { observed } => {
                    writer
                        .set_taint(&node_name, rebooting_taint(), false)
                        .await?;
                    if *observed && self.memory().observed.insert(episode(&claim)) {
                        self.ctx
                            .events
                            .normal_node_claim(
                                &claim,
                                "RebootObserved",
                                "New boot observed (bootID changed); awaiting node readiness",
                            )
                            .await;
                    }
                }
                RebootStep::Drain(plan) => {
                    for (key, action) in &plan.actions {
                        if let Some(pod) = pods.get(key) {
                            self.drain.act(&node_name, pod, action, "Repair").await?;
                        }
                    }
                }
                RebootStep::RecordPreBootId { boot_id } => {
                    self.issuing(&uid);
                    writer
                        .merge_metadata::<NodeClaim>(
                            &name,
                            json!({"annotations": {labels::REBOOT_PRE_BOOT_ID: boot_id}}),
                            "recording the pre-boot id",
                        )
                        .await?;
                }
                RebootStep::Issue { operation_id } => {
                    self.issuing(&uid);
                    self.ctx.fence.check()?;
                    match self.ctx.cloud.reboot(&claim, operation_id).await {
                        Ok(()) => {
                            tracing::info!(nodeclaim = %name, operation_id, "reboot issued");
                            mark_issued().await?;
                        }
                        Err(
                            source @ (CloudError::RebootRejected { .. }
                            | CloudError::NodeClaimNotFound { .. }),
                        ) => {
                            let message =
                                format!("reboot rejected by the cloud provider: {source}");
                            self.fail(&claim, &node_name, RebootResult::ProviderError, &message)
                                .await?;
                            return Ok(Action::AwaitChange);
                        }
                        Err(source) => {
                            return Err(RebootError::Cloud {
                                claim: name.clone(),
                                source,
                            });
                        }
                    }
                }
                RebootStep::MarkIssued => mark_issued().await?,
                RebootStep::RemoveInitializedLabel => {
                    writer
                        .merge_metadata::<Node>(
                            &node_name,
                            json!({"labels": {labels::INITIALIZED: null}}),
                            "removing the initialized label",
                        )
                        .await?;
                }
                RebootStep::Succeed => {
                    let now = Utc::now();
                    let duration = requested_at(&claim).map(|t| seconds(now - t));
                    let recovery = issued_at(&claim).map(|t| seconds(now - t));
                    self.end(
                        &claim,
                        rebooting::SUCCEEDED,
                        "node rebooted and rejoined the cluster",
                    )
                    .await?;
                    self.ctx.metrics.reboot_ended(
                        RebootResult::Succeeded.as_str(),
                        duration.unwrap_or_default(),
                    );
                    if let Some(recovery) = recovery {
                        self.ctx.metrics.reboot_recovered(recovery);
                    }
                    tracing::info!(nodeclaim = %name, "reboot succeeded");
                }
                RebootStep::Fail { result, message } => {
                    self.fail(&claim, &node_name, *result, message).await?;
                }
            }
        }
        Ok(pass
            .requeue_after
            .map_or(Action::AwaitChange, Action::RequeueAfter))
    }

    fn error_policy(&self, error: &RebootError) -> Retry {
        match error {
            RebootError::Write(error) => error.retry(),
            RebootError::Drain(error) => error.retry(),
            RebootError::Cloud { .. } | RebootError::Fenced(_) => Retry::Backoff,
        }
    }

    fn step_name(work: &RebootWork) -> &'static str {
        work.pass.steps.first().map_or("wait", RebootStep::name)
    }
}

fn seconds(d: chrono::Duration) -> f64 {
    d.to_std().unwrap_or_default().as_secs_f64()
}

impl<C: CloudProvider + 'static> Reboot<C> {
    /// Ends the reboot with `reason` (`Rebooting=False`), its pre-boot id removed.
    async fn end(&self, claim: &NodeClaim, reason: &str, message: &str) -> Result<(), RebootError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let writer = self.ctx.writer();
        self.forget(claim.metadata.uid.as_deref().unwrap_or_default());
        writer
            .merge_metadata::<NodeClaim>(
                &name,
                json!({"annotations": {labels::REBOOT_PRE_BOOT_ID: null}}),
                "removing the pre-boot id",
            )
            .await?;
        writer
            .set_claim_condition(
                &name,
                conditions::REBOOTING,
                Some(("False", reason, message)),
                Utc::now(),
            )
            .await?;
        Ok(())
    }

    /// A failed reboot: the fence goes; the node is replaced (the NodeClaim deleted, its drain
    /// bounded by the reboot's), or for an invalid request the reboot ends `RebootFailed`.
    async fn fail(
        &self,
        claim: &NodeClaim,
        node: &str,
        result: RebootResult,
        message: &str,
    ) -> Result<(), RebootError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let writer = self.ctx.writer();
        if !node.is_empty() {
            writer.set_taint(node, rebooting_taint(), false).await?;
        }
        let duration = requested_at(claim).map(|t| seconds(Utc::now() - t));
        if result.replaces() {
            if let Ok(Some(grace)) = termination_grace_period(claim)
                && let Ok(grace) = chrono::Duration::from_std(grace)
            {
                let deadline = Utc::now() + grace;
                let current = karpenter_lifecycle::termination::termination_deadline(claim);
                if current.is_none_or(|c| c > deadline) {
                    writer
                        .merge_metadata::<NodeClaim>(
                            &name,
                            json!({"annotations": {labels::NODECLAIM_TERMINATION_TIMESTAMP: deadline_annotation(deadline)}}),
                            "bounding the replacement's drain",
                        )
                        .await?;
                }
            }
            self.forget(claim.metadata.uid.as_deref().unwrap_or_default());
            writer.delete::<NodeClaim>(&name, "deleting").await?;
            tracing::info!(nodeclaim = %name, result = result.as_str(), "reboot failed, replacing node");
        } else {
            self.end(claim, rebooting::FAILED, message).await?;
        }
        self.ctx
            .events
            .warn_node_claim(claim, "RebootFailed", message)
            .await;
        self.ctx
            .metrics
            .reboot_ended(result.as_str(), duration.unwrap_or_default());
        Ok(())
    }
}
