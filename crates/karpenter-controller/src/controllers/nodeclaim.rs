//! The NodeClaim lifecycle executor (upstream `nodeclaim.lifecycle`): for every NodeClaim in
//! the index, [`karpenter_lifecycle::decide`] says what to do next and this module does it
//! against the API server and the cloud. Each NodeClaim has at most one step in flight;
//! steps run concurrently across NodeClaims (bounded). The loop wakes on every change of the
//! index and at least every [`RESYNC`].

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_lifecycle::lifecycle::{
    self, initialized_claim, initialized_node, launched, registered_claim, registered_node,
    set_condition,
};
use karpenter_lifecycle::{LifecycleConfig, Step, decide, termination};
use karpenter_state::{Kind, Object, ObjectRef};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::events::Events;
use super::in_flight::{Backoff, InFlight};

/// The key a NodeClaim's failures back off under: a deletion is a new start (a failing launch
/// must not hold up the finalizer).
fn backoff_key(claim: &NodeClaim) -> String {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    if claim.metadata.deletion_timestamp.is_some() {
        format!("{name}#deleting")
    } else {
        name.to_owned()
    }
}
use super::metrics::{ControllerMetrics, Reconciled};

/// The loop looks at every NodeClaim at most this often on changes.
const SCAN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// The loop runs at least this often.
pub const RESYNC: Duration = Duration::from_secs(2);
/// Steps in flight at once.
const CONCURRENCY: usize = 64;

/// The lifecycle loop.
pub struct Lifecycle<C> {
    pub cache: ClusterCache,
    pub cloud: Arc<C>,
    pub client: Client,
    pub events: Events,
    pub metrics: ControllerMetrics,
    pub config: LifecycleConfig,
}

/// A step failed; it is retried on the next pass.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{step} of nodeclaim {claim}: {source}")]
    Api {
        step: &'static str,
        claim: String,
        #[source]
        source: kube::Error,
    },
    #[error("{step} of node {node}: {source}")]
    NodeApi {
        step: &'static str,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("{step} of nodeclaim {claim}: {source}")]
    Cloud {
        step: &'static str,
        claim: String,
        #[source]
        source: CloudError,
    },
}

impl<C> std::fmt::Debug for Lifecycle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Removes our finalizer from an object (a missing object is fine: it is gone already).
pub(super) async fn release<K>(
    api: &Api<K>,
    name: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let finalizers: Vec<&String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != labels::TERMINATION_FINALIZER)
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

fn label<'a>(claim: &'a NodeClaim, key: &str) -> &'a str {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}

impl<C: CloudProvider + 'static> Lifecycle<C> {
    /// Runs until `cancel` trips.
    pub async fn run(self, cancel: CancellationToken) {
        let this = Arc::new(self);
        let busy = InFlight::default();
        let backoff = Backoff::default();
        let permits = Arc::new(Semaphore::new(CONCURRENCY));
        let mut changes = this.cache.changes(SCAN_INTERVAL);
        loop {
            if this.cache.synced() {
                let waiting = backoff.waiting(std::time::Instant::now());
                let steps = {
                    let mut busy = busy.lock();
                    let steps = this.pending_steps(&busy, &waiting);
                    for (claim, _, _) in &steps {
                        busy.insert(claim.metadata.name.clone().unwrap_or_default());
                    }
                    steps
                };
                for (claim, node, step) in steps {
                    let name = claim.metadata.name.clone().unwrap_or_default();
                    let (this, busy, permits, backoff) =
                        (this.clone(), busy.clone(), permits.clone(), backoff.clone());
                    tokio::spawn(async move {
                        let _permit = permits.acquire_owned().await;
                        let started = std::time::Instant::now();
                        let result = this.execute(&claim, node.as_ref(), step).await;
                        this.metrics.reconciled(
                            "nodeclaim.lifecycle",
                            Reconciled::of(&result),
                            started.elapsed().as_secs_f64(),
                        );
                        let key = backoff_key(&claim);
                        match result {
                            Ok(()) => backoff.succeeded(&key),
                            Err(error) => {
                                let delay = backoff.failed(&key, std::time::Instant::now());
                                tracing::warn!(%error, retry_in = ?delay, "lifecycle step failed; retrying");
                            }
                        }
                        busy.done(&name);
                    });
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
                () = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// Every NodeClaim whose next step is not "wait" or "done", with its Node.
    /// The steps to start now: NodeClaims with a step in flight (`busy`) are skipped before
    /// anything is copied (a NodeClaim naming 600 instance types is 20 KB; copying every one
    /// on every scan was a third of the controller's CPU with 500 NodeClaims in flight).
    fn pending_steps(
        &self,
        busy: &HashSet<String>,
        waiting: &HashSet<String>,
    ) -> Vec<(NodeClaim, Option<Node>, Step)> {
        let now = Utc::now();
        let cluster = self.cache.lock();
        let by_provider: BTreeMap<&str, &Node> = cluster
            .nodes()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
            .collect();
        cluster
            .node_claims()
            .filter(|claim| {
                claim
                    .metadata
                    .name
                    .as_ref()
                    .is_none_or(|name| !busy.contains(name))
                    && !waiting.contains(&backoff_key(claim))
            })
            .filter_map(|claim| {
                let node = claim
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(|id| by_provider.get(id).copied());
                let step = decide(claim, node, now, &self.config);
                let waiting_and_said = match &step {
                    Step::Done => true,
                    Step::AwaitRegistration { .. } => {
                        lifecycle::is_condition(claim, conditions::REGISTERED, "Unknown")
                    }
                    Step::AwaitInitialization { .. } => {
                        lifecycle::is_condition(claim, conditions::INITIALIZED, "Unknown")
                    }
                    _ => false,
                };
                (!waiting_and_said).then(|| (claim.clone(), node.cloned(), step))
            })
            .collect()
    }

    fn claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    async fn execute(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        step: Step,
    ) -> Result<(), StepError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api_error = |step: &'static str| {
            let claim = name.clone();
            move |source| StepError::Api {
                step,
                claim,
                source,
            }
        };
        let now = Utc::now();
        match step {
            Step::Done => Ok(()),
            Step::AddFinalizer => {
                let mut finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(labels::TERMINATION_FINALIZER.to_owned());
                let patch = json!({"metadata": {"finalizers": finalizers}});
                let updated = self
                    .claims()
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error("adding the finalizer"))?;
                self.cache.apply(Object::NodeClaim(updated));
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
                self.write_status(&updated, "recording registration").await
            }
            Step::Register { node: node_name } => {
                let Some(node) = node else { return Ok(()) };
                let desired = registered_node(claim, node);
                let patch = json!({
                    "metadata": {
                        "labels": desired.metadata.labels,
                        "annotations": desired.metadata.annotations,
                        "finalizers": desired.metadata.finalizers,
                        "ownerReferences": desired.metadata.owner_references,
                    },
                    "spec": {"taints": desired.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()},
                });
                let patched = self
                    .nodes()
                    .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error("registering the node"))?;
                self.cache.apply(Object::Node(patched));
                self.write_status(&registered_claim(claim, &node_name, now), "registering")
                    .await?;
                self.metrics.node_created(label(claim, labels::NODEPOOL));
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
                self.write_status(&updated, "recording initialization")
                    .await
            }
            Step::Initialize { node: node_name } => {
                let Some(node) = node else { return Ok(()) };
                let desired = initialized_node(node);
                let patch = json!({"metadata": {"labels": desired.metadata.labels}});
                let patched = self
                    .nodes()
                    .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error("initializing the node"))?;
                self.cache.apply(Object::Node(patched));
                self.write_status(&initialized_claim(claim, now), "initializing")
                    .await?;
                tracing::info!(nodeclaim = %name, node = %node_name, "initialized");
                Ok(())
            }
            Step::Delete { reason } => {
                tracing::info!(nodeclaim = %name, reason = reason.as_str(), "deleting a NodeClaim that did not become a node in time");
                self.events
                    .warn_node_claim(
                        claim,
                        "NodeClaimLivenessTimeout",
                        &format!("deleting: {}", reason.as_str()),
                    )
                    .await;
                self.metrics.nodeclaim_disrupted(
                    reason.as_str(),
                    label(claim, labels::NODEPOOL),
                    label(claim, labels::CAPACITY_TYPE),
                );
                self.delete_claim(&name).await
            }
            Step::Finalize => self.finalize(claim, node).await,
        }
    }

    async fn launch(&self, claim: &NodeClaim) -> Result<(), StepError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let now = Utc::now();
        match self.cloud.create(claim).await {
            Ok(instance) => {
                let updated = launched(claim, &instance, now);
                let patch = json!({"metadata": {"labels": updated.metadata.labels, "annotations": updated.metadata.annotations}});
                let patched = self
                    .claims()
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|source| StepError::Api {
                        step: "launching",
                        claim: name.clone(),
                        source,
                    })?;
                let mut with_status = patched;
                with_status.status = updated.status;
                self.write_status(&with_status, "launching").await?;
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
                self.events
                    .warn_node_claim(claim, reason, &error.to_string())
                    .await;
                self.metrics
                    .nodeclaim_disrupted(metric, label(claim, labels::NODEPOOL), "");
                self.delete_claim(&name).await
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
                self.write_status(&updated, "recording a failed launch")
                    .await?;
                Err(StepError::Cloud {
                    step: "launching",
                    claim: name,
                    source: error,
                })
            }
        }
    }

    async fn finalize(&self, claim: &NodeClaim, node: Option<&Node>) -> Result<(), StepError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        // The drain's deadline, written once as upstream does, so a restart (or upstream, after
        // a switch back) keeps it.
        if let Some(deadline) = termination::termination_deadline(claim)
            && claim
                .metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key(labels::NODECLAIM_TERMINATION_TIMESTAMP))
        {
            let value = termination::deadline_annotation(deadline);
            let patch = json!({"metadata": {"annotations": {
                labels::NODECLAIM_TERMINATION_TIMESTAMP: value,
            }}});
            let patched = self
                .claims()
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| StepError::Api {
                    step: "annotating the termination deadline",
                    claim: name.clone(),
                    source,
                })?;
            self.cache.apply(Object::NodeClaim(patched));
        }
        if let Some(node) = node {
            // The Node goes first, drained by the termination loop; the instance and this
            // finalizer follow once it is gone.
            if node.metadata.deletion_timestamp.is_none() {
                let node_name = node.metadata.name.clone().unwrap_or_default();
                match self
                    .nodes()
                    .delete(&node_name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(source) => {
                        return Err(StepError::Api {
                            step: "deleting the node",
                            claim: name,
                            source,
                        });
                    }
                }
            }
            return Ok(());
        }
        if claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some()
        {
            match self.cloud.delete(claim).await {
                Ok(()) | Err(CloudError::NodeClaimNotFound { .. }) => {}
                Err(source) => {
                    return Err(StepError::Cloud {
                        step: "terminating the instance",
                        claim: name,
                        source,
                    });
                }
            }
        }
        release(&self.claims(), &name, &claim.metadata)
            .await
            .map_err(|source| StepError::Api {
                step: "removing the finalizer",
                claim: name.clone(),
                source,
            })?;
        self.metrics.nodeclaim_terminated(
            label(claim, labels::NODEPOOL),
            label(claim, labels::CAPACITY_TYPE),
            label(claim, labels::ZONE),
        );
        tracing::info!(nodeclaim = %name, "terminated");
        Ok(())
    }

    async fn delete_claim(&self, name: &str) -> Result<(), StepError> {
        match self.claims().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.cache
                    .delete(&ObjectRef::new(Kind::NodeClaim, None, name));
                Ok(())
            }
            Err(source) => Err(StepError::Api {
                step: "deleting",
                claim: name.to_owned(),
                source,
            }),
        }
    }

    async fn write_status(&self, claim: &NodeClaim, step: &'static str) -> Result<(), StepError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let patch = json!({"status": claim.status});
        let updated = self
            .claims()
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StepError::Api {
                step,
                claim: name,
                source,
            })?;
        self.cache.apply(Object::NodeClaim(updated));
        Ok(())
    }
}
