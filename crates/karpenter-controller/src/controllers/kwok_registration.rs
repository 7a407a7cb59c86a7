//! The simulated cloud's instances join the cluster (`--cloud-provider kwok` with
//! `KWOK_REGISTRATION_DELAY` above zero): a launched NodeClaim whose Node does not exist gets
//! it once the delay, counted from its `Launched` transition, has passed.
//!
//! The NodeClaim in the API server is the booting instance's record, so a controller killed
//! during the delay registers it after its restart, as an EC2 instance boots whatever happens
//! to the process that launched it. This loop only plays the instance's kubelet; it decides
//! nothing about NodeClaims.

use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_cloud::CloudError;
use karpenter_kwok_provider::{Kwok, NodePoolLookup, registration_due};
use karpenter_state::Cluster;

use crate::reconcile::{Action, Busy, Context, MeteredCloud, Reconciler, Retry, Scan, Shape};

/// The loop.
#[derive(Debug)]
pub struct KwokRegistration<L> {
    pub ctx: Context<MeteredCloud<Kwok<L>>>,
    /// `KWOK_REGISTRATION_DELAY`.
    pub delay: Duration,
}

/// The NodeClaims whose Node is due now (their names), and how long until the next one is.
pub fn due(
    cluster: &Cluster,
    delay: Duration,
    now: DateTime<Utc>,
) -> (Vec<String>, Option<Duration>) {
    let mut ready = Vec::new();
    let mut next: Option<Duration> = None;
    for claim in cluster.node_claims() {
        let Some(name) = claim.metadata.name.as_deref() else {
            continue;
        };
        if claim.metadata.deletion_timestamp.is_some() || cluster.node(name).is_some() {
            continue;
        }
        let Some(at) = registration_due(claim, delay) else {
            continue;
        };
        match (at - now).to_std() {
            Ok(wait) if !wait.is_zero() => next = Some(next.map_or(wait, |n| n.min(wait))),
            _ => ready.push(name.to_owned()),
        }
    }
    (ready, next)
}

impl<L: NodePoolLookup + 'static> Reconciler for KwokRegistration<L> {
    type Step = String;
    type Error = CloudError;
    const NAME: &'static str = "kwok.registration";

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_millis(200), Duration::from_secs(30)).concurrency(8)
    }

    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<String> {
        let mut scan = Scan::new();
        let (ready, next) = due(cluster, self.delay, now);
        for name in ready {
            if !busy.contains(&name) {
                scan.step(name.clone(), name);
            }
        }
        if let Some(next) = next {
            scan.requeue_after(next);
        }
        scan
    }

    async fn execute(&self, name: String) -> Result<Action, CloudError> {
        let Some(claim) = self.ctx.cache.lock().node_claim(&name).cloned() else {
            return Ok(Action::AwaitChange);
        };
        if self.ctx.cloud.register(&claim).await? {
            tracing::info!(nodeclaim = %name, "kwok: the instance registered its Node");
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, _: &CloudError) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &String) -> &'static str {
        "register"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::v1::NodeClaim;
    use karpenter_state::Object;

    fn claim(name: &str, launched: &str) -> Object {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("kwok://{name}"), "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": launched}
            ]}
        }))
        .unwrap();
        Object::NodeClaim(claim)
    }

    #[test]
    fn a_node_is_due_the_delay_after_launch_unless_it_exists() {
        let mut cluster = Cluster::new();
        cluster.apply(claim("early", "2026-11-27T12:00:00Z"));
        cluster.apply(claim("late", "2026-11-27T12:00:50Z"));
        cluster.apply(claim("joined", "2026-11-27T12:00:00Z"));
        cluster.apply(Object::Node(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "joined"}, "spec": {"providerID": "kwok://joined"}
            }))
            .unwrap(),
        ));
        let now: DateTime<Utc> = "2026-11-27T12:01:00Z".parse().unwrap();
        let (ready, next) = due(&cluster, Duration::from_secs(30), now);
        assert_eq!(ready, ["early"]);
        assert_eq!(
            next,
            Some(Duration::from_secs(20)),
            "late is due at 12:01:20"
        );
    }
}
