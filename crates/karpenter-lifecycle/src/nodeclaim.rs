//! NodeClaims as upstream's `NodeClaimTemplate.ToNodeClaim` writes them, from the solver's
//! [`NewNodeClaim`] and the NodePool it came from.
//!
//! - `metadata.generateName: <nodepool>-` (the API server picks the suffix);
//! - labels: the NodePool template's labels, `karpenter.sh/nodepool`, the node-class label
//!   (`karpenter.k8s.aws/ec2nodeclass` for an EC2NodeClass), and the single-valued
//!   requirements the solver resolved;
//! - annotations: the template's, the NodePool hash and hash version (computed from the pool,
//!   as upstream does, not copied from its annotations),
//!   `karpenter.sh/nodeclaim-min-values-relaxed` when minValues were relaxed;
//!   `karpenter.sh/price-overlay-applied` / `capacity-overlay-applied` when a NodeOverlay
//!   changed one of its instance types ([`annotate_overlays`]);
//! - an owner reference to the NodePool (`blockOwnerDeletion`);
//! - requirements: the solver's, with `node.kubernetes.io/instance-type In [options]` (cheapest
//!   first, at most 600, keeping minValues);
//! - `resources.requests`: the pods' requests plus DaemonSet overhead;
//! - node class, taints, startup taints, `expireAfter` and `terminationGracePeriod` from the
//!   template.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::ResourceRequirements;
use karpenter_api::v1::{NodeClaim, NodeClaimSpec, NodePool, NodeSelectorRequirementWithMinValues};
use karpenter_scheduling::NewNodeClaim;

/// The label naming a NodeClaim's node class, for the node classes we know.
pub fn node_class_label(kind: &str) -> Option<&'static str> {
    (kind == "EC2NodeClass").then_some(labels::EC2NODECLASS)
}

/// Adds upstream's overlay annotations to `node_claim` (made for `claim`) when `overlays`
/// changed the price or the capacity of one of its instance-type options.
pub fn annotate_overlays(
    node_claim: &mut NodeClaim,
    claim: &NewNodeClaim,
    overlays: &karpenter_scheduling::overlay::Outcome,
) {
    let (price, capacity) = overlays.applied_to(
        &claim.node_pool,
        claim.instance_type_options.iter().map(|o| &*o.name),
    );
    for (applied, key) in [
        (price, labels::PRICE_OVERLAY_APPLIED),
        (capacity, labels::CAPACITY_OVERLAY_APPLIED),
    ] {
        if applied {
            node_claim
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_owned(), "true".to_owned());
        }
    }
}

/// The NodeClaim to create for `claim`, launched from `pool`.
pub fn node_claim(claim: &NewNodeClaim, pool: &NodePool) -> NodeClaim {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let template = &pool.spec.template;
    let mut node_labels: BTreeMap<String, String> =
        template.metadata.labels.clone().unwrap_or_default();
    node_labels.extend(claim.labels.clone());
    node_labels.insert(labels::NODEPOOL.to_owned(), pool_name.clone());
    if let Some(key) = node_class_label(&template.spec.node_class_ref.kind) {
        node_labels.insert(key.to_owned(), template.spec.node_class_ref.name.clone());
    }
    let mut annotations: BTreeMap<String, String> =
        template.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        labels::NODEPOOL_HASH.to_owned(),
        karpenter_api::hash::node_pool_hash(pool),
    );
    annotations.insert(
        labels::NODEPOOL_HASH_VERSION.to_owned(),
        labels::NODEPOOL_HASH_VERSION_VALUE.to_owned(),
    );
    if claim.min_values_relaxed {
        annotations.insert(
            labels::NODECLAIM_MIN_VALUES_RELAXED.to_owned(),
            "true".to_owned(),
        );
    }
    let requirements = claim
        .requirements_with_instance_types()
        .into_iter()
        .map(|r| NodeSelectorRequirementWithMinValues {
            key: r.key,
            operator: r.operator,
            values: r.values,
            min_values: r.min_values.and_then(|m| i32::try_from(m).ok()),
        })
        .collect();
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".to_owned(),
        kind: "NodePool".to_owned(),
        name: pool_name.clone(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{pool_name}-")),
            labels: Some(node_labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: template.spec.taints.clone(),
            startup_taints: template.spec.startup_taints.clone(),
            requirements,
            resources: Some(ResourceRequirements {
                requests: Some(claim.requests.to_k8s()),
            }),
            node_class_ref: template.spec.node_class_ref.clone(),
            termination_grace_period: template.spec.termination_grace_period.clone(),
            expire_after: template.spec.expire_after.clone(),
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::{
        InstanceTypeOption, Operator, Quantity as Q, RequirementSpec, ResourceList,
    };
    use pretty_assertions::assert_eq;

    fn pool() -> NodePool {
        let object = serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {
                "name": "general",
                "uid": "pool-uid",
                "annotations": {"karpenter.sh/nodepool-hash": "123", "karpenter.sh/nodepool-hash-version": "v3"}
            },
            "spec": {
                "template": {
                    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [],
                        "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                        "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
                        "expireAfter": "336h",
                        "terminationGracePeriod": "1h"
                    }
                }
            }
        });
        match serde_json::from_value(object) {
            Ok(pool) => pool,
            Err(e) => panic!("test NodePool parses: {e}"),
        }
    }

    fn new_claim() -> NewNodeClaim {
        let option = |name: &str, price: f64| InstanceTypeOption {
            name: name.into(),
            price,
        };
        NewNodeClaim {
            node_pool: "general".into(),
            requirements: vec![RequirementSpec::is_in(
                labels::CAPACITY_TYPE,
                &["on-demand", "spot"],
            )],
            instance_type_min_values: Some(2),
            instance_type_options: vec![option("m5.large", 0.096), option("m5.xlarge", 0.192)],
            requests: ResourceList::new()
                .with("cpu", Q::from_millis(1500))
                .with("pods", Q::from_units(3)),
            pods: Vec::new(),
            min_values_relaxed: true,
            labels: BTreeMap::from([("arch".to_owned(), "amd64".to_owned())]),
        }
    }

    #[test]
    fn a_node_claim_is_annotated_when_an_overlay_changed_one_of_its_instance_types() {
        use karpenter_scheduling::overlay::{Outcome, PriceOverlaid, TypeOverlaid};
        let claim = new_claim();
        let mut nc = node_claim(&claim, &pool());
        let mut outcome = Outcome::default();
        outcome.changed.insert(
            ("general".to_owned(), "m5.xlarge".to_owned()),
            TypeOverlaid {
                prices: vec![PriceOverlaid {
                    zone: "a".to_owned(),
                    capacity_type: "spot".to_owned(),
                    before: 1.0,
                    after: 0.5,
                    overlay: "o".to_owned(),
                }],
                capacity: BTreeMap::new(),
            },
        );
        // Another pool's change is not this claim's.
        outcome.changed.insert(
            ("other".to_owned(), "m5.large".to_owned()),
            TypeOverlaid {
                prices: Vec::new(),
                capacity: BTreeMap::from([(
                    "example.com/fuse".to_owned(),
                    (Q::from_units(1), "o".to_owned()),
                )]),
            },
        );
        annotate_overlays(&mut nc, &claim, &outcome);
        let annotations = nc.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations
                .get(labels::PRICE_OVERLAY_APPLIED)
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(annotations.get(labels::CAPACITY_OVERLAY_APPLIED), None);
    }

    #[test]
    fn a_node_claim_is_shaped_like_upstreams() {
        let nc = node_claim(&new_claim(), &pool());
        assert_eq!(nc.metadata.generate_name.as_deref(), Some("general-"));
        let labels = nc.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(labels.get("arch").map(String::as_str), Some("amd64"));
        assert_eq!(
            labels.get(labels::NODEPOOL).map(String::as_str),
            Some("general")
        );
        assert_eq!(
            labels.get(labels::EC2NODECLASS).map(String::as_str),
            Some("default")
        );
        let annotations = nc.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(labels::NODEPOOL_HASH),
            Some(&karpenter_api::hash::node_pool_hash(&pool())),
            "the hash is the pool's, not the stale annotation it carries"
        );
        assert_ne!(
            annotations.get(labels::NODEPOOL_HASH).map(String::as_str),
            Some("123")
        );
        assert_eq!(annotations.get("note").map(String::as_str), Some("x"));
        assert_eq!(
            annotations
                .get(labels::NODECLAIM_MIN_VALUES_RELAXED)
                .map(String::as_str),
            Some("true")
        );
        let owner = nc.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owner.len(), 1);
        assert_eq!(
            (owner[0].kind.as_str(), owner[0].uid.as_str()),
            ("NodePool", "pool-uid")
        );
        assert_eq!(owner[0].block_owner_deletion, Some(true));
        let types = nc
            .spec
            .requirements
            .iter()
            .find(|r| r.key == labels::INSTANCE_TYPE)
            .map(|r| (r.operator, r.values.clone(), r.min_values));
        assert_eq!(
            types,
            Some((
                Operator::In,
                vec!["m5.large".into(), "m5.xlarge".into()],
                Some(2)
            ))
        );
        let requests = nc
            .spec
            .resources
            .and_then(|r| r.requests)
            .unwrap_or_default();
        assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("1500m"));
        assert_eq!(requests.get("pods").map(|q| q.0.as_str()), Some("3"));
        assert_eq!(nc.spec.taints.len(), 1);
        assert_eq!(nc.spec.startup_taints.len(), 1);
        assert_eq!(nc.spec.expire_after.as_str(), "336h");
        assert_eq!(
            nc.spec
                .termination_grace_period
                .map(|d| d.as_str().to_owned()),
            Some("1h".to_owned())
        );
    }
}
