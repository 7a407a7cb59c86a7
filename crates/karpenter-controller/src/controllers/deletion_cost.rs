//! Pod deletion cost (upstream `pod.deletioncost` and its write queue `pod.deletioncost.queue`;
//! started only with the feature gate `PodDeletionCostManagement`, off by default): every
//! [`INTERVAL`] the index becomes a disruption [`karpenter_disruption::Snapshot`],
//! [`karpenter_disruption::deletion_cost::plan`] ranks its nodes in consolidation's order, and
//! each ReplicaSet pod of the nodes it says to write becomes a step keyed by the pod: a merge
//! patch of `controller.kubernetes.io/pod-deletion-cost` (set, or removed), guarded by the pod's
//! `resourceVersion`. A ReplicaSet scaling down then deletes the pods of the node consolidation
//! would remove first, so that node empties instead of having its pods evicted later.
//!
//! Outcomes, as upstream counts them in `karpenter_pod_deletion_cost_pod_annotation_writes_total`:
//! `updated`; `skipped_unchanged` (the pod already carries the value when its step runs);
//! `skipped_notfound` (gone); `skipped_conflict` (written meanwhile: the next cycle looks again);
//! `error` (retried with backoff, 100 ms doubling to 10 s, upstream's queue limits). A pod
//! replaced at the same name before its step runs is left to the next cycle. Prices come from
//! the instance types the provisioner and the disruption pass last listed; before the first
//! listing a cycle waits.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_cloud::CloudProvider;
use karpenter_disruption::deletion_cost::{self, Desired, NodeWrites};
use karpenter_disruption::pods::POD_DELETION_COST;
use karpenter_state::Cluster;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::disruption::snapshot_of;
use crate::cluster::writes::WriteError;
use crate::http::Metrics;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Labels;

/// How often the nodes are ranked (upstream: every minute).
pub const INTERVAL: Duration = Duration::from_secs(60);
/// How soon a cycle that found no instance-type listing yet looks again.
const CATALOG_WAIT: Duration = Duration::from_secs(5);
/// Pod writes at once (each is one small patch; the client's rate limit bounds them too).
const CONCURRENCY: usize = 16;

/// One pod's write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodWrite {
    pub namespace: String,
    pub name: String,
    /// The pod planned for (a pod recreated at the same name since is another one).
    pub uid: Option<String>,
    pub desired: Desired,
}

/// Upstream's `karpenter_pod_deletion_cost_*` metrics.
#[derive(Debug, Clone, Default)]
pub struct DeletionCostMetrics {
    pending: Family<Labels, Gauge>,
    writes: Family<Labels, Counter>,
}

impl DeletionCostMetrics {
    pub fn register(registry: &Metrics) -> Self {
        let metrics = DeletionCostMetrics::default();
        registry.register(
            "karpenter_pod_deletion_cost_nodes_with_pending_annotation_writes",
            "Number of nodes with at least one pending pod-deletion-cost annotation change enqueued this cycle.",
            metrics.pending.clone(),
        );
        registry.register(
            "karpenter_pod_deletion_cost_pod_annotation_writes",
            "Number of pod-deletion-cost annotation write attempts. Labeled by outcome.",
            metrics.writes.clone(),
        );
        metrics
    }

    /// This cycle's nodes to write, per NodePool (the pools of the last cycle not carried over).
    pub fn pending(&self, writes: &[NodeWrites]) {
        self.pending.clear();
        let mut per_pool: BTreeMap<&str, i64> = BTreeMap::new();
        for w in writes {
            *per_pool.entry(w.node_pool.as_str()).or_default() += 1;
        }
        for (pool, count) in per_pool {
            self.pending
                .get_or_create(&vec![("nodepool", pool.to_owned())])
                .set(count);
        }
    }

    /// A write ended with `result` (`updated`, `skipped_unchanged`, `skipped_notfound`,
    /// `skipped_conflict` or `error`).
    pub fn written(&self, result: &str) {
        self.writes
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }
}

/// The pod writes of `plan`, keyed by pod, those in flight left out.
pub fn steps(writes: &[NodeWrites], busy: Busy<'_>) -> Vec<(String, PodWrite)> {
    writes
        .iter()
        .flat_map(|w| w.pods.iter().map(move |pod| (w.desired, pod)))
        .filter_map(|(desired, pod)| {
            let key = pod.key();
            (!busy.contains(&key)).then(|| {
                let write = PodWrite {
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone(),
                    desired,
                };
                (key, write)
            })
        })
        .collect()
}

/// The pod-deletion-cost loop.
#[derive(Debug)]
pub struct PodDeletionCost<C> {
    pub ctx: Context<C>,
    pub metrics: DeletionCostMetrics,
}

/// What the index holds of a step's pod when the step runs.
enum Current {
    Gone,
    Replaced,
    AsPlanned,
    Differs(Option<String>),
}

impl<C: CloudProvider + 'static> PodDeletionCost<C> {
    fn current(&self, write: &PodWrite) -> Current {
        let cluster = self.ctx.cache.lock();
        match cluster.pod(&write.namespace, &write.name) {
            None => Current::Gone,
            Some(pod) if pod.metadata.uid != write.uid => Current::Replaced,
            Some(pod) if write.desired.holds_for(pod) => Current::AsPlanned,
            Some(pod) => Current::Differs(pod.metadata.resource_version.clone()),
        }
    }
}

impl<C: CloudProvider + 'static> Reconciler for PodDeletionCost<C> {
    type Step = PodWrite;
    type Error = WriteError;
    const NAME: &'static str = "pod.deletioncost";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
            .concurrency(CONCURRENCY)
            .backoff(Duration::from_millis(100), Duration::from_secs(10))
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<PodWrite> {
        let mut scan = Scan::new();
        let Some(catalogs) = self.ctx.catalogs.latest() else {
            scan.requeue_after(CATALOG_WAIT);
            return scan;
        };
        let snapshot = snapshot_of(
            cluster,
            &self.ctx.settings,
            catalogs.instance_types.clone(),
            &BTreeSet::new(),
            now,
        );
        let plan = deletion_cost::plan(&snapshot, now);
        self.metrics.pending(&plan.writes);
        if !plan.writes.is_empty() {
            tracing::debug!(
                nodes = plan.writes.len(),
                ranked = plan
                    .ranking
                    .iter()
                    .filter(
                        |r| matches!(r.desired, Desired::Cost(c) if c != deletion_cost::DISRUPTING)
                    )
                    .count(),
                "writing pod deletion costs"
            );
        }
        for (key, write) in steps(&plan.writes, busy) {
            scan.step(key, write);
        }
        scan
    }

    async fn execute(&self, write: PodWrite) -> Result<Action, WriteError> {
        let resource_version = match self.current(&write) {
            Current::Gone => {
                self.metrics.written("skipped_notfound");
                return Ok(Action::AwaitChange);
            }
            // Upstream drops it silently: the next cycle plans for the new pod.
            Current::Replaced => return Ok(Action::AwaitChange),
            Current::AsPlanned => {
                self.metrics.written("skipped_unchanged");
                return Ok(Action::AwaitChange);
            }
            Current::Differs(resource_version) => resource_version,
        };
        let value = write.desired.value();
        let written = self
            .ctx
            .writer()
            .annotate_pod(
                &write.namespace,
                &write.name,
                resource_version.as_deref(),
                POD_DELETION_COST,
                value.as_deref(),
                "writing the pod deletion cost",
            )
            .await;
        match written {
            Ok(Some(_)) => self.metrics.written("updated"),
            Ok(None) => self.metrics.written("skipped_notfound"),
            Err(e) if e.is_conflict() => {
                tracing::debug!(pod = %format!("{}/{}", write.namespace, write.name), "pod deletion cost not written: the pod changed meanwhile");
                self.metrics.written("skipped_conflict");
            }
            Err(e) => {
                self.metrics.written("error");
                return Err(e);
            }
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &PodWrite) -> &'static str {
        "annotate"
    }

    fn controller(_: &PodWrite) -> &'static str {
        "pod.deletioncost.queue"
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use karpenter_disruption::deletion_cost::Group;
    use karpenter_scheduling::PodRecord;

    use super::*;

    fn pod(name: &str, uid: &str) -> Arc<PodRecord> {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("shop".into());
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(uid.into());
        Arc::new(pod.into())
    }

    fn node_writes(node: &str, pool: &str, desired: Desired, pods: &[&str]) -> NodeWrites {
        NodeWrites {
            node: node.into(),
            node_pool: pool.into(),
            group: Group::Consolidatable,
            desired,
            pods: pods.iter().map(|p| pod(p, &format!("uid-{p}"))).collect(),
        }
    }

    #[test]
    fn every_pod_of_a_node_to_write_is_a_step_keyed_by_the_pod_with_its_nodes_value() {
        let writes = [
            node_writes("a", "general", Desired::Cost(-2), &["web-1", "web-2"]),
            node_writes("b", "general", Desired::Cleared, &["web-3"]),
        ];
        let steps = steps(&writes, Busy::none());
        let got: Vec<(&str, Desired, Option<&str>)> = steps
            .iter()
            .map(|(k, w)| (k.as_str(), w.desired, w.uid.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("shop/web-1", Desired::Cost(-2), Some("uid-web-1")),
                ("shop/web-2", Desired::Cost(-2), Some("uid-web-2")),
                ("shop/web-3", Desired::Cleared, Some("uid-web-3")),
            ]
        );
    }

    #[test]
    fn the_pending_gauge_counts_this_cycles_nodes_per_pool_and_forgets_the_last_cycles() {
        let registry = Metrics::new();
        let metrics = DeletionCostMetrics::register(&registry);
        metrics.pending(&[
            node_writes("a", "general", Desired::Cost(-2), &["p"]),
            node_writes("b", "general", Desired::Cost(-1), &["q"]),
            node_writes("c", "gpu", Desired::Cleared, &["r"]),
        ]);
        let gauge = |pool: &str| {
            metrics
                .pending
                .get(&vec![("nodepool", pool.to_owned())])
                .map(|g| g.get())
        };
        assert_eq!((gauge("general"), gauge("gpu")), (Some(2), Some(1)));
        metrics.pending(&[node_writes("c", "gpu", Desired::Cleared, &["r"])]);
        assert_eq!((gauge("general"), gauge("gpu")), (None, Some(1)));
    }
}
