//! Why a node is not disrupted, as a typed value: a stable [`Code`] (for events and metric
//! labels) and the sentence a human reads (`karpenter explain`, `simulate --timeline`).
//!
//! A [`Reason`] displays as its sentence only, so output built from reasons reads as it always
//! has; the code is for machines. [`Reasons`] is the list a pass collects for one node, shown
//! joined with `"; "`.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// The cause of a reason: a small closed set with stable names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// The node has no NodeClaim: Karpenter does not manage it.
    Unmanaged,
    /// The node has no `karpenter.sh/nodepool` label.
    NoNodePoolLabel,
    /// The node's NodePool does not exist.
    NodePoolNotFound,
    /// The NodePool cannot be converted for the solver (it launches no replacements).
    NodePoolInvalid,
    /// The node is already in the orchestration queue.
    Queued,
    /// The node is not initialized.
    NotInitialized,
    /// The node is being deleted.
    Deleting,
    /// The node no longer exists.
    NodeGone,
    /// The node is already marked for deletion.
    MarkedForDeletion,
    /// The node is rebooting in place (`Rebooting=True`).
    Rebooting,
    /// The node is nominated for pending pods.
    Nominated,
    /// The node has `karpenter.sh/do-not-disrupt=true`.
    NodeDoNotDisrupt,
    /// A pod on the node has an active `karpenter.sh/do-not-disrupt`.
    PodDoNotDisrupt,
    /// A PodDisruptionBudget forbids evicting a pod on the node.
    PodDisruptionBudget,
    /// The NodePool's disruption budget allows no more disruptions for this reason.
    BudgetExhausted,
    /// Static NodePools are not consolidated.
    StaticNodePool,
    /// The node is empty: emptiness, not consolidation, handles it.
    LeftToEmptiness,
    /// The node is not empty (emptiness skips it).
    NotEmpty,
    /// The NodePool's policy `WhenEmpty` consolidates only empty nodes.
    WhenEmptyPolicy,
    /// The NodePool has `consolidateAfter: Never`.
    ConsolidationDisabled,
    /// `consolidateAfter` has not elapsed since the last pod event (or initialization).
    NotConsolidatable,
    /// The node's instance type is not offered to its NodePool.
    InstanceTypeNotOffered,
    /// The node lacks a capacity-type or zone label.
    NodeLabelsMissing,
    /// A pod of the node fits nowhere else.
    Unschedulable,
    /// A pod of the node would fit only on a node that is not initialized.
    UninitializedDestination,
    /// Rescheduling needs more than the one new node consolidation may launch.
    MultipleReplacements,
    /// **karpenter-rs**: the pods fit on other nodes only as packed by the plan; placed the
    /// way kube-scheduler spreads them (`LeastAllocated`), one would need a new node.
    SpreadNeedsNewNode,
    /// No replacement is cheaper than what it replaces.
    NotCheaper,
    /// Spot-to-spot consolidation is disabled (feature gate `SpotToSpotConsolidation`).
    SpotToSpotDisabled,
    /// Spot-to-spot consolidation found fewer cheaper spot options than it needs.
    SpotToSpotTooFewOptions,
    /// Fewer cheaper options than the requirements' `minValues`.
    MinValuesNotMet,
    /// A Balanced NodePool's score rejects the move.
    BalancedThreshold,
    /// A static NodePool is still scaling down.
    StaticPoolScalingDown,
    /// A static NodePool has no room under `limits.nodes` to stage a replacement.
    StaticPoolAtNodeLimit,
    /// Every offering a static NodePool's template allows is a full capacity reservation, so
    /// no replacement can be staged (and the node holds no slot a replacement could reuse).
    StaticPoolReservationsFull,
    /// No instance type of a static NodePool fits its template.
    StaticPoolNoInstanceType,
    /// Another method produced this pass's command, for other nodes.
    OtherMethodChosen,
    /// The node receives the pods of a command decided earlier in the same pass.
    ReceivesMovedPods,
    /// No method found a reason to disrupt the node.
    NothingFound,
    /// Validation: a candidate changed (pods, protection, nomination, deletion, queue).
    CandidateChanged,
    /// Validation: the re-simulation gives a different answer.
    DecisionChanged,
    /// A condition matches a repair policy, still within its toleration.
    UnhealthyTolerated,
    /// The node has `karpenter.sh/do-not-repair=true`.
    DoNotRepair,
    /// Repair would bypass blocking pods, but nothing bounds the drain.
    RepairNeedsGracePeriod,
    /// Too much of the node's NodePool is unhealthy: repair waits (never all at once).
    UnhealthyThresholdExceeded,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 45] = [
        Code::Unmanaged,
        Code::NoNodePoolLabel,
        Code::NodePoolNotFound,
        Code::NodePoolInvalid,
        Code::Queued,
        Code::NotInitialized,
        Code::Deleting,
        Code::NodeGone,
        Code::MarkedForDeletion,
        Code::Rebooting,
        Code::Nominated,
        Code::NodeDoNotDisrupt,
        Code::PodDoNotDisrupt,
        Code::PodDisruptionBudget,
        Code::BudgetExhausted,
        Code::StaticNodePool,
        Code::LeftToEmptiness,
        Code::NotEmpty,
        Code::WhenEmptyPolicy,
        Code::ConsolidationDisabled,
        Code::NotConsolidatable,
        Code::InstanceTypeNotOffered,
        Code::NodeLabelsMissing,
        Code::Unschedulable,
        Code::UninitializedDestination,
        Code::MultipleReplacements,
        Code::SpreadNeedsNewNode,
        Code::NotCheaper,
        Code::SpotToSpotDisabled,
        Code::SpotToSpotTooFewOptions,
        Code::MinValuesNotMet,
        Code::BalancedThreshold,
        Code::StaticPoolScalingDown,
        Code::StaticPoolAtNodeLimit,
        Code::StaticPoolReservationsFull,
        Code::StaticPoolNoInstanceType,
        Code::OtherMethodChosen,
        Code::ReceivesMovedPods,
        Code::NothingFound,
        Code::CandidateChanged,
        Code::DecisionChanged,
        Code::UnhealthyTolerated,
        Code::DoNotRepair,
        Code::RepairNeedsGracePeriod,
        Code::UnhealthyThresholdExceeded,
    ];

    /// The stable name (CamelCase), for event reasons and metric labels. Never rename one.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unmanaged => "Unmanaged",
            Code::NoNodePoolLabel => "NoNodePoolLabel",
            Code::NodePoolNotFound => "NodePoolNotFound",
            Code::NodePoolInvalid => "NodePoolInvalid",
            Code::Queued => "Queued",
            Code::NotInitialized => "NotInitialized",
            Code::Deleting => "Deleting",
            Code::NodeGone => "NodeGone",
            Code::MarkedForDeletion => "MarkedForDeletion",
            Code::Rebooting => "Rebooting",
            Code::Nominated => "Nominated",
            Code::NodeDoNotDisrupt => "NodeDoNotDisrupt",
            Code::PodDoNotDisrupt => "PodDoNotDisrupt",
            Code::PodDisruptionBudget => "PodDisruptionBudget",
            Code::BudgetExhausted => "BudgetExhausted",
            Code::StaticNodePool => "StaticNodePool",
            Code::LeftToEmptiness => "LeftToEmptiness",
            Code::NotEmpty => "NotEmpty",
            Code::WhenEmptyPolicy => "WhenEmptyPolicy",
            Code::ConsolidationDisabled => "ConsolidationDisabled",
            Code::NotConsolidatable => "NotConsolidatable",
            Code::InstanceTypeNotOffered => "InstanceTypeNotOffered",
            Code::NodeLabelsMissing => "NodeLabelsMissing",
            Code::Unschedulable => "Unschedulable",
            Code::UninitializedDestination => "UninitializedDestination",
            Code::MultipleReplacements => "MultipleReplacements",
            Code::SpreadNeedsNewNode => "SpreadNeedsNewNode",
            Code::NotCheaper => "NotCheaper",
            Code::SpotToSpotDisabled => "SpotToSpotDisabled",
            Code::SpotToSpotTooFewOptions => "SpotToSpotTooFewOptions",
            Code::MinValuesNotMet => "MinValuesNotMet",
            Code::BalancedThreshold => "BalancedThreshold",
            Code::StaticPoolScalingDown => "StaticPoolScalingDown",
            Code::StaticPoolAtNodeLimit => "StaticPoolAtNodeLimit",
            Code::StaticPoolReservationsFull => "StaticPoolReservationsFull",
            Code::StaticPoolNoInstanceType => "StaticPoolNoInstanceType",
            Code::OtherMethodChosen => "OtherMethodChosen",
            Code::ReceivesMovedPods => "ReceivesMovedPods",
            Code::NothingFound => "NothingFound",
            Code::CandidateChanged => "CandidateChanged",
            Code::DecisionChanged => "DecisionChanged",
            Code::UnhealthyTolerated => "UnhealthyTolerated",
            Code::DoNotRepair => "DoNotRepair",
            Code::RepairNeedsGracePeriod => "RepairNeedsGracePeriod",
            Code::UnhealthyThresholdExceeded => "UnhealthyThresholdExceeded",
        }
    }
}

/// Upstream's event reason for a node left alone because of a disruption-level cause (the
/// node or a pod protects it, its pool or budget forbids it, it is not ready for it).
pub const DISRUPTION_BLOCKED: &str = "DisruptionBlocked";
/// Upstream's event reason for a node consolidation looked at and left (policy, price,
/// nowhere for its pods, spot-to-spot).
pub const UNCONSOLIDATABLE: &str = "Unconsolidatable";
/// Upstream's warning event reason for a node repair withholds because too much of its
/// NodePool is unhealthy (on the Node, its NodeClaim and the NodePool).
pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";
/// Upstream's event reason for a move a Balanced NodePool's score refused.
pub const CONSOLIDATION_REJECTED: &str = "ConsolidationRejected";

impl Code {
    /// The Kubernetes event reason upstream publishes this cause under (alerts and docs grep
    /// for them): [`UNCONSOLIDATABLE`] for consolidation's own verdicts,
    /// [`CONSOLIDATION_REJECTED`] for a Balanced score, [`DISRUPTION_BLOCKED`] for the rest.
    pub fn event_reason(self) -> &'static str {
        match self {
            Code::LeftToEmptiness
            | Code::NotEmpty
            | Code::WhenEmptyPolicy
            | Code::ConsolidationDisabled
            | Code::NotConsolidatable
            | Code::InstanceTypeNotOffered
            | Code::NodeLabelsMissing
            | Code::Unschedulable
            | Code::UninitializedDestination
            | Code::MultipleReplacements
            | Code::SpreadNeedsNewNode
            | Code::NotCheaper
            | Code::SpotToSpotDisabled
            | Code::SpotToSpotTooFewOptions
            | Code::MinValuesNotMet
            | Code::OtherMethodChosen
            | Code::ReceivesMovedPods
            | Code::NothingFound => UNCONSOLIDATABLE,
            Code::BalancedThreshold => CONSOLIDATION_REJECTED,
            Code::UnhealthyThresholdExceeded => NODE_REPAIR_BLOCKED,
            Code::Unmanaged
            | Code::NoNodePoolLabel
            | Code::NodePoolNotFound
            | Code::NodePoolInvalid
            | Code::Queued
            | Code::NotInitialized
            | Code::Deleting
            | Code::NodeGone
            | Code::MarkedForDeletion
            | Code::Rebooting
            | Code::Nominated
            | Code::NodeDoNotDisrupt
            | Code::PodDoNotDisrupt
            | Code::PodDisruptionBudget
            | Code::BudgetExhausted
            | Code::StaticNodePool
            | Code::StaticPoolScalingDown
            | Code::StaticPoolAtNodeLimit
            | Code::StaticPoolReservationsFull
            | Code::StaticPoolNoInstanceType
            | Code::CandidateChanged
            | Code::DecisionChanged
            | Code::UnhealthyTolerated
            | Code::DoNotRepair
            | Code::RepairNeedsGracePeriod => DISRUPTION_BLOCKED,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// When a cause lifts by itself, with nothing changing in the cluster (e.g. `consolidateAfter`
/// passing): the time, and how long that is after the pass that found it. Serializes as
/// `{"at": RFC 3339, "remaining": Go duration}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifts {
    pub at: DateTime<Utc>,
    pub remaining: Duration,
}

impl Serialize for Lifts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Lifts", 2)?;
        s.serialize_field(
            "at",
            &self.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )?;
        s.serialize_field(
            "remaining",
            &karpenter_api::duration::format_go_duration(self.remaining),
        )?;
        s.end()
    }
}

/// One reason: its code and its sentence (and, for a cause that passes with time, when).
/// Displays as the sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    pub code: Code,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifts: Option<Lifts>,
}

impl Reason {
    pub fn new(code: Code, text: impl Into<String>) -> Self {
        Reason {
            code,
            text: text.into(),
            lifts: None,
        }
    }

    /// The same cause, lifting by itself at `at`, `remaining` after the pass at `now`.
    pub fn lifting_at(self, at: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        let remaining = (at - now).to_std().unwrap_or_default();
        Reason {
            lifts: Some(Lifts { at, remaining }),
            ..self
        }
    }

    /// The same cause, its sentence led by `prefix` (e.g. `"empty but "`).
    pub fn prefixed(self, prefix: &str) -> Self {
        Reason {
            text: format!("{prefix}{}", self.text),
            ..self
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The reasons one node stayed, in the order they were found. Displays (and serializes) as
/// the sentences joined with `"; "`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reasons(Vec<Reason>);

impl Reasons {
    pub fn new(reasons: Vec<Reason>) -> Self {
        Reasons(reasons)
    }

    pub fn as_slice(&self) -> &[Reason] {
        &self.0
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Reason> {
        self.0.iter()
    }

    /// The codes, in order.
    pub fn codes(&self) -> Vec<Code> {
        self.0.iter().map(|r| r.code).collect()
    }

    /// The first (most specific) reason.
    pub fn first(&self) -> Option<&Reason> {
        self.0.first()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The sentences joined with `"; "`.
    pub fn text(&self) -> String {
        self.to_string()
    }

    /// The reasons grouped by [`Code::event_reason`], in the order each event reason first
    /// appears, each group's sentences joined with `"; "`: one event per group.
    pub fn by_event_reason(&self) -> Vec<(&'static str, String)> {
        let mut groups: Vec<(&'static str, Vec<&str>)> = Vec::new();
        for reason in &self.0 {
            let event = reason.code.event_reason();
            match groups.iter_mut().find(|(e, _)| *e == event) {
                Some((_, texts)) => texts.push(&reason.text),
                None => groups.push((event, vec![&reason.text])),
            }
        }
        groups
            .into_iter()
            .map(|(event, texts)| (event, texts.join("; ")))
            .collect()
    }
}

impl fmt::Display for Reasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&r.text)?;
        }
        Ok(())
    }
}

impl Serialize for Reasons {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'a> IntoIterator for &'a Reasons {
    type Item = &'a Reason;
    type IntoIter = std::slice::Iter<'a, Reason>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn consolidation_verdicts_are_unconsolidatable_and_protections_block_disruption() {
        assert_eq!(Code::NotCheaper.event_reason(), "Unconsolidatable");
        assert_eq!(
            Code::ConsolidationDisabled.event_reason(),
            "Unconsolidatable"
        );
        assert_eq!(Code::SpotToSpotDisabled.event_reason(), "Unconsolidatable");
        assert_eq!(
            Code::PodDisruptionBudget.event_reason(),
            "DisruptionBlocked"
        );
        assert_eq!(Code::PodDoNotDisrupt.event_reason(), "DisruptionBlocked");
        assert_eq!(Code::BudgetExhausted.event_reason(), "DisruptionBlocked");
        assert_eq!(
            Code::BalancedThreshold.event_reason(),
            "ConsolidationRejected"
        );
    }

    #[test]
    fn reasons_group_into_one_event_per_event_reason_in_order() {
        let reasons = Reasons::new(vec![
            Reason::new(Code::PodDisruptionBudget, "pdb web blocks eviction"),
            Reason::new(Code::NotCheaper, "no cheaper replacement"),
            Reason::new(Code::NodeDoNotDisrupt, "node annotated do-not-disrupt"),
        ]);
        assert_eq!(
            reasons.by_event_reason(),
            [
                (
                    "DisruptionBlocked",
                    "pdb web blocks eviction; node annotated do-not-disrupt".to_owned()
                ),
                ("Unconsolidatable", "no cheaper replacement".to_owned()),
            ]
        );
        assert!(Reasons::default().by_event_reason().is_empty());
    }

    /// The published names. Changing one breaks dashboards and alerts: add, never rename.
    const STABLE: [(Code, &str); 45] = [
        (Code::Unmanaged, "Unmanaged"),
        (Code::NoNodePoolLabel, "NoNodePoolLabel"),
        (Code::NodePoolNotFound, "NodePoolNotFound"),
        (Code::NodePoolInvalid, "NodePoolInvalid"),
        (Code::Queued, "Queued"),
        (Code::NotInitialized, "NotInitialized"),
        (Code::Deleting, "Deleting"),
        (Code::NodeGone, "NodeGone"),
        (Code::MarkedForDeletion, "MarkedForDeletion"),
        (Code::Rebooting, "Rebooting"),
        (Code::Nominated, "Nominated"),
        (Code::NodeDoNotDisrupt, "NodeDoNotDisrupt"),
        (Code::PodDoNotDisrupt, "PodDoNotDisrupt"),
        (Code::PodDisruptionBudget, "PodDisruptionBudget"),
        (Code::BudgetExhausted, "BudgetExhausted"),
        (Code::StaticNodePool, "StaticNodePool"),
        (Code::LeftToEmptiness, "LeftToEmptiness"),
        (Code::NotEmpty, "NotEmpty"),
        (Code::WhenEmptyPolicy, "WhenEmptyPolicy"),
        (Code::ConsolidationDisabled, "ConsolidationDisabled"),
        (Code::NotConsolidatable, "NotConsolidatable"),
        (Code::InstanceTypeNotOffered, "InstanceTypeNotOffered"),
        (Code::NodeLabelsMissing, "NodeLabelsMissing"),
        (Code::Unschedulable, "Unschedulable"),
        (Code::UninitializedDestination, "UninitializedDestination"),
        (Code::MultipleReplacements, "MultipleReplacements"),
        (Code::SpreadNeedsNewNode, "SpreadNeedsNewNode"),
        (Code::NotCheaper, "NotCheaper"),
        (Code::SpotToSpotDisabled, "SpotToSpotDisabled"),
        (Code::SpotToSpotTooFewOptions, "SpotToSpotTooFewOptions"),
        (Code::MinValuesNotMet, "MinValuesNotMet"),
        (Code::BalancedThreshold, "BalancedThreshold"),
        (Code::StaticPoolScalingDown, "StaticPoolScalingDown"),
        (Code::StaticPoolAtNodeLimit, "StaticPoolAtNodeLimit"),
        (
            Code::StaticPoolReservationsFull,
            "StaticPoolReservationsFull",
        ),
        (Code::StaticPoolNoInstanceType, "StaticPoolNoInstanceType"),
        (Code::OtherMethodChosen, "OtherMethodChosen"),
        (Code::ReceivesMovedPods, "ReceivesMovedPods"),
        (Code::NothingFound, "NothingFound"),
        (Code::CandidateChanged, "CandidateChanged"),
        (Code::DecisionChanged, "DecisionChanged"),
        (Code::UnhealthyTolerated, "UnhealthyTolerated"),
        (Code::DoNotRepair, "DoNotRepair"),
        (Code::RepairNeedsGracePeriod, "RepairNeedsGracePeriod"),
        (
            Code::UnhealthyThresholdExceeded,
            "UnhealthyThresholdExceeded",
        ),
    ];

    #[test]
    fn every_code_keeps_its_published_name() {
        for (code, name) in STABLE {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.to_string(), name);
        }
        let listed: Vec<Code> = STABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(listed, Code::ALL, "the table covers every code, in order");
    }

    #[test]
    fn no_two_codes_share_a_name() {
        let names: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), Code::ALL.len());
    }

    #[test]
    fn names_are_camel_case_words_fit_for_event_reasons_and_metric_labels() {
        for code in Code::ALL {
            let name = code.as_str();
            assert!(name.starts_with(|c: char| c.is_ascii_uppercase()), "{name}");
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{name}");
        }
    }

    #[test]
    fn a_reason_displays_as_its_sentence_and_a_list_joins_them() {
        let reasons = Reasons::new(vec![
            Reason::new(Code::NotEmpty, "not empty (2 pods to reschedule)"),
            Reason::new(Code::OtherMethodChosen, "Drift chose other nodes this pass"),
        ]);
        assert_eq!(
            reasons.to_string(),
            "not empty (2 pods to reschedule); Drift chose other nodes this pass"
        );
        assert_eq!(reasons.text(), reasons.to_string());
        assert_eq!(reasons.codes(), [Code::NotEmpty, Code::OtherMethodChosen]);
        assert_eq!(
            serde_json::to_string(&reasons).ok().as_deref(),
            Some("\"not empty (2 pods to reschedule); Drift chose other nodes this pass\"")
        );
    }

    #[test]
    fn a_prefix_keeps_the_code() {
        let r = Reason::new(Code::BudgetExhausted, "budget is 0").prefixed("empty but ");
        assert_eq!(r.code, Code::BudgetExhausted);
        assert_eq!(r.to_string(), "empty but budget is 0");
    }
}
