//! The solver's output: new NodeClaims to create, pods placed on existing nodes, and the reasons
//! the remaining pods could not be placed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::input::RequirementSpec;
use crate::resources::ResourceList;

/// A pod, named for humans and by UID for machines.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One instance type still viable for a new NodeClaim, with its cheapest compatible price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceTypeOption {
    pub name: String,
    /// Cheapest available offering compatible with the claim's requirements.
    pub price: f64,
}

/// A NodeClaim the solver wants created.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewNodeClaim {
    pub node_pool: String,
    /// Final requirements (NodePool + pods + topology), including `node.kubernetes.io/instance-type
    /// In [options]` and `karpenter.sh/capacity-type In [...]`; hostname placeholder dropped.
    pub requirements: Vec<RequirementSpec>,
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
}

/// Everything one solve decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SolveResult {
    pub new_node_claims: Vec<NewNodeClaim>,
    pub existing_placements: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
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
        self.new_node_claims.iter().map(NewNodeClaim::cheapest_price).sum()
    }
}
