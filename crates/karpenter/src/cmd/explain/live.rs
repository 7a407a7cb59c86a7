//! `karpenter explain --no-controller`: the answers recomputed from the live cluster, without
//! asking the controller. The objects the controller watches are listed through the kubeconfig
//! (`--kubeconfig`, `--context`), read only, into the same [`Manifests`] an export loads into,
//! and answered as `-f` answers them ([`super::offline`]): the controller's cluster index, one
//! provisioning solve and one disruption pass at now.
//!
//! What only the controller knows is not known here (each said in a note): the instance types
//! and prices EC2 described to it (the embedded catalog stands in, as for `simulate`), the
//! offerings it marked unavailable after insufficient capacity, why it launched each node, and
//! the commands it holds for validation.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_sim::Manifests;
use karpenter_sim::workload::Workload;
use karpenter_state::slim::{slim_meta, slim_node, slim_pod};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

/// Objects listed per request (the API server pages a list by this many).
const PAGE: u32 = 500;

/// What the listing took: objects and time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub objects: usize,
    pub took: Duration,
}

/// Every object the answers read, listed from the cluster of `client`.
pub async fn manifests(client: &kube::Client) -> anyhow::Result<(Manifests, Listing)> {
    let started = Instant::now();
    let mut manifests = Manifests {
        node_pools: list::<NodePool>(client, "NodePools").await?,
        node_classes: optional(list::<EC2NodeClass>(client, "EC2NodeClasses").await)?,
        node_overlays: optional(list::<NodeOverlay>(client, "NodeOverlays").await)?,
        node_claims: list::<NodeClaim>(client, "NodeClaims").await?,
        nodes: list_slim::<Node>(client, "Nodes", slim_node).await?,
        daemonsets: list::<DaemonSet>(client, "DaemonSets").await?,
        pod_disruption_budgets: list::<PodDisruptionBudget>(client, "PodDisruptionBudgets").await?,
        persistent_volume_claims: list::<PersistentVolumeClaim>(client, "PersistentVolumeClaims")
            .await?,
        persistent_volumes: list::<PersistentVolume>(client, "PersistentVolumes").await?,
        storage_classes: list::<StorageClass>(client, "StorageClasses").await?,
        namespaces: list::<Namespace>(client, "Namespaces").await?,
        ..Manifests::default()
    };
    manifests.workloads = list_slim::<Pod>(client, "Pods", slim_pod)
        .await?
        .into_iter()
        .map(|pod| Workload::Pod(Box::new(pod)))
        .collect();
    let objects = manifests.node_pools.len()
        + manifests.node_classes.len()
        + manifests.node_overlays.len()
        + manifests.node_claims.len()
        + manifests.nodes.len()
        + manifests.daemonsets.len()
        + manifests.pod_disruption_budgets.len()
        + manifests.persistent_volume_claims.len()
        + manifests.persistent_volumes.len()
        + manifests.storage_classes.len()
        + manifests.namespaces.len()
        + manifests.workloads.len();
    Ok((
        manifests,
        Listing {
            objects,
            took: started.elapsed(),
        },
    ))
}

/// Every `kind` object of the cluster (all namespaces), page by page, each reduced by `slim`
/// as it arrives ([`karpenter_state::slim`]: what the controller's index keeps).
async fn list_slim<K>(client: &kube::Client, kind: &str, slim: fn(&mut K)) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let mut items = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|e| listing_error(kind, e))?;
        // Only what the index keeps, page by page: what no answer reads (managed fields,
        // images, env, container statuses, ...) is most of a listed pod's size.
        items.extend(page.items.into_iter().map(|mut item| {
            slim(&mut item);
            item
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// [`list_slim`] keeping what the index keeps of any object's metadata.
async fn list<K>(client: &kube::Client, kind: &str) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    list_slim(client, kind, |o: &mut K| slim_meta(o.meta_mut())).await
}

/// Listing `kind` failed: what the user can do about it.
fn listing_error(kind: &str, error: kube::Error) -> anyhow::Error {
    let hint = match &error {
        kube::Error::Api(status) if status.code == 403 => {
            " (no RBAC to list them: the answers need read access to the objects the controller watches)"
        }
        kube::Error::Api(status) if status.code == 404 => {
            " (the API server does not serve them: are Karpenter's CRDs installed?)"
        }
        _ => "",
    };
    anyhow::Error::new(error).context(format!("listing the cluster's {kind}{hint}"))
}

/// An optional kind (a CRD the cluster may not have): none when the API server does not
/// serve it.
fn optional<K>(listed: anyhow::Result<Vec<K>>) -> anyhow::Result<Vec<K>> {
    match listed {
        Err(error)
            if error
                .downcast_ref::<kube::Error>()
                .is_some_and(|e| matches!(e, kube::Error::Api(s) if s.code == 404)) =>
        {
            Ok(Vec::new())
        }
        other => other,
    }
}

/// The listing, read from `kubeconfig`, with a runtime of its own.
pub fn read(
    kubeconfig: &karpenter_controller::explain::client::Kubeconfig,
) -> anyhow::Result<(Manifests, Listing)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let client = kubeconfig
            .client()
            .await
            .context("a client for the cluster (--kubeconfig, --context)")?;
        manifests(&client).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": code, "message": "pods is forbidden", "reason": "Forbidden"
        }))
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_denied_list_names_the_kind_and_the_access_it_needs() {
        let message = format!("{:#}", listing_error("Pods", api_error(403)));
        assert!(
            message.starts_with("listing the cluster's Pods (no RBAC"),
            "{message}"
        );
        assert!(message.contains("pods is forbidden"), "{message}");
    }

    #[test]
    fn an_unserved_optional_kind_is_none_and_an_unserved_required_one_an_error() {
        let unserved: anyhow::Result<Vec<NodeOverlay>> =
            Err(listing_error("NodeOverlays", api_error(404)));
        assert!(optional(unserved).is_ok_and(|v| v.is_empty()));
        let denied: anyhow::Result<Vec<NodeOverlay>> =
            Err(listing_error("NodeOverlays", api_error(403)));
        assert!(optional(denied).is_err());
        let message = format!("{:#}", listing_error("NodePools", api_error(404)));
        assert!(message.contains("CRDs installed"), "{message}");
    }
}
