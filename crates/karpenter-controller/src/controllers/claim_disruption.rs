//! The NodeClaim side of disruption (upstream `nodeclaim.disruption`, `nodeclaim.podevents`
//! and `nodepool.hash`): facts written on the objects so users (and upstream's tools) see what
//! disruption acts on.
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
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_cloud::CloudProvider;
use karpenter_disruption::{ClaimConditions, DriftMark};
use karpenter_state::conditions::api_time;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::catalogs::Catalogs;
use super::events::Events;
use super::writes;
use crate::settings::Settings;

/// How often pod events and hash stamps are looked at.
const TICK: Duration = Duration::from_secs(1);
/// How often `Drifted` and `Consolidatable` are evaluated.
pub const CONDITIONS_INTERVAL: Duration = Duration::from_secs(5);
/// `lastPodEventTime` is not rewritten within this long of its last value (upstream: 10 s).
pub const POD_EVENT_DEDUPE: chrono::Duration = chrono::Duration::seconds(10);

/// A NodeClaim to re-stamp and the annotations to write.
type Restamp = (String, BTreeMap<String, String>);

/// The loop.
pub struct ClaimDisruption<C> {
    pub cache: ClusterCache,
    pub cloud: Arc<C>,
    pub client: Client,
    pub settings: Arc<Settings>,
    pub events: Events,
    pub catalogs: Catalogs,
}

impl<C> std::fmt::Debug for ClaimDisruption<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimDisruption").finish_non_exhaustive()
    }
}

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

impl<C: CloudProvider + 'static> ClaimDisruption<C> {
    /// Runs until `cancel` trips.
    pub async fn run(self, cancel: CancellationToken) {
        // Pod events numbered before this loop started happened at an unknown time: only
        // later ones move lastPodEventTime.
        let mut seen: HashMap<String, u64> = HashMap::new();
        let mut baseline: Option<u64> = None;
        let mut next_conditions = Instant::now();
        loop {
            if self.cache.synced() {
                let base = *baseline.get_or_insert_with(|| self.cache.lock().pod_event_max());
                self.stamp_hashes().await;
                self.pod_events(&mut seen, base).await;
                if Instant::now() >= next_conditions {
                    next_conditions = Instant::now() + CONDITIONS_INTERVAL;
                    self.conditions().await;
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// NodePools get our hash annotations; NodeClaims stamped by another hash version are
    /// re-stamped.
    async fn stamp_hashes(&self) {
        let (pools, claims): (Vec<(NodePool, String)>, Vec<Restamp>) = {
            let cluster = self.cache.lock();
            let pools: Vec<(NodePool, String)> = cluster
                .node_pools()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| (p.clone(), karpenter_api::hash::node_pool_hash(p)))
                .collect();
            let hashes: HashMap<&str, &str> = pools
                .iter()
                .filter_map(|(p, h)| Some((p.metadata.name.as_deref()?, h.as_str())))
                .collect();
            let claims = cluster
                .node_claims()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| {
                    let pool = c.metadata.labels.as_ref()?.get(labels::NODEPOOL)?;
                    let hash = hashes.get(pool.as_str())?;
                    let stamp = karpenter_api::hash::restamp(
                        hash,
                        c.metadata.annotations.as_ref(),
                        is_true(c, conditions::DRIFTED),
                    )?;
                    Some((c.metadata.name.clone()?, stamp))
                })
                .collect();
            (pools, claims)
        };
        let api: Api<NodePool> = Api::all(self.client.clone());
        for (pool, _) in &pools {
            let Some(stamp) = karpenter_api::hash::pool_annotations(pool) else {
                continue;
            };
            let name = pool.metadata.name.clone().unwrap_or_default();
            let patch = json!({"metadata": {"annotations": stamp}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(patched) => self.cache.apply(karpenter_state::Object::NodePool(patched)),
                Err(error) => {
                    tracing::warn!(nodepool = %name, %error, "writing the NodePool hash failed");
                }
            }
        }
        for (claim, stamp) in claims {
            tracing::info!(nodeclaim = %claim, ?stamp, "re-stamping a NodeClaim written under another nodepool-hash version (no drift)");
            let patch = json!({"metadata": {"annotations": stamp}});
            if let Err(error) = writes::patch_claim(
                &self.client,
                &self.cache,
                &claim,
                &patch,
                false,
                "re-stamping the nodepool hash",
            )
            .await
            {
                tracing::warn!(%error, "re-stamping failed; retried next tick");
            }
        }
    }

    /// Writes `lastPodEventTime` on NodeClaims whose node had a pod event since last looked.
    async fn pod_events(&self, seen: &mut HashMap<String, u64>, baseline: u64) {
        let now = Utc::now();
        let due: Vec<(String, String, u64)> = {
            let cluster = self.cache.lock();
            cluster
                .node_claims()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| {
                    let node = c.status.as_ref()?.node_name.as_deref()?;
                    let seq = cluster.pod_event_seq(node)?;
                    let last = seen.get(node).copied().unwrap_or(baseline);
                    if seq <= last {
                        return None;
                    }
                    let previous = c
                        .status
                        .as_ref()
                        .and_then(|s| s.last_pod_event_time.as_ref())
                        .and_then(karpenter_state::conditions::from_api_time);
                    if previous.is_some_and(|p| now - p < POD_EVENT_DEDUPE) {
                        return None;
                    }
                    Some((c.metadata.name.clone()?, node.to_owned(), seq))
                })
                .collect()
        };
        seen.retain(|node, _| self.cache.lock().node(node).is_some());
        for (claim, node, seq) in due {
            let Some(time) = api_time(now) else { continue };
            let patch = json!({"status": {"lastPodEventTime": time}});
            match writes::patch_claim(
                &self.client,
                &self.cache,
                &claim,
                &patch,
                true,
                "writing lastPodEventTime",
            )
            .await
            {
                Ok(()) => {
                    seen.insert(node, seq);
                }
                Err(error) => tracing::warn!(%error, "retried next tick"),
            }
        }
    }

    /// `Drifted` and `Consolidatable` on every managed NodeClaim.
    async fn conditions(&self) {
        let instance_types = self
            .catalogs
            .instance_types(&self.cache, &*self.cloud, &self.events)
            .await;
        let now = Utc::now();
        let snapshot = super::disruption::snapshot(
            &self.cache,
            &self.settings,
            instance_types,
            &Default::default(),
            now,
        );
        for wanted in karpenter_disruption::claim_conditions(&snapshot, now) {
            if let Err(error) = self.write(wanted, now).await {
                tracing::warn!(%error, "writing a disruption condition failed; retried");
            }
        }
    }

    async fn write(
        &self,
        mut wanted: ClaimConditions,
        now: DateTime<Utc>,
    ) -> Result<(), super::nodeclaim::StepError> {
        let Some(claim) = self.cache.lock().node_claim(&wanted.node_claim).cloned() else {
            return Ok(());
        };
        let launched = is_true(&claim, conditions::LAUNCHED);
        if launched && wanted.drifted.is_none() {
            match self.cloud.is_drifted(&claim).await {
                Ok(Some(reason)) => {
                    wanted.drifted = Some(DriftMark {
                        reason: reason.0,
                        since: now,
                    });
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(nodeclaim = %wanted.node_claim, %error, "provider drift check failed");
                }
            }
        }
        let drifted = match (&wanted.drifted, launched) {
            (Some(mark), true) => Some(("True", mark.reason.as_str(), "")),
            _ => None,
        };
        if drifted.is_some() && !is_true(&claim, conditions::DRIFTED) {
            tracing::info!(nodeclaim = %wanted.node_claim, reason = ?drifted.map(|d| d.1), "NodeClaim drifted");
        }
        writes::set_claim_condition(
            &self.client,
            &self.cache,
            &wanted.node_claim,
            conditions::DRIFTED,
            drifted,
            now,
        )
        .await?;
        writes::set_claim_condition(
            &self.client,
            &self.cache,
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
