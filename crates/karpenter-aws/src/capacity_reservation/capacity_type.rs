//! Capacity-type label sync (upstream v1.15.1's `capacityreservation.capacitytype`
//! controller): when a reservation expires or is cancelled, EC2 keeps its instances running as
//! on-demand ones; the NodeClaim and its Node then still say `karpenter.sh/capacity-type:
//! reserved`. Once the cloud lists the instance as `on-demand`, the NodeClaim and its
//! registered Node are relabelled: `karpenter.sh/capacity-type` becomes `on-demand` and the
//! reservation labels upstream registers as reserved-capacity labels
//! (`karpenter.k8s.aws/capacity-reservation-id` and `-type`) go.
//!
//! Owns: [`relabels`] (which objects to relabel) and [`patch`] (the metadata merge patch).
//! Only the reserved -> on-demand demotion is made, as upstream: Karpenter never promotes an
//! instance into a reservation. NodeClaims and Nodes being deleted are left alone (they are
//! draining), and so are Nodes not yet registered (their labels are still being synced).
//!
//! Must not: read the clock, list instances or write anything.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels::{
    CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED, REGISTERED,
};
use karpenter_api::v1::NodeClaim;

/// The labels removed on a demotion (upstream's `cloudprovider.ReservedCapacityLabels`, which
/// the AWS provider fills with these two; the `-interruptible` label stays, as upstream).
pub const RESERVATION_LABELS: [&str; 2] = [CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE];

/// An object to relabel.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Relabel {
    NodeClaim(String),
    /// A Node, with the NodeClaim it belongs to (for the log).
    Node {
        name: String,
        node_claim: String,
    },
}

/// The merge patch of `metadata` for a demotion: capacity type `on-demand`, reservation
/// labels removed.
pub fn patch() -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    labels.insert(CAPACITY_TYPE.to_owned(), CAPACITY_TYPE_ON_DEMAND.into());
    for label in RESERVATION_LABELS {
        labels.insert(label.to_owned(), serde_json::Value::Null);
    }
    serde_json::json!({ "labels": labels })
}

fn label<'a>(labels: Option<&'a std::collections::BTreeMap<String, String>>, key: &str) -> &'a str {
    labels.and_then(|l| l.get(key)).map_or("", String::as_str)
}

/// What to relabel: `listed` is the cloud's capacity type per provider id (its instances as it
/// lists them); a NodeClaim whose instance it lists `on-demand` is demoted when it says
/// `reserved`, and so is each of its registered Nodes (matched by provider id) that does.
pub fn relabels<'a>(
    listed: &HashMap<String, String>,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    nodes: impl IntoIterator<Item = &'a Node>,
) -> Vec<Relabel> {
    let mut nodes_by_provider: HashMap<&str, Vec<&Node>> = HashMap::new();
    for node in nodes {
        if let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
            nodes_by_provider.entry(id).or_default().push(node);
        }
    }
    let mut out = Vec::new();
    for claim in claims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (Some(name), Some(provider_id)) = (
            claim.metadata.name.as_deref(),
            claim.status.as_ref().and_then(|s| s.provider_id.as_deref()),
        ) else {
            continue;
        };
        if listed.get(provider_id).map(String::as_str) != Some(CAPACITY_TYPE_ON_DEMAND) {
            continue;
        }
        if label(claim.metadata.labels.as_ref(), CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED {
            out.push(Relabel::NodeClaim(name.to_owned()));
        }
        for node in nodes_by_provider.get(provider_id).into_iter().flatten() {
            let labels = node.metadata.labels.as_ref();
            if node.metadata.deletion_timestamp.is_some()
                || label(labels, REGISTERED) != "true"
                || label(labels, CAPACITY_TYPE) != CAPACITY_TYPE_RESERVED
            {
                continue;
            }
            if let Some(node_name) = node.metadata.name.as_deref() {
                out.push(Relabel::Node {
                    name: node_name.to_owned(),
                    node_claim: name.to_owned(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: &str = "aws:///us-west-2a/i-0123456789abcdef0";

    fn claim(name: &str, capacity_type: &str) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {
                CAPACITY_TYPE: capacity_type,
                CAPACITY_RESERVATION_ID: "cr-1", CAPACITY_RESERVATION_TYPE: "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []},
            "status": {"providerID": PID}
        }))
        .expect("a NodeClaim")
    }

    fn node(name: &str, capacity_type: &str, registered: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {
                CAPACITY_TYPE: capacity_type,
                REGISTERED: if registered { "true" } else { "false" }}},
            "spec": {"providerID": PID}
        }))
        .expect("a Node")
    }

    fn listed(capacity_type: &str) -> HashMap<String, String> {
        HashMap::from([(PID.to_owned(), capacity_type.to_owned())])
    }

    #[test]
    fn a_reserved_claim_and_its_node_whose_instance_fell_back_to_on_demand_are_relabelled() {
        let claims = [claim("c", "reserved")];
        let nodes = [node("n", "reserved", true)];
        assert_eq!(
            relabels(&listed("on-demand"), &claims, &nodes),
            vec![
                Relabel::NodeClaim("c".into()),
                Relabel::Node {
                    name: "n".into(),
                    node_claim: "c".into()
                }
            ]
        );
    }

    #[test]
    fn an_instance_still_reserved_or_unlisted_changes_nothing() {
        let claims = [claim("c", "reserved")];
        let nodes = [node("n", "reserved", true)];
        assert_eq!(relabels(&listed("reserved"), &claims, &nodes), vec![]);
        assert_eq!(relabels(&HashMap::new(), &claims, &nodes), vec![]);
        // Never a promotion, and never a spot instance.
        let claims = [claim("c", "on-demand")];
        assert_eq!(relabels(&listed("reserved"), &claims, &[]), vec![]);
        let claims = [claim("c", "spot")];
        assert_eq!(relabels(&listed("on-demand"), &claims, &[]), vec![]);
    }

    #[test]
    fn deleting_claims_and_unregistered_or_deleting_nodes_are_left_alone() {
        let mut deleting = claim("c", "reserved");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(0).expect("a time"),
            ));
        let nodes = [node("n", "reserved", true)];
        assert_eq!(relabels(&listed("on-demand"), [&deleting], &nodes), vec![]);
        let claims = [claim("c", "reserved")];
        let mut gone = node("gone", "reserved", true);
        gone.metadata.deletion_timestamp = deleting.metadata.deletion_timestamp.clone();
        let nodes = [node("unregistered", "reserved", false), gone];
        assert_eq!(
            relabels(&listed("on-demand"), &claims, &nodes),
            vec![Relabel::NodeClaim("c".into())]
        );
        // A claim already relabelled whose Node was registered after still has its Node done.
        let claims = [claim("c", "on-demand")];
        let nodes = [node("late", "reserved", true)];
        assert_eq!(
            relabels(&listed("on-demand"), &claims, &nodes),
            vec![Relabel::Node {
                name: "late".into(),
                node_claim: "c".into()
            }]
        );
    }

    #[test]
    fn the_patch_sets_on_demand_and_removes_the_reservation_id_and_type() {
        assert_eq!(
            patch(),
            serde_json::json!({"labels": {
                "karpenter.sh/capacity-type": "on-demand",
                "karpenter.k8s.aws/capacity-reservation-id": null,
                "karpenter.k8s.aws/capacity-reservation-type": null,
            }})
        );
    }
}
