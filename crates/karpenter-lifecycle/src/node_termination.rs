//! The termination of a Node (upstream `node.termination`) as a step function: from a Node
//! being deleted, its NodeClaim, the pods on it and the volume attachments the drain still
//! waits for, the steps of one pass ([`decide_termination`]), in order.
//!
//! The sequence, as upstream runs it: the NodeClaim is deleted too (a Node deleted directly
//! takes its NodeClaim with it); the Node is tainted `karpenter.sh/disrupted:NoSchedule`; it is
//! drained ([`plan_drain`]: one tier at a time, PDBs asked, never overridden, only the
//! termination grace period forces pods) while the NodeClaim says `Drained=Unknown`; a drain
//! that had pods to wait for lasts at least [`MIN_DRAIN_TIME`](crate::termination::MIN_DRAIN_TIME); `Drained=True`; the volumes of
//! the pods that left detach (`VolumesDetached`, not awaited past the deadline); the instance
//! is terminated (`InstanceTerminating=True` first) and the Node's finalizer removed.
//!
//! A pass lists every step that can be taken now, assuming each one before it succeeds; the
//! executor performs them in order and stops at the first failure, so the next pass starts
//! again from what the cluster then says. Conditions that already say what a step would write
//! are not written again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_api::v1::nodeclaim::conditions;
use karpenter_scheduling::PodRecord;

use crate::termination::{DrainPlan, is_tainted, min_drain_time_left, plan_drain};

/// What one pass looks at.
#[derive(Debug, Clone, Copy)]
pub struct TerminationView<'a> {
    /// The Node being deleted.
    pub node: &'a Node,
    /// Its NodeClaim (by provider id), if any.
    pub claim: Option<&'a NodeClaim>,
    /// The pods bound to the Node.
    pub pods: &'a [&'a PodRecord],
    /// The VolumeAttachments the termination still waits for
    /// ([`crate::termination::attachments_to_await`]).
    pub attachments: &'a [&'a str],
}

/// One thing a termination pass does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminationStep {
    /// Delete the Node's NodeClaim (the Node was deleted on its own).
    DeleteNodeClaim { claim: String },
    /// Taint the Node `karpenter.sh/disrupted:NoSchedule`.
    Taint,
    /// Set a condition on the NodeClaim (its message empty).
    Condition {
        claim: String,
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
    },
    /// Evict (or, past the deadline, delete) the pods the plan names.
    Drain(DrainPlan),
    /// Terminate the NodeClaim's instance (an instance already gone is terminated).
    TerminateInstance { claim: String },
    /// Remove `karpenter.sh/termination` from the Node: it goes.
    RemoveFinalizer,
}

impl TerminationStep {
    /// The step's name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            TerminationStep::DeleteNodeClaim { .. } => "delete-nodeclaim",
            TerminationStep::Taint => "taint",
            TerminationStep::Condition { .. } => "condition",
            TerminationStep::Drain(_) => "drain",
            TerminationStep::TerminateInstance { .. } => "terminate-instance",
            TerminationStep::RemoveFinalizer => "remove-finalizer",
        }
    }
}

/// One pass: its steps in order, and when to look again if nothing changes first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminationPass {
    pub steps: Vec<TerminationStep>,
    /// Set when the pass waits for time alone (`MinDrainTime`).
    pub requeue_after: Option<Duration>,
    /// What the pass stops short of the end for, in words (`None` once the finalizer goes).
    pub waiting_for: Option<String>,
}

impl TerminationPass {
    /// The pass removes the finalizer: the Node is done.
    pub fn finishes(&self) -> bool {
        self.steps.last() == Some(&TerminationStep::RemoveFinalizer)
    }

    /// The drain plan of this pass, if it drains.
    pub fn drain(&self) -> Option<&DrainPlan> {
        self.steps.iter().find_map(|s| match s {
            TerminationStep::Drain(plan) => Some(plan),
            _ => None,
        })
    }

    /// The drain plan of this pass, to narrow ([`crate::eviction_order::EvictionOrder::admit`]).
    pub fn drain_mut(&mut self) -> Option<&mut DrainPlan> {
        self.steps.iter_mut().find_map(|s| match s {
            TerminationStep::Drain(plan) => Some(plan),
            _ => None,
        })
    }
}

/// The NodeClaim's drain deadline (`karpenter.sh/nodeclaim-termination-timestamp`).
pub fn deadline(claim: Option<&NodeClaim>) -> Option<DateTime<Utc>> {
    let value = claim?
        .metadata
        .annotations
        .as_ref()?
        .get(labels::NODECLAIM_TERMINATION_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(value)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The Node still has our finalizer.
pub fn has_finalizer(node: &Node) -> bool {
    node.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::TERMINATION_FINALIZER)
}

/// The Node is ours to terminate: being deleted, with `karpenter.sh/termination`.
pub fn is_terminating(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some() && has_finalizer(node)
}

fn has_condition(claim: &NodeClaim, type_: &str, status: &str, reason: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .is_some_and(|c| c.status == status && c.reason == reason && c.message.is_empty())
}

/// The steps of one termination pass over `view` at `now`.
pub fn decide_termination(view: &TerminationView<'_>, now: DateTime<Utc>) -> TerminationPass {
    let mut pass = TerminationPass::default();
    let claim = view.claim;
    let claim_name = claim.and_then(|c| c.metadata.name.clone());
    let condition = |pass: &mut TerminationPass,
                     type_: &'static str,
                     status: &'static str,
                     reason: &'static str| {
        if let (Some(claim), Some(name)) = (claim, &claim_name)
            && !has_condition(claim, type_, status, reason)
        {
            pass.steps.push(TerminationStep::Condition {
                claim: name.clone(),
                type_,
                status,
                reason,
            });
        }
    };
    if let Some(name) = &claim_name
        && claim.is_some_and(|c| c.metadata.deletion_timestamp.is_none())
    {
        pass.steps.push(TerminationStep::DeleteNodeClaim {
            claim: name.clone(),
        });
    }
    if !is_tainted(view.node) {
        pass.steps.push(TerminationStep::Taint);
    }
    let deadline = deadline(claim);
    let plan = plan_drain(view.pods, deadline, now);
    if !plan.drained() {
        condition(&mut pass, conditions::DRAINED, "Unknown", "Draining");
        pass.waiting_for = Some(format!("{} pods to leave the node", plan.waiting));
        pass.steps.push(TerminationStep::Drain(plan));
        return pass;
    }
    if let Some(left) = min_drain_time_left(claim, now) {
        pass.waiting_for = Some("the minimum drain time".to_owned());
        pass.requeue_after = Some(left);
        return pass;
    }
    condition(&mut pass, conditions::DRAINED, "True", "Drained");
    // Volumes detach before the instance goes (their data would be lost with it), unless the
    // termination grace period has run out.
    if deadline.is_some_and(|d| now >= d) {
        condition(
            &mut pass,
            conditions::VOLUMES_DETACHED,
            "False",
            "TerminationGracePeriodElapsed",
        );
    } else if !view.attachments.is_empty() {
        condition(
            &mut pass,
            conditions::VOLUMES_DETACHED,
            "Unknown",
            "AwaitingVolumeDetachment",
        );
        pass.waiting_for = Some(format!(
            "volume attachments to go: {}",
            view.attachments.join(", ")
        ));
        return pass;
    } else {
        condition(
            &mut pass,
            conditions::VOLUMES_DETACHED,
            "True",
            "VolumesDetached",
        );
    }
    let launched = claim.is_some_and(|c| {
        c.status
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some()
    });
    if let (true, Some(name)) = (launched, &claim_name) {
        condition(
            &mut pass,
            conditions::INSTANCE_TERMINATING,
            "True",
            "InstanceTerminating",
        );
        pass.steps.push(TerminationStep::TerminateInstance {
            claim: name.clone(),
        });
    }
    pass.steps.push(TerminationStep::RemoveFinalizer);
    pass
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::termination::{PodAction, disrupted_taint};
    use karpenter_scheduling::builders::PodBuilder;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap_or_default()
    }

    fn time(t: DateTime<Utc>) -> String {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// A Node being deleted with our finalizer; `tainted` with the disrupted taint.
    fn node(tainted: bool) -> Node {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"],
                         "deletionTimestamp": time(at(0))},
            "spec": {"providerID": "kwok://n1"},
        }))
        .unwrap_or_else(|e| panic!("test Node: {e}"));
        if tainted {
            node.spec.get_or_insert_default().taints = Some(vec![disrupted_taint()]);
        }
        node
    }

    /// The Node's NodeClaim: `deleting` or not, `launched` (a provider id) or not, with
    /// `conditions` as (type, status, reason, since) and an optional drain deadline.
    struct ClaimBuilder {
        deleting: bool,
        launched: bool,
        conditions: Vec<(&'static str, &'static str, &'static str, i64)>,
        deadline: Option<i64>,
    }

    fn claim() -> ClaimBuilder {
        ClaimBuilder {
            deleting: true,
            launched: true,
            conditions: Vec::new(),
            deadline: None,
        }
    }

    impl ClaimBuilder {
        fn not_deleting(mut self) -> Self {
            self.deleting = false;
            self
        }
        fn never_launched(mut self) -> Self {
            self.launched = false;
            self
        }
        fn condition(
            mut self,
            type_: &'static str,
            status: &'static str,
            reason: &'static str,
            since: i64,
        ) -> Self {
            self.conditions.push((type_, status, reason, since));
            self
        }
        fn deadline(mut self, at_second: i64) -> Self {
            self.deadline = Some(at_second);
            self
        }
        fn build(self) -> NodeClaim {
            let conditions: Vec<serde_json::Value> = self
                .conditions
                .iter()
                .map(|(type_, status, reason, since)| {
                    json!({"type": type_, "status": status, "reason": reason, "message": "",
                           "lastTransitionTime": time(at(*since))})
                })
                .collect();
            let mut metadata = json!({"name": "c1"});
            if self.deleting {
                metadata["deletionTimestamp"] = json!(time(at(0)));
                metadata["finalizers"] = json!(["karpenter.sh/termination"]);
            }
            if let Some(deadline) = self.deadline {
                metadata["annotations"] =
                    json!({"karpenter.sh/nodeclaim-termination-timestamp": time(at(deadline))});
            }
            let mut status = json!({"conditions": conditions});
            if self.launched {
                status["providerID"] = json!("kwok://n1");
            }
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": metadata,
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                          "name": "default"}, "requirements": []},
                "status": status,
            }))
            .unwrap_or_else(|e| panic!("test NodeClaim: {e}"))
        }
    }

    fn pod(name: &str) -> PodRecord {
        PodBuilder::new(name).build().into()
    }

    fn condition(
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
    ) -> TerminationStep {
        TerminationStep::Condition {
            claim: "c1".into(),
            type_,
            status,
            reason,
        }
    }

    fn pass(
        node: &Node,
        claim: Option<&NodeClaim>,
        pods: &[&PodRecord],
        attachments: &[&str],
        now: i64,
    ) -> TerminationPass {
        decide_termination(
            &TerminationView {
                node,
                claim,
                pods,
                attachments,
            },
            at(now),
        )
    }

    const DRAINED: &str = conditions::DRAINED;
    const VOLUMES: &str = conditions::VOLUMES_DETACHED;
    const TERMINATING: &str = conditions::INSTANCE_TERMINATING;

    #[test]
    fn a_node_deleted_on_its_own_takes_its_nodeclaim_is_tainted_and_drained() {
        let claim = claim().not_deleting().build();
        let web = pod("web");
        let pass = pass(&node(false), Some(&claim), &[&web], &[], 1);
        assert_eq!(
            pass.steps,
            [
                TerminationStep::DeleteNodeClaim { claim: "c1".into() },
                TerminationStep::Taint,
                condition(DRAINED, "Unknown", "Draining"),
                TerminationStep::Drain(DrainPlan {
                    actions: vec![("default/web".into(), PodAction::Evict)],
                    waiting: 1,
                    do_not_disrupt: vec![],
                    pod_events: vec![],
                }),
            ]
        );
        assert_eq!(
            pass.waiting_for.as_deref(),
            Some("1 pods to leave the node")
        );
        assert!(!pass.finishes());
    }

    #[test]
    fn a_drain_in_progress_writes_its_condition_once() {
        let claim = claim().condition(DRAINED, "Unknown", "Draining", 0).build();
        let web = pod("web");
        let pass = pass(&node(true), Some(&claim), &[&web], &[], 1);
        assert_eq!(pass.steps.len(), 1, "{pass:?}");
        assert!(pass.drain().is_some());
    }

    #[test]
    fn a_drain_that_waited_for_pods_lasts_min_drain_time_then_finishes_in_one_pass() {
        let claim = claim().condition(DRAINED, "Unknown", "Draining", 0).build();
        let early = pass(&node(true), Some(&claim), &[], &[], 3);
        assert_eq!(early.steps, []);
        assert_eq!(early.requeue_after, Some(Duration::from_secs(2)));
        let done = pass(&node(true), Some(&claim), &[], &[], 5);
        assert_eq!(
            done.steps,
            [
                condition(DRAINED, "True", "Drained"),
                condition(VOLUMES, "True", "VolumesDetached"),
                condition(TERMINATING, "True", "InstanceTerminating"),
                TerminationStep::TerminateInstance { claim: "c1".into() },
                TerminationStep::RemoveFinalizer,
            ]
        );
        assert!(done.finishes());
        assert_eq!(done.requeue_after, None);
    }

    #[test]
    fn volumes_still_attached_hold_the_instance_until_the_deadline() {
        let claim = claim().deadline(100).build();
        let held = pass(&node(true), Some(&claim), &[], &["va-1"], 10);
        assert_eq!(
            held.steps,
            [
                condition(DRAINED, "True", "Drained"),
                condition(VOLUMES, "Unknown", "AwaitingVolumeDetachment"),
            ]
        );
        assert_eq!(
            held.waiting_for.as_deref(),
            Some("volume attachments to go: va-1")
        );
        let forced = pass(&node(true), Some(&claim), &[], &["va-1"], 100);
        assert_eq!(
            forced.steps[1],
            condition(VOLUMES, "False", "TerminationGracePeriodElapsed")
        );
        assert!(forced.finishes());
    }

    #[test]
    fn a_nodeclaim_never_launched_or_absent_only_releases_the_node() {
        let claim = claim().never_launched().build();
        let pass_without_instance = pass(&node(true), Some(&claim), &[], &[], 1);
        assert_eq!(
            pass_without_instance.steps,
            [
                condition(DRAINED, "True", "Drained"),
                condition(VOLUMES, "True", "VolumesDetached"),
                TerminationStep::RemoveFinalizer,
            ]
        );
        let orphan = pass(&node(true), None, &[], &[], 1);
        assert_eq!(orphan.steps, [TerminationStep::RemoveFinalizer]);
    }

    #[test]
    fn conditions_already_recorded_are_not_written_again() {
        let claim = claim()
            .condition(DRAINED, "True", "Drained", 0)
            .condition(VOLUMES, "True", "VolumesDetached", 0)
            .condition(TERMINATING, "True", "InstanceTerminating", 0)
            .build();
        let retried = pass(&node(true), Some(&claim), &[], &[], 9);
        assert_eq!(
            retried.steps,
            [
                TerminationStep::TerminateInstance { claim: "c1".into() },
                TerminationStep::RemoveFinalizer,
            ]
        );
    }

    #[test]
    fn only_nodes_being_deleted_with_our_finalizer_are_terminated() {
        assert!(is_terminating(&node(false)));
        let mut alive = node(false);
        alive.metadata.deletion_timestamp = None;
        assert!(!is_terminating(&alive));
        let mut foreign = node(false);
        foreign.metadata.finalizers = None;
        assert!(!is_terminating(&foreign));
    }
}
