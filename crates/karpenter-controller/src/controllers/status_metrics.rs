//! operatorpkg's status controllers (`operatorpkg.nodeclaim.status`,
//! `operatorpkg.nodepool.status`, `operatorpkg.ec2nodeclass.status`): the status-condition
//! metrics of every NodeClaim, NodePool and EC2NodeClass the index holds
//! ([`crate::report::status`]), updated when the index changes (at most every second) and every
//! 10 s (upstream's requeue), and removed with their object.
//!
//! A NodeClaim's series carry its EC2NodeClass and NodePool labels
//! (`karpenter_k8s_aws_ec2nodeclass`, `karpenter_sh_nodepool`), as upstream configures its
//! controller (`WithLabels`).

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as ApiCondition, ObjectMeta};
use karpenter_api::labels;
use karpenter_state::Cluster;
use karpenter_state::conditions::from_api_time;

use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Labels;
use crate::report::status::{Condition, ConditionKind, Conditions, Observed};

/// Upstream's requeue of every object.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// A kind whose conditions are measured.
pub trait Kind: Send + Sync + 'static {
    /// The controller's name.
    const NAME: &'static str;
    const KIND: ConditionKind;

    /// Every object of the kind in the index, as its status controller reads it.
    fn objects(cluster: &Cluster) -> Vec<Observed>;
}

fn conditions(list: Option<&Vec<ApiCondition>>) -> Vec<Condition> {
    list.into_iter()
        .flatten()
        .map(|c| Condition {
            kind: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            last_transition: from_api_time(&c.last_transition_time),
        })
        .collect()
}

fn observed(meta: &ObjectMeta, list: Option<&Vec<ApiCondition>>, labels: Labels) -> Observed {
    Observed {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        deleted: meta.deletion_timestamp.as_ref().and_then(from_api_time),
        conditions: conditions(list),
        labels,
    }
}

/// NodeClaims.
#[derive(Debug)]
pub struct NodeClaims;

impl Kind for NodeClaims {
    const NAME: &'static str = "operatorpkg.nodeclaim.status";
    const KIND: ConditionKind = ConditionKind::NodeClaim;

    fn objects(cluster: &Cluster) -> Vec<Observed> {
        cluster
            .node_claims()
            .map(|claim| {
                let label = |key: &str| {
                    claim
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(key))
                        .cloned()
                        .unwrap_or_default()
                };
                observed(
                    &claim.metadata,
                    claim.status.as_ref().and_then(|s| s.conditions.as_ref()),
                    vec![
                        (
                            "karpenter_k8s_aws_ec2nodeclass",
                            label(labels::EC2NODECLASS),
                        ),
                        ("karpenter_sh_nodepool", label(labels::NODEPOOL)),
                    ],
                )
            })
            .collect()
    }
}

/// NodePools.
#[derive(Debug)]
pub struct NodePools;

impl Kind for NodePools {
    const NAME: &'static str = "operatorpkg.nodepool.status";
    const KIND: ConditionKind = ConditionKind::NodePool;

    fn objects(cluster: &Cluster) -> Vec<Observed> {
        cluster
            .node_pools()
            .map(|pool| {
                observed(
                    &pool.metadata,
                    pool.status.as_ref().and_then(|s| s.conditions.as_ref()),
                    Labels::new(),
                )
            })
            .collect()
    }
}

/// EC2NodeClasses.
#[derive(Debug)]
pub struct NodeClasses;

impl Kind for NodeClasses {
    const NAME: &'static str = "operatorpkg.ec2nodeclass.status";
    const KIND: ConditionKind = ConditionKind::EC2NodeClass;

    fn objects(cluster: &Cluster) -> Vec<Observed> {
        cluster
            .node_classes()
            .map(|class| {
                observed(
                    &class.metadata,
                    class.status.as_ref().and_then(|s| s.conditions.as_ref()),
                    Labels::new(),
                )
            })
            .collect()
    }
}

/// One kind's loop.
#[derive(Debug)]
pub struct StatusMetrics<K, C> {
    pub ctx: Context<C>,
    conditions: Mutex<Conditions>,
    kind: PhantomData<K>,
}

impl<K: Kind, C> StatusMetrics<K, C> {
    pub fn new(ctx: Context<C>) -> Self {
        let conditions = Conditions::new(K::KIND, ctx.metrics.conditions.clone());
        StatusMetrics {
            ctx,
            conditions: Mutex::new(conditions),
            kind: PhantomData,
        }
    }
}

/// The one step: look at every object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observe;

impl<K: Kind, C: Send + Sync + 'static> Reconciler for StatusMetrics<K, C> {
    type Step = Observe;
    type Error = std::convert::Infallible;
    const NAME: &'static str = K::NAME;

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_secs(1), INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Observe> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Observe);
        }
        scan
    }

    async fn execute(&self, _: Observe) -> Result<Action, std::convert::Infallible> {
        let objects = K::objects(&self.ctx.cache.lock());
        let now = Utc::now();
        let mut conditions = match self.conditions.lock() {
            Ok(conditions) => conditions,
            // Only the last observations: keep using them.
            Err(poisoned) => poisoned.into_inner(),
        };
        let present: HashSet<(String, String)> = objects
            .iter()
            .map(|o| (o.namespace.clone(), o.name.clone()))
            .collect();
        for object in objects {
            conditions.observe(object, now);
        }
        conditions.forget_all_but(&present, now);
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Observe) -> &'static str {
        "observe"
    }
}
