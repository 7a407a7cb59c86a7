//! The NodeClaim lifecycle (upstream `nodeclaim.lifecycle`) as a step function: from a
//! NodeClaim, the Node with its provider id (if any) and `now`, the one thing to do next.
//!
//! Finalizer first; then Launch (the cloud creates the instance); Registration (a Node with
//! our provider id appears: it gets our labels, annotations, taints, finalizer and owner
//! reference, loses the `karpenter.sh/unregistered` taint and is labelled registered);
//! Initialization (the Node is Ready, its startup and ephemeral taints are gone and every
//! extended resource requested is registered); Liveness (not launched within
//! [`LifecycleConfig::launch_timeout`], or no Node within
//! [`LifecycleConfig::registration_ttl`] of the launch: delete the NodeClaim). A NodeClaim
//! being deleted is finalized in stages: its termination deadline written, its Node deleted
//! (and drained by the Node's own termination), its instance terminated, then the finalizer
//! removed.
//!
//! The functions after [`decide`] compute what each step writes, so the executor only sends
//! objects.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_scheduling::ResourceList;

/// Liveness timeouts (upstream: 5 min to launch, 15 min to register).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleConfig {
    pub launch_timeout: Duration,
    pub registration_ttl: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            launch_timeout: Duration::from_secs(5 * 60),
            registration_ttl: Duration::from_secs(15 * 60),
        }
    }
}

/// Why liveness deletes a NodeClaim (`karpenter_nodeclaims_disrupted_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    LaunchTimeout,
    RegistrationTimeout,
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::LaunchTimeout => "launch_timeout",
            Liveness::RegistrationTimeout => "registration_timeout",
        }
    }
}

/// The next thing to do for a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Add the `karpenter.sh/termination` finalizer.
    AddFinalizer,
    /// Ask the cloud for an instance; write [`launched`].
    Launch,
    /// Launched; no Node with its provider id yet: record `Registered=Unknown`, and come back
    /// after `requeue_after` (the registration TTL runs out then at the latest).
    AwaitRegistration { requeue_after: Duration },
    /// Sync the Node ([`registered_node`]) and mark the NodeClaim registered.
    Register { node: String },
    /// Registered; not initialized because of `waiting_for`: record `Initialized=Unknown`.
    AwaitInitialization { node: String, waiting_for: String },
    /// Label the Node initialized and mark the NodeClaim initialized.
    Initialize { node: String },
    /// Delete the NodeClaim: it did not become a node in time.
    Delete { reason: Liveness },
    /// Being deleted, first stage: write the drain's deadline
    /// (`karpenter.sh/nodeclaim-termination-timestamp`, [`termination::deadline_annotation`])
    /// once, as upstream does, so a restart (or upstream, after a switch back) keeps it.
    ///
    /// [`termination::deadline_annotation`]: crate::termination::deadline_annotation
    AnnotateTerminationDeadline { deadline: String },
    /// Being deleted: delete the Node; the Node's termination drains it, and this NodeClaim
    /// waits until it is gone.
    DeleteNode { node: String },
    /// Being deleted, its Node gone: terminate the instance, then remove the finalizer (a
    /// retried step asks the cloud again; an instance already gone is terminated).
    TerminateInstance,
    /// Being deleted, never launched: remove the finalizer.
    RemoveFinalizer,
    /// Nothing to write now: what is recorded already says what the NodeClaim waits for (its
    /// Node to register, to initialize or to terminate). Look again after `requeue_after`
    /// (a liveness deadline) or on a change.
    Wait { requeue_after: Option<Duration> },
    /// Nothing left to do.
    Done,
}

impl Step {
    /// The step's name, for logs, metrics and backoff.
    pub fn name(&self) -> &'static str {
        match self {
            Step::AddFinalizer => "add-finalizer",
            Step::Launch => "launch",
            Step::AwaitRegistration { .. } => "await-registration",
            Step::Register { .. } => "register",
            Step::AwaitInitialization { .. } => "await-initialization",
            Step::Initialize { .. } => "initialize",
            Step::Delete { .. } => "liveness-delete",
            Step::AnnotateTerminationDeadline { .. } => "annotate-termination-deadline",
            Step::DeleteNode { .. } => "delete-node",
            Step::TerminateInstance => "terminate-instance",
            Step::RemoveFinalizer => "remove-finalizer",
            Step::Wait { .. } => "wait",
            Step::Done => "done",
        }
    }
}

pub(crate) fn condition<'a>(claim: &'a NodeClaim, type_: &str) -> Option<&'a Condition> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

/// The condition `type_` has `status`.
pub fn is_condition(claim: &NodeClaim, type_: &str, status: &str) -> bool {
    condition(claim, type_).is_some_and(|c| c.status == status)
}

/// The condition `type_` is `True`.
pub fn is_true(claim: &NodeClaim, type_: &str) -> bool {
    condition(claim, type_).is_some_and(|c| c.status == "True")
}

use karpenter_state::conditions::from_api_time as time;

fn elapsed(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    since
        .and_then(|since| (now - since).to_std().ok())
        .unwrap_or_default()
}

fn has_finalizer(claim: &NodeClaim) -> bool {
    claim
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == labels::TERMINATION_FINALIZER))
}

/// What to do next for `claim`, whose Node (by provider id) is `node`.
pub fn decide(
    claim: &NodeClaim,
    node: Option<&Node>,
    now: DateTime<Utc>,
    config: &LifecycleConfig,
) -> Step {
    if claim.metadata.deletion_timestamp.is_some() {
        return finalize(claim, node);
    }
    if !has_finalizer(claim) {
        return Step::AddFinalizer;
    }
    if !is_true(claim, conditions::LAUNCHED) {
        let created = claim.metadata.creation_timestamp.as_ref().and_then(time);
        if elapsed(created, now) >= config.launch_timeout {
            return Step::Delete {
                reason: Liveness::LaunchTimeout,
            };
        }
        return Step::Launch;
    }
    let Some(node) = node else {
        if is_true(claim, conditions::REGISTERED) {
            // The Node went away after registering: garbage collection's business.
            return Step::Done;
        }
        let launched =
            condition(claim, conditions::LAUNCHED).and_then(|c| time(&c.last_transition_time));
        let waited = elapsed(launched, now);
        if waited >= config.registration_ttl {
            return Step::Delete {
                reason: Liveness::RegistrationTimeout,
            };
        }
        let requeue_after = (config.registration_ttl - waited).min(Duration::from_secs(10));
        if is_condition(claim, conditions::REGISTERED, "Unknown") {
            return Step::Wait {
                requeue_after: Some(requeue_after),
            };
        }
        return Step::AwaitRegistration { requeue_after };
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    if !is_true(claim, conditions::REGISTERED) {
        return Step::Register { node: name };
    }
    if is_true(claim, conditions::INITIALIZED) {
        return Step::Done;
    }
    // A reboot in flight re-initializes the node once it ended (the old boot must not count).
    if is_true(claim, conditions::REBOOTING) {
        return Step::Wait {
            requeue_after: None,
        };
    }
    match initialization_blocker(claim, node) {
        Some(_) if is_condition(claim, conditions::INITIALIZED, "Unknown") => Step::Wait {
            requeue_after: None,
        },
        Some(waiting_for) => Step::AwaitInitialization {
            node: name,
            waiting_for,
        },
        None => Step::Initialize { node: name },
    }
}

/// The stage a NodeClaim being deleted is at: deadline written, Node gone, instance
/// terminated, finalizer removed.
fn finalize(claim: &NodeClaim, node: Option<&Node>) -> Step {
    if !has_finalizer(claim) {
        return Step::Done;
    }
    let annotated = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(labels::NODECLAIM_TERMINATION_TIMESTAMP));
    if !annotated && let Some(deadline) = crate::termination::termination_deadline(claim) {
        return Step::AnnotateTerminationDeadline {
            deadline: crate::termination::deadline_annotation(deadline),
        };
    }
    if let Some(node) = node {
        return if node.metadata.deletion_timestamp.is_none() {
            Step::DeleteNode {
                node: node.metadata.name.clone().unwrap_or_default(),
            }
        } else {
            Step::Wait {
                requeue_after: None,
            }
        };
    }
    let launched = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_some();
    if launched {
        Step::TerminateInstance
    } else {
        Step::RemoveFinalizer
    }
}

const BASE_RESOURCES: &[&str] = &[
    labels::RESOURCE_CPU,
    labels::RESOURCE_MEMORY,
    labels::RESOURCE_PODS,
    labels::RESOURCE_EPHEMERAL_STORAGE,
];

fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Why a registered node is not initialized yet; `None` when it is.
pub fn initialization_blocker(claim: &NodeClaim, node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return Some("node is not Ready".to_owned());
    }
    let taints = node_taints(node);
    if let Some(t) = claim.spec.startup_taints.iter().find(|s| {
        taints
            .iter()
            .any(|t| t.key == s.key && t.effect == s.effect.as_str())
    }) {
        return Some(format!("startup taint {} is still on the node", t.key));
    }
    // Upstream's known ephemeral taints (not-ready, unreachable, uninitialized, unregistered,
    // the Node Readiness Controller's `readiness.k8s.io/*`), one definition with the solver's.
    if let Some(t) = taints
        .iter()
        .find(|t| karpenter_scheduling::taints::is_ephemeral(t))
    {
        return Some(format!("taint {} is still on the node", t.key));
    }
    let requested = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| ResourceList::from_k8s(r).ok())
        .unwrap_or_default();
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| ResourceList::from_k8s(a).ok())
        .unwrap_or_default();
    requested
        .iter()
        .filter(|(name, q)| !BASE_RESOURCES.contains(&name.as_str()) && !q.is_zero())
        .find(|(name, _)| allocatable.get(name).is_zero())
        .map(|(name, _)| format!("resource {name} is not registered on the node"))
}

/// Sets a NodeClaim condition (status `True`/`False`/`Unknown`), keeping its transition time
/// while the status holds: the index's one condition writer.
pub use karpenter_state::conditions::set_node_claim_condition as set_condition;

/// The NodeClaim after the cloud launched `instance` for it: the provider's labels under the
/// NodeClaim's own (the NodeClaim's win), annotations merged, provider id, image id,
/// capacity and allocatable copied, `Launched=True`.
pub fn launched(claim: &NodeClaim, instance: &NodeClaim, now: DateTime<Utc>) -> NodeClaim {
    let mut out = claim.clone();
    let mut merged = instance.metadata.labels.clone().unwrap_or_default();
    merged.extend(claim.metadata.labels.clone().unwrap_or_default());
    out.metadata.labels = Some(merged);
    let mut annotations = instance.metadata.annotations.clone().unwrap_or_default();
    annotations.extend(claim.metadata.annotations.clone().unwrap_or_default());
    out.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let from = instance.status.clone().unwrap_or_default();
    let status = out.status.get_or_insert_with(Default::default);
    status.provider_id = from.provider_id;
    status.image_id = from.image_id;
    status.capacity = from.capacity;
    status.allocatable = from.allocatable;
    set_condition(&mut out, conditions::LAUNCHED, "True", "Launched", "", now);
    out
}

/// Adds the extended resources NodeOverlays gave the launched instance type (of the claim's
/// NodePool) to the launched claim's `status.capacity` and `status.allocatable`, as upstream's
/// AWS provider writes a launched NodeClaim from the overlaid type: until its Node reports
/// them, the cluster state (and the next solve) sees them on the in-flight node.
pub fn add_overlay_capacity(
    claim: &mut NodeClaim,
    overlays: &karpenter_scheduling::overlay::Outcome,
) {
    let label = |key: &str| {
        claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let key = (label(labels::NODEPOOL), label(labels::INSTANCE_TYPE));
    let Some(changed) = overlays.changed.get(&key) else {
        return;
    };
    if changed.capacity.is_empty() {
        return;
    }
    let status = claim.status.get_or_insert_with(Default::default);
    for list in [&mut status.capacity, &mut status.allocatable] {
        let list = list.get_or_insert_with(Default::default);
        for (resource, (quantity, _)) in &changed.capacity {
            list.insert(
                resource.clone(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(quantity.to_string()),
            );
        }
    }
}

/// The NodeClaim once its Node registered: `Registered=True`, `status.nodeName`.
pub fn registered_claim(claim: &NodeClaim, node: &str, now: DateTime<Utc>) -> NodeClaim {
    let mut out = claim.clone();
    out.status.get_or_insert_with(Default::default).node_name = Some(node.to_owned());
    set_condition(
        &mut out,
        conditions::REGISTERED,
        "True",
        "Registered",
        "",
        now,
    );
    out
}

/// The NodeClaim once its Node initialized.
pub fn initialized_claim(claim: &NodeClaim, now: DateTime<Utc>) -> NodeClaim {
    let mut out = claim.clone();
    set_condition(
        &mut out,
        conditions::INITIALIZED,
        "True",
        "Initialized",
        "",
        now,
    );
    out
}

fn same_taint(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// The Node as registration leaves it: the NodeClaim's labels and annotations, its taints and
/// startup taints (unless the Node is labelled `karpenter.sh/do-not-sync-taints=true`), our
/// finalizer, an owner reference to the NodeClaim, the `karpenter.sh/registered=true` label,
/// and no `karpenter.sh/unregistered` taint.
pub fn registered_node(claim: &NodeClaim, node: &Node) -> Node {
    let mut out = node.clone();
    let mut node_labels: BTreeMap<String, String> = out.metadata.labels.take().unwrap_or_default();
    let sync_taints = node_labels
        .get(labels::DO_NOT_SYNC_TAINTS)
        .is_none_or(|v| v != "true");
    node_labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    node_labels.insert(labels::REGISTERED.to_owned(), "true".to_owned());
    out.metadata.labels = Some(node_labels);
    let mut annotations = out.metadata.annotations.take().unwrap_or_default();
    annotations.extend(claim.metadata.annotations.clone().unwrap_or_default());
    out.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let finalizers = out.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers
        .iter()
        .any(|f| f == labels::TERMINATION_FINALIZER)
    {
        finalizers.push(labels::TERMINATION_FINALIZER.to_owned());
    }
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".to_owned(),
        kind: "NodeClaim".to_owned(),
        name: claim.metadata.name.clone().unwrap_or_default(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let owners = out.metadata.owner_references.get_or_insert_with(Vec::new);
    if !owners
        .iter()
        .any(|o| o.uid == owner.uid && o.kind == owner.kind)
    {
        owners.push(owner);
    }
    let spec = out.spec.get_or_insert_with(Default::default);
    let mut taints: Vec<Taint> = spec
        .taints
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != labels::UNREGISTERED_TAINT_KEY)
        .collect();
    if sync_taints {
        for t in claim.spec.taints.iter().chain(&claim.spec.startup_taints) {
            let t = karpenter_scheduling::v1::taint(t);
            if !taints.iter().any(|have| same_taint(have, &t)) {
                taints.push(t);
            }
        }
    }
    spec.taints = (!taints.is_empty()).then_some(taints);
    out
}

/// The Node labelled initialized.
pub fn initialized_node(node: &Node) -> Node {
    let mut out = node.clone();
    out.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::INITIALIZED.to_owned(), "true".to_owned());
    out
}
