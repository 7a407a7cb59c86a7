//! Instance memory learned from registered nodes (`--cloud-provider aws`, upstream's
//! `providers.instancetype.capacity`): the `status.capacity.memory` of every registered Node
//! of an EC2NodeClass is handed to the provider ([`AwsCloud::learn_node_memory`]), which keeps
//! the smallest per instance type and AMIs and lists that type with it from then on
//! (`karpenter_aws::discovered_capacity`).
//!
//! Each Node is handed over once per (memory, image, class AMIs): at start for the Nodes
//! already registered (upstream hydrates its cache the same way) and when one registers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::conditions::is_true;
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::conditions::REGISTERED;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::discovered_capacity::amis_key;
use karpenter_aws_provider::{AwsCloud, NodeClasses};
use karpenter_scheduling::Quantity;
use karpenter_state::Cluster;

use crate::reconcile::cloud::MeteredCloud;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};

/// How often the loop looks again without a change.
const RESYNC: Duration = Duration::from_secs(300);

/// What one registered node says, and what it is remembered by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub node: String,
    pub class: String,
    pub labels: BTreeMap<String, String>,
    pub memory_bytes: i64,
    pub image_id: String,
    /// (memory, image, class AMIs): a node is handed over again only when one changes.
    seen: (i64, String, u64),
}

/// The loop.
#[derive(Debug)]
pub struct DiscoveredCapacity<L> {
    pub ctx: Context<MeteredCloud<AwsCloud<L>>>,
    seen: Mutex<HashMap<String, (i64, String, u64)>>,
}

impl<L> DiscoveredCapacity<L> {
    pub fn new(ctx: Context<MeteredCloud<AwsCloud<L>>>) -> Self {
        DiscoveredCapacity {
            ctx,
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn seen(&self) -> MutexGuard<'_, HashMap<String, (i64, String, u64)>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The report of a registered NodeClaim's Node of `class`; `None` when there is nothing to
/// learn from (not registered, no Node, no memory or image).
pub fn report(claim: &NodeClaim, node: &Node, class: &EC2NodeClass) -> Option<Report> {
    if claim.spec.node_class_ref.kind != "EC2NodeClass" {
        return None;
    }
    let status = claim.status.as_ref()?;
    if !is_true(status.conditions.as_deref(), REGISTERED) {
        return None;
    }
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    if node_labels.get(labels::REGISTERED).map(String::as_str) != Some("true") {
        return None;
    }
    let memory = node
        .status
        .as_ref()?
        .capacity
        .as_ref()?
        .get(labels::RESOURCE_MEMORY)?;
    let memory_bytes = i64::try_from(Quantity::parse(&memory.0).ok()?.value()).ok()?;
    let image_id = status.image_id.clone()?;
    let amis = class
        .status
        .as_ref()
        .and_then(|s| s.amis.as_deref())
        .unwrap_or_default();
    Some(Report {
        node: node.metadata.name.clone()?,
        class: class.metadata.name.clone()?,
        labels: node_labels,
        memory_bytes,
        seen: (memory_bytes, image_id.clone(), amis_key(amis)),
        image_id,
    })
}

/// Hand the reports over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learn(pub Vec<Report>);

impl<L: NodeClasses + 'static> Reconciler for DiscoveredCapacity<L> {
    type Step = Learn;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "providers.instancetype.capacity";

    fn shape(&self) -> Shape {
        Shape::new(Duration::from_secs(1), RESYNC)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Learn> {
        let mut scan = Scan::new();
        if busy.contains(Self::NAME) {
            return scan;
        }
        let mut seen = self.seen();
        seen.retain(|node, _| cluster.node(node).is_some());
        let reports: Vec<Report> = cluster
            .node_claims()
            .filter_map(|claim| {
                let node = cluster.node(claim.status.as_ref()?.node_name.as_deref()?)?;
                let class = cluster.node_class(&claim.spec.node_class_ref.name)?;
                report(claim, node, class)
            })
            .filter(|r| seen.get(&r.node) != Some(&r.seen))
            .collect();
        if !reports.is_empty() {
            scan.step(Self::NAME, Learn(reports));
        }
        scan
    }

    async fn execute(&self, Learn(reports): Learn) -> Result<Action, std::convert::Infallible> {
        for report in reports {
            // The class as the provider reads it now (its AMIs are the key).
            let class = self.ctx.cache.lock().node_class(&report.class).cloned();
            if let Some(class) = class {
                self.ctx.cloud.inner().learn_node_memory(
                    &class,
                    &report.labels,
                    report.memory_bytes,
                    &report.image_id,
                );
            }
            self.seen().insert(report.node, report.seen);
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Learn) -> &'static str {
        "learn"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(registered: bool) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []},
            "status": {"providerID": "aws:///us-west-2a/i-0abc", "nodeName": "n", "imageID": "ami-1",
                       "conditions": [{"type": "Registered", "status": if registered {"True"} else {"Unknown"},
                                       "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn node(memory: Option<&str>) -> Node {
        let mut status = json!({});
        if let Some(memory) = memory {
            status = json!({"capacity": {"memory": memory}});
        }
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {
                "karpenter.sh/registered": "true",
                "node.kubernetes.io/instance-type": "m5.large"}},
            "status": status
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn class() -> EC2NodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
            "status": {"amis": [{"id": "ami-1", "requirements": []}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_registered_nodes_memory_is_reported_with_its_image_and_labels() {
        let found = report(&claim(true), &node(Some("7910348Ki")), &class());
        let found = found.unwrap_or_else(|| panic!("a report"));
        assert_eq!(found.memory_bytes, 7_910_348 * 1024);
        assert_eq!(found.image_id, "ami-1");
        assert_eq!(
            found.labels.get(labels::INSTANCE_TYPE).map(String::as_str),
            Some("m5.large")
        );
        assert_eq!(found.class, "default");
    }

    #[test]
    fn nodes_not_registered_or_without_memory_report_nothing() {
        assert_eq!(
            report(&claim(false), &node(Some("7910348Ki")), &class()),
            None
        );
        assert_eq!(report(&claim(true), &node(None), &class()), None);
    }
}
