//! What a disruption pass decides: commands (which nodes go, what replaces them, why) and, for
//! every node left alone, a reason a human can read.

use karpenter_api::v1::DisruptionReason;
use karpenter_scheduling::NewNodeClaim;
use serde::Serialize;

use crate::candidate::Candidate;
use crate::reason::Reasons;

/// The disruption methods, in the order a pass tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Method {
    Emptiness,
    StaticDrift,
    Drift,
    MultiNodeConsolidation,
    SingleNodeConsolidation,
    /// Node repair (reason `Unhealthy`): runs first when the `NodeRepair` gate is on.
    Repair,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Emptiness => "Emptiness",
            Method::StaticDrift => "StaticDrift",
            Method::Drift => "Drift",
            Method::MultiNodeConsolidation => "MultiNodeConsolidation",
            Method::SingleNodeConsolidation => "SingleNodeConsolidation",
            Method::Repair => "Repair",
        }
    }

    /// The `DisruptionReason` budgets are counted against.
    pub fn reason(self) -> DisruptionReason {
        match self {
            Method::Emptiness => DisruptionReason::Empty,
            Method::StaticDrift | Method::Drift => DisruptionReason::Drifted,
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
                DisruptionReason::Underutilized
            }
            Method::Repair => DisruptionReason::Unhealthy,
        }
    }
}

/// A node a command disrupts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandCandidate {
    pub node: String,
    pub node_claim: String,
    pub node_pool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    pub price: f64,
    /// Pods that will be rescheduled.
    pub pods: usize,
}

impl From<&Candidate> for CommandCandidate {
    fn from(c: &Candidate) -> Self {
        CommandCandidate {
            node: c.name.clone(),
            node_claim: c.node_claim.clone(),
            node_pool: c.node_pool.clone(),
            instance_type: c.instance_type.clone(),
            capacity_type: c.capacity_type.clone(),
            zone: c.zone.clone(),
            price: c.price,
            pods: c.reschedulable.len(),
        }
    }
}

/// One disruption: delete the candidates, after launching the replacements (if any).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    pub method: Method,
    pub reason: DisruptionReason,
    pub candidates: Vec<CommandCandidate>,
    /// NodeClaims to launch (and wait for) before the candidates are deleted.
    pub replacements: Vec<NewNodeClaim>,
    /// Candidate prices minus the replacements' cheapest prices.
    pub savings_per_hour: f64,
    pub explanation: String,
    /// The scores of the Balanced pools that approved the move (empty for other policies).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub balanced: Vec<crate::methods::balanced::BalancedScore>,
    /// What node repair decided (repair commands only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairCommand>,
    /// Set on a delete-only command that takes a node whose replacement could not be staged
    /// first (`terminate_first.rs`): provisioning refills the freed slot afterwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate_first: Option<TerminateFirst>,
}

/// Why a terminate-first command could not stage its replacement before the node goes
/// (upstream's `TerminateFirstReason`, the `terminate_first_reason` metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TerminateFirst {
    /// The replacement has no reserved capacity to launch into but the slot the node holds
    /// in a full capacity reservation.
    NoReservedCapacity,
    /// The node's static NodePool is at its `limits.nodes`.
    StaticAtLimit,
}

impl TerminateFirst {
    /// The metric label value (`no-reserved-capacity`, `static-at-limit`).
    pub fn as_str(self) -> &'static str {
        match self {
            TerminateFirst::NoReservedCapacity => "no-reserved-capacity",
            TerminateFirst::StaticAtLimit => "static-at-limit",
        }
    }

    /// What the command's explanation says of it.
    pub fn sentence(self) -> &'static str {
        match self {
            TerminateFirst::NoReservedCapacity => {
                "terminated before its replacement: the capacity reservations are full, so the replacement launches into the slot this node frees"
            }
            TerminateFirst::StaticAtLimit => {
                "terminated before its replacement: the static nodepool is at its node limit, so the replacement launches once this node is gone"
            }
        }
    }
}

/// A repair command's policy decision (upstream's `RepairPolicyResult` on the candidate).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepairCommand {
    /// The condition type the repair is for (`Ready`), and its status and reason.
    pub condition: String,
    pub status: String,
    pub reason: String,
    /// The policy asks for a reboot: the node is rebooted in place, not replaced.
    pub reboot: bool,
    /// The drain bound to stamp on the NodeClaim before it is deleted: `min(policy bound,
    /// NodeClaim's terminationGracePeriod)`; `None` inherits the NodeClaim's own.
    pub termination_grace_period: Option<std::time::Duration>,
}

impl Command {
    /// A delete-only terminate-first command of `method` for `candidate`: no replacement, no
    /// saving claimed, `explanation` followed by `why`'s sentence.
    pub(crate) fn terminate_first(
        method: Method,
        candidate: &Candidate,
        explanation: String,
        why: TerminateFirst,
    ) -> Command {
        Command {
            method,
            reason: method.reason(),
            explanation: format!("{explanation}; {}", why.sentence()),
            savings_per_hour: 0.0,
            candidates: vec![CommandCandidate::from(candidate)],
            replacements: Vec::new(),
            balanced: Vec::new(),
            repair: None,
            terminate_first: Some(why),
        }
    }

    pub fn is_delete(&self) -> bool {
        self.replacements.is_empty()
    }

    pub fn candidate_names(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.node.as_str()).collect()
    }
}

/// A node the pass left alone, and why: every reason found, in order (most specific first).
/// `reason` displays and serializes as the sentences joined with `"; "`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Considered {
    pub node: String,
    pub reason: Reasons,
}

/// The result of one disruption pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Decision {
    pub commands: Vec<Command>,
    pub considered: Vec<Considered>,
    /// Per method run, in order: its reason and how many candidates it could disrupt (the
    /// last figure per reason is upstream's `karpenter_voluntary_disruption_eligible_nodes`).
    #[serde(skip)]
    pub eligible: Vec<(DisruptionReason, usize)>,
    /// Per method run, in order: how long it took (wall clock; upstream's
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`).
    #[serde(skip)]
    pub evaluated: Vec<(Method, std::time::Duration)>,
    /// The consolidation moves this pass decided or a Balanced pool rejected
    /// (`karpenter_consolidation_moves_total`, `karpenter_consolidation_score`).
    #[serde(skip)]
    pub moves: Vec<crate::scores::ConsolidationMove>,
}

impl Decision {
    /// Why `node` was not disrupted, if it was considered.
    pub fn reasons_for(&self, node: &str) -> Option<&Reasons> {
        self.considered
            .iter()
            .find(|c| c.node == node)
            .map(|c| &c.reason)
    }

    /// Why `node` was not disrupted, as one sentence, if it was considered.
    pub fn reason_for(&self, node: &str) -> Option<String> {
        self.reasons_for(node).map(Reasons::text)
    }
}
