//! Garbage collection (upstream `nodeclaim.garbagecollection` and the AWS provider's instance
//! collector), every [`INTERVAL`]: the cloud's instances are listed, then
//! [`karpenter_lifecycle::garbage::collect`] compares them with the index's NodeClaims and
//! Nodes, and this loop deletes what it names: NodeClaims whose instance is gone, instances of
//! ours nothing claims (leaked, e.g. by a crash between launch and the NodeClaim status write),
//! and Nodes Karpenter launched that no NodeClaim claims.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::v1::NodeClaim;
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_lifecycle::garbage::{Collect, collect};
use karpenter_state::Cluster;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Disrupted;

/// How often the cloud is listed (upstream: 2 min for NodeClaims; instances more often).
pub const INTERVAL: Duration = Duration::from_secs(30);

/// The garbage-collection loop.
#[derive(Debug)]
pub struct GarbageCollection<C> {
    pub ctx: Context<C>,
}

/// A look at the cloud failed, or some of what it found could not be removed (the rest was).
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("listing the cloud's instances: {0}")]
    List(#[source] CloudError),
    #[error("{failed} of {found} removals failed; the first: {first}")]
    Remove {
        failed: usize,
        found: usize,
        first: String,
    },
}

/// The one step: look at the cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass;

impl<C: CloudProvider + 'static> Reconciler for GarbageCollection<C> {
    type Step = Pass;
    type Error = CollectError;
    const NAME: &'static str = "nodeclaim.garbagecollection";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Pass> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Pass);
        }
        scan
    }

    async fn execute(&self, _: Pass) -> Result<Action, CollectError> {
        self.pass().await?;
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &CollectError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Pass) -> &'static str {
        "collect"
    }
}

impl<C: CloudProvider + 'static> GarbageCollection<C> {
    /// One look at the cloud: every removal is tried; the failures are reported together.
    pub async fn pass(&self) -> Result<(), CollectError> {
        let ctx = &self.ctx;
        let instances = ctx.cloud.list().await.map_err(CollectError::List)?;
        let found = {
            let cluster = ctx.cache.lock();
            let claims: Vec<&NodeClaim> = cluster.node_claims().collect();
            let nodes: Vec<&Node> = cluster.nodes().collect();
            collect(&claims, &nodes, &instances, Utc::now())
        };
        let total = found.len();
        let mut failures: Vec<String> = Vec::new();
        let writer = ctx.writer();
        for item in found {
            match item {
                Collect::NodeClaim { name, provider_id } => {
                    let claim = ctx.cache.lock().node_claim(&name).cloned();
                    tracing::info!(nodeclaim = %name, %provider_id, "garbage collecting a NodeClaim whose instance is gone");
                    match writer
                        .delete::<NodeClaim>(&name, "garbage collecting")
                        .await
                    {
                        Ok(()) => {
                            let pods = claim
                                .as_ref()
                                .and_then(|c| c.status.as_ref()?.node_name.clone())
                                .and_then(|node| {
                                    let cluster = ctx.cache.lock();
                                    let node = cluster.state_node_named(&node)?;
                                    Some(node.reschedulable_pods().count())
                                })
                                .unwrap_or(0);
                            ctx.metrics.disrupted(
                                &Disrupted::of("garbage_collected", claim.as_ref()),
                                pods,
                            );
                        }
                        Err(error) => failures.push(error.to_string()),
                    }
                }
                Collect::Instance { provider_id } => {
                    let Some(instance) = instances.iter().find(|i| {
                        i.status.as_ref().and_then(|s| s.provider_id.as_deref())
                            == Some(provider_id.as_str())
                    }) else {
                        continue;
                    };
                    if let Err(fenced) = ctx.fence.check() {
                        failures.push(format!("terminating {provider_id}: {fenced}"));
                        continue;
                    }
                    tracing::warn!(%provider_id, "terminating a leaked instance: no NodeClaim claims it");
                    match ctx.cloud.delete(instance).await {
                        Ok(()) => {}
                        Err(error) if error.is_not_found() => {}
                        Err(error) => failures.push(format!("terminating {provider_id}: {error}")),
                    }
                }
                Collect::Node { name, provider_id } => {
                    tracing::info!(node = %name, %provider_id, "deleting a Node no NodeClaim claims");
                    if let Err(error) = writer.delete::<Node>(&name, "garbage collecting").await {
                        failures.push(WriteError::to_string(&error));
                    }
                }
            }
        }
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(CollectError::Remove {
                failed: failures.len(),
                found: total,
                first: first.clone(),
            }),
        }
    }
}
