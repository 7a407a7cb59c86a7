//! [`StateNode`]: a Node joined with its NodeClaim (upstream `StateNode`), and the two views
//! the decisions take of it: the solver's [`ExistingNode`] and disruption's [`NodeState`].
//!
//! Three shapes exist: a NodeClaim in flight (launched or launching, no Node yet), a NodeClaim
//! with its Node (joined by provider id), and a Node without a NodeClaim (not managed by
//! Karpenter). Until the Node is initialized, what it will be comes from the NodeClaim: labels
//! from its single-valued requirements, resources from its status, taints from its spec
//! (startup taints excluded), so the solver can count in-flight capacity.
//!
//! Quantities come from the API server, which only stores quantities that parse; one that
//! still does not is read as absent.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karpenter_api::labels;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_api::v1::{NodeClaim, Operator};
use karpenter_disruption::{DriftMark, NodeState, ObservedCondition};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::{ExistingNode, ResourceList};

/// A node of the cluster, as the index knows it.
#[derive(Debug, Clone)]
pub struct StateNode<'a> {
    pub node: Option<&'a Node>,
    pub node_claim: Option<&'a NodeClaim>,
    /// Pods bound to the node.
    pub pods: Vec<&'a Arc<PodRecord>>,
    /// Nominated for pending pods until then.
    pub nominated_until: Option<DateTime<Utc>>,
    /// Chosen by a disruption command (counts against budgets, receives no pods).
    pub marked_for_deletion: bool,
}

fn resources(list: Option<&BTreeMap<String, Quantity>>) -> ResourceList {
    list.and_then(|l| ResourceList::from_k8s(l).ok())
        .unwrap_or_default()
}

use crate::conditions::from_api_time as time;

fn condition<'c>(conditions: Option<&'c [Condition]>, type_: &str) -> Option<&'c Condition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

impl<'a> StateNode<'a> {
    /// The node's name; a NodeClaim without a Node goes by the node name it reported, else
    /// its own name.
    pub fn name(&self) -> &'a str {
        if let Some(node) = self.node {
            return node.metadata.name.as_deref().unwrap_or_default();
        }
        let claim = self.node_claim;
        claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.node_name.as_deref())
            .or_else(|| claim.and_then(|c| c.metadata.name.as_deref()))
            .unwrap_or_default()
    }

    pub fn provider_id(&self) -> Option<&'a str> {
        self.node_claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.provider_id.as_deref())
            .or_else(|| {
                self.node
                    .and_then(|n| n.spec.as_ref())
                    .and_then(|s| s.provider_id.as_deref())
            })
    }

    /// Backed by a NodeClaim.
    pub fn managed(&self) -> bool {
        self.node_claim.is_some()
    }

    fn claim_conditions(&self) -> Option<&'a [Condition]> {
        self.node_claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_deref())
    }

    fn claim_condition_true(&self, type_: &str) -> bool {
        condition(self.claim_conditions(), type_).is_some_and(|c| c.status == "True")
    }

    /// A Node without a NodeClaim counts as initialized; a managed one once its NodeClaim is
    /// `Initialized=True` (or its Node carries `karpenter.sh/initialized=true`).
    pub fn initialized(&self) -> bool {
        let Some(node) = self.node else {
            return false;
        };
        if !self.managed() {
            return true;
        }
        self.claim_condition_true(conditions::INITIALIZED)
            || node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::INITIALIZED))
                .is_some_and(|v| v == "true")
    }

    /// When the NodeClaim became initialized.
    pub fn initialized_at(&self) -> Option<DateTime<Utc>> {
        if !self.managed() {
            return self.created();
        }
        condition(self.claim_conditions(), conditions::INITIALIZED)
            .filter(|c| c.status == "True")
            .and_then(|c| time(&c.last_transition_time))
    }

    /// Node condition `Ready=True`.
    pub fn ready(&self) -> bool {
        self.node
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True")
    }

    /// The Node or its NodeClaim is being deleted.
    pub fn deleting(&self) -> bool {
        self.node
            .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
            || self
                .node_claim
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
    }

    pub fn created(&self) -> Option<DateTime<Utc>> {
        self.node_claim
            .and_then(|c| c.metadata.creation_timestamp.as_ref())
            .or_else(|| {
                self.node
                    .and_then(|n| n.metadata.creation_timestamp.as_ref())
            })
            .and_then(time)
    }

    /// The Node's labels once it exists; before, the NodeClaim's labels and single-valued `In`
    /// requirements. Always with a hostname.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut out = match (self.node, self.node_claim) {
            (Some(node), _) => node.metadata.labels.clone().unwrap_or_default(),
            (None, Some(claim)) => {
                let mut out: BTreeMap<String, String> = claim
                    .spec
                    .requirements
                    .iter()
                    .filter(|r| r.operator == Operator::In && r.values.len() == 1)
                    .filter_map(|r| Some((r.key.clone(), r.values.first()?.clone())))
                    .collect();
                out.extend(claim.metadata.labels.clone().unwrap_or_default());
                out
            }
            (None, None) => BTreeMap::new(),
        };
        out.entry(labels::HOSTNAME.to_owned())
            .or_insert_with(|| self.name().to_owned());
        out
    }

    /// Node and NodeClaim annotations (the Node's win).
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = self
            .node_claim
            .and_then(|c| c.metadata.annotations.clone())
            .unwrap_or_default();
        out.extend(
            self.node
                .and_then(|n| n.metadata.annotations.clone())
                .unwrap_or_default(),
        );
        out
    }

    /// The Node's taints once it exists (the solver hides startup and ephemeral taints of an
    /// uninitialized managed node); before, the NodeClaim's taints without startup taints.
    /// While a reboot is in progress (the NodeClaim's `Rebooting=True`), the reboot's fence
    /// `karpenter.sh/rebooting` is left out, as upstream: the node's capacity is coming back,
    /// so the pods its drain evicts are placed on it again rather than on a new node.
    pub fn taints(&self) -> Vec<Taint> {
        let mut taints = match self.node {
            Some(node) => node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            None => self
                .node_claim
                .map(|c| {
                    c.spec
                        .taints
                        .iter()
                        .map(karpenter_scheduling::v1::taint)
                        .collect()
                })
                .unwrap_or_default(),
        };
        if self.managed() && self.claim_condition_true(conditions::REBOOTING) {
            taints.retain(|t| t.key != karpenter_api::labels::REBOOTING_TAINT_KEY);
        }
        taints
    }

    fn node_resources(&self, allocatable: bool) -> ResourceList {
        let status = self.node.and_then(|n| n.status.as_ref());
        let list = if allocatable {
            status
                .and_then(|s| s.allocatable.as_ref())
                .or_else(|| status.and_then(|s| s.capacity.as_ref()))
        } else {
            status.and_then(|s| s.capacity.as_ref())
        };
        resources(list)
    }

    fn claim_resources(&self, allocatable: bool) -> ResourceList {
        let status = self.node_claim.and_then(|c| c.status.as_ref());
        resources(if allocatable {
            status.and_then(|s| s.allocatable.as_ref())
        } else {
            status.and_then(|s| s.capacity.as_ref())
        })
    }

    /// The Node's values; until it is initialized, the NodeClaim's fill resources the Node
    /// reports as zero or not at all (upstream: a registering kubelet reports partial values).
    fn resource_view(&self, allocatable: bool) -> ResourceList {
        let mut out = self.node_resources(allocatable);
        if self.managed() && !self.initialized() {
            for (name, quantity) in &self.claim_resources(allocatable).0 {
                if out.get(name).millis() == 0 {
                    out.0.insert(name.clone(), *quantity);
                }
            }
        }
        out
    }

    pub fn capacity(&self) -> ResourceList {
        self.resource_view(false)
    }

    pub fn allocatable(&self) -> ResourceList {
        self.resource_view(true)
    }

    /// `Drifted=True` as the NodeClaim disruption controller set it.
    pub fn drifted(&self) -> Option<DriftMark> {
        condition(self.claim_conditions(), conditions::DRIFTED)
            .filter(|c| c.status == "True")
            .and_then(|c| {
                Some(DriftMark {
                    reason: c.reason.clone(),
                    since: time(&c.last_transition_time)?,
                })
            })
    }

    /// The solver's view.
    pub fn to_existing(&self) -> ExistingNode {
        ExistingNode {
            name: self.name().to_owned(),
            labels: self.labels(),
            taints: self.taints(),
            capacity: self.capacity(),
            allocatable: self.allocatable(),
            pods: self.pods.iter().map(|p| Arc::clone(p)).collect(),
            initialized: self.initialized(),
            deleting: self.deleting() || self.marked_for_deletion,
            volume_limits: BTreeMap::new(),
            refuses_relocated_pods: false,
        }
    }

    /// Disruption's view at `now` (`queued` is the orchestration queue's to set).
    pub fn to_node_state(&self, now: DateTime<Utc>) -> NodeState {
        let created = self.created().unwrap_or(now);
        let mut state = NodeState::new(self.name(), created);
        state.node_claim = self.node_claim.and_then(|c| c.metadata.name.clone());
        state.labels = self.labels();
        state.annotations = self.annotations();
        state.taints = self.taints();
        state.capacity = self.capacity();
        state.allocatable = self.allocatable();
        state.initialized = self.initialized();
        state.initialized_at = self.initialized_at();
        state.ready = self.ready();
        state.marked_for_deletion = self.marked_for_deletion;
        state.deleting = self.deleting();
        state.instance_terminating = self.claim_condition_true(conditions::INSTANCE_TERMINATING);
        state.rebooting = self.claim_condition_true(conditions::REBOOTING);
        state.last_reboot_end = condition(self.claim_conditions(), conditions::REBOOTING)
            .filter(|c| c.status == "False")
            .and_then(|c| time(&c.last_transition_time));
        state.nominated_until = self.nominated_until.filter(|until| *until > now);
        state.drifted = self.drifted();
        state.last_pod_event = self
            .node_claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.last_pod_event_time.as_ref())
            .and_then(time);
        if let Some(claim) = self.node_claim {
            state.expire_after = claim.spec.expire_after.duration();
            state.termination_grace_period = claim
                .spec
                .termination_grace_period
                .as_ref()
                .map(karpenter_api::duration::GoDuration::as_duration);
        }
        state.pods = self.pods.iter().map(|p| Arc::clone(p)).collect();
        state.has_node = self.node.is_some();
        state.launched = self.provider_id().is_some();
        state.conditions = self.node_conditions();
        state
    }

    /// The Node's status conditions, as node repair matches them.
    pub fn node_conditions(&self) -> Vec<ObservedCondition> {
        self.node
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| ObservedCondition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone().unwrap_or_default(),
                        last_transition: c.last_transition_time.as_ref().and_then(time),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reschedulable pods bound to the node.
    pub fn reschedulable_pods(&self) -> impl Iterator<Item = &'a PodRecord> + '_ {
        self.pods
            .iter()
            .map(|p| &***p)
            .filter(|p| p.is_reschedulable())
    }
}
