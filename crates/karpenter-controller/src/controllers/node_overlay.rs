//! NodeOverlay status (upstream `nodeoverlay.controller`, gate `NodeOverlay`): after the
//! overlays are applied to the NodePools' instance types ([`crate::reconcile::catalogs`],
//! where every solve and every consolidation decision reads them), this loop writes each
//! overlay's `ValidationSucceeded` and `Ready` as
//! [`karpenter_lifecycle::nodeoverlay_status::decide`] says, guarded by the overlay's
//! `resourceVersion`, when they change.
//!
//! Unlike upstream there is no evaluation to wait for: overlays are applied synchronously with
//! each conversion, so a NodePool is never skipped "awaiting nodeoverlay evaluation", and the
//! status only reports what the solver already uses.

use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_cloud::CloudProvider;
use karpenter_state::Cluster;
use karpenter_state::conditions::api_time;
use serde_json::json;

use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// Changes are looked at at most this often.
const SCAN_INTERVAL: Duration = Duration::from_millis(500);
/// Looked at again at least this often (the cloud's instance types change by themselves).
const RESYNC: Duration = Duration::from_secs(30);
/// The loop's one key.
const KEY: &str = "nodeoverlays";

/// The one step: apply the overlays (or reuse the conversion that did) and write the
/// statuses that change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluate;

/// The loop.
#[derive(Debug)]
pub struct NodeOverlayStatus<C> {
    pub ctx: Context<C>,
}

impl<C: CloudProvider + 'static> Reconciler for NodeOverlayStatus<C> {
    type Step = Evaluate;
    type Error = WriteError;
    const NAME: &'static str = "nodeoverlay.controller";

    fn shape(&self) -> Shape {
        Shape::new(SCAN_INTERVAL, RESYNC)
    }

    fn scan(&self, cluster: &Cluster, _now: DateTime<Utc>, busy: Busy<'_>) -> Scan<Evaluate> {
        let mut scan = Scan::new();
        if cluster.node_overlays().next().is_some() && !busy.contains(KEY) {
            scan.step(KEY, Evaluate);
        }
        scan
    }

    async fn execute(&self, _: Evaluate) -> Result<Action, WriteError> {
        let catalogs = self
            .ctx
            .catalogs
            .get(&self.ctx.cache, &*self.ctx.cloud, &self.ctx.events)
            .await;
        // The API server keeps seconds: so do the conditions written.
        let Some(now) = DateTime::from_timestamp(Utc::now().timestamp(), 0).and_then(api_time)
        else {
            return Ok(Action::AwaitChange);
        };
        let overlays: Vec<NodeOverlay> = self.ctx.cache.lock().node_overlays().cloned().collect();
        let mut stale = false;
        for overlay in overlays {
            let name = overlay.metadata.name.clone().unwrap_or_default();
            // Only a verdict about this spec: one made before an edit waits for the next
            // conversion (the edit changed the catalogs' key).
            let seen = catalogs
                .overlay_versions
                .iter()
                .any(|(n, generation)| *n == name && *generation == overlay.metadata.generation);
            let Some(verdict) = catalogs.overlays.verdicts.get(&name).filter(|_| seen) else {
                stale = true;
                continue;
            };
            if let Some(conditions) =
                karpenter_lifecycle::nodeoverlay_status::decide(&overlay, verdict, &now)
            {
                self.ctx
                    .writer()
                    .patch_status(
                        &overlay,
                        json!({"conditions": conditions}),
                        "updating the conditions",
                    )
                    .await?;
            }
        }
        Ok(if stale {
            Action::RequeueAfter(Duration::from_secs(1))
        } else {
            Action::AwaitChange
        })
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &Evaluate) -> &'static str {
        "conditions"
    }
}
