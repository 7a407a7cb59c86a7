//! NodePool status (upstream `nodepool.counter`): `status.resources` (capacity of the pool's
//! NodeClaims, in-flight ones included) and `status.nodes`, written when they change, checked
//! every [`INTERVAL`]; and the same figures and the pool's limits as metrics (upstream
//! `metrics.nodepool`), one loop each.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::v1::NodePool;
use karpenter_scheduling::ResourceList;
use karpenter_state::Cluster;
use serde_json::json;

use super::gauges::{resource_type, resource_value};
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

pub const INTERVAL: Duration = Duration::from_secs(5);

/// One pool's figures: `status.resources`, `status.nodes`, whether the status already says
/// so, and its limits.
#[derive(Debug, Clone)]
pub struct PoolFigures {
    pub pool: NodePool,
    pub resources: BTreeMap<String, Quantity>,
    pub nodes: u64,
    pub unchanged: bool,
    pub limits: Option<ResourceList>,
}

/// Every NodePool's figures, from the index.
fn figures<'a>(cluster: &'a Cluster, busy: Busy<'a>) -> impl Iterator<Item = PoolFigures> + 'a {
    cluster
        .node_pools()
        .filter(move |pool| {
            pool.metadata
                .name
                .as_deref()
                .is_some_and(|n| !busy.contains(n))
        })
        .map(|pool| {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let usage = cluster.node_pool_usage(&name);
            let resources = usage.resources.to_k8s();
            let status = pool.status.as_ref();
            let unchanged = status.and_then(|s| s.resources.as_ref()) == Some(&resources)
                && status.and_then(|s| s.nodes) == i64::try_from(usage.nodes).ok();
            let limits = pool
                .spec
                .limits
                .as_ref()
                .and_then(|l| ResourceList::from_k8s(l).ok());
            PoolFigures {
                pool: pool.clone(),
                resources,
                nodes: usage.nodes,
                unchanged,
                limits,
            }
        })
}

fn name(figures: &PoolFigures) -> String {
    figures.pool.metadata.name.clone().unwrap_or_default()
}

/// `nodepool.counter`: writes a NodePool's status when its figures change.
#[derive(Debug)]
pub struct NodePoolCounter<C> {
    pub ctx: Context<C>,
}

impl<C: Send + Sync + 'static> Reconciler for NodePoolCounter<C> {
    type Step = PoolFigures;
    type Error = WriteError;
    const NAME: &'static str = "nodepool.counter";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<PoolFigures> {
        let mut scan = Scan::new();
        for f in figures(cluster, busy).filter(|f| !f.unchanged) {
            scan.step(name(&f), f);
        }
        scan
    }

    async fn execute(&self, f: PoolFigures) -> Result<Action, WriteError> {
        self.ctx
            .writer()
            .patch_status(
                &f.pool,
                json!({"resources": f.resources, "nodes": f.nodes}),
                "updating the status",
            )
            .await?;
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &PoolFigures) -> &'static str {
        "status"
    }
}

/// `metrics.nodepool`: each NodePool's usage and limits as gauges.
#[derive(Debug)]
pub struct NodePoolMetrics<C> {
    pub ctx: Context<C>,
}

impl<C: Send + Sync + 'static> Reconciler for NodePoolMetrics<C> {
    type Step = PoolFigures;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "metrics.nodepool";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<PoolFigures> {
        let mut scan = Scan::new();
        for f in figures(cluster, busy) {
            scan.step(name(&f), f);
        }
        scan
    }

    async fn execute(&self, f: PoolFigures) -> Result<Action, std::convert::Infallible> {
        let metrics = &self.ctx.metrics;
        let name = name(&f);
        for (resource, quantity) in &f.resources {
            if let Ok(q) = quantity.0.parse::<karpenter_scheduling::Quantity>() {
                metrics.nodepool_usage(
                    &name,
                    &resource_type(resource),
                    resource_value(resource, q),
                );
            }
        }
        for (resource, quantity) in f.limits.iter().flat_map(|l| l.iter()) {
            metrics.nodepool_limit(
                &name,
                &resource_type(resource),
                resource_value(resource, *quantity),
            );
        }
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &PoolFigures) -> &'static str {
        "gauges"
    }
}
