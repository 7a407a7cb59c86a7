//! Reading the cluster: one list of each kind the view reads, fed to a fresh index, and
//! Karpenter's newest events.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
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

/// The events `top` keeps, at most: the newest of Karpenter's.
pub const EVENTS_KEPT: usize = 200;

/// The reporting controller of Karpenter's events (upstream's and this controller's name).
pub const REPORTING_CONTROLLER: &str = "karpenter";

/// The index, and what it does not keep that the view shows: each pending pod's
/// `PodScheduled` message (kube-scheduler's reason), by `namespace/name`, and Karpenter's
/// events.
#[derive(Debug, Default)]
pub struct Listed {
    pub cluster: Cluster,
    pub scheduling: BTreeMap<String, String>,
    /// Karpenter's events (`events.k8s.io/v1`, `reportingController: karpenter`), newest first
    /// ([`crate::seen::last_seen`]), at most [`EVENTS_KEPT`].
    pub events: Vec<Event>,
    /// Why the events could not be listed (e.g. RBAC); the rest of the list stands.
    pub events_problem: Option<String>,
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

/// Hands every `kind` object `params` selects to `each`, page by page.
async fn each<K>(
    client: &kube::Client,
    kind: &'static str,
    params: ListParams,
    mut each: impl FnMut(K),
) -> Result<(), ListError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let mut params = params.limit(PAGE);
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

/// Keeps the newest [`EVENTS_KEPT`] of `events`, newest first.
fn keep_newest(events: &mut Vec<Event>) {
    events.sort_by_key(|e| std::cmp::Reverse(crate::seen::last_seen(e)));
    events.truncate(EVENTS_KEPT);
}

/// Adds `event` to `kept`, trimming to the newest once twice as many are held, so a cluster's
/// thousands of events are never all kept.
fn keep(kept: &mut Vec<Event>, event: Event) {
    kept.push(event);
    if kept.len() >= 2 * EVENTS_KEPT {
        keep_newest(kept);
    }
}

/// Karpenter's events, newest first, at most [`EVENTS_KEPT`], a page at a time. The API
/// server selects them (`reportingController=karpenter`, a field `events.k8s.io/v1` Events
/// can be selected by); one that refuses the selector (400) is asked for every event, and
/// Karpenter's are kept here.
async fn events(client: &kube::Client) -> Result<Vec<Event>, ListError> {
    let selector = format!("reportingController={REPORTING_CONTROLLER}");
    let mut kept = Vec::new();
    let selected = each::<Event>(
        client,
        "Events",
        ListParams::default().fields(&selector),
        |e| keep(&mut kept, e),
    )
    .await;
    match selected {
        Err(e) if matches!(&e.source, kube::Error::Api(status) if status.code == 400) => {
            kept.clear();
            each::<Event>(client, "Events", ListParams::default(), |e| {
                if e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER) {
                    keep(&mut kept, e);
                }
            })
            .await?;
        }
        other => other?,
    }
    keep_newest(&mut kept);
    Ok(kept)
}

/// Lists Nodes, NodeClaims, Pods and NodePools, and Karpenter's events. A cluster without
/// Karpenter's CRDs lists no NodeClaims or NodePools (their list fails with 404 and counts as
/// empty); events that cannot be listed are told in [`Listed::events_problem`].
pub async fn list(client: &kube::Client) -> Result<Listed, ListError> {
    let mut listed = Listed::default();
    let not_installed =
        |e: &ListError| matches!(&e.source, kube::Error::Api(status) if status.code == 404);
    let cluster = &mut listed.cluster;
    each::<Node>(client, "Nodes", ListParams::default(), |node| {
        apply(cluster, Object::Node(node));
    })
    .await?;
    match each::<NodeClaim>(client, "NodeClaims", ListParams::default(), |c| {
        apply(cluster, Object::NodeClaim(c));
    })
    .await
    {
        Err(e) if !not_installed(&e) => return Err(e),
        _ => {}
    }
    match each::<NodePool>(client, "NodePools", ListParams::default(), |p| {
        apply(cluster, Object::NodePool(p));
    })
    .await
    {
        Err(e) if !not_installed(&e) => return Err(e),
        _ => {}
    }
    let scheduling = &mut listed.scheduling;
    each::<Pod>(client, "Pods", ListParams::default(), |pod| {
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
    match events(client).await {
        Ok(events) => listed.events = events,
        Err(e) => {
            listed.events_problem = Some(format!("{e}: {}", e.source));
        }
    }
    Ok(listed)
}
