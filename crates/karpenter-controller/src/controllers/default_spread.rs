//! The lookups behind `SCHEDULER_CONFIG`'s default topology spread constraints: for pods
//! without spread constraints of their own, the Services of their namespace and their
//! controller (ReplicationController, ReplicaSet, StatefulSet), read once per batch, so
//! [`karpenter_scheduling::default_spread`] can deduce each pod's selector as the
//! kube-scheduler does. A failed lookup (a controller gone, a Service list the RBAC does not
//! allow) leaves that part out, as upstream does.
//!
//! Provisioning applies them to the pending pods; disruption ([`inject_snapshot`]) to every pod
//! its simulation may move (the pods of the nodes and the pending ones), as upstream's scheduler
//! does for both.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::default_spread::{
    OwnerContribution, applies_to, default_selector, with_defaults,
};
use kube::Client;
use kube::api::{Api, ListParams};

/// What two pods share when they deduce the same selector: namespace, controller uid, labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SelectorKey {
    namespace: String,
    owner: Option<String>,
    labels: BTreeMap<String, String>,
}

impl SelectorKey {
    pub fn of(pod: &PodRecord) -> SelectorKey {
        SelectorKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            owner: controller(pod).map(|o| o.uid.clone()),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
        }
    }
}

fn controller(
    pod: &PodRecord,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Each distinct pod shape's deduced selector (`None`: nothing deduced, the pod stays as it
/// is), for the `pods` the defaults apply to.
pub async fn selectors(
    client: &Client,
    pods: &[Arc<PodRecord>],
) -> HashMap<SelectorKey, Option<LabelSelector>> {
    let mut services: HashMap<String, Vec<Option<BTreeMap<String, String>>>> = HashMap::new();
    let mut owners: HashMap<String, Option<OwnerContribution>> = HashMap::new();
    let mut out = HashMap::new();
    for pod in pods.iter().filter(|p| applies_to(p)) {
        let key = SelectorKey::of(pod);
        if out.contains_key(&key) {
            continue;
        }
        if !services.contains_key(&key.namespace) {
            let listed = Api::<Service>::namespaced(client.clone(), &key.namespace)
                .list(&ListParams::default())
                .await;
            let selectors = match listed {
                Ok(list) => list
                    .items
                    .into_iter()
                    .map(|s| s.spec.and_then(|spec| spec.selector))
                    .collect(),
                Err(error) => {
                    tracing::debug!(namespace = %key.namespace, %error, "Services left out of default spread selectors");
                    Vec::new()
                }
            };
            services.insert(key.namespace.clone(), selectors);
        }
        let owner = match controller(pod) {
            Some(reference) => {
                if !owners.contains_key(&reference.uid) {
                    let resolved = owner_contribution(client, &key.namespace, reference).await;
                    owners.insert(reference.uid.clone(), resolved);
                }
                owners.get(&reference.uid).cloned().flatten()
            }
            None => None,
        };
        let namespace_services: Vec<Option<&BTreeMap<String, String>>> = services
            .get(&key.namespace)
            .into_iter()
            .flatten()
            .map(Option::as_ref)
            .collect();
        let selector = default_selector(&key.labels, &namespace_services, owner.as_ref());
        out.insert(key, selector);
    }
    out
}

async fn owner_contribution(
    client: &Client,
    namespace: &str,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Option<OwnerContribution> {
    let lookup = match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            Api::<ReplicationController>::namespaced(client.clone(), namespace)
                .get(&owner.name)
                .await
                .map(|rc| {
                    rc.spec
                        .and_then(|s| s.selector)
                        .filter(|s| !s.is_empty())
                        .map(OwnerContribution::Labels)
                })
        }
        ("apps/v1", "ReplicaSet") => Api::<ReplicaSet>::namespaced(client.clone(), namespace)
            .get(&owner.name)
            .await
            .map(|rs| Some(OwnerContribution::from_selector(&rs.spec.selector))),
        ("apps/v1", "StatefulSet") => Api::<StatefulSet>::namespaced(client.clone(), namespace)
            .get(&owner.name)
            .await
            .map(|ss| Some(OwnerContribution::from_selector(&ss.spec.selector))),
        _ => return None,
    };
    match lookup {
        Ok(contribution) => contribution,
        Err(error) => {
            tracing::debug!(owner = %owner.name, kind = %owner.kind, %error, "owner left out of a default spread selector");
            None
        }
    }
}

/// `pods` with the default constraints where they apply and a selector was deduced.
pub fn apply(
    pods: Vec<Arc<PodRecord>>,
    defaults: &[TopologySpreadConstraint],
    selectors: &HashMap<SelectorKey, Option<LabelSelector>>,
) -> Vec<Arc<PodRecord>> {
    if defaults.is_empty() {
        return pods;
    }
    pods.into_iter()
        .map(|pod| {
            if !applies_to(&pod) {
                return pod;
            }
            match selectors.get(&SelectorKey::of(&pod)) {
                Some(Some(selector)) => Arc::new(with_defaults(&pod, defaults, selector)),
                _ => pod,
            }
        })
        .collect()
}

/// `snapshot` with the default constraints on every pod the disruption simulation may
/// reschedule: the nodes' pods and the pending ones. The selectors are looked up once for the
/// snapshot (one per pod shape, see [`selectors`]).
pub async fn inject_snapshot(
    client: &Client,
    defaults: &[TopologySpreadConstraint],
    mut snapshot: karpenter_disruption::Snapshot,
) -> karpenter_disruption::Snapshot {
    if defaults.is_empty() {
        return snapshot;
    }
    let pods: Vec<Arc<PodRecord>> = snapshot
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter().cloned())
        .chain(snapshot.pending_pods.iter().cloned())
        .collect();
    let selectors = selectors(client, &pods).await;
    for node in &mut snapshot.nodes {
        node.pods = apply(std::mem::take(&mut node.pods), defaults, &selectors);
    }
    snapshot.pending_pods = apply(
        std::mem::take(&mut snapshot.pending_pods),
        defaults,
        &selectors,
    );
    snapshot
}
