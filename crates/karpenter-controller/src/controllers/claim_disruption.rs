//! The NodeClaim side of disruption (upstream `nodeclaim.disruption`, `nodeclaim.podevents`
//! and `nodepool.hash`, one loop each): facts written on the objects so users (and upstream's
//! tools) see what disruption acts on.
//!
//! - `status.lastPodEventTime`: set when a pod binds to the node, finishes, starts
//!   terminating or is deleted (the index numbers these events; the time is when this loop
//!   saw the number move, within [`TICK`]); writes closer than [`POD_EVENT_DEDUPE`] to the
//!   previous one wait, as upstream's dedupe does.
//! - `Drifted` and `Consolidatable` conditions, from
//!   [`karpenter_disruption::claim_conditions`] every [`CONDITIONS_INTERVAL`], plus the cloud
//!   provider's own drift.
//! - NodePool hash annotations kept current, and NodeClaims stamped by another hash version
//!   (upstream's `v3`) re-stamped instead of drifted ([`karpenter_api::hash::restamp`]): a
//!   switch from upstream causes no drift storm.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_cloud::{CloudError, CloudProvider};
use karpenter_disruption::{ClaimConditions, DriftMark};
use karpenter_state::Cluster;
use karpenter_state::conditions::api_time;
use serde_json::json;

use super::lock;
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// How often pod events and hash stamps are looked at.
pub const TICK: Duration = Duration::from_secs(1);
/// How often `Drifted` and `Consolidatable` are evaluated.
pub const CONDITIONS_INTERVAL: Duration = Duration::from_secs(5);
/// `lastPodEventTime` is not rewritten within this long of its last value (upstream: 10 s).
pub const POD_EVENT_DEDUPE: chrono::Duration = chrono::Duration::seconds(10);

fn claim_condition<'a>(
    claim: &'a NodeClaim,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

fn is_true(claim: &NodeClaim, type_: &str) -> bool {
    claim_condition(claim, type_).is_some_and(|c| c.status == "True")
}

/// `nodepool.hash`: NodePools get our hash annotations; NodeClaims stamped by another hash
/// version are re-stamped.
#[derive(Debug)]
pub struct HashStamps<C> {
    pub ctx: Context<C>,
}

/// A hash stamp to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// The NodePool's own annotations.
    NodePool {
        name: String,
        annotations: BTreeMap<String, String>,
    },
    /// A NodeClaim stamped by another hash version gets ours.
    NodeClaim {
        name: String,
        annotations: BTreeMap<String, String>,
    },
}

/// The stamps to write: every live NodePool whose annotations lag its template, every live
/// NodeClaim stamped by another hash version.
pub fn stamps(cluster: &Cluster) -> Vec<Stamp> {
    let pools: Vec<(&NodePool, String)> = cluster
        .node_pools()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p, karpenter_api::hash::node_pool_hash(p)))
        .collect();
    let hashes: HashMap<&str, &str> = pools
        .iter()
        .filter_map(|(p, h)| Some((p.metadata.name.as_deref()?, h.as_str())))
        .collect();
    let mut out: Vec<Stamp> = pools
        .iter()
        .filter_map(|(pool, _)| {
            Some(Stamp::NodePool {
                name: pool.metadata.name.clone()?,
                annotations: karpenter_api::hash::pool_annotations(pool)?,
            })
        })
        .collect();
    out.extend(
        cluster
            .node_claims()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| {
                let pool = c.metadata.labels.as_ref()?.get(labels::NODEPOOL)?;
                let hash = hashes.get(pool.as_str())?;
                let annotations = karpenter_api::hash::restamp(
                    hash,
                    c.metadata.annotations.as_ref(),
                    is_true(c, conditions::DRIFTED),
                )?;
                Some(Stamp::NodeClaim {
                    name: c.metadata.name.clone()?,
                    annotations,
                })
            }),
    );
    out
}

impl<C: Send + Sync + 'static> Reconciler for HashStamps<C> {
    type Step = Stamp;
    type Error = WriteError;
    const NAME: &'static str = "nodepool.hash";

    fn shape(&self) -> Shape {
        Shape::periodic(TICK).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Stamp> {
        let mut scan = Scan::new();
        for stamp in stamps(cluster) {
            let key = match &stamp {
                Stamp::NodePool { name, .. } => format!("nodepool/{name}"),
                Stamp::NodeClaim { name, .. } => format!("nodeclaim/{name}"),
            };
            if !busy.contains(&key) {
                scan.step(key, stamp);
            }
        }
        scan
    }

    async fn execute(&self, stamp: Stamp) -> Result<Action, WriteError> {
        let writer = self.ctx.writer();
        match stamp {
            Stamp::NodePool { name, annotations } => {
                writer
                    .merge_metadata::<NodePool>(
                        &name,
                        json!({"annotations": annotations}),
                        "writing the hash",
                    )
                    .await?;
            }
            Stamp::NodeClaim { name, annotations } => {
                tracing::info!(nodeclaim = %name, stamp = ?annotations, "re-stamping a NodeClaim written under another nodepool-hash version (no drift)");
                writer
                    .merge_metadata::<NodeClaim>(
                        &name,
                        json!({"annotations": annotations}),
                        "re-stamping the nodepool hash",
                    )
                    .await?;
            }
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(stamp: &Stamp) -> &'static str {
        match stamp {
            Stamp::NodePool { .. } => "stamp-nodepool",
            Stamp::NodeClaim { .. } => "restamp-nodeclaim",
        }
    }
}

/// `nodeclaim.podevents`: `lastPodEventTime` on NodeClaims whose node had a pod event.
#[derive(Debug)]
pub struct PodEvents<C> {
    pub ctx: Context<C>,
    /// Per node, the last pod-event number written, and the number below which events
    /// happened before this loop started (at an unknown time: only later ones count).
    seen: Arc<Mutex<SeenEvents>>,
}

#[derive(Debug, Default)]
struct SeenEvents {
    baseline: Option<u64>,
    written: HashMap<String, u64>,
}

impl<C> PodEvents<C> {
    pub fn new(ctx: Context<C>) -> Self {
        PodEvents {
            ctx,
            seen: Arc::default(),
        }
    }
}

/// A `lastPodEventTime` to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub claim: String,
    pub node: String,
    /// The node's pod-event number it answers.
    pub seq: u64,
}

impl<C: Send + Sync + 'static> Reconciler for PodEvents<C> {
    type Step = PodEvent;
    type Error = WriteError;
    const NAME: &'static str = "nodeclaim.podevents";

    fn shape(&self) -> Shape {
        Shape::periodic(TICK).concurrency(8)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<PodEvent> {
        let mut seen = lock(&self.seen);
        let baseline = *seen.baseline.get_or_insert_with(|| cluster.pod_event_max());
        seen.written.retain(|node, _| cluster.node(node).is_some());
        let mut scan = Scan::new();
        for c in cluster
            .node_claims()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
        {
            let (Some(name), Some(node)) = (
                c.metadata.name.as_deref(),
                c.status.as_ref().and_then(|s| s.node_name.as_deref()),
            ) else {
                continue;
            };
            let Some(seq) = cluster.pod_event_seq(node) else {
                continue;
            };
            if seq <= seen.written.get(node).copied().unwrap_or(baseline) || busy.contains(name) {
                continue;
            }
            let previous = c
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_ref())
                .and_then(karpenter_state::conditions::from_api_time);
            if previous.is_some_and(|p| now - p < POD_EVENT_DEDUPE) {
                continue;
            }
            scan.step(
                name,
                PodEvent {
                    claim: name.to_owned(),
                    node: node.to_owned(),
                    seq,
                },
            );
        }
        scan
    }

    async fn execute(&self, event: PodEvent) -> Result<Action, WriteError> {
        let Some(time) = api_time(Utc::now()) else {
            return Ok(Action::AwaitChange);
        };
        let Some(current) = self.ctx.cache.lock().node_claim(&event.claim).cloned() else {
            return Ok(Action::AwaitChange);
        };
        self.ctx
            .writer()
            .patch_status(
                &current,
                json!({"lastPodEventTime": time}),
                "writing lastPodEventTime",
            )
            .await?;
        lock(&self.seen).written.insert(event.node, event.seq);
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &PodEvent) -> &'static str {
        "last-pod-event-time"
    }
}

/// `nodeclaim.disruption`: `Drifted` and `Consolidatable` on every managed NodeClaim.
#[derive(Debug)]
pub struct ClaimDisruption<C> {
    pub ctx: Context<C>,
}

/// The one step: evaluate every NodeClaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluate;

/// Some conditions could not be written (the others were).
#[derive(Debug, thiserror::Error)]
#[error("{failed} disruption condition writes failed; the first: {first}")]
pub struct ConditionsError {
    failed: usize,
    #[source]
    first: WriteError,
    /// Every failure was a conflict.
    conflicts_only: bool,
}

impl<C: CloudProvider + 'static> Reconciler for ClaimDisruption<C> {
    type Step = Evaluate;
    type Error = ConditionsError;
    const NAME: &'static str = "nodeclaim.disruption";

    fn shape(&self) -> Shape {
        Shape::periodic(CONDITIONS_INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Evaluate> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Evaluate);
        }
        scan
    }

    async fn execute(&self, _: Evaluate) -> Result<Action, ConditionsError> {
        let ctx = &self.ctx;
        let instance_types = ctx
            .catalogs
            .instance_types(&ctx.cache, &*ctx.cloud, &ctx.events)
            .await;
        let now = Utc::now();
        let snapshot = super::disruption::snapshot(
            &ctx.cache,
            &ctx.settings,
            instance_types,
            &Default::default(),
            now,
        );
        let mut failures: Vec<WriteError> = Vec::new();
        for wanted in karpenter_disruption::claim_conditions(&snapshot, now) {
            if let Err(error) = self.write(wanted, now).await {
                failures.push(error);
            }
        }
        let conflicts_only = failures.iter().all(WriteError::is_conflict);
        let failed = failures.len();
        match failures.into_iter().next() {
            None => Ok(Action::RequeueAfter(CONDITIONS_INTERVAL)),
            Some(first) => Err(ConditionsError {
                failed,
                first,
                conflicts_only,
            }),
        }
    }

    fn error_policy(&self, error: &ConditionsError) -> Retry {
        if error.conflicts_only {
            Retry::Now
        } else {
            Retry::Backoff
        }
    }

    fn step_name(_: &Evaluate) -> &'static str {
        "evaluate"
    }
}

impl<C: CloudProvider + 'static> ClaimDisruption<C> {
    async fn write(
        &self,
        mut wanted: ClaimConditions,
        now: DateTime<Utc>,
    ) -> Result<(), WriteError> {
        let Some(claim) = self
            .ctx
            .cache
            .lock()
            .node_claim(&wanted.node_claim)
            .cloned()
        else {
            return Ok(());
        };
        let launched = is_true(&claim, conditions::LAUNCHED);
        if launched && wanted.drifted.is_none() {
            match self.ctx.cloud.is_drifted(&claim).await {
                Ok(Some(reason)) => {
                    wanted.drifted = Some(DriftMark {
                        reason: reason.0,
                        since: now,
                    });
                }
                Ok(None) => {}
                Err(error) => log_drift_check_failure(&wanted.node_claim, &error),
            }
        }
        let drifted = match (&wanted.drifted, launched) {
            (Some(mark), true) => Some(("True", mark.reason.as_str(), "")),
            _ => None,
        };
        if drifted.is_some() && !is_true(&claim, conditions::DRIFTED) {
            tracing::info!(nodeclaim = %wanted.node_claim, reason = ?drifted.map(|d| d.1), "NodeClaim drifted");
        }
        let writer = self.ctx.writer();
        writer
            .set_claim_condition(&wanted.node_claim, conditions::DRIFTED, drifted, now)
            .await?;
        writer
            .set_claim_condition(
                &wanted.node_claim,
                conditions::CONSOLIDATABLE,
                wanted
                    .consolidatable
                    .then_some(("True", "Consolidatable", "")),
                now,
            )
            .await
    }
}

/// The provider's drift check failing leaves the condition as the rest of the rules say; it is
/// worth a line, not a failed pass.
fn log_drift_check_failure(claim: &str, error: &CloudError) {
    tracing::warn!(nodeclaim = %claim, %error, "provider drift check failed");
}
