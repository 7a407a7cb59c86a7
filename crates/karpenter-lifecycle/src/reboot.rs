//! The in-place reboot of a node (upstream `nodeclaim.reboot`, v1.15) as a step function: from
//! a NodeClaim with `Rebooting=True`, its Node, the pods on it and `now`, the steps of one pass
//! ([`decide_reboot`]).
//!
//! The `Rebooting` condition's reason is the durable phase. `RebootRequested` (written by node
//! repair when it commits a reboot): the Node is fenced with `karpenter.sh/rebooting:NoSchedule`;
//! unless the drain bound (`karpenter.sh/reboot-termination-grace-period`) is `0s`, it is
//! drained through the Eviction API (the termination's [`plan_drain`] without a deadline: pods
//! are evicted, never force-deleted) for at least [`MIN_DRAIN_TIME`] and at most the bound from
//! the request, pods still there then ride the reboot; the Node's `bootID` is recorded
//! (`karpenter.sh/reboot-pre-boot-id`) and the cloud asked to reboot with a stable operation id
//! ([`operation_id`]). `RebootIssued` (with `Initialized=Unknown`, reason `Rebooting`): once
//! the `bootID` differs the fence goes, and once the Node is also `Ready` the reboot succeeds.
//! A recorded pre-boot id with a changed `bootID` means the reboot happened already: it is not
//! issued again.
//!
//! Deadlines: the cloud must accept the reboot within [`ISSUANCE_TIMEOUT`] of the first try (in
//! this process: upstream keeps that time in memory too, the controller passes it in), the node
//! must come back within [`OBSERVATION_WINDOW`] of the issue. A failed reboot replaces the
//! node (the NodeClaim is deleted), except an invalid request, which only ends the reboot.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use karpenter_api::duration::parse_go_duration;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions::{self, rebooting};
use karpenter_scheduling::PodRecord;
use karpenter_state::conditions::from_api_time;

use crate::lifecycle::condition;
use crate::termination::{DrainPlan, MIN_DRAIN_TIME, plan_drain};

/// How long the node has to prove a new boot and be Ready after the reboot was issued.
pub const OBSERVATION_WINDOW: Duration = Duration::from_secs(20 * 60);
/// How long the cloud has to accept the reboot after the first try.
pub const ISSUANCE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How often a reboot in flight is looked at when nothing changes.
pub const POLL_INTERVAL: Duration = Duration::from_secs(15);

/// The taint fencing a rebooting Node from new pods.
pub fn rebooting_taint() -> Taint {
    crate::taint::no_schedule(labels::REBOOTING_TAINT_KEY)
}

/// The Node carries [`rebooting_taint`].
pub fn is_fenced(node: &Node) -> bool {
    crate::taint::has_no_schedule(node, labels::REBOOTING_TAINT_KEY)
}

/// The Node's `status.nodeInfo.bootID` (empty when unknown).
pub fn boot_id(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map_or("", |i| i.boot_id.as_str())
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The NodeClaim has a reboot in flight (`Rebooting=True`).
pub fn is_rebooting(claim: &NodeClaim) -> bool {
    condition(claim, conditions::REBOOTING).is_some_and(|c| c.status == "True")
}

/// When the reboot was requested: the `Rebooting` condition's last transition.
pub fn requested_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    condition(claim, conditions::REBOOTING).and_then(|c| from_api_time(&c.last_transition_time))
}

/// When the reboot was issued: `Initialized` went `Unknown` then.
pub fn issued_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    condition(claim, conditions::INITIALIZED)
        .filter(|c| c.status == "Unknown")
        .and_then(|c| from_api_time(&c.last_transition_time))
}

/// The drain bound: `None` unbounded, `0` no drain. An unparsable or negative value is an
/// invalid request.
pub fn termination_grace_period(claim: &NodeClaim) -> Result<Option<Duration>, String> {
    let Some(value) = annotation(claim, labels::REBOOT_TERMINATION_GRACE_PERIOD) else {
        return Ok(None);
    };
    if value.trim_start().starts_with('-') {
        return Err(format!(
            "reboot termination grace period must be non-negative, got {value:?}"
        ));
    }
    parse_go_duration(value)
        .map(Some)
        .map_err(|e| format!("parsing reboot termination grace period {value:?}: {e}"))
}

/// The reboot's stable operation id: the NodeClaim's uid, the request time (ns) and the
/// pre-boot id, the same at every retry and after a restart (upstream's format).
pub fn operation_id(claim: &NodeClaim, pre_boot_id: &str) -> String {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let at = requested_at(claim)
        .and_then(|t| t.timestamp_nanos_opt())
        .unwrap_or_default();
    format!("{uid}-{at}-{pre_boot_id}")
}

/// How a reboot ended (the `result` label of the reboot metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebootResult {
    Succeeded,
    ProviderError,
    RecoveryTimeout,
    InvalidRequest,
}

impl RebootResult {
    pub fn as_str(self) -> &'static str {
        match self {
            RebootResult::Succeeded => "succeeded",
            RebootResult::ProviderError => "provider_error",
            RebootResult::RecoveryTimeout => "recovery_timeout",
            RebootResult::InvalidRequest => "invalid_request",
        }
    }

    /// A failed reboot replaces the node, unless the request itself was invalid.
    pub fn replaces(self) -> bool {
        matches!(
            self,
            RebootResult::ProviderError | RebootResult::RecoveryTimeout
        )
    }
}

/// One thing a reboot pass does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebootStep {
    /// Taint the Node `karpenter.sh/rebooting:NoSchedule`.
    Fence,
    /// Evict the pods the plan names (never force-delete them).
    Drain(DrainPlan),
    /// Record the Node's current `bootID` in `karpenter.sh/reboot-pre-boot-id`.
    RecordPreBootId { boot_id: String },
    /// Ask the cloud to reboot; on acceptance, [`RebootStep::MarkIssued`].
    Issue { operation_id: String },
    /// `Rebooting=True/RebootIssued` (message kept), `Initialized=Unknown/Rebooting`, and the
    /// Node's `karpenter.sh/initialized` label removed.
    MarkIssued,
    /// Remove `karpenter.sh/initialized` from the Node (re-applied after a restart).
    RemoveInitializedLabel,
    /// The new boot is seen: remove the fence.
    Unfence { observed: bool },
    /// `Rebooting=False/RebootSucceeded`, the pre-boot id removed.
    Succeed,
    /// The reboot failed: replace the node (delete the NodeClaim, its drain bounded by the
    /// reboot's) or, for an invalid request, `Rebooting=False/RebootFailed`.
    Fail {
        result: RebootResult,
        message: String,
    },
}

impl RebootStep {
    /// The step's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            RebootStep::Fence => "fence",
            RebootStep::Drain(_) => "drain",
            RebootStep::RecordPreBootId { .. } => "record-pre-boot-id",
            RebootStep::Issue { .. } => "issue",
            RebootStep::MarkIssued => "mark-issued",
            RebootStep::RemoveInitializedLabel => "remove-initialized-label",
            RebootStep::Unfence { .. } => "unfence",
            RebootStep::Succeed => "succeed",
            RebootStep::Fail { .. } => "fail",
        }
    }
}

/// What one pass looks at.
#[derive(Debug, Clone, Copy)]
pub struct RebootView<'a> {
    pub claim: &'a NodeClaim,
    /// Its Node, if it exists.
    pub node: Option<&'a Node>,
    /// The pods bound to the Node.
    pub pods: &'a [&'a PodRecord],
    /// When this process first tried to issue the reboot (`None`: not yet).
    pub issuance_started: Option<DateTime<Utc>>,
}

/// One pass: its steps in order, and when to look again if nothing changes first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebootPass {
    pub steps: Vec<RebootStep>,
    pub requeue_after: Option<Duration>,
}

impl RebootPass {
    fn wait(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }

    fn fail(mut self, node: Option<&Node>, result: RebootResult, message: String) -> Self {
        if node.is_some_and(is_fenced) {
            self.steps.push(RebootStep::Unfence { observed: false });
        }
        self.steps.push(RebootStep::Fail { result, message });
        self
    }
}

fn after(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    at + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

fn left(until: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (until - now).to_std().unwrap_or_default()
}

/// The current phase's deadline and what missing it means.
fn deadline(
    view: &RebootView<'_>,
    phase: &str,
) -> Option<(DateTime<Utc>, RebootResult, &'static str)> {
    if phase == rebooting::ISSUED {
        return issued_at(view.claim).map(|t| {
            (
                after(t, OBSERVATION_WINDOW),
                RebootResult::RecoveryTimeout,
                "node did not recover within the observation window",
            )
        });
    }
    view.issuance_started.map(|t| {
        (
            after(t, ISSUANCE_TIMEOUT),
            RebootResult::ProviderError,
            "reboot was not issued within the issuance timeout",
        )
    })
}

/// The steps of one reboot pass over `view` at `now` (none when no reboot is in flight).
pub fn decide_reboot(view: &RebootView<'_>, now: DateTime<Utc>) -> RebootPass {
    let pass = RebootPass::default();
    let claim = view.claim;
    let Some(cond) = condition(claim, conditions::REBOOTING).filter(|c| c.status == "True") else {
        return pass;
    };
    // A NodeClaim being deleted is the termination's.
    if claim.metadata.deletion_timestamp.is_some() {
        return pass;
    }
    let phase = cond.reason.as_str();
    let requested = requested_at(claim).unwrap_or(now);
    let Some(node) = view.node else {
        // The Node may come back; without it nothing can be drained or issued: bound the wait
        // from the request.
        let (until, result, message) = deadline(view, phase).unwrap_or((
            after(requested, ISSUANCE_TIMEOUT),
            RebootResult::ProviderError,
            "reboot was not issued within the issuance timeout",
        ));
        if now > until {
            return pass.fail(None, result, message.to_owned());
        }
        return pass.wait(
            POLL_INTERVAL
                .min(left(until, now))
                .max(Duration::from_secs(1)),
        );
    };
    if let Some((until, result, message)) = deadline(view, phase)
        && now > until
    {
        return pass.fail(Some(node), result, message.to_owned());
    }
    match phase {
        rebooting::REQUESTED => on_requested(view, node, requested, now, pass),
        rebooting::ISSUED => on_issued(claim, node, pass),
        _ => pass,
    }
}

fn on_requested(
    view: &RebootView<'_>,
    node: &Node,
    requested: DateTime<Utc>,
    now: DateTime<Utc>,
    mut pass: RebootPass,
) -> RebootPass {
    let claim = view.claim;
    let grace = match termination_grace_period(claim) {
        Ok(grace) => grace,
        Err(error) => {
            return pass.fail(
                Some(node),
                RebootResult::InvalidRequest,
                format!("invalid reboot request: {error}"),
            );
        }
    };
    if !is_fenced(node) {
        pass.steps.push(RebootStep::Fence);
    }
    let current = boot_id(node);
    if let Some(pre) = annotation(claim, labels::REBOOT_PRE_BOOT_ID) {
        if current != pre {
            // Issued before a restart and already rebooted: do not issue again.
            pass.steps.push(RebootStep::MarkIssued);
            return pass.wait(POLL_INTERVAL);
        }
        pass.steps.push(RebootStep::Issue {
            operation_id: operation_id(claim, pre),
        });
        return pass;
    }
    if grace != Some(Duration::ZERO) {
        let floor = after(requested, MIN_DRAIN_TIME);
        let bound = grace.map(|g| after(requested, g.max(MIN_DRAIN_TIME)));
        let plan = plan_drain(view.pods, None, now);
        if !plan.drained() {
            match bound {
                Some(bound) if now >= bound => {} // pods still there ride the reboot
                Some(bound) => {
                    pass.steps.push(RebootStep::Drain(plan));
                    return pass.wait(POLL_INTERVAL.min(left(bound, now)));
                }
                None => {
                    pass.steps.push(RebootStep::Drain(plan));
                    return pass.wait(POLL_INTERVAL);
                }
            }
        } else if now < floor {
            return pass.wait(left(floor, now));
        }
    }
    pass.steps.push(RebootStep::RecordPreBootId {
        boot_id: current.to_owned(),
    });
    pass.steps.push(RebootStep::Issue {
        operation_id: operation_id(claim, current),
    });
    pass
}

fn on_issued(claim: &NodeClaim, node: &Node, mut pass: RebootPass) -> RebootPass {
    if node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::INITIALIZED))
    {
        pass.steps.push(RebootStep::RemoveInitializedLabel);
    }
    let pre = annotation(claim, labels::REBOOT_PRE_BOOT_ID).unwrap_or_default();
    let booted = boot_id(node) != pre;
    if booted && is_fenced(node) {
        pass.steps.push(RebootStep::Unfence { observed: true });
    }
    if booted && node_ready(node) {
        pass.steps.push(RebootStep::Succeed);
        return pass;
    }
    pass.wait(POLL_INTERVAL)
}

#[cfg(test)]
#[path = "reboot_tests.rs"]
mod tests;
