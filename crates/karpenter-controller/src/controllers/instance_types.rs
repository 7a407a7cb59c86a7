//! The EC2 instance-type listing and prices (`--cloud-provider aws`, upstream's
//! `providers.instancetype` and `providers.pricing`): prices at once, then instance types and
//! prices every [`EVERY`] (upstream's schedule). A failed refresh keeps what was known (the
//! last listing, or the embedded catalog's prices) and is tried again after [`RETRY`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_aws_provider::{AwsCloud, AwsError, NodeClasses};
use karpenter_state::Cluster;

use crate::reconcile::{Action, Busy, Reconciler, Retry, Scan, Shape};

/// How often instance types and prices are listed.
pub const EVERY: Duration = Duration::from_secs(12 * 3600);
/// How soon a failed refresh is tried again.
pub const RETRY: Duration = Duration::from_secs(300);

/// The refresh loop.
#[derive(Debug)]
pub struct InstanceTypeRefresh<L> {
    pub cloud: Arc<AwsCloud<L>>,
    /// Whether the instance types were listed at least once here (the provider lists them
    /// when it starts, so the first pass only prices).
    pub listed: AtomicBool,
}

/// A refresh failed; what was known stays.
#[derive(Debug, thiserror::Error)]
#[error("refreshing {what}: {source}")]
pub struct RefreshError {
    what: &'static str,
    #[source]
    source: AwsError,
    /// Further failures of the same refresh.
    more: usize,
}

/// The one step: refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh;

impl<L> InstanceTypeRefresh<L> {
    pub fn new(cloud: Arc<AwsCloud<L>>) -> Self {
        InstanceTypeRefresh {
            cloud,
            listed: AtomicBool::new(true),
        }
    }
}

impl<L: NodeClasses + 'static> Reconciler for InstanceTypeRefresh<L> {
    type Step = Refresh;
    type Error = RefreshError;
    const NAME: &'static str = "providers.instancetype";

    fn shape(&self) -> Shape {
        Shape::periodic(EVERY)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Refresh> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Refresh);
        }
        scan
    }

    async fn execute(&self, _: Refresh) -> Result<Action, RefreshError> {
        let mut errors: Vec<(&'static str, AwsError)> = Vec::new();
        if !self.listed.swap(false, Ordering::Relaxed)
            && let Err(error) = self.cloud.refresh_catalog().await
        {
            errors.push(("the instance types", error));
            // Listed again at the next attempt.
            self.listed.store(false, Ordering::Relaxed);
        }
        errors.extend(
            self.cloud
                .refresh_prices()
                .await
                .into_iter()
                .map(|e| ("prices", e)),
        );
        let more = errors.len().saturating_sub(1);
        match errors.into_iter().next() {
            None => Ok(Action::RequeueAfter(EVERY)),
            Some((what, source)) => Err(RefreshError { what, source, more }),
        }
    }

    fn error_policy(&self, _: &RefreshError) -> Retry {
        Retry::After(RETRY)
    }

    fn step_name(_: &Refresh) -> &'static str {
        "refresh"
    }
}
