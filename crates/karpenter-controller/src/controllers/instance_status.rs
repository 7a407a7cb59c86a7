//! EC2 instance status checks (`--cloud-provider aws`, upstream's `interruption.instancestatus`
//! controller, v1.12+): every `INSTANCE_STATUS_INTERVAL` (upstream's fixed 1m) the three
//! `ec2:DescribeInstanceStatus` queries of
//! [`karpenter_aws::interruption::instance_status::QUERIES`], judged by
//! [`karpenter_aws::interruption::instance_status::unhealthy`]; each unhealthy category of an
//! instance that is one of our NodeClaims becomes a message of its kind, decided by
//! [`karpenter_aws::interruption::decide_for`] and performed with the interruption loop's
//! `act`: `InstanceUnhealthy` events, then for a failed instance or system check the
//! termination grace expired at once and the NodeClaim deleted, for a scheduled event the
//! NodeClaim deleted (a normal drain). The normal termination then drains, terminates, and the
//! provisioner replaces. No interruption queue is needed, and no node repair: upstream acts the
//! same way with or without it.
//!
//! `karpenter_interruption_instance_status_unhealthy_total{category}` counts an (instance,
//! category) once while it stays unhealthy, and again if it comes back after a healthy poll.
//! A denied `DescribeInstanceStatus` (the policy lacks it) is logged as an error and polled
//! again at the next interval (upstream stops until restarted).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::Utc;
use karpenter_aws::interruption::instance_status::{
    Category, INSTANCE_STATUS_UNHEALTHY_TOTAL, unhealthy,
};
use karpenter_aws::interruption::{Action, ActionOutcome, decide_for};
use karpenter_aws_provider::{AwsClients, AwsError};
use karpenter_cloud::CloudProvider;
use karpenter_state::Cluster;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::controllers::interruption::{act, claims_by_instance};
use crate::http::Metrics;
use crate::reconcile::{self, Busy, Context, Reconciler, Retry, Scan, Shape};

/// `karpenter_interruption_instance_status_unhealthy_total` (upstream's name and help).
#[derive(Debug, Clone, Default)]
pub struct InstanceStatusMetrics {
    unhealthy: Family<Vec<(&'static str, String)>, Counter>,
}

impl InstanceStatusMetrics {
    pub fn register(registry: &Metrics) -> Self {
        let metrics = InstanceStatusMetrics::default();
        registry.register(
            INSTANCE_STATUS_UNHEALTHY_TOTAL
                .strip_suffix("_total")
                .unwrap_or(INSTANCE_STATUS_UNHEALTHY_TOTAL),
            "Count of unique unhealthy instance statuses detected from EC2 DescribeInstanceStatus. Broken down by status check category.",
            metrics.unhealthy.clone(),
        );
        metrics
    }

    /// An instance of ours was first seen unhealthy in `category`.
    pub fn unhealthy(&self, category: Category) {
        self.unhealthy
            .get_or_create(&vec![("category", category.as_str().to_owned())])
            .inc();
    }
}

/// The loop.
#[derive(Debug)]
pub struct InstanceStatus<C> {
    pub ctx: Context<C>,
    pub clients: AwsClients,
    pub interval: Duration,
    pub metrics: InstanceStatusMetrics,
    /// (instance, category) counted in the metric, while they stay unhealthy.
    seen: Mutex<HashSet<(String, Category)>>,
}

impl<C> InstanceStatus<C> {
    pub fn new(
        ctx: Context<C>,
        clients: AwsClients,
        interval: Duration,
        metrics: InstanceStatusMetrics,
    ) -> Self {
        InstanceStatus {
            ctx,
            clients,
            interval,
            metrics,
            seen: Mutex::new(HashSet::new()),
        }
    }
}

/// The one step: poll and act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll;

impl<C: CloudProvider + 'static> Reconciler for InstanceStatus<C> {
    type Step = Poll;
    type Error = AwsError;
    const NAME: &'static str = "interruption.instancestatus";

    fn shape(&self) -> Shape {
        Shape::periodic(self.interval)
    }

    fn scan(&self, _: &Cluster, _: chrono::DateTime<Utc>, busy: Busy<'_>) -> Scan<Poll> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Poll);
        }
        scan
    }

    async fn execute(&self, _: Poll) -> Result<reconcile::Action, AwsError> {
        let reports = match karpenter_aws_provider::instance_status::describe(&self.clients).await {
            Ok(reports) => reports,
            Err(error) if error.is_access_denied() => {
                tracing::error!(%error, "ec2:DescribeInstanceStatus permission is not allowed, update the IAM policy to enable instance status health checks");
                return Ok(reconcile::Action::RequeueAfter(self.interval));
            }
            Err(error) => return Err(error),
        };
        let found = unhealthy(&reports, Utc::now());
        let claims = claims_by_instance(&self.ctx.cache.lock());
        let mut current = HashSet::new();
        let mut deleted = HashSet::new();
        for instance in found {
            for category in &instance.categories {
                let Some(kind) = category.kind() else {
                    continue;
                };
                let ids = [instance.instance_id.clone()];
                let actions = decide_for(kind, &ids, |id| claims.get(id).cloned());
                if actions.is_empty() {
                    // Not one of our NodeClaims.
                    continue;
                }
                let key = (instance.instance_id.clone(), *category);
                let first = !self
                    .seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&key);
                if first {
                    tracing::info!(instance = %instance.instance_id, category = category.as_str(), "detected unhealthy instance owned by cluster");
                    self.metrics.unhealthy(*category);
                }
                current.insert(key);
                for action in &actions {
                    // One deletion per NodeClaim and poll, whichever category came first.
                    if let Action::DeleteNodeClaim { name, .. } = action
                        && !deleted.insert(name.clone())
                    {
                        continue;
                    }
                    let outcome = act(&self.ctx, action).await;
                    if outcome == ActionOutcome::Failed
                        && matches!(action, Action::ExpireTerminationGrace { .. })
                    {
                        // Not deleted without the expired grace: the next poll tries again.
                        break;
                    }
                }
            }
        }
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = current;
        Ok(reconcile::Action::RequeueAfter(self.interval))
    }

    fn error_policy(&self, _: &AwsError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Poll) -> &'static str {
        "poll"
    }
}
