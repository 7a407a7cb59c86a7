//! ARC zonal shifts (`ENABLE_ZONAL_SHIFT`, `--cloud-provider aws`, upstream's `zonalshift`
//! controller): every 30 seconds asks ARC again for the cluster's zonal shifts
//! ([`ZonalShifts::refresh`]); the EC2 provider reads the answer on every listing, launch and
//! termination ([`karpenter_aws::zonal_shift`]). When the set of shifted zones changes, each
//! NodePool that may use a zone that changed is told (`ZonalShiftActive`, a warning, or
//! `ZonalShiftCleared`), as upstream; the transitions are remembered only once told, so a
//! failed round tells them again.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use karpenter_aws::zonal_shift::{POLL_INTERVAL, event, transitions};
use karpenter_aws_provider::zonal_shift::ZonalShifts;
use karpenter_aws_provider::{AwsClients, AwsError};
use karpenter_cloud::CloudProvider;
use karpenter_state::Cluster;

use crate::reconcile::{self, Busy, Context, Reconciler, Retry, Scan, Shape};

/// The loop.
#[derive(Debug)]
pub struct ZonalShift<C> {
    pub ctx: Context<C>,
    pub clients: AwsClients,
    pub shifts: Arc<ZonalShifts>,
    /// The zone ids shifted at the last round NodePools were told of.
    told: Mutex<BTreeSet<String>>,
}

impl<C> ZonalShift<C> {
    pub fn new(ctx: Context<C>, clients: AwsClients, shifts: Arc<ZonalShifts>) -> Self {
        ZonalShift {
            ctx,
            clients,
            shifts,
            told: Mutex::new(BTreeSet::new()),
        }
    }
}

/// The one step: ask ARC and tell the NodePools what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh;

impl<C: CloudProvider + 'static> Reconciler for ZonalShift<C> {
    type Step = Refresh;
    type Error = AwsError;
    const NAME: &'static str = "zonalshift";

    fn shape(&self) -> Shape {
        Shape::periodic(POLL_INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Refresh> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Refresh);
        }
        scan
    }

    async fn execute(&self, _: Refresh) -> Result<reconcile::Action, AwsError> {
        self.shifts.refresh(&self.clients).await?;
        let current = self.shifts.shifted(Utc::now());
        let previous = self
            .told
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if current != previous {
            tracing::info!(shifted = ?current, before = ?previous, "zonal shifts changed");
            let told: Vec<_> = {
                let cluster = self.ctx.cache.lock();
                cluster
                    .node_pools()
                    .filter_map(|pool| {
                        let class_name = &pool.spec.template.spec.node_class_ref.name;
                        let class = cluster.node_class(class_name)?;
                        let zones: Vec<(String, String)> = class
                            .status
                            .as_ref()
                            .and_then(|s| s.subnets.as_ref())
                            .into_iter()
                            .flatten()
                            .filter_map(|s| Some((s.zone.clone(), s.zone_id.clone()?)))
                            .collect();
                        let requirements = karpenter_scheduling::v1::node_pool(pool)
                            .map(|p| p.requirements)
                            .unwrap_or_default();
                        let changes = transitions(&previous, &current, &zones, &requirements);
                        (!changes.is_empty()).then(|| (pool.clone(), changes))
                    })
                    .collect()
            };
            for (pool, changes) in told {
                for change in changes {
                    let (warning, reason, message) = event(&change);
                    if warning {
                        self.ctx
                            .events
                            .warn_node_pool(&pool, reason, &message)
                            .await;
                    } else {
                        self.ctx
                            .events
                            .normal_node_pool(&pool, reason, &message)
                            .await;
                    }
                }
            }
            *self.told.lock().unwrap_or_else(PoisonError::into_inner) = current;
        }
        Ok(reconcile::Action::RequeueAfter(POLL_INTERVAL))
    }

    fn error_policy(&self, _: &AwsError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Refresh) -> &'static str {
        "refresh"
    }
}
