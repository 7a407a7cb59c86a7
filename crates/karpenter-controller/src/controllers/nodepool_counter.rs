//! NodePool status (upstream `nodepool.counter`): `status.resources` (capacity of the pool's
//! NodeClaims, in-flight ones included) and `status.nodes`, written when they change, checked
//! every [`INTERVAL`]; the same figures and the pool's limits as metrics (upstream
//! `metrics.nodepool`). The same loop keeps the node and pod gauges
//! ([`super::metrics::state`], upstream `metrics.node` and `metrics.pod`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::v1::NodePool;
use karpenter_lifecycle::nodeclaim::quantities;
use karpenter_scheduling::ResourceList;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::metrics::state::{StateMetrics, resource_type, resource_value};
use super::metrics::{ControllerMetrics, Reconciled};

pub const INTERVAL: Duration = Duration::from_secs(5);

/// One pool's figures: name, `status.resources`, `status.nodes`, whether the status already
/// says so, and its limits.
struct PoolFigures {
    name: String,
    resources: BTreeMap<String, Quantity>,
    nodes: u64,
    unchanged: bool,
    limits: Option<ResourceList>,
}

/// Runs until `cancel` trips.
pub async fn run(
    cache: ClusterCache,
    client: Client,
    metrics: ControllerMetrics,
    cancel: CancellationToken,
) {
    let api: Api<NodePool> = Api::all(client);
    let mut state_metrics = StateMetrics::new(metrics.clone(), chrono::Utc::now());
    loop {
        if cache.synced() {
            state_metrics.update(&cache);
            let work: Vec<PoolFigures> = {
                let cluster = cache.lock();
                cluster
                    .node_pools()
                    .map(|pool| {
                        let name = pool.metadata.name.clone().unwrap_or_default();
                        let usage = cluster.node_pool_usage(&name);
                        let resources = quantities(&usage.resources);
                        let status = pool.status.as_ref();
                        let unchanged = status.and_then(|s| s.resources.as_ref())
                            == Some(&resources)
                            && status.and_then(|s| s.nodes) == i64::try_from(usage.nodes).ok();
                        let limits = pool
                            .spec
                            .limits
                            .as_ref()
                            .and_then(|l| ResourceList::from_k8s(l).ok());
                        PoolFigures {
                            name,
                            resources,
                            nodes: usage.nodes,
                            unchanged,
                            limits,
                        }
                    })
                    .collect()
            };
            for PoolFigures {
                name,
                resources,
                nodes,
                unchanged,
                limits,
            } in work
            {
                let started = Instant::now();
                for (resource, quantity) in &resources {
                    if let Ok(q) = quantity.0.parse::<karpenter_scheduling::Quantity>() {
                        metrics.nodepool_usage(
                            &name,
                            &resource_type(resource),
                            resource_value(resource, q),
                        );
                    }
                }
                for (resource, quantity) in limits.iter().flat_map(|l| l.iter()) {
                    metrics.nodepool_limit(
                        &name,
                        &resource_type(resource),
                        resource_value(resource, *quantity),
                    );
                }
                metrics.reconciled(
                    "metrics.nodepool",
                    Reconciled::RequeueAfter,
                    started.elapsed().as_secs_f64(),
                );
                let started = Instant::now();
                let mut result = Reconciled::Success;
                if !unchanged {
                    let patch = json!({"status": {"resources": resources, "nodes": nodes}});
                    if let Err(error) = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        tracing::warn!(nodepool = %name, %error, "updating NodePool status failed");
                        result = Reconciled::Error;
                    }
                }
                metrics.reconciled("nodepool.counter", result, started.elapsed().as_secs_f64());
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}
