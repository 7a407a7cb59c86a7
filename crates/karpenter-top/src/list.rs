//! Reading the cluster: one list of each kind the view reads, fed to a fresh index.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_state::Cluster;
use karpenter_state::object::Object;
use kube::api::{Api, ListParams};

/// A list call failed (RBAC, the API server unreachable, a CRD not installed).
#[derive(Debug, thiserror::Error)]
#[error("listing {kind}")]
pub struct ListError {
    pub kind: &'static str,
    #[source]
    pub source: kube::Error,
}

/// The index, and what it does not keep that the view shows: each pending pod's
/// `PodScheduled` message (kube-scheduler's reason), by `namespace/name`.
#[derive(Debug, Default)]
pub struct Listed {
    pub cluster: Cluster,
    pub scheduling: BTreeMap<String, String>,
}

async fn all<K>(client: &kube::Client, kind: &'static str) -> Result<Vec<K>, ListError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|source| ListError { kind, source })
}

/// Lists Nodes, NodeClaims, Pods and NodePools. A cluster without Karpenter's CRDs lists no
/// NodeClaims or NodePools (their list fails with 404 and counts as empty).
pub async fn list(client: &kube::Client) -> Result<Listed, ListError> {
    let mut listed = Listed::default();
    let not_installed =
        |e: &ListError| matches!(&e.source, kube::Error::Api(status) if status.code == 404);
    for node in all::<Node>(client, "Nodes").await? {
        listed.cluster.apply(Object::Node(node));
    }
    match all::<NodeClaim>(client, "NodeClaims").await {
        Ok(claims) => claims
            .into_iter()
            .for_each(|c| listed.cluster.apply(Object::NodeClaim(c))),
        Err(e) if not_installed(&e) => {}
        Err(e) => return Err(e),
    }
    match all::<NodePool>(client, "NodePools").await {
        Ok(pools) => pools
            .into_iter()
            .for_each(|p| listed.cluster.apply(Object::NodePool(p))),
        Err(e) if not_installed(&e) => {}
        Err(e) => return Err(e),
    }
    for pod in all::<Pod>(client, "Pods").await? {
        let unbound = pod.spec.as_ref().is_none_or(|s| s.node_name.is_none());
        if unbound
            && let Some(message) = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| {
                    c.iter()
                        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                })
                .and_then(|c| c.message.clone())
        {
            let key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            listed.scheduling.insert(key, message);
        }
        listed.cluster.apply(Object::Pod(pod));
    }
    Ok(listed)
}
