//! Reading the cluster: one list of each kind the view reads, fed to a fresh index, and
//! Karpenter's newest events; and how one change (a watch event, a relist) updates what was
//! listed ([`Listed::apply`], [`Listed::delete`], [`Listed::reset`] and their events' twins),
//! so a list followed by changes keeps the same [`Listed`] a fresh list of the end state gives.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_state::object::{Kind, Object, ObjectRef};
use karpenter_state::{Cluster, slim};
use kube::api::{Api, ListParams};

/// A list call failed (RBAC, the API server unreachable, a CRD not installed).
#[derive(Debug, thiserror::Error)]
#[error("listing {kind}")]
pub struct ListError {
    pub kind: &'static str,
    #[source]
    pub source: kube::Error,
}

impl ListError {
    /// The kind's CRD is not installed (404): it counts as empty.
    pub fn not_installed(&self) -> bool {
        matches!(&self.source, kube::Error::Api(status) if status.code == 404)
    }
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

/// An object as the view keeps it: slimmed the way the controller's index keeps it
/// ([`karpenter_state::slim`]: a listed pod is mostly fields nothing shown reads), with what
/// slimming drops that the view shows: an unbound pod's `PodScheduled` message.
#[derive(Debug, Clone)]
pub struct Kept {
    object: Object,
    scheduling: Option<String>,
}

impl Kept {
    pub fn new(mut object: Object) -> Self {
        let scheduling = match &object {
            Object::Pod(pod) => pending_message(pod),
            _ => None,
        };
        slim::slim(&mut object);
        Kept { object, scheduling }
    }
}

/// An unbound pod's `PodScheduled: False` message (kube-scheduler's reason).
fn pending_message(pod: &Pod) -> Option<String> {
    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        return None;
    }
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
        .clone()
}

/// The [`Listed::scheduling`] key of a pod: `namespace/name`.
fn pod_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or("default"))
}

/// An event's identity: `namespace/name`.
fn event_key(event: &Event) -> (Option<&str>, Option<&str>) {
    (
        event.metadata.namespace.as_deref(),
        event.metadata.name.as_deref(),
    )
}

impl Listed {
    /// Creates or replaces an object ([`Cluster::apply`]); a pod's pending message follows
    /// it (gone once the pod is bound or scheduled).
    pub fn apply(&mut self, kept: Kept) {
        let Kept { object, scheduling } = kept;
        if let Object::Pod(pod) = &object {
            let key = pod_key(
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref().unwrap_or_default(),
            );
            match scheduling {
                Some(message) => self.scheduling.insert(key, message),
                None => self.scheduling.remove(&key),
            };
        }
        self.cluster.apply(object);
    }

    /// Removes an object ([`Cluster::delete`]), and a pod's pending message.
    pub fn delete(&mut self, reference: &ObjectRef) {
        if reference.kind == Kind::Pod {
            self.scheduling
                .remove(&pod_key(reference.namespace.as_deref(), &reference.name));
        }
        self.cluster.delete(reference);
    }

    /// Every object of `kind` becomes `objects` (a relist, [`Cluster::reset`]: what was
    /// deleted while a watch was down goes).
    pub fn reset(&mut self, kind: Kind, objects: Vec<Kept>) {
        if kind == Kind::Pod {
            self.scheduling.clear();
        }
        let mut reset = Vec::with_capacity(objects.len());
        for Kept { object, scheduling } in objects {
            if let (Object::Pod(pod), Some(message)) = (&object, scheduling) {
                let key = pod_key(
                    pod.metadata.namespace.as_deref(),
                    pod.metadata.name.as_deref().unwrap_or_default(),
                );
                self.scheduling.insert(key, message);
            }
            reset.push(object);
        }
        self.cluster.reset(kind, reset);
    }

    /// Adds or replaces one of Karpenter's events (by namespace and name), keeping the newest
    /// [`EVENTS_KEPT`].
    pub fn apply_event(&mut self, event: Event) {
        let key = event_key(&event);
        match self.events.iter().position(|e| event_key(e) == key) {
            Some(i) => self.events[i] = event,
            None => self.events.push(event),
        }
        keep_newest(&mut self.events);
    }

    /// Removes an event (by namespace and name).
    pub fn delete_event(&mut self, event: &Event) {
        let key = event_key(event);
        self.events.retain(|e| event_key(e) != key);
    }

    /// Karpenter's events become `events` (a relist), the newest [`EVENTS_KEPT`] kept.
    pub fn reset_events(&mut self, mut events: Vec<Event>) {
        keep_newest(&mut events);
        self.events = events;
        self.events_problem = None;
    }
}

/// Hands every `kind` object `params` selects to `each`, page by page.
pub(crate) async fn each<K>(
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
pub(crate) fn keep(kept: &mut Vec<Event>, event: Event) {
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
    each::<Node>(client, "Nodes", ListParams::default(), |node| {
        listed.apply(Kept::new(Object::Node(node)));
    })
    .await?;
    match each::<NodeClaim>(client, "NodeClaims", ListParams::default(), |c| {
        listed.apply(Kept::new(Object::NodeClaim(c)));
    })
    .await
    {
        Err(e) if !e.not_installed() => return Err(e),
        _ => {}
    }
    match each::<NodePool>(client, "NodePools", ListParams::default(), |p| {
        listed.apply(Kept::new(Object::NodePool(p)));
    })
    .await
    {
        Err(e) if !e.not_installed() => return Err(e),
        _ => {}
    }
    each::<Pod>(client, "Pods", ListParams::default(), |pod| {
        listed.apply(Kept::new(Object::Pod(pod)));
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
