//! Node termination (upstream `node.termination`) as pure decisions: what a Node being deleted
//! still waits for and the one thing to do next.
//!
//! A terminating Node is tainted `karpenter.sh/disrupted:NoSchedule`, then drained: the pods it
//! waits for ([`awaits_eviction`]) are evicted through the Eviction API tier by tier
//! ([`Tier`]: workloads before DaemonSet pods, non-critical before critical), a tier only once
//! the tiers before it are gone. A pod annotated `karpenter.sh/do-not-disrupt` is not evicted;
//! it holds the drain until the NodeClaim's termination grace period forces it. With a
//! deadline (`karpenter.sh/nodeclaim-termination-timestamp`), a pod is deleted early enough to
//! end by it: at `deadline - terminationGracePeriodSeconds`, with the time left as its grace
//! period (at least 1 s), past PDBs and do-not-disrupt. Then volumes detach (skipped once the
//! deadline passed), the instance is terminated and the finalizer removed.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_disruption::do_not_disrupt::{
    PodProtection, ProtectionEvent, pod_protection, protection_event,
};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::taints::tolerates;
use karpenter_state::conditions::from_api_time;

/// Upstream: a pod terminating for longer than this no longer holds the drain.
pub const STUCK_TERMINATING_AFTER: Duration = Duration::from_secs(60);

/// Upstream's `MinDrainTime`: a drain that had pods to wait for lasts at least this long after
/// the NodeClaim's `Drained` condition went `Unknown`, before it may turn `True`.
pub const MIN_DRAIN_TIME: Duration = Duration::from_secs(5);

/// What is left of [`MIN_DRAIN_TIME`] at `now` before a drain with nothing left to wait for
/// may be declared done: `None` once it may (the NodeClaim's `Drained` condition went `Unknown`
/// long enough ago), or when it never waited (no `Unknown` condition) or has no NodeClaim.
pub fn min_drain_time_left(claim: Option<&NodeClaim>, now: DateTime<Utc>) -> Option<Duration> {
    let draining_since = claim
        .and_then(|c| c.status.as_ref()?.conditions.as_ref())
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.type_ == karpenter_api::v1::nodeclaim::conditions::DRAINED
                    && c.status == "Unknown"
            })
        })
        .and_then(|c| from_api_time(&c.last_transition_time))?;
    let elapsed = (now - draining_since).to_std().unwrap_or_default();
    MIN_DRAIN_TIME
        .checked_sub(elapsed)
        .filter(|left| !left.is_zero())
}

/// Priority classes whose pods drain last.
const CRITICAL_PRIORITY_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];

/// The taint every terminating (or disrupted) Node carries.
pub fn disrupted_taint() -> Taint {
    crate::taint::no_schedule(labels::DISRUPTED_TAINT_KEY)
}

/// The Node carries [`disrupted_taint`].
pub fn is_tainted(node: &Node) -> bool {
    crate::taint::has_no_schedule(node, labels::DISRUPTED_TAINT_KEY)
}

/// When a deleted NodeClaim's node must be gone (upstream writes it to
/// `karpenter.sh/nodeclaim-termination-timestamp` when the NodeClaim is finalized): its
/// deletion timestamp plus its `terminationGracePeriod`; `None` without either.
pub fn termination_deadline(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let deleted = from_api_time(claim.metadata.deletion_timestamp.as_ref()?)?;
    let grace = claim.spec.termination_grace_period.as_ref()?.as_duration();
    deleted.checked_add_signed(chrono::Duration::from_std(grace).ok()?)
}

/// The annotation's value for `deadline` (RFC 3339, seconds, `Z`), as upstream formats it.
pub fn deadline_annotation(deadline: DateTime<Utc>) -> String {
    deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Drain order: every pod of a tier is gone before the next tier is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Workload,
    Daemon,
    CriticalWorkload,
    CriticalDaemon,
}

/// The pod's drain tier.
pub fn tier(pod: &PodRecord) -> Tier {
    let critical = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c));
    match (critical, pod.is_daemonset()) {
        (false, false) => Tier::Workload,
        (false, true) => Tier::Daemon,
        (true, false) => Tier::CriticalWorkload,
        (true, true) => Tier::CriticalDaemon,
    }
}

fn tolerates_disrupted_taint(pod: &PodRecord) -> bool {
    let taint = disrupted_taint();
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|tolerations| tolerations.iter().any(|t| tolerates(t, &taint)))
}

fn deletion_time(pod: &PodRecord) -> Option<DateTime<Utc>> {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .and_then(from_api_time)
}

/// The drain waits for `pod` (upstream "waiting eviction"): not finished, not tolerating the
/// disrupted taint (it would come straight back), not stuck terminating, not a mirror pod.
pub fn awaits_eviction(pod: &PodRecord, now: DateTime<Utc>) -> bool {
    let stuck = deletion_time(pod).is_some_and(|deleted| {
        (now - deleted)
            .to_std()
            .is_ok_and(|age| age > STUCK_TERMINATING_AFTER)
    });
    !pod.is_terminal() && !tolerates_disrupted_taint(pod) && !stuck && !pod.is_mirror()
}

fn grace_period(pod: &PodRecord) -> Duration {
    let seconds = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// What to do with one pod of a draining node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodAction {
    /// Ask the Eviction API (a PDB may refuse: try again later, never force).
    Evict,
    /// Delete with this grace period: the node's deadline does not leave the pod its own.
    ForceDelete { grace_period_seconds: i64 },
}

/// One pass of a drain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// `namespace/name` and what to do, in drain order.
    pub actions: Vec<(String, PodAction)>,
    /// Pods the drain still waits for (acted on now or terminating already).
    pub waiting: usize,
    /// Pods of the current tier that `karpenter.sh/do-not-disrupt` keeps from eviction
    /// (`"true"`, or a duration from the pod's start that has not passed).
    pub do_not_disrupt: Vec<String>,
    /// What upstream tells about the annotations it looked at (a duration's end, its
    /// passing, an invalid value), by pod `namespace/name`.
    pub pod_events: Vec<(String, ProtectionEvent)>,
}

impl DrainPlan {
    /// Nothing left to wait for.
    pub fn drained(&self) -> bool {
        self.waiting == 0
    }
}

/// The drain pass for a node whose pods are `node_pods`, with the NodeClaim's termination
/// deadline, at `now`.
pub fn plan_drain(
    node_pods: &[&PodRecord],
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DrainPlan {
    let waiting: Vec<&PodRecord> = node_pods
        .iter()
        .copied()
        .filter(|p| awaits_eviction(p, now))
        .collect();
    let mut plan = DrainPlan {
        waiting: waiting.len(),
        ..DrainPlan::default()
    };
    // The deletion timestamp of a terminating pod is when it is killed: it is forced only when
    // that is after the deadline.
    let force = |pod: &PodRecord| -> Option<i64> {
        let deadline = deadline?;
        let left = (deadline - now).num_seconds().max(1);
        if let Some(killed) = deletion_time(pod) {
            return (killed > deadline).then_some(left);
        }
        let start = deadline - chrono::Duration::from_std(grace_period(pod)).ok()?;
        (now > start).then_some(left)
    };
    let mut rest: Vec<&PodRecord> = Vec::new();
    for pod in waiting {
        match force(pod) {
            Some(grace_period_seconds) => plan.actions.push((
                pod.key(),
                PodAction::ForceDelete {
                    grace_period_seconds,
                },
            )),
            None => rest.push(pod),
        }
    }
    let Some(current) = rest.iter().map(|p| tier(p)).min() else {
        return plan;
    };
    for pod in rest.into_iter().filter(|p| tier(p) == current) {
        if pod.is_terminating() {
            continue;
        }
        let value = pod.annotation(labels::DO_NOT_DISRUPT);
        let started = karpenter_disruption::pods::started(pod);
        if let Some(event) = protection_event(value, started, now) {
            plan.pod_events.push((pod.key(), event));
        }
        if matches!(
            pod_protection(value, started, now),
            PodProtection::Protected(_)
        ) {
            plan.do_not_disrupt.push(pod.key());
            continue;
        }
        plan.actions.push((pod.key(), PodAction::Evict));
    }
    plan
}

/// The VolumeAttachments (names) the termination still waits for once the node is drained:
/// every attachment to the node except those of volumes a pod staying on the node uses (a pod
/// that tolerates the disrupted taint keeps its volume until the node goes). `volume_of` names
/// the persistent volume bound to a pod's claim (`namespace`, `claim`).
pub fn attachments_to_await<'a>(
    attachments: &[&'a VolumeAttachment],
    node_pods: &[&PodRecord],
    volume_of: impl Fn(&str, &str) -> Option<String>,
    now: DateTime<Utc>,
) -> Vec<&'a str> {
    let staying: BTreeSet<String> = node_pods
        .iter()
        .filter(|p| !awaits_eviction(p, now) && !p.is_terminal())
        .flat_map(|p| {
            let namespace = p.metadata.namespace.as_deref().unwrap_or("default");
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .filter_map(|c| volume_of(namespace, &c.claim_name))
                .collect::<Vec<_>>()
        })
        .collect();
    attachments
        .iter()
        .filter(|va| {
            va.spec
                .source
                .persistent_volume_name
                .as_ref()
                .is_none_or(|pv| !staying.contains(pv))
        })
        .filter_map(|va| va.metadata.name.as_deref())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Toleration;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use karpenter_scheduling::builders::PodBuilder;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap_or_default()
    }

    fn api_time(t: DateTime<Utc>) -> Time {
        karpenter_state::conditions::api_time(t).unwrap_or_else(|| panic!("time {t}"))
    }

    fn pod(name: &str) -> PodRecord {
        PodBuilder::new(name).build().into()
    }

    fn claim_draining_since(condition: Option<(&str, DateTime<Utc>)>) -> NodeClaim {
        let conditions: Vec<serde_json::Value> = condition
            .into_iter()
            .map(|(status, since)| {
                serde_json::json!({
                    "type": "Drained", "status": status, "reason": "Draining", "message": "",
                    "lastTransitionTime": since.to_rfc3339(),
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "draining"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"conditions": conditions},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_drain_that_waited_for_pods_lasts_at_least_min_drain_time() {
        let claim = claim_draining_since(Some(("Unknown", at(0))));
        assert_eq!(
            min_drain_time_left(Some(&claim), at(0)),
            Some(MIN_DRAIN_TIME)
        );
        assert_eq!(
            min_drain_time_left(Some(&claim), at(4)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(min_drain_time_left(Some(&claim), at(5)), None);
        assert_eq!(min_drain_time_left(Some(&claim), at(60)), None);
    }

    #[test]
    fn a_drain_that_never_waited_or_has_no_claim_is_done_at_once() {
        assert_eq!(min_drain_time_left(None, at(0)), None);
        let never_draining = claim_draining_since(None);
        assert_eq!(min_drain_time_left(Some(&never_draining), at(0)), None);
        let already_drained = claim_draining_since(Some(("True", at(0))));
        assert_eq!(min_drain_time_left(Some(&already_drained), at(0)), None);
    }

    fn daemon(mut pod: PodRecord) -> PodRecord {
        pod.metadata.owner_references = Some(vec![OwnerReference {
            kind: "DaemonSet".into(),
            name: "agent".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        pod
    }

    fn critical(mut pod: PodRecord) -> PodRecord {
        std::sync::Arc::make_mut(pod.spec.get_or_insert_with(Default::default))
            .priority_class_name = Some("system-node-critical".into());
        pod
    }

    fn grace(mut pod: PodRecord, seconds: i64) -> PodRecord {
        std::sync::Arc::make_mut(pod.spec.get_or_insert_with(Default::default))
            .termination_grace_period_seconds = Some(seconds);
        pod
    }

    fn evicted(plan: &DrainPlan) -> Vec<&str> {
        plan.actions
            .iter()
            .filter(|(_, a)| *a == PodAction::Evict)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    #[test]
    fn workloads_are_evicted_before_daemonset_pods_and_critical_pods_last() {
        let (web, agent) = (pod("web"), daemon(pod("agent")));
        let (dns, cni) = (critical(pod("dns")), critical(daemon(pod("cni"))));
        let all = [&cni, &dns, &agent, &web];
        let plan = plan_drain(&all, None, at(0));
        assert_eq!(evicted(&plan), ["default/web"]);
        assert_eq!(plan.waiting, 4);
        let plan = plan_drain(&[&cni, &dns, &agent], None, at(0));
        assert_eq!(evicted(&plan), ["default/agent"]);
        let plan = plan_drain(&[&cni, &dns], None, at(0));
        assert_eq!(evicted(&plan), ["default/dns"]);
        let plan = plan_drain(&[&cni], None, at(0));
        assert_eq!(evicted(&plan), ["default/cni"]);
        assert!(plan_drain(&[], None, at(0)).drained());
    }

    #[test]
    fn finished_mirror_and_taint_tolerating_pods_do_not_hold_the_drain() {
        let mut done = pod("done");
        done.status.get_or_insert_default().phase = Some("Succeeded".into());
        let mut mirror = pod("static");
        mirror.metadata.annotations.get_or_insert_default().insert(
            karpenter_scheduling::pod_record::MIRROR_POD.into(),
            "x".into(),
        );
        let mut tolerant = pod("tolerant");
        std::sync::Arc::make_mut(tolerant.spec.get_or_insert_with(Default::default)).tolerations =
            Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]);
        let plan = plan_drain(&[&done, &mirror, &tolerant], None, at(0));
        assert!(plan.drained(), "{plan:?}");
        assert!(plan.actions.is_empty());
    }

    #[test]
    fn a_terminating_pod_is_awaited_until_it_is_stuck_for_a_minute() {
        let mut leaving = pod("leaving");
        leaving.metadata.deletion_timestamp = Some(api_time(at(0)));
        let plan = plan_drain(&[&leaving], None, at(30));
        assert_eq!(plan.waiting, 1);
        assert!(plan.actions.is_empty(), "not evicted twice: {plan:?}");
        assert!(plan_drain(&[&leaving], None, at(61)).drained());
    }

    #[test]
    fn a_do_not_disrupt_duration_holds_the_drain_until_it_has_passed_since_the_pod_started() {
        let mut guarded = pod("guarded");
        guarded
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(labels::DO_NOT_DISRUPT.into(), "10m".into());
        guarded.status.get_or_insert_default().start_time = Some(api_time(at(0)));
        let plan = plan_drain(&[&guarded], None, at(599));
        assert_eq!(plan.do_not_disrupt, ["default/guarded"]);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.pod_events.len(), 1);
        assert_eq!(plan.pod_events[0].1.reason, "DoNotDisruptUntil");

        let plan = plan_drain(&[&guarded], None, at(600));
        assert!(plan.do_not_disrupt.is_empty());
        assert_eq!(
            plan.actions,
            [("default/guarded".to_owned(), PodAction::Evict)]
        );
        assert_eq!(
            plan.pod_events[0].1.reason,
            "DoNotDisruptGracePeriodElapsed"
        );

        // An invalid value protects nothing and is told.
        guarded
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(labels::DO_NOT_DISRUPT.into(), "forever".into());
        let plan = plan_drain(&[&guarded], None, at(1));
        assert_eq!(
            plan.actions,
            [("default/guarded".to_owned(), PodAction::Evict)]
        );
        assert_eq!(plan.pod_events[0].1.reason, "InvalidDoNotDisruptAnnotation");
    }

    #[test]
    fn a_do_not_disrupt_pod_holds_the_drain_until_the_deadline_forces_it() {
        let mut guarded = grace(pod("guarded"), 30);
        guarded
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
        let plan = plan_drain(&[&guarded], None, at(0));
        assert_eq!(plan.do_not_disrupt, ["default/guarded"]);
        assert!(plan.actions.is_empty());
        assert!(!plan.drained());

        // Deadline at 100 s: before 70 s nothing; after, deleted with the time left.
        let plan = plan_drain(&[&guarded], Some(at(100)), at(60));
        assert!(plan.actions.is_empty());
        let plan = plan_drain(&[&guarded], Some(at(100)), at(80));
        assert_eq!(
            plan.actions,
            [(
                "default/guarded".to_owned(),
                PodAction::ForceDelete {
                    grace_period_seconds: 20
                }
            )]
        );
        let late = plan_drain(&[&guarded], Some(at(100)), at(150));
        assert_eq!(
            late.actions[0].1,
            PodAction::ForceDelete {
                grace_period_seconds: 1
            }
        );
    }

    #[test]
    fn a_deadline_forces_pods_of_every_tier_at_once() {
        let (web, cni) = (
            grace(pod("web"), 600),
            critical(daemon(grace(pod("cni"), 600))),
        );
        let plan = plan_drain(&[&web, &cni], Some(at(300)), at(0));
        assert_eq!(plan.actions.len(), 2, "{plan:?}");
        assert!(plan.actions.iter().all(|(_, a)| *a
            == PodAction::ForceDelete {
                grace_period_seconds: 300
            }));
    }

    #[test]
    fn the_deadline_is_the_deletion_plus_the_termination_grace_period() {
        let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "deletionTimestamp": "2026-01-01T10:00:00Z"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                      "name": "default"},
                     "requirements": [], "terminationGracePeriod": "1h30m"}
        }))
        .unwrap_or_else(|e| panic!("test NodeClaim: {e}"));
        let deadline = termination_deadline(&claim).map(deadline_annotation);
        assert_eq!(deadline.as_deref(), Some("2026-01-01T11:30:00Z"));
        claim.spec.termination_grace_period = None;
        assert_eq!(
            termination_deadline(&claim),
            None,
            "no grace period, no deadline"
        );
    }

    fn attachment(name: &str, volume: &str) -> VolumeAttachment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                     "source": {"persistentVolumeName": volume}}
        }))
        .unwrap_or_else(|e| panic!("test VolumeAttachment: {e}"))
    }

    fn with_claim(mut pod: PodRecord, claim: &str) -> PodRecord {
        std::sync::Arc::make_mut(pod.spec.get_or_insert_with(Default::default)).volumes =
            Some(vec![k8s_openapi::api::core::v1::Volume {
                name: "data".into(),
                persistent_volume_claim: Some(
                    k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                        claim_name: claim.into(),
                        read_only: None,
                    },
                ),
                ..Default::default()
            }]);
        pod
    }

    #[test]
    fn volumes_of_pods_that_stay_on_the_node_are_not_awaited() {
        let mut agent = with_claim(daemon(pod("agent")), "agent-data");
        std::sync::Arc::make_mut(agent.spec.get_or_insert_with(Default::default)).tolerations =
            Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]);
        let (moved, kept) = (
            attachment("va-web", "pv-web"),
            attachment("va-agent", "pv-agent"),
        );
        let volume_of = |_: &str, claim: &str| match claim {
            "agent-data" => Some("pv-agent".to_owned()),
            "web-data" => Some("pv-web".to_owned()),
            _ => None,
        };
        let awaited = attachments_to_await(&[&moved, &kept], &[&agent], volume_of, at(0));
        assert_eq!(awaited, ["va-web"]);
        assert!(attachments_to_await(&[], &[&agent], volume_of, at(0)).is_empty());
    }

    #[test]
    fn the_disrupted_taint_is_recognised_on_a_node() {
        let mut node = Node::default();
        assert!(!is_tainted(&node));
        node.spec.get_or_insert_default().taints = Some(vec![disrupted_taint()]);
        assert!(is_tainted(&node));
    }
}
