//! NodePool status conditions (upstream `nodepool.readiness`, `nodepool.validation` and
//! `nodepool.registrationhealth` in one loop): for every NodePool this cloud manages,
//! [`karpenter_lifecycle::nodepool_status::decide`] says what `Ready`, `ValidationSucceeded`,
//! `NodeClassReady`, `NodeRegistrationHealthy` and `status.nodeClassObservedGeneration` should
//! be, from the pool, its class in the index and its recent registrations; this loop writes it
//! (guarded by the pool's `resourceVersion`) when it differs. The provisioner launches only for
//! `Ready` pools.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::v1::NodePool;
use karpenter_cloud::{CloudProvider, NodeClasses};
use karpenter_lifecycle::nodepool_status::{NodeClassView, StatusUpdate, decide};
use karpenter_lifecycle::registration_health::RegistrationHealth;
use karpenter_state::Cluster;
use karpenter_state::conditions::api_time;
use serde_json::json;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// Changes are looked at at most this often.
const SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// Every pool is looked at again at least this often (registration outcomes change without
/// a change of the index).
const RESYNC: Duration = Duration::from_secs(10);

/// One NodePool's new status.
#[derive(Debug, Clone)]
pub struct PoolStatus {
    pub pool: NodePool,
    pub update: StatusUpdate,
}

/// How `pool`'s class looks to a cloud that reads classes as `classes`; `None` when the pool
/// names a class of another cloud (upstream: not managed, left alone).
pub fn class_view<'a>(
    cluster: &'a Cluster,
    pool: &NodePool,
    classes: NodeClasses,
) -> Option<NodeClassView<'a>> {
    let reference = &pool.spec.template.spec.node_class_ref;
    match classes {
        NodeClasses::Resolved { group, kind } => {
            if reference.group != group || reference.kind != kind {
                return None;
            }
            Some(match cluster.node_class(&reference.name) {
                None => NodeClassView::NotFound,
                Some(class) => NodeClassView::Found {
                    generation: class.metadata.generation,
                    deleting: class.metadata.deletion_timestamp.is_some(),
                    ready: karpenter_api::conditions::get(
                        class.status.as_ref().and_then(|s| s.conditions.as_deref()),
                        karpenter_api::v1::ec2nodeclass::conditions::READY,
                    ),
                },
            })
        }
        NodeClasses::Simulated => Some(NodeClassView::Simulated {
            generation: (reference.kind == "EC2NodeClass")
                .then(|| cluster.node_class(&reference.name))
                .flatten()
                .and_then(|c| c.metadata.generation),
        }),
    }
}

/// Every managed NodePool whose status is to change, at `now`.
pub fn scan_pools(
    cluster: &Cluster,
    classes: NodeClasses,
    health: &RegistrationHealth,
    now: DateTime<Utc>,
    busy: Busy<'_>,
) -> Vec<(String, PoolStatus)> {
    // The API server keeps seconds: so do the conditions written.
    let Some(now) = DateTime::from_timestamp(now.timestamp(), 0).and_then(api_time) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pool in cluster.node_pools() {
        let Some(name) = pool.metadata.name.as_deref() else {
            continue;
        };
        if busy.contains(name) {
            continue;
        }
        let Some(class) = class_view(cluster, pool, classes) else {
            continue;
        };
        let validation: Vec<String> = karpenter_api::validation::validate_nodepool(pool)
            .iter()
            .map(ToString::to_string)
            .collect();
        let uid = pool.metadata.uid.as_deref().unwrap_or_default();
        if let Some(update) = decide(pool, class, &validation, &health.health(uid), &now) {
            out.push((
                name.to_owned(),
                PoolStatus {
                    pool: pool.clone(),
                    update,
                },
            ));
        }
    }
    out
}

/// The NodePool status loop.
#[derive(Debug)]
pub struct NodePoolStatus<C> {
    pub ctx: Context<C>,
}

impl<C: CloudProvider + 'static> Reconciler for NodePoolStatus<C> {
    type Step = PoolStatus;
    type Error = WriteError;
    const NAME: &'static str = "nodepool.status";

    fn shape(&self) -> Shape {
        Shape::new(SCAN_INTERVAL, RESYNC).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<PoolStatus> {
        let mut health = self.ctx.registrations.lock();
        let live: BTreeSet<&str> = cluster
            .node_pools()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        health.retain(|uid| live.contains(uid));
        let mut scan = Scan::new();
        for (name, step) in scan_pools(cluster, self.ctx.cloud.node_classes(), &health, now, busy) {
            scan.step(name, step);
        }
        scan
    }

    async fn execute(&self, step: PoolStatus) -> Result<Action, WriteError> {
        let PoolStatus { pool, update } = step;
        let written = self
            .ctx
            .writer()
            .patch_status(
                &pool,
                json!({
                    "conditions": update.conditions,
                    "nodeClassObservedGeneration": update.node_class_observed_generation,
                }),
                "updating the conditions",
            )
            .await?;
        if let (Some(health), Some(_)) = (&update.health, written)
            && let Some(uid) = pool.metadata.uid.as_deref()
        {
            self.ctx.registrations.lock().set(uid, health);
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &PoolStatus) -> &'static str {
        "conditions"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_state::Object;
    use serde_json::json;

    const EC2: NodeClasses = NodeClasses::Resolved {
        group: "karpenter.k8s.aws",
        kind: "EC2NodeClass",
    };

    fn pool(name: &str, group: &str, kind: &str, class: &str) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": group, "kind": kind, "name": class},
                "requirements": []}}}
        }))
        .unwrap()
    }

    fn ready_class(name: &str) -> karpenter_api::v1::EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "generation": 2},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                     "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                       "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap()
    }

    fn status_of<'a>(steps: &'a [(String, PoolStatus)], name: &str) -> &'a StatusUpdate {
        &steps.iter().find(|(n, _)| n == name).unwrap().1.update
    }

    fn ready_of(update: &StatusUpdate) -> (String, String) {
        let c = karpenter_api::conditions::get(Some(&update.conditions), "Ready").unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn pools_of_this_cloud_get_conditions_and_pools_of_another_cloud_are_left_alone() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::EC2NodeClass(ready_class("default")));
        cluster.apply(Object::NodePool(pool(
            "good",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        )));
        cluster.apply(Object::NodePool(pool(
            "missing",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "gone",
        )));
        cluster.apply(Object::NodePool(pool(
            "other",
            "karpenter.kwok.sh",
            "KWOKNodeClass",
            "default",
        )));
        let steps = scan_pools(
            &cluster,
            EC2,
            &RegistrationHealth::default(),
            Utc::now(),
            Busy::none(),
        );
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert_eq!(
            ready_of(status_of(&steps, "good")),
            ("True".to_owned(), "Ready".to_owned())
        );
        assert_eq!(
            status_of(&steps, "good").node_class_observed_generation,
            Some(2)
        );
        assert_eq!(
            ready_of(status_of(&steps, "missing")),
            ("False".to_owned(), "UnhealthyDependents".to_owned())
        );
        assert!(!steps.iter().any(|(n, _)| n == "other"));
    }

    #[test]
    fn on_the_simulated_cloud_any_class_is_ready_and_a_missing_one_too() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::NodePool(pool(
            "kwok",
            "karpenter.kwok.sh",
            "KWOKNodeClass",
            "default",
        )));
        cluster.apply(Object::NodePool(pool(
            "ec2",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "gone",
        )));
        let steps = scan_pools(
            &cluster,
            NodeClasses::Simulated,
            &RegistrationHealth::default(),
            Utc::now(),
            Busy::none(),
        );
        assert_eq!(ready_of(status_of(&steps, "kwok")).0, "True");
        assert_eq!(ready_of(status_of(&steps, "ec2")).0, "True");
    }

    #[test]
    fn the_provisioner_launches_only_for_ready_pools_and_says_why_not_for_the_others() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::EC2NodeClass(ready_class("default")));
        cluster.apply(Object::NodePool(pool(
            "good",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        )));
        cluster.apply(Object::NodePool(pool(
            "missing",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "gone",
        )));
        cluster.apply(Object::NodePool(pool(
            "new",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        )));
        // The loop's writes, as the API server would store them (`new` not reconciled yet).
        for (name, step) in scan_pools(
            &cluster,
            EC2,
            &RegistrationHealth::default(),
            Utc::now(),
            Busy::none(),
        ) {
            if name == "new" {
                continue;
            }
            let mut written = step.pool.clone();
            let status = written.status.get_or_insert_with(Default::default);
            status.conditions = Some(step.update.conditions.clone());
            cluster.apply(Object::NodePool(written));
        }
        let (launchable, not_ready) = super::super::provisioner::launchable_pools(&cluster);
        assert_eq!(launchable.into_iter().collect::<Vec<_>>(), ["good"]);
        assert_eq!(
            not_ready,
            [
                (
                    "missing".to_owned(),
                    "not ready: NodeClassReady=False (NodeClassNotFound: NodeClass not found on cluster)".to_owned()
                ),
                ("new".to_owned(), "not ready: its status is not reconciled yet".to_owned()),
            ]
        );
    }
}
