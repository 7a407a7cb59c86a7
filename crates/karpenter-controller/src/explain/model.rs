//! The answers, as JSON: written by the controller, read by `karpenter explain`.

use serde::{Deserialize, Serialize};

/// Why a node is disrupted, kept, or was not looked at, by the last disruption pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnswer {
    pub node: String,
    /// When the disruption pass that decided ran (RFC 3339).
    pub decided_at: String,
    pub verdict: NodeVerdict,
    /// Why it was launched, when this controller launched it (recorded at launch, kept
    /// while its NodeClaim lives; not known offline nor across restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchAnswer>,
}

/// Why a NodeClaim was launched: the provisioning batch, the pods it was for, the instance
/// types it could launch as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchAnswer {
    pub node_claim: String,
    pub node_pool: String,
    /// When the batch that decided it ran (RFC 3339).
    pub batch: String,
    /// The pods it was for (`namespace/name`, at most [`MAX_LAUNCH_PODS`]).
    pub pods: Vec<String>,
    /// How many pods it was for.
    pub pod_count: usize,
    /// How many instance types were compatible (the options it was created with).
    pub instance_types: usize,
    /// The cheapest option and its price per hour.
    pub cheapest: Option<PricedType>,
    /// The next-cheapest option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cheapest: Option<PricedType>,
    /// The instance type the cloud launched (once launched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_as: Option<String>,
}

/// At most this many pods are named in a [`LaunchAnswer`] (the rest are counted).
pub const MAX_LAUNCH_PODS: usize = 20;

/// The pass's verdict on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum NodeVerdict {
    /// A command disrupts it.
    #[serde(rename_all = "camelCase")]
    Disrupting { command: CommandAnswer },
    /// It stays, for these reasons (most specific first).
    #[serde(rename_all = "camelCase")]
    Kept { reasons: Vec<ReasonAnswer> },
    /// The pass did not consider it (not a node of Karpenter's at the time of the pass, or
    /// created after it).
    NotConsidered,
}

/// One reason a node stays: its stable code, the event reason it is told under, the sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasonAnswer {
    pub code: String,
    pub event: String,
    pub text: String,
    /// For a cause that passes with time (`consolidateAfter` not yet passed): when it lifts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifts: Option<LiftsAnswer>,
}

/// When a reason lifts by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiftsAnswer {
    /// The time (RFC 3339).
    pub at: String,
    /// How long after the pass that found it (Go duration, `4m30s`).
    pub remaining: String,
}

/// A disruption command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandAnswer {
    /// `Emptiness`, `Drift`, `SingleNodeConsolidation`, `Repair`, ...
    pub method: String,
    /// The budget reason (`Empty`, `Drifted`, `Underutilized`, `Unhealthy`).
    pub reason: String,
    /// The nodes it removes.
    pub nodes: Vec<String>,
    /// What replaces them (empty: a delete).
    pub replacements: Vec<ReplacementAnswer>,
    pub savings_per_hour: f64,
    /// The command's own sentence.
    pub explanation: String,
    /// For a repair: the node condition it is for (`Ready=False (KubeletNotReady)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
}

/// A NodeClaim a command (or a batch) launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacementAnswer {
    pub node_pool: String,
    /// How many instance types it may launch as.
    pub instance_types: usize,
    /// The cheapest of them and its price per hour.
    pub cheapest: Option<PricedType>,
}

/// An instance type and its cheapest compatible offering's price per hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricedType {
    pub instance_type: String,
    pub price: f64,
}

/// What the last provisioning batch decided for one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAnswer {
    /// `namespace/name`.
    pub pod: String,
    /// When the batch was decided (RFC 3339).
    pub decided_at: String,
    pub outcome: PodOutcome,
}

/// Where the batch put the pod, or why nowhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum PodOutcome {
    /// A new NodeClaim is launched for it (its name once created).
    #[serde(rename_all = "camelCase")]
    NewNodeClaim {
        node_claim: Option<String>,
        launch: ReplacementAnswer,
        /// The pods sharing that NodeClaim, this one included.
        pods: usize,
        /// Offerings cheaper than the launch's cheapest that its requirements allow, not
        /// picked because they are marked unavailable after insufficient capacity.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unavailable: Vec<UnavailableAnswer>,
    },
    /// It fits on a node that exists (or is being launched).
    #[serde(rename_all = "camelCase")]
    ExistingNode { node: String },
    /// It fits nowhere: per NodePool (or `existing nodes`, `validation`), why.
    #[serde(rename_all = "camelCase")]
    Unschedulable { reasons: Vec<PlaceReason> },
    /// Deferred to the next batch: it can use a capacity reservation whose free slots the
    /// batch promised to other NodeClaims (or that is full with no other offering); per
    /// NodePool, why.
    #[serde(rename_all = "camelCase")]
    WaitingForReservation { reasons: Vec<PlaceReason> },
}

/// Why a pod does not fit in one place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlaceReason {
    /// `nodepool <name>`, `existing nodes` or `validation`.
    pub place: String,
    pub reason: String,
    /// When no instance type of the pool holds the pod's requests: the closest one and what
    /// it lacks (`m5.xlarge: needs 6 cpu, has 3920m allocatable`; before DaemonSets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closest: Option<String>,
    /// Offerings of the pool's instance types that hold the pod, marked unavailable after
    /// insufficient capacity (cheapest first, at most ten).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<UnavailableAnswer>,
}

/// An offering marked unavailable after insufficient capacity, and when it comes back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnavailableAnswer {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// Its price per hour.
    pub price: f64,
    /// When it is offered again (RFC 3339).
    pub until: String,
    /// How long that is after the batch (Go duration).
    pub remaining: String,
}

/// What the last disruption pass decided, whole: the dry run of consolidation users ask for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionAnswer {
    pub decided_at: String,
    pub commands: Vec<CommandAnswer>,
    /// Every node left alone, with its reasons.
    pub kept: Vec<KeptNode>,
}

/// A node the pass left alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptNode {
    pub node: String,
    pub reasons: Vec<ReasonAnswer>,
}

/// Why there is no answer (the body of a 404 or 503).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoAnswer {
    pub message: String,
}

/// A NodePool as the last disruption pass saw it: readiness, limits, budgets now, its nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolAnswer {
    pub node_pool: String,
    /// When the pass ran (RFC 3339).
    pub decided_at: String,
    /// Its status conditions (`Ready` first).
    pub conditions: Vec<ConditionAnswer>,
    /// Per limited resource: what its nodes use and the limit.
    pub limits: Vec<LimitAnswer>,
    /// Per disruption reason: how many nodes may be disrupted now, and why.
    pub budgets: Vec<BudgetAnswer>,
    pub nodes: NodeCounts,
}

/// One status condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionAnswer {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// One limited resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitAnswer {
    pub resource: String,
    /// `status.resources` (empty when not counted yet).
    pub used: String,
    pub limit: String,
}

/// The budgets of one disruption reason, now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetAnswer {
    /// `Empty`, `Drifted`, `Underutilized`, `Unhealthy`.
    pub reason: String,
    /// Nodes that may still be disrupted for it now.
    pub allowed: u32,
    /// What the active budgets allow before the nodes already disrupting are subtracted.
    pub budget: u32,
    pub disrupting: u32,
    /// Why the allowance is what it is.
    pub explanation: String,
    /// When the budgets next allow a disruption, if scheduled windows allow none now
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<String>,
}

/// The pool's nodes by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub total: u32,
    pub initialized: u32,
    pub not_ready: u32,
    /// Marked for deletion or being deleted.
    pub deleting: u32,
    pub drifted: u32,
}

/// One node's removal simulation (`explain consolidation --node`): what single-node
/// consolidation would find for it alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovalAnswer {
    pub node: String,
    pub node_pool: String,
    /// The pass whose snapshot was simulated (RFC 3339).
    pub decided_at: String,
    /// Its price per hour (0 when it is not a candidate).
    pub price: f64,
    /// Whether consolidation would remove it (`command` says how).
    pub removable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandAnswer>,
    /// Why it cannot be removed (when not removable).
    pub reasons: Vec<ReasonAnswer>,
    /// What else stops a pass from taking it now (its pool's budget).
    pub held_by: Vec<ReasonAnswer>,
    /// Where each of its pods would go.
    pub moves: Vec<PodMoveAnswer>,
}

/// Where one pod would go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMoveAnswer {
    pub pod: String,
    #[serde(flatten)]
    pub to: DestinationAnswer,
}

/// A pod's destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "camelCase")]
pub enum DestinationAnswer {
    /// A node that exists.
    #[serde(rename_all = "camelCase")]
    Node { node: String },
    /// The replacement NodeClaim.
    #[serde(rename_all = "camelCase")]
    NewNodeClaim { node_pool: String },
    /// Nowhere.
    #[serde(rename_all = "camelCase")]
    Nowhere { reason: String },
}
