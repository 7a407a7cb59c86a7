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

#[cfg(test)]
mod tests {
    //! A list followed by any sequence of watch changes (applies, deletes, relists) must keep
    //! what a fresh list of the end state gives: the live view (watched) and `--once` (listed)
    //! show the same cluster.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::view::tests::{Flat, at, object};
    use crate::view::{Options, view};

    /// The objects changes are drawn from: a few of each kind, in a few versions.
    fn node(i: u8, v: u8) -> Object {
        let taints = if v == 1 {
            serde_json::json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        } else {
            serde_json::json!([])
        };
        Object::Node(object(serde_json::json!({
            "metadata": {"name": format!("node-{i}"), "creationTimestamp": "2026-11-27T08:00:00Z",
                "labels": {"node.kubernetes.io/instance-type": if v == 2 { "m5.large" } else { "c5.large" },
                    "karpenter.sh/capacity-type": if v == 2 { "spot" } else { "on-demand" },
                    "karpenter.sh/nodepool": format!("pool-{}", i % 2)}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{i}"), "taints": taints},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": if v == 0 { "True" } else { "False" }}]}
        })))
    }

    fn claim(i: u8, v: u8) -> Object {
        let node = (v == 1).then(|| format!("node-{i}"));
        Object::NodeClaim(object(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{i}"), "creationTimestamp": "2026-11-27T09:00:00Z",
                "labels": {"karpenter.sh/nodepool": format!("pool-{}", i % 2),
                    "node.kubernetes.io/instance-type": "c5.large",
                    "karpenter.sh/capacity-type": "on-demand"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []},
            "status": {"providerID": format!("aws:///us-east-1a/i-{i}"), "nodeName": node}
        })))
    }

    fn pool(i: u8, v: u8) -> Object {
        Object::NodePool(object(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": format!("pool-{i}")},
            "spec": {"limits": {"cpu": format!("{}", 10 * (u32::from(v) + 1))}, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
        })))
    }

    /// Pod `i`, bound to a node (version < 4) or pending with kube-scheduler's reason
    /// (version 4) or without one (5).
    fn pod(i: u8, v: u8) -> Object {
        let node = (v < 4).then(|| format!("node-{v}"));
        let mut conditions = serde_json::json!([]);
        if v == 4 {
            conditions = serde_json::json!([{"type": "PodScheduled", "status": "False",
                "message": format!("0/4 nodes are available (pod {i})")}]);
        }
        Object::Pod(object(serde_json::json!({
            "metadata": {"name": format!("pod-{i}"), "namespace": "shop", "uid": format!("uid-{i}"),
                "creationTimestamp": "2026-11-27T09:58:00Z"},
            "spec": {"nodeName": node, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": format!("{}m", 100 * (u32::from(i) + 1)), "memory": "1Gi"}}}]},
            "status": {"phase": if v < 4 { "Running" } else { "Pending" }, "conditions": conditions}
        })))
    }

    fn event(i: u8, v: u8) -> Event {
        object(serde_json::json!({
            "metadata": {"name": format!("event-{i}"), "namespace": "default"},
            "eventTime": format!("2026-11-27T09:5{v}:0{i}.000000Z"),
            "reportingController": "karpenter", "reportingInstance": "karpenter-0",
            "action": "Nominated", "type": "Normal", "reason": "Nominated",
            "regarding": {"kind": "Pod", "namespace": "shop", "name": format!("pod-{i}")},
            "note": format!("version {v}")
        }))
    }

    const KINDS: [Kind; 4] = [Kind::Node, Kind::NodeClaim, Kind::NodePool, Kind::Pod];

    fn build(kind: Kind, i: u8, v: u8) -> Object {
        match kind {
            Kind::Node => node(i, v % 3),
            Kind::NodeClaim => claim(i, v % 2),
            Kind::NodePool => pool(i, v % 2),
            _ => pod(i, v % 6),
        }
    }

    /// One change a watch can deliver.
    #[derive(Debug, Clone)]
    enum Change {
        Apply(usize, u8, u8),
        Delete(usize, u8),
        /// A relist of a kind: these objects, every other one of the kind gone.
        Reset(usize, Vec<(u8, u8)>),
        ApplyEvent(u8, u8),
        DeleteEvent(u8),
        ResetEvents(Vec<(u8, u8)>),
    }

    fn change() -> impl Strategy<Value = Change> {
        let pair = (0u8..4, 0u8..6);
        prop_oneof![
            4 => (0usize..4, 0u8..4, 0u8..6).prop_map(|(k, i, v)| Change::Apply(k, i, v)),
            2 => (0usize..4, 0u8..4).prop_map(|(k, i)| Change::Delete(k, i)),
            1 => (0usize..4, prop::collection::vec(pair.clone(), 0..4))
                .prop_map(|(k, objects)| Change::Reset(k, objects)),
            2 => pair.clone().prop_map(|(i, v)| Change::ApplyEvent(i, v)),
            1 => (0u8..4).prop_map(Change::DeleteEvent),
            1 => prop::collection::vec(pair, 0..4).prop_map(Change::ResetEvents),
        ]
    }

    /// What a list of the end state gives: each object the changes left, applied once.
    fn fresh(objects: &BTreeMap<(Kind, u8), u8>, events: &BTreeMap<u8, u8>) -> Listed {
        let mut listed = Listed::default();
        for (&(kind, i), &v) in objects {
            listed.apply(Kept::new(build(kind, i, v)));
        }
        listed.reset_events(events.iter().map(|(&i, &v)| event(i, v)).collect());
        listed
    }

    fn shown(listed: &Listed) -> serde_json::Value {
        let view = view(
            listed,
            &Flat,
            &Options::default(),
            at("2026-11-27T10:00:00Z"),
        );
        serde_json::json!({"view": view, "scheduling": listed.scheduling})
    }

    proptest! {
        #[test]
        fn a_list_followed_by_watch_changes_shows_what_a_fresh_list_of_the_end_state_shows(
            start in prop::collection::vec((0usize..4, 0u8..4, 0u8..6), 0..12),
            changes in prop::collection::vec(change(), 0..40),
        ) {
            let mut objects: BTreeMap<(Kind, u8), u8> = BTreeMap::new();
            let mut events: BTreeMap<u8, u8> = BTreeMap::new();
            for &(k, i, v) in &start {
                objects.insert((KINDS[k], i), v);
            }
            let mut watched = fresh(&objects, &events);
            for change in changes {
                match change {
                    Change::Apply(k, i, v) => {
                        objects.insert((KINDS[k], i), v);
                        watched.apply(Kept::new(build(KINDS[k], i, v)));
                    }
                    Change::Delete(k, i) => {
                        let Some(v) = objects.remove(&(KINDS[k], i)) else { continue };
                        watched.delete(&build(KINDS[k], i, v).reference());
                    }
                    Change::Reset(k, listed) => {
                        objects.retain(|(kind, _), _| *kind != KINDS[k]);
                        let kept: BTreeMap<u8, u8> = listed.into_iter().collect();
                        let mut relist = Vec::new();
                        for (&i, &v) in &kept {
                            objects.insert((KINDS[k], i), v);
                            relist.push(Kept::new(build(KINDS[k], i, v)));
                        }
                        watched.reset(KINDS[k], relist);
                    }
                    Change::ApplyEvent(i, v) => {
                        events.insert(i, v);
                        watched.apply_event(event(i, v));
                    }
                    Change::DeleteEvent(i) => {
                        let Some(v) = events.remove(&i) else { continue };
                        watched.delete_event(&event(i, v));
                    }
                    Change::ResetEvents(listed) => {
                        events = listed.into_iter().collect();
                        watched.reset_events(events.iter().map(|(&i, &v)| event(i, v)).collect());
                    }
                }
            }
            prop_assert_eq!(shown(&watched), shown(&fresh(&objects, &events)));
        }
    }
}
