//! Garbage collection (upstream `nodeclaim.garbagecollection` and the AWS provider's instance
//! collector): what to remove when the cloud and the cluster disagree.
//!
//! - A launched NodeClaim whose instance the cloud no longer lists (terminated outside
//!   Karpenter, a spot reclaim missed by the queue) is deleted, once its launch is
//!   [`LAUNCH_GRACE`] old (a fresh launch may not be listed yet).
//! - An instance the cloud lists as ours (it carries `karpenter.sh/nodepool`) that no
//!   NodeClaim claims is terminated once [`LEAK_GRACE`] old (a launch in progress records its
//!   provider id on the NodeClaim within that time).
//! - A Node launched by Karpenter (`karpenter.sh/nodepool` label, a provider id) that no
//!   NodeClaim claims is deleted once [`LEAK_GRACE`] old; nodes Karpenter did not launch (a
//!   managed node group's) are never touched.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_state::conditions::from_api_time;

/// How old a launch must be before a missing instance counts (upstream: 10 s).
pub const LAUNCH_GRACE: chrono::Duration = chrono::Duration::seconds(10);
/// How old an unclaimed instance or Node must be before it counts as leaked (upstream: 30 s).
pub const LEAK_GRACE: chrono::Duration = chrono::Duration::seconds(30);

/// One thing to collect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collect {
    /// Delete this NodeClaim: its instance is gone.
    NodeClaim { name: String, provider_id: String },
    /// Terminate this instance (the cloud's view of it): nothing claims it.
    Instance { provider_id: String },
    /// Delete this Node: Karpenter launched it and nothing claims it.
    Node { name: String, provider_id: String },
}

fn provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref()?.provider_id.as_deref()
}

fn launched_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    claim
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == conditions::LAUNCHED && c.status == "True")
        .and_then(|c| from_api_time(&c.last_transition_time))
}

fn created(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<DateTime<Utc>> {
    meta.creation_timestamp.as_ref().and_then(from_api_time)
}

fn launched_by_karpenter(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::NODEPOOL))
}

/// What to collect, given the cluster's NodeClaims and Nodes and the cloud's instances (as
/// NodeClaim views with a provider id, labels and creation time), all read after `instances`
/// was listed.
pub fn collect<'a>(
    claims: &[&'a NodeClaim],
    nodes: &[&'a Node],
    instances: &[NodeClaim],
    now: DateTime<Utc>,
) -> Vec<Collect> {
    let listed: BTreeSet<&str> = instances.iter().filter_map(provider_id).collect();
    let claimed: BTreeSet<&str> = claims.iter().filter_map(|c| provider_id(c)).collect();
    let mut out = Vec::new();
    for claim in claims {
        let Some(id) = provider_id(claim) else {
            continue;
        };
        if claim.metadata.deletion_timestamp.is_some() || listed.contains(id) {
            continue;
        }
        if launched_at(claim).is_some_and(|at| now - at >= LAUNCH_GRACE) {
            out.push(Collect::NodeClaim {
                name: claim.metadata.name.clone().unwrap_or_default(),
                provider_id: id.to_owned(),
            });
        }
    }
    for instance in instances {
        let Some(id) = provider_id(instance) else {
            continue;
        };
        if claimed.contains(id) || !launched_by_karpenter(&instance.metadata) {
            continue;
        }
        if created(&instance.metadata).is_some_and(|at| now - at >= LEAK_GRACE) {
            out.push(Collect::Instance {
                provider_id: id.to_owned(),
            });
        }
    }
    for node in nodes {
        let node: &Node = node;
        let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) else {
            continue;
        };
        if claimed.contains(id)
            || node.metadata.deletion_timestamp.is_some()
            || !launched_by_karpenter(&node.metadata)
        {
            continue;
        }
        if created(&node.metadata).is_some_and(|at| now - at >= LEAK_GRACE) {
            out.push(Collect::Node {
                name: node.metadata.name.clone().unwrap_or_default(),
                provider_id: id.to_owned(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0)
            .single()
            .unwrap_or_default()
    }

    fn at(seconds_ago: i64) -> String {
        (now() - chrono::Duration::seconds(seconds_ago))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    fn claim(name: &str, id: &str, launched_ago: i64) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": id, "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": at(launched_ago)}
            ]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn instance(id: &str, created_ago: i64, ours: bool) -> NodeClaim {
        let labels = if ours {
            json!({"karpenter.sh/nodepool": "general"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": id, "labels": labels, "creationTimestamp": at(created_ago)},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": id}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn node(name: &str, id: &str, created_ago: i64, ours: bool) -> Node {
        let labels = if ours {
            json!({"karpenter.sh/nodepool": "general"})
        } else {
            json!({"eks.amazonaws.com/nodegroup": "system"})
        };
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": at(created_ago)},
            "spec": {"providerID": id}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_claim_whose_instance_is_gone_is_collected_after_the_launch_grace() {
        let claims = [
            claim("old", "aws:///a/i-1", 60),
            claim("fresh", "aws:///a/i-2", 3),
        ];
        let refs: Vec<&NodeClaim> = claims.iter().collect();
        let got = collect(&refs, &[], &[], now());
        assert_eq!(
            got,
            [Collect::NodeClaim {
                name: "old".into(),
                provider_id: "aws:///a/i-1".into()
            }]
        );
        let listed = [instance("aws:///a/i-1", 60, true)];
        assert!(
            collect(&refs[..1], &[], &listed, now()).is_empty(),
            "listed: kept"
        );
    }

    #[test]
    fn an_unclaimed_instance_of_ours_is_terminated_after_the_leak_grace_and_others_never() {
        let instances = [
            instance("aws:///a/i-leaked", 120, true),
            instance("aws:///a/i-launching", 5, true),
            instance("aws:///a/i-not-ours", 120, false),
            instance("aws:///a/i-claimed", 120, true),
        ];
        let claim = claim("c", "aws:///a/i-claimed", 100);
        assert_eq!(
            collect(&[&claim], &[], &instances, now()),
            [Collect::Instance {
                provider_id: "aws:///a/i-leaked".into()
            }]
        );
    }

    #[test]
    fn only_nodes_karpenter_launched_are_collected_when_nothing_claims_them() {
        let nodes = [
            node("orphan", "aws:///a/i-9", 120, true),
            node("nodegroup", "aws:///a/i-8", 120, false),
            node("young", "aws:///a/i-7", 5, true),
            node("claimed", "aws:///a/i-1", 120, true),
        ];
        let claim = claim("c", "aws:///a/i-1", 100);
        let listed = [instance("aws:///a/i-1", 100, true)];
        let nodes: Vec<&Node> = nodes.iter().collect();
        assert_eq!(
            collect(&[&claim], &nodes, &listed, now()),
            [Collect::Node {
                name: "orphan".into(),
                provider_id: "aws:///a/i-9".into()
            }]
        );
    }
}
