//! Node repair policies (upstream `cloudprovider.RepairPolicy` and `node/health/policy.go`):
//! which unhealthy Node conditions a cloud supports repairing, and the pure matching of a Node's
//! conditions against them.
//!
//! A cloud lists its policies ([`crate::CloudProvider::repair_policies`]); [`RepairMatcher::new`]
//! validates the whole set once (exactly one default fallback, an empty `reason_regex`, which
//! must replace; regexes compile; priorities within 0-100) and compiles it. Then, per Node:
//!
//! - [`RepairMatcher::matches`]: every policy one of the Node's conditions matches, whatever the
//!   toleration. A condition matches the policies of its (type, status) pair whose regex matches
//!   its reason; when none does (or the pair has only the fallback), the set's one fallback
//!   applies. A pair no policy names is healthy.
//! - [`resolve`]: the matches eligible at `now` (the condition's `lastTransitionTime`, clamped to
//!   the Node's creation, plus the policy's toleration) merged into one [`RepairResult`]: the most
//!   disruptive action; among equal actions the higher priority, then the earlier eligibility,
//!   then the lower condition type; the shortest drain bound of any eligible policy; and the
//!   repair score (dense priority rank + minutes since eligible / 30) that orders candidates.
//!
//! No clock and no I/O: `now` and the Node's conditions come in as values.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use regex::Regex;

/// What a policy asks for (upstream `RepairAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RepairAction {
    /// Restart the instance in place (upstream `RebootNode`).
    RebootNode,
    /// Replace the Node (upstream `ReplaceNode`).
    ReplaceNode,
}

impl RepairAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RepairAction::RebootNode => "RebootNode",
            RepairAction::ReplaceNode => "ReplaceNode",
        }
    }

    /// Replacing disrupts more than rebooting.
    pub fn is_more_disruptive_than(self, other: RepairAction) -> bool {
        self.rank() > other.rank()
    }

    fn rank(self) -> u8 {
        match self {
            RepairAction::RebootNode => 0,
            RepairAction::ReplaceNode => 1,
        }
    }
}

impl fmt::Display for RepairAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Node condition status a policy names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }

    /// `True`, `False` or `Unknown`; anything else is no status a policy can name.
    pub fn parse(value: &str) -> Option<ConditionStatus> {
        match value {
            "True" => Some(ConditionStatus::True),
            "False" => Some(ConditionStatus::False),
            "Unknown" => Some(ConditionStatus::Unknown),
            _ => None,
        }
    }
}

/// When and how a cloud repairs a Node condition (upstream `RepairPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPolicy {
    /// The Node condition type (`Ready`, `KernelReady`, ...).
    pub condition_type: String,
    /// The unhealthy status.
    pub condition_status: ConditionStatus,
    /// A regex over the condition's reason; empty makes this the set's one default fallback.
    pub reason_regex: String,
    /// Added to the condition's `lastTransitionTime`: when the policy becomes eligible.
    pub toleration: Duration,
    /// The drain bound of a repair: `None` inherits the NodeClaim's `terminationGracePeriod`,
    /// a non-zero value is `min(this, the NodeClaim's)`, zero skips the drain.
    pub termination_grace_period: Option<Duration>,
    /// 0-100; higher repairs first (only the order matters: ranks are dense).
    pub priority: i32,
    pub action: RepairAction,
}

impl RepairPolicy {
    /// A `ReplaceNode` policy with priority 0 and no drain bound.
    pub fn replace(
        condition_type: &str,
        condition_status: ConditionStatus,
        reason_regex: &str,
        toleration: Duration,
    ) -> Self {
        RepairPolicy {
            condition_type: condition_type.to_owned(),
            condition_status,
            reason_regex: reason_regex.to_owned(),
            toleration,
            termination_grace_period: None,
            priority: 0,
            action: RepairAction::ReplaceNode,
        }
    }

    /// The same, with a drain bound.
    pub fn with_grace(mut self, bound: Duration) -> Self {
        self.termination_grace_period = Some(bound);
        self
    }
}

/// The lowest and highest priority a policy may have.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> = 0..=100;
/// How long past its toleration a node waits to earn one priority rank (upstream
/// `agingConstant`): a node overtakes a fresher rival one rank above it after this long.
pub const AGING: Duration = Duration::from_secs(30 * 60);

/// A cloud's policy set is not usable; every problem is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid repair policies: {}", .0.join("; "))]
pub struct InvalidRepairPolicies(pub Vec<String>);

/// One of a Node's conditions, as matching reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedCondition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    /// `None` when the condition carries none (then the Node's creation counts).
    pub last_transition: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
struct Compiled {
    policy: RepairPolicy,
    regex: Option<Regex>,
}

/// A validated, compiled policy set.
#[derive(Debug, Clone)]
pub struct RepairMatcher {
    groups: BTreeMap<(String, ConditionStatus), Vec<Compiled>>,
    fallback: Compiled,
    ranks: BTreeMap<i32, usize>,
}

/// A policy one of a Node's conditions matches, whatever the toleration.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyMatch {
    pub policy: RepairPolicy,
    /// The condition's type, status and reason.
    pub condition: String,
    pub status: String,
    pub reason: String,
    /// The policy is the set's fallback (no reason-specific policy matched).
    pub fallback: bool,
    /// Dense rank of the policy's priority.
    pub rank: usize,
    /// The condition's transition (clamped to the Node's creation) plus the toleration.
    pub eligible_at: DateTime<Utc>,
}

impl RepairMatcher {
    /// Validates and compiles a cloud's complete policy set.
    pub fn new(policies: &[RepairPolicy]) -> Result<Self, InvalidRepairPolicies> {
        let mut errors = Vec::new();
        let mut groups: BTreeMap<(String, ConditionStatus), Vec<Compiled>> = BTreeMap::new();
        let mut fallback: Option<Compiled> = None;
        for (i, policy) in policies.iter().enumerate() {
            let name = format!(
                "policy[{i}] ({}={}, reason {:?})",
                policy.condition_type,
                policy.condition_status.as_str(),
                policy.reason_regex
            );
            if policy.condition_type.is_empty() {
                errors.push(format!("{name} has an empty condition type"));
            }
            if !PRIORITY_RANGE.contains(&policy.priority) {
                errors.push(format!(
                    "{name} has priority {} outside [0, 100]",
                    policy.priority
                ));
            }
            let key = (policy.condition_type.clone(), policy.condition_status);
            let specific = groups.entry(key).or_default();
            if policy.reason_regex.is_empty() {
                let compiled = Compiled {
                    policy: policy.clone(),
                    regex: None,
                };
                match &fallback {
                    Some(first) => errors.push(format!(
                        "the set has more than one default fallback (empty reason regex): policy {}={} and {name}",
                        first.policy.condition_type,
                        first.policy.condition_status.as_str()
                    )),
                    None => fallback = Some(compiled),
                }
                continue;
            }
            match Regex::new(&policy.reason_regex) {
                Ok(regex) => specific.push(Compiled {
                    policy: policy.clone(),
                    regex: Some(regex),
                }),
                Err(e) => errors.push(format!("{name} has an invalid reason regex: {e}")),
            }
        }
        let fallback = match fallback {
            None => {
                errors.push("the set must define one default fallback (empty reason regex)".into());
                None
            }
            Some(f) if f.policy.action != RepairAction::ReplaceNode => {
                errors.push(format!(
                    "the default fallback ({}={}) must use action ReplaceNode, not {}",
                    f.policy.condition_type,
                    f.policy.condition_status.as_str(),
                    f.policy.action
                ));
                None
            }
            Some(f) => Some(f),
        };
        match fallback {
            Some(fallback) if errors.is_empty() => {
                let priorities: BTreeSet<i32> = policies.iter().map(|p| p.priority).collect();
                let ranks = priorities
                    .into_iter()
                    .enumerate()
                    .map(|(rank, p)| (p, rank))
                    .collect();
                Ok(RepairMatcher {
                    groups,
                    fallback,
                    ranks,
                })
            }
            _ => Err(InvalidRepairPolicies(errors)),
        }
    }

    /// The condition's (type, status) pair is one the set repairs: the Node counts as
    /// unhealthy for the never-all-at-once threshold, whatever its toleration.
    pub fn covers(&self, condition: &ObservedCondition) -> bool {
        ConditionStatus::parse(&condition.status)
            .is_some_and(|s| self.groups.contains_key(&(condition.type_.clone(), s)))
    }

    /// Every policy one of the conditions matches, whatever the toleration.
    pub fn matches(
        &self,
        conditions: &[ObservedCondition],
        created: DateTime<Utc>,
    ) -> Vec<PolicyMatch> {
        let mut out = Vec::new();
        for condition in conditions {
            let Some(status) = ConditionStatus::parse(&condition.status) else {
                continue;
            };
            let Some(specific) = self.groups.get(&(condition.type_.clone(), status)) else {
                continue;
            };
            // A condition cannot predate its Node; a missing transition counts from creation.
            let since = condition
                .last_transition
                .filter(|t| *t >= created)
                .unwrap_or(created);
            let mut matched = false;
            for compiled in specific {
                if compiled
                    .regex
                    .as_ref()
                    .is_some_and(|r| r.is_match(&condition.reason))
                {
                    matched = true;
                    out.push(self.policy_match(compiled, condition, since, false));
                }
            }
            if !matched {
                out.push(self.policy_match(&self.fallback, condition, since, true));
            }
        }
        out
    }

    fn policy_match(
        &self,
        compiled: &Compiled,
        condition: &ObservedCondition,
        since: DateTime<Utc>,
        fallback: bool,
    ) -> PolicyMatch {
        let toleration =
            chrono::Duration::from_std(compiled.policy.toleration).unwrap_or(chrono::Duration::MAX);
        PolicyMatch {
            policy: compiled.policy.clone(),
            condition: condition.type_.clone(),
            status: condition.status.clone(),
            reason: condition.reason.clone(),
            fallback,
            rank: self
                .ranks
                .get(&compiled.policy.priority)
                .copied()
                .unwrap_or(0),
            eligible_at: since.checked_add_signed(toleration).unwrap_or(since),
        }
    }
}

/// The repair decision for one Node at one moment: the eligible matches merged (upstream
/// `RepairResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct RepairResult {
    pub action: RepairAction,
    /// The condition (type, status, reason) the action comes from.
    pub condition: String,
    pub status: String,
    pub reason: String,
    pub reason_regex: String,
    pub fallback: bool,
    pub toleration: Duration,
    /// When the selected policy became eligible.
    pub eligible_at: DateTime<Utc>,
    /// The shortest drain bound of any eligible policy, and the condition it comes from.
    pub termination_grace_period: Option<(Duration, String)>,
    selected_priority: i32,
    grace_eligible_at: Option<DateTime<Utc>>,
    score_rank: usize,
    score_eligible_at: DateTime<Utc>,
}

fn minutes(d: chrono::Duration) -> f64 {
    d.num_milliseconds() as f64 / 60_000.0
}

impl RepairResult {
    /// Rank + minutes since eligible / [`AGING`], the highest over the eligible policies;
    /// scoring every candidate at the same `now` keeps equal ones tied.
    pub fn score_at(&self, now: DateTime<Utc>) -> f64 {
        self.score_rank as f64
            + minutes(now - self.score_eligible_at) / (AGING.as_secs_f64() / 60.0)
    }

    fn first(m: &PolicyMatch, eligible_at: DateTime<Utc>) -> Self {
        RepairResult {
            action: m.policy.action,
            condition: m.condition.clone(),
            status: m.status.clone(),
            reason: m.reason.clone(),
            reason_regex: m.policy.reason_regex.clone(),
            fallback: m.fallback,
            toleration: m.policy.toleration,
            eligible_at,
            termination_grace_period: m
                .policy
                .termination_grace_period
                .map(|g| (g, m.condition.clone())),
            selected_priority: m.policy.priority,
            grace_eligible_at: m.policy.termination_grace_period.map(|_| eligible_at),
            score_rank: m.rank,
            score_eligible_at: eligible_at,
        }
    }

    fn merge(&mut self, m: &PolicyMatch, eligible_at: DateTime<Utc>, now: DateTime<Utc>) {
        let score = m.rank as f64 + minutes(now - eligible_at) / (AGING.as_secs_f64() / 60.0);
        if score > self.score_at(now) {
            self.score_rank = m.rank;
            self.score_eligible_at = eligible_at;
        }
        if let Some(bound) = m.policy.termination_grace_period {
            let shorter = match (&self.termination_grace_period, self.grace_eligible_at) {
                (None, _) | (_, None) => true,
                (Some((current, condition)), Some(at)) => {
                    if bound != *current {
                        bound < *current
                    } else if eligible_at != at {
                        eligible_at < at
                    } else {
                        m.condition < *condition
                    }
                }
            };
            if shorter {
                self.termination_grace_period = Some((bound, m.condition.clone()));
                self.grace_eligible_at = Some(eligible_at);
            }
        }
        let selected = if m.policy.action == self.action {
            if m.policy.priority != self.selected_priority {
                m.policy.priority > self.selected_priority
            } else if eligible_at != self.eligible_at {
                eligible_at < self.eligible_at
            } else {
                m.condition < self.condition
            }
        } else {
            m.policy.action.is_more_disruptive_than(self.action)
        };
        if selected {
            self.action = m.policy.action;
            self.condition = m.condition.clone();
            self.status = m.status.clone();
            self.reason = m.reason.clone();
            self.reason_regex = m.policy.reason_regex.clone();
            self.fallback = m.fallback;
            self.toleration = m.policy.toleration;
            self.eligible_at = eligible_at;
            self.selected_priority = m.policy.priority;
        }
    }
}

/// The matches eligible at `now` merged into one decision; `None` while every match is within
/// its toleration (or there is none). Each toleration counts from `not_before` at the earliest
/// (upstream: the end of the Node's last reboot).
pub fn resolve(
    matches: &[PolicyMatch],
    now: DateTime<Utc>,
    not_before: Option<DateTime<Utc>>,
) -> Option<RepairResult> {
    let mut result: Option<RepairResult> = None;
    for m in matches {
        let mut eligible_at = m.eligible_at;
        if let Some(earliest) = not_before.and_then(|t| {
            t.checked_add_signed(chrono::Duration::from_std(m.policy.toleration).ok()?)
        }) && eligible_at < earliest
        {
            eligible_at = earliest;
        }
        if eligible_at > now {
            continue;
        }
        match &mut result {
            None => result = Some(RepairResult::first(m, eligible_at)),
            Some(r) => r.merge(m, eligible_at, now),
        }
    }
    result
}

/// The earliest time one of the matches becomes eligible (for a human: "repair from ...").
pub fn earliest_eligible(matches: &[PolicyMatch]) -> Option<&PolicyMatch> {
    matches.iter().min_by_key(|m| m.eligible_at)
}

#[cfg(test)]
mod tests;
