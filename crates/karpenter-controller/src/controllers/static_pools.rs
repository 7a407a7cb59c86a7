//! Static NodePools (feature gate `StaticCapacity`; upstream `static.provisioning` and
//! `static.deprovisioning` in one loop, keyed by NodePool): for every static pool (`spec.replicas`
//! set) this cloud manages, [`karpenter_disruption::static_pool::replicas`] says from the index
//! whether NodeClaims are missing or surplus, and this loop creates or deletes them.
//!
//! - **Launch**: the pool's template alone
//!   ([`karpenter_scheduling::template::template_claim`], with the pool's instance types and the
//!   cluster's DaemonSets) shaped by the provisioner's one NodeClaim builder
//!   ([`super::provisioner::create_node_claim`]: the same labels, annotations, NodePool hash and
//!   owner reference as a dynamic launch), counted in `karpenter_nodeclaims_created_total` with
//!   upstream's reason `provisioned`. Pods are not needed.
//! - **Remove**: the surplus NodeClaims are deleted; the normal termination path (finalizer,
//!   taint, drain respecting PDBs and the termination grace period, instance deletion) takes
//!   them from there. Budgets do not apply, as upstream (the user asked for fewer nodes).
//!
//! `status.nodes`, which `kubectl scale nodepool` reads through the scale subresource, is
//! written by `nodepool.counter`. Drift of static nodes is the disruption pass's `StaticDrift`
//! method (replace first, within budgets and `limits.nodes`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_cloud::CloudProvider;
use karpenter_disruption::Features;
use karpenter_disruption::static_pool::{Replicas, replicas};
use karpenter_scheduling::template::{TemplateClaimError, template_claim};
use karpenter_state::Cluster;

use super::nodepool_status::class_view;
use super::provisioner::{create_node_claim, solve_options};
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// Changes are looked at at most this often.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Every pool is looked at again at least this often (upstream requeues after a minute).
const RESYNC: Duration = Duration::from_secs(30);
/// NodeClaims of one pool created at once (the client's QPS limit still applies).
const CREATE_CONCURRENCY: usize = 16;
/// Upstream's `karpenter_nodeclaims_created_total` reason for a static launch.
const PROVISIONED: &str = "provisioned";

/// What one static pool needs now.
#[derive(Debug, Clone, PartialEq)]
pub enum StaticStep {
    /// Create this many NodeClaims from the pool's template.
    Launch { pool: Box<NodePool>, count: usize },
    /// Delete these NodeClaims.
    Remove {
        pool: String,
        node_claims: Vec<String>,
    },
}

/// The static pools of this cloud (`classes`) that need a step at `now`, by pool name.
pub fn scan_static_pools(
    cluster: &Cluster,
    classes: karpenter_cloud::NodeClasses,
    features: Features,
    now: DateTime<Utc>,
    busy: Busy<'_>,
) -> Vec<(String, StaticStep)> {
    let pools: Vec<&NodePool> = cluster
        .node_pools()
        .filter(|p| karpenter_scheduling::v1::is_static(p))
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| !busy.contains(n))
        })
        .filter(|p| class_view(cluster, p, classes).is_some())
        .collect();
    if pools.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = pools
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let nodes: Vec<_> = cluster
        .state_nodes()
        .iter()
        .filter(|n| {
            n.node_claim
                .and_then(|c| c.metadata.labels.as_ref())
                .and_then(|l| l.get(karpenter_api::labels::NODEPOOL))
                .is_some_and(|p| names.contains(&p.as_str()))
        })
        .map(|n| n.to_node_state(now))
        .collect();
    let mut out = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        match replicas(pool, &nodes, features, now) {
            Replicas::Steady => {}
            Replicas::Held(why) => {
                tracing::debug!(nodepool = %name, %why, "static nodepool launches nothing");
            }
            Replicas::Launch(count) => out.push((
                name,
                StaticStep::Launch {
                    pool: Box::new(pool.clone()),
                    count,
                },
            )),
            Replicas::Remove(node_claims) => out.push((
                name.clone(),
                StaticStep::Remove {
                    pool: name,
                    node_claims,
                },
            )),
        }
    }
    out
}

/// The static NodePool loop (runs only with `StaticCapacity=true`).
#[derive(Debug)]
pub struct StaticPools<C> {
    pub ctx: Context<C>,
}

/// A static pool's step failed.
#[derive(Debug, thiserror::Error)]
pub enum StaticError {
    #[error("static nodepool {pool}: no instance types are offered to it")]
    NoInstanceTypes { pool: String },
    #[error("static nodepool {pool}: making a NodeClaim from its template")]
    Template {
        pool: String,
        #[source]
        source: Box<TemplateClaimError>,
    },
    #[error("static nodepool {pool}: {failed} of {count} NodeClaim writes failed")]
    Writes {
        pool: String,
        failed: usize,
        count: usize,
        #[source]
        source: Box<WriteError>,
    },
}

impl<C: CloudProvider + 'static> Reconciler for StaticPools<C> {
    type Step = StaticStep;
    type Error = StaticError;
    const NAME: &'static str = "static.provisioning";

    fn shape(&self) -> Shape {
        Shape::new(DEBOUNCE, RESYNC).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<StaticStep> {
        let features = self.ctx.settings.feature_gates.disruption_features();
        let mut scan = Scan::new();
        for (name, step) in
            scan_static_pools(cluster, self.ctx.cloud.node_classes(), features, now, busy)
        {
            scan.step(name, step);
        }
        scan
    }

    async fn execute(&self, step: StaticStep) -> Result<Action, StaticError> {
        match step {
            StaticStep::Launch { pool, count } => self.launch(&pool, count).await,
            StaticStep::Remove { pool, node_claims } => self.remove(&pool, &node_claims).await,
        }
    }

    fn error_policy(&self, error: &StaticError) -> Retry {
        match error {
            StaticError::Writes { source, .. } => source.retry(),
            StaticError::NoInstanceTypes { .. } | StaticError::Template { .. } => Retry::Backoff,
        }
    }

    fn step_name(step: &StaticStep) -> &'static str {
        match step {
            StaticStep::Launch { .. } => "launch",
            StaticStep::Remove { .. } => "remove",
        }
    }

    fn controller(step: &StaticStep) -> &'static str {
        match step {
            StaticStep::Launch { .. } => "static.provisioning",
            StaticStep::Remove { .. } => "static.deprovisioning",
        }
    }
}

impl<C: CloudProvider + 'static> StaticPools<C> {
    async fn launch(&self, pool: &NodePool, count: usize) -> Result<Action, StaticError> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let catalogs = self
            .ctx
            .catalogs
            .get(&self.ctx.cache, &*self.ctx.cloud, &self.ctx.events)
            .await;
        let Some(catalog) = catalogs.instance_types.get(&name) else {
            return Err(StaticError::NoInstanceTypes { pool: name });
        };
        let daemonsets: Vec<_> = self.ctx.cache.lock().daemonsets().cloned().collect();
        let claim = template_claim(
            pool,
            catalog,
            &daemonsets,
            &solve_options(&self.ctx.settings),
        )
        .map_err(|source| StaticError::Template {
            pool: name.clone(),
            source: Box::new(source),
        })?;
        tracing::info!(nodepool = %name, count, "provisioning nodeclaims to satisfy replica count");
        // The futures are built first (see the provisioner: a stream mapping through a closure
        // that borrows `self` is not provably `Send`).
        let creations: Vec<_> = (0..count)
            .map(|_| create_node_claim(&self.ctx, &claim, pool, PROVISIONED))
            .collect();
        let results: Vec<Result<String, WriteError>> = futures::stream::iter(creations)
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        self.settle(&name, count, results)
    }

    async fn remove(&self, pool: &str, node_claims: &[String]) -> Result<Action, StaticError> {
        tracing::info!(nodepool = %pool, nodeclaims = ?node_claims, "deprovisioning nodeclaims to satisfy replica count");
        let writer = self.ctx.writer();
        let deletions: Vec<_> = node_claims
            .iter()
            .map(|name| writer.delete::<NodeClaim>(name, "deleting"))
            .collect();
        let results: Vec<Result<(), WriteError>> = futures::stream::iter(deletions)
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        self.settle(pool, node_claims.len(), results)
    }

    /// The step's outcome from its writes: the first failure (the others logged) or done.
    fn settle<T>(
        &self,
        pool: &str,
        count: usize,
        results: Vec<Result<T, WriteError>>,
    ) -> Result<Action, StaticError> {
        let mut failures = results.into_iter().filter_map(Result::err);
        let Some(first) = failures.next() else {
            return Ok(Action::AwaitChange);
        };
        let mut failed = 1;
        for error in failures {
            failed += 1;
            tracing::warn!(nodepool = %pool, %error, "a static nodepool's NodeClaim write failed");
        }
        Err(StaticError::Writes {
            pool: pool.to_owned(),
            failed,
            count,
            source: Box::new(first),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_state::Object;
    use serde_json::json;

    const KWOK: karpenter_cloud::NodeClasses = karpenter_cloud::NodeClasses::Simulated;

    fn pool(name: &str, replicas: Option<i64>) -> NodePool {
        let mut spec = json!({"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
            "requirements": []}}});
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn claim(name: &str, pool: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool},
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
                "requirements": []}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn scan(cluster: &Cluster) -> Vec<(String, StaticStep)> {
        scan_static_pools(cluster, KWOK, Features::default(), Utc::now(), Busy::none())
    }

    #[test]
    fn only_static_pools_get_steps_and_each_says_what_its_replicas_ask_for() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::NodePool(pool("dynamic", None)));
        cluster.apply(Object::NodePool(pool("grow", Some(2))));
        cluster.apply(Object::NodePool(pool("shrink", Some(0))));
        cluster.apply(Object::NodeClaim(claim("shrink-a", "shrink")));
        cluster.apply(Object::NodeClaim(claim("dynamic-a", "dynamic")));
        let steps = scan(&cluster);
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert!(matches!(&steps[0], (name, StaticStep::Launch { count: 2, .. }) if name == "grow"));
        assert_eq!(
            steps[1],
            (
                "shrink".to_owned(),
                StaticStep::Remove {
                    pool: "shrink".to_owned(),
                    node_claims: vec!["shrink-a".to_owned()]
                }
            )
        );
    }
}
