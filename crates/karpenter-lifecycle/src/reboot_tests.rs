use super::*;
use karpenter_scheduling::builders::PodBuilder;
use pretty_assertions::assert_eq;
use serde_json::json;

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap_or_default()
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A NodeClaim rebooting in `phase` since second 0 (requested then), with `annotations`;
/// `issued_at` sets `Initialized=Unknown/Rebooting` at that second.
fn claim(phase: &str, annotations: serde_json::Value, issued_at: Option<i64>) -> NodeClaim {
    let mut conditions = vec![
        json!({"type": "Rebooting", "status": "True", "reason": phase,
        "message": "rebooting for KWOKRebootRequired/True", "lastTransitionTime": time(at(0))}),
    ];
    if let Some(issued) = issued_at {
        conditions.push(
            json!({"type": "Initialized", "status": "Unknown", "reason": "Rebooting",
            "message": "node is rebooting", "lastTransitionTime": time(at(issued))}),
        );
    }
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "c1", "uid": "u1", "annotations": annotations},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": "default"}, "requirements": []},
        "status": {"providerID": "kwok://n1", "conditions": conditions},
    }))
    .unwrap_or_else(|e| panic!("test NodeClaim: {e}"))
}

fn requested(annotations: serde_json::Value) -> NodeClaim {
    claim(rebooting::REQUESTED, annotations, None)
}

/// The Node on boot `boot`, `fenced` or not, Ready or not.
fn node(boot: &str, fenced: bool, ready: bool) -> Node {
    let taints = if fenced {
        json!([{"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"karpenter.sh/initialized": "true"}},
        "spec": {"providerID": "kwok://n1", "taints": taints},
        "status": {
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "nodeInfo": {"bootID": boot, "machineID": "", "systemUUID": "", "kernelVersion": "",
                "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }))
    .unwrap_or_else(|e| panic!("test Node: {e}"))
}

fn pass(
    claim: &NodeClaim,
    node: Option<&Node>,
    pods: &[&PodRecord],
    started: Option<i64>,
    now: i64,
) -> RebootPass {
    decide_reboot(
        &RebootView {
            claim,
            node,
            pods,
            issuance_started: started.map(at),
        },
        at(now),
    )
}

fn names(pass: &RebootPass) -> Vec<&'static str> {
    pass.steps.iter().map(RebootStep::name).collect()
}

fn failure(pass: &RebootPass) -> Option<RebootResult> {
    pass.steps.iter().find_map(|s| match s {
        RebootStep::Fail { result, .. } => Some(*result),
        _ => None,
    })
}

#[test]
fn a_nodeclaim_without_a_reboot_in_flight_gets_no_step() {
    let mut c = requested(json!({}));
    if let Some(cs) = c.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        cs[0].status = "False".into();
        cs[0].reason = rebooting::SUCCEEDED.into();
    }
    assert_eq!(
        pass(&c, Some(&node("b1", false, true)), &[], None, 10),
        RebootPass::default()
    );
}

#[test]
fn a_requested_reboot_fences_the_node_and_drains_its_pods_first() {
    let c = requested(json!({}));
    let web = PodRecord::from(PodBuilder::new("web").build());
    let p = pass(&c, Some(&node("b1", false, true)), &[&web], None, 1);
    assert_eq!(names(&p), ["fence", "drain"]);
    assert_eq!(p.requeue_after, Some(POLL_INTERVAL));
}

#[test]
fn a_drained_node_waits_for_the_minimum_drain_time_then_records_its_boot_and_issues() {
    let c = requested(json!({}));
    let n = node("b1", true, true);
    let early = pass(&c, Some(&n), &[], None, 2);
    assert_eq!(names(&early), Vec::<&str>::new());
    assert_eq!(early.requeue_after, Some(Duration::from_secs(3)));
    let p = pass(&c, Some(&n), &[], None, 6);
    assert_eq!(
        p.steps,
        [
            RebootStep::RecordPreBootId {
                boot_id: "b1".into()
            },
            RebootStep::Issue {
                operation_id: format!("u1-{}-b1", at(0).timestamp_nanos_opt().unwrap_or(0))
            },
        ]
    );
}

#[test]
fn a_forceful_reboot_skips_the_drain_and_the_pods_ride_it() {
    let c = requested(json!({"karpenter.sh/reboot-termination-grace-period": "0s"}));
    let web = PodRecord::from(PodBuilder::new("web").build());
    let p = pass(&c, Some(&node("b1", false, true)), &[&web], None, 0);
    assert_eq!(names(&p), ["fence", "record-pre-boot-id", "issue"]);
}

#[test]
fn a_bounded_drain_issues_the_reboot_once_the_bound_passed_with_pods_left() {
    let c = requested(json!({"karpenter.sh/reboot-termination-grace-period": "1m"}));
    let web = PodRecord::from(PodBuilder::new("web").build());
    let n = node("b1", true, true);
    let draining = pass(&c, Some(&n), &[&web], None, 50);
    assert_eq!(names(&draining), ["drain"]);
    assert_eq!(draining.requeue_after, Some(Duration::from_secs(10)));
    assert_eq!(
        names(&pass(&c, Some(&n), &[&web], None, 60)),
        ["record-pre-boot-id", "issue"]
    );
}

#[test]
fn an_invalid_drain_bound_fails_the_reboot_without_replacing_the_node() {
    for bad in ["-1m", "soon"] {
        let c = requested(json!({"karpenter.sh/reboot-termination-grace-period": bad}));
        let p = pass(&c, Some(&node("b1", true, true)), &[], None, 0);
        assert_eq!(names(&p), ["unfence", "fail"], "{bad}");
        assert_eq!(failure(&p), Some(RebootResult::InvalidRequest));
        assert!(!RebootResult::InvalidRequest.replaces());
    }
}

#[test]
fn a_recorded_pre_boot_id_is_issued_again_with_the_same_operation_id_without_draining() {
    let c = requested(json!({"karpenter.sh/reboot-pre-boot-id": "b1"}));
    let web = PodRecord::from(PodBuilder::new("web").build());
    let p = pass(&c, Some(&node("b1", true, true)), &[&web], Some(0), 30);
    assert_eq!(
        p.steps,
        [RebootStep::Issue {
            operation_id: operation_id(&c, "b1")
        }]
    );
}

#[test]
fn a_node_that_booted_before_the_issue_was_recorded_is_not_rebooted_again() {
    let c = requested(json!({"karpenter.sh/reboot-pre-boot-id": "b1"}));
    let p = pass(&c, Some(&node("b2", true, true)), &[], Some(0), 30);
    assert_eq!(names(&p), ["mark-issued"]);
}

#[test]
fn a_reboot_the_cloud_has_not_accepted_in_five_minutes_fails_and_replaces() {
    let c = requested(json!({"karpenter.sh/reboot-pre-boot-id": "b1"}));
    let n = node("b1", true, true);
    assert_eq!(names(&pass(&c, Some(&n), &[], Some(10), 310)), ["issue"]);
    let p = pass(&c, Some(&n), &[], Some(10), 311);
    assert_eq!(names(&p), ["unfence", "fail"]);
    assert_eq!(failure(&p), Some(RebootResult::ProviderError));
    assert!(RebootResult::ProviderError.replaces());
}

#[test]
fn an_issued_reboot_waits_for_a_new_boot_with_the_fence_on() {
    let c = claim(
        rebooting::ISSUED,
        json!({"karpenter.sh/reboot-pre-boot-id": "b1"}),
        Some(10),
    );
    let p = pass(&c, Some(&node("b1", true, true)), &[], None, 20);
    assert_eq!(names(&p), ["remove-initialized-label"]);
    assert_eq!(p.requeue_after, Some(POLL_INTERVAL));
}

#[test]
fn a_new_boot_removes_the_fence_before_the_node_is_ready() {
    let c = claim(
        rebooting::ISSUED,
        json!({"karpenter.sh/reboot-pre-boot-id": "b1"}),
        Some(10),
    );
    let p = pass(&c, Some(&node("b2", true, false)), &[], None, 20);
    assert_eq!(
        p.steps,
        [
            RebootStep::RemoveInitializedLabel,
            RebootStep::Unfence { observed: true }
        ]
    );
}

#[test]
fn a_new_boot_that_is_ready_succeeds() {
    let c = claim(
        rebooting::ISSUED,
        json!({"karpenter.sh/reboot-pre-boot-id": "b1"}),
        Some(10),
    );
    let p = pass(&c, Some(&node("b2", false, true)), &[], None, 20);
    assert_eq!(names(&p), ["remove-initialized-label", "succeed"]);
}

#[test]
fn a_node_not_back_within_twenty_minutes_of_the_issue_fails_and_replaces() {
    let c = claim(
        rebooting::ISSUED,
        json!({"karpenter.sh/reboot-pre-boot-id": "b1"}),
        Some(10),
    );
    let n = node("b2", false, false);
    assert_eq!(failure(&pass(&c, Some(&n), &[], None, 1210)), None);
    let p = pass(&c, Some(&n), &[], None, 1211);
    assert_eq!(failure(&p), Some(RebootResult::RecoveryTimeout));
}

#[test]
fn a_missing_node_is_waited_for_until_the_issuance_timeout_from_the_request() {
    let c = requested(json!({}));
    let waiting = pass(&c, None, &[], None, 299);
    assert_eq!(names(&waiting), Vec::<&str>::new());
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(1)));
    let p = pass(&c, None, &[], None, 301);
    assert_eq!(names(&p), ["fail"]);
    assert_eq!(failure(&p), Some(RebootResult::ProviderError));
}

#[test]
fn a_deleted_nodeclaim_is_left_to_the_termination() {
    let mut c = requested(json!({}));
    c.metadata.deletion_timestamp = karpenter_state::conditions::api_time(at(0));
    assert_eq!(
        pass(&c, Some(&node("b1", false, true)), &[], None, 1),
        RebootPass::default()
    );
}
