//! Garbage collection (upstream `nodeclaim.garbagecollection` and the AWS provider's instance
//! collector), every [`INTERVAL`]: the cloud's instances are listed, then
//! [`karpenter_lifecycle::garbage::collect`] compares them with the index's NodeClaims and
//! Nodes, and this loop deletes what it names: NodeClaims whose instance is gone, instances of
//! ours nothing claims (leaked, e.g. by a crash between launch and the NodeClaim status write),
//! and Nodes Karpenter launched that no NodeClaim claims.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_cloud::CloudProvider;
use karpenter_lifecycle::garbage::{Collect, collect};
use kube::Client;
use kube::api::{Api, DeleteParams};
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::metrics::{ControllerMetrics, Reconciled};
use super::writes;

/// How often the cloud is listed (upstream: 2 min for NodeClaims; instances more often).
pub const INTERVAL: Duration = Duration::from_secs(30);

/// The garbage-collection loop.
pub struct GarbageCollection<C> {
    pub cache: ClusterCache,
    pub cloud: Arc<C>,
    pub client: Client,
    pub metrics: ControllerMetrics,
}

impl<C> std::fmt::Debug for GarbageCollection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollection").finish_non_exhaustive()
    }
}

fn label(claim: Option<&NodeClaim>, key: &str) -> String {
    claim
        .and_then(|c| c.metadata.labels.as_ref()?.get(key).cloned())
        .unwrap_or_default()
}

impl<C: CloudProvider + 'static> GarbageCollection<C> {
    /// Runs until `cancel` trips.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(INTERVAL) => {}
            }
            if self.cache.synced() {
                let started = std::time::Instant::now();
                self.pass().await;
                self.metrics.reconciled(
                    "nodeclaim.garbagecollection",
                    Reconciled::RequeueAfter,
                    started.elapsed().as_secs_f64(),
                );
            }
        }
    }

    /// One look at the cloud.
    pub async fn pass(&self) {
        let instances = match self.cloud.list().await {
            Ok(instances) => instances,
            Err(error) => {
                tracing::warn!(%error, "listing the cloud's instances failed; no garbage collected this time");
                return;
            }
        };
        let found = {
            let cluster = self.cache.lock();
            let claims: Vec<&NodeClaim> = cluster.node_claims().collect();
            let nodes: Vec<&Node> = cluster.nodes().collect();
            collect(&claims, &nodes, &instances, Utc::now())
        };
        for item in found {
            match item {
                Collect::NodeClaim { name, provider_id } => {
                    let claim = self.cache.lock().node_claim(&name).cloned();
                    tracing::info!(nodeclaim = %name, %provider_id, "garbage collecting a NodeClaim whose instance is gone");
                    match writes::delete_claim(&self.client, &name).await {
                        Ok(()) => self.metrics.nodeclaim_disrupted(
                            "garbage_collected",
                            &label(claim.as_ref(), labels::NODEPOOL),
                            &label(claim.as_ref(), labels::CAPACITY_TYPE),
                        ),
                        Err(error) => tracing::warn!(%error, "retried next pass"),
                    }
                }
                Collect::Instance { provider_id } => {
                    let Some(instance) = instances.iter().find(|i| {
                        i.status.as_ref().and_then(|s| s.provider_id.as_deref())
                            == Some(provider_id.as_str())
                    }) else {
                        continue;
                    };
                    tracing::warn!(%provider_id, "terminating a leaked instance: no NodeClaim claims it");
                    match self.cloud.delete(instance).await {
                        Ok(()) => {}
                        Err(error) if error.is_not_found() => {}
                        Err(error) => tracing::warn!(%provider_id, %error, "retried next pass"),
                    }
                }
                Collect::Node { name, provider_id } => {
                    tracing::info!(node = %name, %provider_id, "deleting a Node no NodeClaim claims");
                    let api: Api<Node> = Api::all(self.client.clone());
                    match api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 404 => {}
                        Err(error) => tracing::warn!(node = %name, %error, "retried next pass"),
                    }
                }
            }
        }
    }
}
