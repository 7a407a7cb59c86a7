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

/// Objects listed per request: the API server pages a list by this many, so a big cluster is
/// never one response held whole (10,000 pods are ~80 MB of JSON).
const PAGE: u32 = 500;

/// Applies `object` to the index, keeping what the controller's index keeps of it
/// ([`karpenter_state::slim`]): a listed pod is mostly fields nothing shown reads.
fn apply(cluster: &mut Cluster, mut object: Object) {
    karpenter_state::slim::slim(&mut object);
    cluster.apply(object);
}

/// Hands every `kind` object of the cluster to `each`, page by page.
async fn each<K>(
    client: &kube::Client,
    kind: &'static str,
    mut each: impl FnMut(K),
) -> Result<(), ListError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| ListError { kind, source })?;
        page.items.into_iter().for_each(&mut each);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Lists Nodes, NodeClaims, Pods and NodePools. A cluster without Karpenter's CRDs lists no
/// NodeClaims or NodePools (their list fails with 404 and counts as empty).
pub async fn list(client: &kube::Client) -> Result<Listed, ListError> {
    let mut listed = Listed::default();
    let not_installed =
        |e: &ListError| matches!(&e.source, kube::Error::Api(status) if status.code == 404);
    let cluster = &mut listed.cluster;
    each::<Node>(client, "Nodes", |node| {
        apply(cluster, Object::Node(node));
    })
    .await?;
    match each::<NodeClaim>(client, "NodeClaims", |c| {
        apply(cluster, Object::NodeClaim(c));
    })
    .await
    {
        Err(e) if !not_installed(&e) => return Err(e),
        _ => {}
    }
    match each::<NodePool>(client, "NodePools", |p| {
        apply(cluster, Object::NodePool(p));
    })
    .await
    {
        Err(e) if !not_installed(&e) => return Err(e),
        _ => {}
    }
    let scheduling = &mut listed.scheduling;
    each::<Pod>(client, "Pods", |pod| {
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
            scheduling.insert(key, message);
        }
        apply(cluster, Object::Pod(pod));
    })
    .await?;
    Ok(listed)
}
