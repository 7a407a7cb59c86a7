//! The solver's output: new NodeClaims to create, pods placed on existing nodes, and the reasons
//! the remaining pods could not be placed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::input::RequirementSpec;
use crate::pod_record::{DEFAULT_NAMESPACE, PodRecord};
use crate::resources::ResourceList;

/// A pod, named for humans and by UID for machines.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    /// The pod for the solver's output: namespace (`default` when none), name, and
    /// [`PodRecord::uid_or_key`].
    pub fn of(pod: &PodRecord) -> PodRef {
        let meta = &pod.metadata;
        PodRef {
            namespace: meta
                .namespace
                .clone()
                .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
            name: meta.name.clone().unwrap_or_default(),
            uid: pod.uid_or_key(),
        }
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

fn serialize_arc_str<S: serde::Serializer>(
    s: &std::sync::Arc<str>,
    ser: S,
) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s)
}

/// One instance type still viable for a new NodeClaim, with its cheapest compatible price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceTypeOption {
    /// Shared with every other claim offering the same type.
    #[serde(serialize_with = "serialize_arc_str")]
    pub name: std::sync::Arc<str>,
    /// Cheapest available offering compatible with the claim's requirements.
    pub price: f64,
}

/// A NodeClaim the solver wants created.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewNodeClaim {
    pub node_pool: String,
    /// Final requirements (NodePool + pods + topology) with `karpenter.sh/capacity-type In [...]`
    /// of the options' compatible offerings; the hostname placeholder is dropped. The
    /// instance-type requirement is `instance_type_options` (see [`Self::requirements_with_instance_types`]),
    /// kept out of this list so thousands of claims do not each copy hundreds of names.
    pub requirements: Vec<RequirementSpec>,
    /// minValues of the instance-type requirement, if any.
    pub instance_type_min_values: Option<u32>,
    /// Viable instance types, cheapest first, truncated to `max_instance_types`.
    pub instance_type_options: Vec<InstanceTypeOption>,
    /// Pod requests plus the DaemonSet overhead (the smallest over still-viable groups).
    pub requests: ResourceList,
    pub pods: Vec<PodRef>,
    /// Set when minValues were lowered under the BestEffort policy.
    pub min_values_relaxed: bool,
    /// Labels the NodeClaim carries (template labels, nodepool, single-valued requirements).
    pub labels: BTreeMap<String, String>,
}

impl NewNodeClaim {
    /// `requirements` plus `node.kubernetes.io/instance-type In [options]`, as written on the
    /// NodeClaim.
    pub fn requirements_with_instance_types(&self) -> Vec<RequirementSpec> {
        let mut reqs = self.requirements.clone();
        reqs.push(RequirementSpec {
            key: karpenter_api::labels::INSTANCE_TYPE.to_string(),
            operator: crate::input::Operator::In,
            values: self
                .instance_type_options
                .iter()
                .map(|o| o.name.to_string())
                .collect(),
            min_values: self.instance_type_min_values,
        });
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        reqs
    }

    /// Price of the cheapest option (0 when there is none).
    pub fn cheapest_price(&self) -> f64 {
        self.instance_type_options.first().map_or(0.0, |o| o.price)
    }
}

/// A pod placed on a node that already exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExistingPlacement {
    pub pod: PodRef,
    pub node: String,
}

/// A pod that could not be placed, with a reason for each NodePool (and the existing nodes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unschedulable {
    pub pod: PodRef,
    /// Human-readable summary of all reasons.
    pub reason: String,
    /// `(nodepool name, reason)`; `existing nodes` or `validation` for non-pool reasons.
    pub reasons: Vec<(String, String)>,
    /// Deferred, not unschedulable: it can use a capacity reservation whose free slots this
    /// solve promised to other NodeClaims (or that is full with no other offering), so it
    /// waits for the next batch ([`crate::ReservedOfferingMode::Strict`]). Not counted in
    /// `karpenter_scheduler_unschedulable_pods_count` and given no FailedScheduling event, as
    /// upstream.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

impl Unschedulable {
    /// One line per NodePool (or `existing nodes` / `validation`) saying why the pod does not
    /// fit there, as `simulate` prints them and the controller's events say them.
    pub fn reason_lines(&self) -> Vec<String> {
        if self.reasons.is_empty() {
            return vec![self.reason.clone()];
        }
        self.reasons
            .iter()
            .map(|(pool, reason)| format!("{pool}: {reason}"))
            .collect()
    }
}

/// Everything one solve decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SolveResult {
    pub new_node_claims: Vec<NewNodeClaim>,
    pub existing_placements: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    /// What the solve observed on its way (metrics), not part of its decisions.
    #[serde(skip)]
    pub stats: SolveStats,
}

/// What one solve observed besides its decisions: the values of upstream's scheduler gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SolveStats {
    /// Pods left in the queue when the loop ended: 0 when every pod found a place, else the
    /// pods that went round the queue once more without progress
    /// (`karpenter_scheduler_queue_depth`'s last value in upstream's loop).
    pub queue_depth: usize,
    /// Pending pods (`status.phase` `Pending`) per effective zone: a zone name, `flexible` or
    /// `none` (`karpenter_scheduler_pending_pods_by_effective_zone_count`).
    pub pending_by_effective_zone: std::collections::BTreeMap<String, usize>,
}

impl SolveResult {
    /// Number of pods placed somewhere.
    pub fn scheduled_pods(&self) -> usize {
        self.existing_placements.len()
            + self
                .new_node_claims
                .iter()
                .map(|c| c.pods.len())
                .sum::<usize>()
    }

    /// Sum over new NodeClaims of their cheapest option's price.
    pub fn cost_per_hour(&self) -> f64 {
        self.new_node_claims
            .iter()
            .map(NewNodeClaim::cheapest_price)
            .sum()
    }
}
