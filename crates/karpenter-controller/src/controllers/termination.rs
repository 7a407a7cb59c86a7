//! Node termination (upstream `node.termination`): a Node being deleted that carries the
//! `karpenter.sh/termination` finalizer gets its NodeClaim deleted too, is tainted
//! `karpenter.sh/disrupted:NoSchedule` and drained through the Eviction API
//! ([`karpenter_lifecycle::termination::plan_drain`] decides what each pass does: a PDB that
//! refuses is asked again on the next pass, never overridden; only the NodeClaim's termination
//! grace period deletes pods past it). Once nothing holds the drain (and, if it had pods to wait
//! for, at least `MinDrainTime` after `Drained` went `Unknown`) and the volumes of the pods
//! that left are detached (not awaited past the deadline), the instance is terminated and the
//! finalizer removed. One pass per Node at a time; every node is looked at on changes
//! and at least every [`RESYNC`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_lifecycle::termination::{
    PodAction, attachments_to_await, is_tainted, min_drain_time_elapsed, plan_drain,
};
use karpenter_scheduling::PodRecord;
use kube::api::{Api, DeleteParams, EvictParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::events::Events;
use super::in_flight::InFlight;
use super::metrics::{ControllerMetrics, Reconciled};
use super::nodeclaim::{StepError, release};
use super::writes;

/// The loop looks at terminating nodes at most this often on changes.
const SCAN_INTERVAL: Duration = Duration::from_millis(200);
/// And at least this often (a PDB that refused an eviction is asked again).
pub const RESYNC: Duration = Duration::from_secs(1);
/// Eviction requests in flight at once for one node (the client's rate limit still applies).
const EVICTIONS_AT_ONCE: usize = 64;

/// The termination loop.
pub struct Termination<C> {
    pub cache: ClusterCache,
    pub cloud: Arc<C>,
    pub client: Client,
    pub events: Events,
    pub metrics: ControllerMetrics,
}

impl<C> std::fmt::Debug for Termination<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Termination").finish_non_exhaustive()
    }
}

fn has_finalizer(node: &Node) -> bool {
    node.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::TERMINATION_FINALIZER)
}

/// The NodeClaim's termination deadline (`karpenter.sh/nodeclaim-termination-timestamp`).
fn deadline(claim: Option<&NodeClaim>) -> Option<DateTime<Utc>> {
    let value = claim?
        .metadata
        .annotations
        .as_ref()?
        .get(labels::NODECLAIM_TERMINATION_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(value)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The `reason` of `karpenter_pods_drained_total`: the disruption that deleted the NodeClaim
/// (its `DisruptionReason` condition), else `Forceful Termination` (deleted by a user or an
/// expiry), as upstream labels it.
fn drain_reason(claim: Option<&NodeClaim>) -> &str {
    claim
        .and_then(|c| c.status.as_ref()?.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == super::disruption::DISRUPTION_REASON && c.status == "True")
        })
        .map_or("Forceful Termination", |c| c.reason.as_str())
}

impl<C: CloudProvider + 'static> Termination<C> {
    /// Runs until `cancel` trips.
    pub async fn run(self, cancel: CancellationToken) {
        let this = Arc::new(self);
        let busy = InFlight::default();
        let mut changes = this.cache.changes(SCAN_INTERVAL);
        loop {
            if this.cache.synced() {
                for (node, claim) in this.terminating(&busy) {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let (this, busy) = (this.clone(), busy.clone());
                    tokio::spawn(async move {
                        let started = std::time::Instant::now();
                        let result = this.terminate(&node, claim.as_ref()).await;
                        this.metrics.reconciled(
                            "node.termination",
                            Reconciled::of(&result),
                            started.elapsed().as_secs_f64(),
                        );
                        if let Err(error) = result {
                            tracing::warn!(%error, node = %name, "termination step failed; retrying");
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

    /// Nodes being deleted with our finalizer and no pass in flight (marked busy), with their
    /// NodeClaim.
    fn terminating(&self, busy: &InFlight) -> Vec<(Node, Option<NodeClaim>)> {
        let mut busy = busy.lock();
        let cluster = self.cache.lock();
        let claims: BTreeMap<&str, &NodeClaim> = cluster
            .node_claims()
            .filter_map(|c| Some((c.status.as_ref()?.provider_id.as_deref()?, c)))
            .collect();
        let mut out = Vec::new();
        for node in cluster.nodes() {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            if node.metadata.deletion_timestamp.is_none()
                || !has_finalizer(node)
                || busy.contains(name)
            {
                continue;
            }
            busy.insert(name.to_owned());
            let claim = node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|id| claims.get(id).copied());
            out.push((node.clone(), claim.cloned()));
        }
        out
    }

    fn api_error(step: &'static str, node: &str) -> impl FnOnce(kube::Error) -> StepError {
        let node = node.to_owned();
        move |source| StepError::NodeApi { step, node, source }
    }

    /// One pass over a terminating Node.
    async fn terminate(&self, node: &Node, claim: Option<&NodeClaim>) -> Result<(), StepError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Some(claim) = claim.filter(|c| c.metadata.deletion_timestamp.is_none()) {
            let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
            writes::delete_claim(&self.client, claim_name).await?;
        }
        if !is_tainted(node) {
            writes::set_disrupted_taint(&self.client, &self.cache, &name, true).await?;
        }
        let now = Utc::now();
        // The drain plan and the attachments it waits for from one look at the index.
        let (plan, pods, attached): (_, BTreeMap<String, Arc<PodRecord>>, Vec<String>) = {
            let cluster = self.cache.lock();
            let on_node = cluster.pods_on(&name);
            let refs: Vec<&PodRecord> = on_node.iter().map(|p| &***p).collect();
            let plan = plan_drain(&refs, deadline(claim), now);
            let attachments = cluster.volume_attachments_on(&name);
            let volume_of = |namespace: &str, claim: &str| {
                cluster
                    .persistent_volume_claim(namespace, claim)
                    .and_then(|c| c.spec.as_ref()?.volume_name.clone())
            };
            let attached = attachments_to_await(&attachments, &refs, volume_of, now)
                .into_iter()
                .map(str::to_owned)
                .collect();
            let pods = on_node
                .iter()
                .map(|p| (karpenter_disruption::pods::key(p), Arc::clone(p)))
                .collect();
            (plan, pods, attached)
        };
        if !plan.drained() {
            self.condition(claim, conditions::DRAINED, "Unknown", "Draining")
                .await?;
            let reason = drain_reason(claim);
            // One tier's evictions at a time, as upstream's eviction queue makes them: a node
            // of 170 pods drained one round trip after another took 17 s.
            let requests: Vec<_> = plan
                .actions
                .iter()
                .filter_map(|(key, action)| Some(self.act(pods.get(key)?, action, reason)))
                .collect();
            let outcomes: Vec<Result<bool, StepError>> = futures::stream::iter(requests)
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
            return Ok(());
        }
        if !min_drain_time_elapsed(claim, now) {
            // The next pass (at most RESYNC away) declares it.
            return Ok(());
        }
        self.condition(claim, conditions::DRAINED, "True", "Drained")
            .await?;
        // Volumes detach before the instance goes (their data would be lost with it), unless the
        // termination grace period has run out.
        if deadline(claim).is_some_and(|d| now >= d) {
            self.condition(
                claim,
                conditions::VOLUMES_DETACHED,
                "False",
                "TerminationGracePeriodElapsed",
            )
            .await?;
        } else {
            if !attached.is_empty() {
                self.condition(
                    claim,
                    conditions::VOLUMES_DETACHED,
                    "Unknown",
                    "AwaitingVolumeDetachment",
                )
                .await?;
                tracing::debug!(node = %name, volume_attachments = ?attached, "drained; waiting for volumes to detach");
                return Ok(());
            }
            self.condition(
                claim,
                conditions::VOLUMES_DETACHED,
                "True",
                "VolumesDetached",
            )
            .await?;
        }
        let pool = node
            .labels()
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        if let Some(claim) = claim.filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some()
        }) {
            self.condition(
                Some(claim),
                conditions::INSTANCE_TERMINATING,
                "True",
                "InstanceTerminating",
            )
            .await?;
            match self.cloud.delete(claim).await {
                Ok(()) | Err(CloudError::NodeClaimNotFound { .. }) => {}
                Err(source) => {
                    return Err(StepError::Cloud {
                        step: "terminating the instance",
                        claim: claim.metadata.name.clone().unwrap_or_default(),
                        source,
                    });
                }
            }
        }
        release(&nodes, &name, &node.metadata)
            .await
            .map_err(Self::api_error("removing the finalizer", &name))?;
        // Both once the finalizer is gone, so a pass retried after a failed termination
        // counts nothing twice.
        self.metrics.node_drained(&pool);
        self.metrics.node_terminated(&pool);
        if let Some(since) = node
            .metadata
            .deletion_timestamp
            .as_ref()
            .and_then(karpenter_state::conditions::from_api_time)
        {
            self.metrics
                .node_termination_duration(&pool, (Utc::now() - since).as_seconds_f64().max(0.0));
        }
        tracing::info!(node = %name, "drained and terminated");
        Ok(())
    }

    /// Sets a termination condition on the NodeClaim (`Drained`, `VolumesDetached`,
    /// `InstanceTerminating`), writing only when its status or reason changes.
    async fn condition(
        &self,
        claim: Option<&NodeClaim>,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> Result<(), StepError> {
        let Some(name) = claim.and_then(|c| c.metadata.name.as_deref()) else {
            return Ok(());
        };
        writes::set_claim_condition(
            &self.client,
            &self.cache,
            name,
            type_,
            Some((status, reason, "")),
            Utc::now(),
        )
        .await
    }

    /// Evicts or deletes one pod; `false` when a PodDisruptionBudget refused the eviction.
    async fn act(
        &self,
        pod: &PodRecord,
        action: &PodAction,
        reason: &str,
    ) -> Result<bool, StepError> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let node = pod.node_name().unwrap_or_default().to_owned();
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
                let answer = pods.evict(name, &params).await;
                self.metrics.eviction_request(match &answer {
                    Ok(_) => 200,
                    Err(kube::Error::Api(status)) => status.code,
                    Err(_) => 0,
                });
                match answer {
                    Ok(_) => {
                        self.metrics.pod_drained(reason);
                        self.events
                            .normal_pod(pod, "Evicted", "Evicted pod: the node is terminating")
                            .await;
                        Ok(true)
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                        Ok(true)
                    }
                    Err(kube::Error::Api(status)) if status.code == 429 || status.code == 500 => {
                        self.events
                            .warn_pod(
                                pod,
                                "FailedDraining",
                                &format!("Failed to evict pod: {}", status.message),
                            )
                            .await;
                        Ok(false)
                    }
                    Err(e) => Err(Self::api_error("evicting a pod", &node)(e)),
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
                        self.events
                            .normal_pod(
                                pod,
                                "Disrupted",
                                "Deleting the pod: the node's termination grace period ends",
                            )
                            .await;
                        Ok(true)
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
                    Err(e) => Err(Self::api_error("deleting a pod", &node)(e)),
                }
            }
        }
    }
}
