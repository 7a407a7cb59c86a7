//! The NodeClaim lifecycle executor (upstream `nodeclaim.lifecycle`): for every NodeClaim in
//! the index, [`karpenter_lifecycle::decide`] says what to do next and this module does it
//! against the API server and the cloud. The driver runs one step per NodeClaim at a time,
//! [`CONCURRENCY`] across NodeClaims, on every change of the index and at least every
//! [`RESYNC`] (sooner when a NodeClaim's registration deadline comes first).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_cloud::{CloudError, CloudProvider, Registration};
use karpenter_lifecycle::lifecycle::{
    initialized_claim, initialized_node, launched, registered_claim, registered_node, set_condition,
};
use karpenter_lifecycle::registration_health::Outcome;
use karpenter_lifecycle::{LifecycleConfig, Step, decide};
use karpenter_state::Cluster;
use serde_json::json;

use crate::cluster::writes::WriteError;
use crate::leader::Fenced;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Disrupted;

/// Changes are looked at at most this often.
const SCAN_INTERVAL: Duration = Duration::from_millis(50);
/// The loop runs at least this often.
pub const RESYNC: Duration = Duration::from_secs(2);
/// Steps in flight at once.
pub const CONCURRENCY: usize = 64;

/// The lifecycle loop.
#[derive(Debug)]
pub struct Lifecycle<C> {
    pub ctx: Context<C>,
    pub config: LifecycleConfig,
}

/// One NodeClaim's next step, with the objects it was decided from.
#[derive(Debug, Clone)]
pub struct ClaimStep {
    pub claim: NodeClaim,
    pub node: Option<Node>,
    pub step: Step,
}

/// A step failed; the driver retries it.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{step} of nodeclaim {claim}: {source}")]
    Cloud {
        step: &'static str,
        claim: String,
        #[source]
        source: CloudError,
    },
    /// Leadership is not confirmed: nothing was launched or terminated.
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

impl StepError {
    /// What the failure means: a conflicting write is tried again at once from a fresher
    /// copy; anything else (an API or cloud failure) backs off.
    pub fn retry(&self) -> Retry {
        match self {
            StepError::Write(error) => error.retry(),
            StepError::Cloud { .. } | StepError::Fenced(_) => Retry::Backoff,
        }
    }
}

/// When the NodeClaim's condition `kind` last changed to `True`, if it is `True`.
fn claim_condition_since(claim: &NodeClaim, kind: &str) -> Option<DateTime<Utc>> {
    claim
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .and_then(|c| karpenter_state::conditions::from_api_time(&c.last_transition_time))
}

fn label<'a>(claim: &'a NodeClaim, key: &str) -> &'a str {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}

/// The steps to take now: every NodeClaim whose next step writes something, with its Node.
/// NodeClaims with a step in flight are skipped before anything is copied (a NodeClaim naming
/// 600 instance types is 20 KB; copying every one on every scan was a third of the
/// controller's CPU with 500 NodeClaims in flight).
pub fn scan(
    cluster: &Cluster,
    now: DateTime<Utc>,
    config: &LifecycleConfig,
    busy: Busy<'_>,
) -> Scan<ClaimStep> {
    let by_provider: BTreeMap<&str, &Node> = cluster
        .nodes()
        .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
        .collect();
    let mut scan = Scan::new();
    for claim in cluster.node_claims() {
        let Some(name) = claim.metadata.name.as_deref() else {
            continue;
        };
        if busy.contains(name) {
            continue;
        }
        let node = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|id| by_provider.get(id).copied());
        let step = decide(claim, node, now, config);
        match &step {
            Step::Done => continue,
            Step::Wait { requeue_after } => {
                if let Some(after) = requeue_after {
                    scan.requeue_after(*after);
                }
                continue;
            }
            Step::AwaitRegistration { requeue_after } => scan.requeue_after(*requeue_after),
            _ => {}
        }
        scan.step(
            name,
            ClaimStep {
                claim: claim.clone(),
                node: node.cloned(),
                step,
            },
        );
    }
    scan
}

impl<C: CloudProvider + 'static> Reconciler for Lifecycle<C> {
    type Step = ClaimStep;
    type Error = StepError;
    const NAME: &'static str = "nodeclaim.lifecycle";

    fn shape(&self) -> Shape {
        Shape::new(SCAN_INTERVAL, RESYNC).concurrency(CONCURRENCY)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<ClaimStep> {
        scan(cluster, now, &self.config, busy)
    }

    async fn execute(&self, step: ClaimStep) -> Result<Action, StepError> {
        self.execute(&step.claim, step.node.as_ref(), step.step)
            .await
            .map(|()| Action::AwaitChange)
    }

    fn error_policy(&self, error: &StepError) -> Retry {
        error.retry()
    }

    fn step_name(step: &ClaimStep) -> &'static str {
        step.step.name()
    }
}

/// What a NodeClaim deleted for liveness says of its NodePool's registration health (upstream
/// `liveness.updateNodePoolRegistrationHealth`): `RegistrationFailed` when it launched, else its
/// `Launched` condition's reason and message.
pub fn liveness_failure(claim: &NodeClaim) -> Outcome {
    let launched = karpenter_api::conditions::get(
        claim.status.as_ref().and_then(|s| s.conditions.as_deref()),
        conditions::LAUNCHED,
    );
    match launched {
        Some(c) if c.status != "True" => Outcome::Failed {
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
        Some(_) => Outcome::registration_failed(),
        // Upstream reads a missing condition as Unknown, awaiting reconciliation.
        None => Outcome::Failed {
            reason: "AwaitingReconciliation".to_owned(),
            message: "object is awaiting reconciliation".to_owned(),
        },
    }
}

/// A Node registering before Karpenter synced it (no `karpenter.sh/registered` label) without
/// the `karpenter.sh/unregistered:NoExecute` taint its kubelet should start with (upstream
/// tells it `UnregisteredTaintMissing` and goes on).
pub fn unregistered_taint_missing(node: &Node) -> bool {
    let synced = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::REGISTERED));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|t| t.key == labels::UNREGISTERED_TAINT_KEY && t.effect == "NoExecute")
        });
    !synced && !tainted
}

/// The uid of the NodePool that owns `claim` (upstream counts only NodeClaims it owns).
pub fn owning_pool_uid(claim: &NodeClaim) -> Option<&str> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "NodePool")
        .map(|o| o.uid.as_str())
}

impl<C: CloudProvider + 'static> Lifecycle<C> {
    /// Records what became of `claim` for its NodePool's registration health.
    fn record(&self, claim: &NodeClaim, outcome: Outcome) {
        if let Some(uid) = owning_pool_uid(claim) {
            self.ctx.registrations.lock().record(uid, outcome);
        }
    }

    async fn execute(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        step: Step,
    ) -> Result<(), StepError> {
        let writer = self.ctx.writer();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let now = Utc::now();
        match step {
            Step::Done | Step::Wait { .. } => Ok(()),
            Step::AddFinalizer => {
                writer
                    .set_finalizer(
                        claim,
                        labels::TERMINATION_FINALIZER,
                        true,
                        "adding the finalizer",
                    )
                    .await?;
                Ok(())
            }
            Step::Launch => self.launch(claim).await,
            Step::AwaitRegistration { .. } => {
                let mut updated = claim.clone();
                set_condition(
                    &mut updated,
                    conditions::REGISTERED,
                    "Unknown",
                    "NodeNotFound",
                    "Node not registered with cluster",
                    now,
                );
                self.write_status(claim, &updated, "recording registration")
                    .await
            }
            Step::Register { node: node_name } => {
                let Some(node) = node else { return Ok(()) };
                // The cloud's registration hook: labels pods may select on are settled first.
                let labelled;
                let claim = match self.ctx.cloud.registration(claim).await {
                    Ok(Registration::Proceed) => claim,
                    Ok(Registration::Wait { reason }) => {
                        tracing::debug!(nodeclaim = %name, node = %node_name, %reason, "registration waits for the cloud");
                        return Ok(());
                    }
                    Ok(Registration::Label(wanted)) => {
                        match writer
                            .merge_metadata::<NodeClaim>(
                                &name,
                                json!({"labels": wanted}),
                                "labelling before registration",
                            )
                            .await?
                        {
                            Some(patched) => {
                                labelled = patched;
                                &labelled
                            }
                            None => return Ok(()),
                        }
                    }
                    Err(source) => {
                        return Err(StepError::Cloud {
                            step: "registration hook",
                            claim: name,
                            source,
                        });
                    }
                };
                if unregistered_taint_missing(node) {
                    tracing::error!(nodeclaim = %name, node = %node_name, taint = labels::UNREGISTERED_TAINT_KEY, "node registered without the taint that prevents registration races");
                    self.ctx
                        .events
                        .warn_node_claim(
                            claim,
                            "UnregisteredTaintMissing",
                            &format!("Missing {} taint which prevents registration related race conditions on Karpenter-managed nodes", labels::UNREGISTERED_TAINT_KEY),
                        )
                        .await;
                }
                let desired = registered_node(claim, node);
                // Finalizers and taints are lists: the patch is guarded by the Node's version.
                let patch = json!({
                    "metadata": {
                        "labels": desired.metadata.labels,
                        "annotations": desired.metadata.annotations,
                        "finalizers": desired.metadata.finalizers,
                        "ownerReferences": desired.metadata.owner_references,
                    },
                    "spec": {"taints": desired.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()},
                });
                if writer
                    .patch_guarded(node, patch, "registering the node")
                    .await?
                    .is_none()
                {
                    return Ok(());
                }
                self.write_status(
                    claim,
                    &registered_claim(claim, &node_name, now),
                    "registering",
                )
                .await?;
                self.ctx
                    .metrics
                    .node_created(label(claim, labels::NODEPOOL), label(claim, labels::ZONE));
                self.record(claim, Outcome::Registered);
                tracing::info!(nodeclaim = %name, node = %node_name, "registered");
                Ok(())
            }
            Step::AwaitInitialization { waiting_for, .. } => {
                let mut updated = claim.clone();
                set_condition(
                    &mut updated,
                    conditions::INITIALIZED,
                    "Unknown",
                    "NotInitialized",
                    &waiting_for,
                    now,
                );
                self.write_status(claim, &updated, "recording initialization")
                    .await
            }
            Step::Initialize { node: node_name } => {
                let Some(node) = node else { return Ok(()) };
                let desired = initialized_node(node);
                if writer
                    .merge_metadata::<Node>(
                        &node_name,
                        json!({"labels": desired.metadata.labels}),
                        "initializing the node",
                    )
                    .await?
                    .is_none()
                {
                    return Ok(());
                }
                self.write_status(claim, &initialized_claim(claim, now), "initializing")
                    .await?;
                tracing::info!(nodeclaim = %name, node = %node_name, "initialized");
                Ok(())
            }
            Step::Delete { reason } => {
                tracing::info!(nodeclaim = %name, reason = reason.as_str(), "deleting a NodeClaim that did not become a node in time");
                self.ctx
                    .events
                    .warn_node_claim(
                        claim,
                        "NodeClaimLivenessTimeout",
                        &format!("deleting: {}", reason.as_str()),
                    )
                    .await;
                self.ctx
                    .metrics
                    .nodeclaim_disrupted(&Disrupted::of(reason.as_str(), Some(claim)));
                writer.delete::<NodeClaim>(&name, "deleting").await?;
                self.record(claim, liveness_failure(claim));
                Ok(())
            }
            Step::AnnotateTerminationDeadline { deadline } => {
                writer
                    .merge_metadata::<NodeClaim>(
                        &name,
                        json!({"annotations": {
                            labels::NODECLAIM_TERMINATION_TIMESTAMP: deadline,
                        }}),
                        "annotating the termination deadline",
                    )
                    .await?;
                self.ctx
                    .events
                    .warn_node_claim(
                        claim,
                        "TerminationGracePeriodExpiring",
                        &format!("All pods will be deleted by {deadline}"),
                    )
                    .await;
                Ok(())
            }
            Step::DeleteNode { node } => {
                // The Node goes first, drained by its termination; the instance and this
                // finalizer follow once it is gone.
                writer.delete::<Node>(&node, "deleting the node").await?;
                Ok(())
            }
            Step::TerminateInstance => {
                self.ctx.fence.check()?;
                let started = Utc::now();
                match self.ctx.cloud.delete(claim).await {
                    Ok(()) | Err(CloudError::NodeClaimNotFound { .. }) => {}
                    Err(source) => {
                        return Err(StepError::Cloud {
                            step: "terminating the instance",
                            claim: name,
                            source,
                        });
                    }
                }
                self.release(claim).await?;
                // From `InstanceTerminating` (the Node's termination sets it when it asks for
                // the instance to go) or, without it, from this request, to the cloud's
                // answer. Unlike upstream, which asks again every 5 s until the instance is
                // gone, the NodeClaim is released once the cloud accepted the termination.
                let since = claim_condition_since(claim, conditions::INSTANCE_TERMINATING)
                    .unwrap_or(started);
                self.ctx.metrics.instance_termination_duration(
                    label(claim, labels::NODEPOOL),
                    (Utc::now() - since).as_seconds_f64().max(0.0),
                );
                Ok(())
            }
            Step::RemoveFinalizer => self.release(claim).await,
        }
    }

    /// Removes the finalizer: the NodeClaim is terminated.
    async fn release(&self, claim: &NodeClaim) -> Result<(), StepError> {
        self.ctx
            .writer()
            .set_finalizer(
                claim,
                labels::TERMINATION_FINALIZER,
                false,
                "removing the finalizer",
            )
            .await?;
        self.ctx.metrics.nodeclaim_terminated(
            label(claim, labels::NODEPOOL),
            label(claim, labels::CAPACITY_TYPE),
            label(claim, labels::ZONE),
        );
        if let Some(deleted) = claim
            .metadata
            .deletion_timestamp
            .as_ref()
            .and_then(karpenter_state::conditions::from_api_time)
        {
            self.ctx.metrics.nodeclaim_termination_duration(
                label(claim, labels::NODEPOOL),
                (Utc::now() - deleted).as_seconds_f64().max(0.0),
            );
        }
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.ctx.explanations.node_claim_terminated(name);
        tracing::info!(nodeclaim = %name, "terminated");
        Ok(())
    }

    async fn launch(&self, claim: &NodeClaim) -> Result<(), StepError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let now = Utc::now();
        self.ctx.fence.check()?;
        match self.ctx.cloud.create(claim).await {
            Ok(instance) => {
                let mut updated = launched(claim, &instance, now);
                if let Some(catalogs) = self.ctx.catalogs.latest() {
                    karpenter_lifecycle::lifecycle::add_overlay_capacity(
                        &mut updated,
                        &catalogs.overlays,
                    );
                }
                let Some(patched) = self
                    .ctx
                    .writer()
                    .merge_metadata::<NodeClaim>(
                        &name,
                        json!({"labels": updated.metadata.labels, "annotations": updated.metadata.annotations}),
                        "launching",
                    )
                    .await?
                else {
                    return Ok(());
                };
                let mut with_status = patched.clone();
                with_status.status = updated.status;
                self.write_status(&patched, &with_status, "launching")
                    .await?;
                self.ctx
                    .explanations
                    .node_claim_launched(&name, label(&instance, labels::INSTANCE_TYPE));
                tracing::info!(
                    nodeclaim = %name,
                    instance_type = label(&instance, labels::INSTANCE_TYPE),
                    zone = label(&instance, labels::ZONE),
                    capacity_type = label(&instance, labels::CAPACITY_TYPE),
                    "launched"
                );
                Ok(())
            }
            Err(
                error @ (CloudError::InsufficientCapacity { .. }
                | CloudError::NodeClassNotReady { .. }),
            ) => {
                let (reason, metric) = match error {
                    CloudError::InsufficientCapacity { .. } => {
                        ("InsufficientCapacityError", "insufficient_capacity")
                    }
                    _ => ("NodeClassNotReady", "nodeclass_not_ready"),
                };
                tracing::warn!(nodeclaim = %name, %error, "launch failed; deleting the NodeClaim so the next batch picks another offering");
                self.ctx
                    .events
                    .warn_node_claim(claim, reason, &error.to_string())
                    .await;
                self.ctx
                    .metrics
                    .nodeclaim_disrupted(&Disrupted::of(metric, Some(claim)));
                self.ctx
                    .writer()
                    .delete::<NodeClaim>(&name, "deleting")
                    .await?;
                Ok(())
            }
            Err(error) => {
                let mut updated = claim.clone();
                let mut message = error.to_string();
                message.truncate(300);
                set_condition(
                    &mut updated,
                    conditions::LAUNCHED,
                    "False",
                    "LaunchFailed",
                    &message,
                    now,
                );
                self.write_status(claim, &updated, "recording a failed launch")
                    .await?;
                Err(StepError::Cloud {
                    step: "launching",
                    claim: name,
                    source: error,
                })
            }
        }
    }

    /// Writes `updated`'s status over `current`'s (guarded by `current`'s version).
    async fn write_status(
        &self,
        current: &NodeClaim,
        updated: &NodeClaim,
        step: &'static str,
    ) -> Result<(), StepError> {
        self.ctx
            .writer()
            .patch_status(current, json!(updated.status), step)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::writes::WriteError;

    #[test]
    fn a_node_registering_without_the_unregistered_taint_is_told_unless_already_synced() {
        let node = |labels: serde_json::Value, taints: serde_json::Value| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "n", "labels": labels},
                "spec": {"taints": taints}
            }))
            .unwrap_or_else(|e| panic!("node: {e}"))
        };
        let taint = json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]);
        assert!(unregistered_taint_missing(&node(json!({}), json!([]))));
        assert!(!unregistered_taint_missing(&node(json!({}), taint)));
        assert!(!unregistered_taint_missing(&node(
            json!({"karpenter.sh/registered": "true"}),
            json!([])
        )));
    }

    #[test]
    fn a_claim_deleted_for_liveness_fails_its_pool_with_its_launch_reason_or_registration() {
        let claim = |conditions: serde_json::Value| -> NodeClaim {
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c"},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}, "requirements": []},
                "status": {"conditions": conditions}
            }))
            .unwrap_or_else(|e| panic!("claim: {e}"))
        };
        let launched = claim(
            json!([{"type": "Launched", "status": "True", "reason": "Launched",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
        );
        assert_eq!(liveness_failure(&launched), Outcome::registration_failed());
        let failed = claim(
            json!([{"type": "Launched", "status": "False", "reason": "InsufficientCapacity",
            "message": "no capacity", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
        );
        assert_eq!(
            liveness_failure(&failed),
            Outcome::Failed {
                reason: "InsufficientCapacity".to_owned(),
                message: "no capacity".to_owned()
            }
        );
    }

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(json!({
            "status": "Failure", "code": code, "message": "m", "reason": "r",
        }))
        .unwrap_or_else(|e| panic!("status: {e}"));
        kube::Error::Api(Box::new(status))
    }

    fn write_error(code: u16) -> StepError {
        StepError::Write(WriteError {
            step: "registering",
            kind: "nodeclaim",
            name: "c1".into(),
            source: api_error(code).into(),
        })
    }

    #[test]
    fn a_conflicting_write_is_retried_at_once_and_other_failures_back_off() {
        assert_eq!(write_error(409).retry(), Retry::Now);
        assert_eq!(write_error(500).retry(), Retry::Backoff);
        assert_eq!(write_error(429).retry(), Retry::Backoff);
        let cloud = StepError::Cloud {
            step: "launching",
            claim: "c1".into(),
            source: CloudError::Provider {
                operation: "CreateFleet",
                message: "throttled".into(),
                retryable: true,
            },
        };
        assert_eq!(cloud.retry(), Retry::Backoff);
    }

    #[test]
    fn a_failed_write_names_the_step_the_kind_and_the_object() {
        let message = write_error(500).to_string();
        assert!(
            message.starts_with("registering of nodeclaim c1: "),
            "{message}"
        );
    }
}
