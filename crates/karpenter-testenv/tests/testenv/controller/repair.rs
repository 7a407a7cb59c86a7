//! Node repair on the real control plane with KWOK (gate `NodeRepair`): a node held NotReady
//! past its toleration is replaced and its pods move; `karpenter.sh/do-not-repair` keeps a
//! node; three broken nodes of ten stop repair in their pool and the event says why; with the
//! gate off nothing happens. The KWOK tolerations are shortened with `KWOK_REPAIR_TOLERATION`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, Patch, PatchParams};

use super::{Harness, only, start};

const GATE_ON: &str = "--feature-gates=NodeRepair=true";
/// KWOK's `Ready` tolerations (upstream: 10 minutes), shortened for the tests.
const TOLERATION: Duration = Duration::from_secs(10);

fn kwok() -> KwokOptions {
    KwokOptions {
        repair_toleration: Some(TOLERATION),
        ..KwokOptions::default()
    }
}

impl Harness {
    /// The Nodes of the test's NodeClaims.
    async fn claim_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .node_claims()
            .await
            .iter()
            .filter_map(|c| c.status.as_ref()?.node_name.clone())
            .collect();
        nodes.sort();
        nodes
    }

    /// Holds Node `node` `Ready=False`: KWOK's `node-unhealthy` stage (label
    /// `kwok.x-k8s.io/stage=unhealthy`) outweighs the stage that would make it Ready again.
    async fn break_node(&self, node: &str) {
        let nodes = Api::<Node>::all(self.client.clone());
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {"kwok.x-k8s.io/stage": "unhealthy"}}})),
            )
            .await
            .expect("labelling the node for KWOK's unhealthy stage");
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        nodes
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Strategic(serde_json::json!({"status": {"conditions": [{
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "injected by the test",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }]}})),
            )
            .await
            .expect("holding the node NotReady");
    }

    /// Waits until the disruption pass has run `passes` more times (a pass every 10 s).
    async fn wait_passes(&self, passes: f64) {
        let metric = "controller_runtime_reconcile_total";
        let label = "controller=\"disruption\"";
        let start = self.metric(metric, &[label]).await;
        wait_for(
            &format!("{passes} more disruption passes"),
            Duration::from_secs(120),
            || async { Ok((self.metric(metric, &[label]).await >= start + passes).then_some(())) },
        )
        .await
        .expect("the disruption loop keeps passing");
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_held_not_ready_past_its_toleration_is_replaced_and_its_pod_moves() {
    let h = start("repair-replace", &[GATE_ON], kwok()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.claim_nodes().await;
    assert_eq!(before.len(), 1, "{before:?}");
    let broken = before[0].clone();
    h.break_node(&broken).await;
    wait_for(
        "the broken node replaced and the pod Running on the replacement",
        Duration::from_secs(180),
        || async {
            let nodes = h.claim_nodes().await;
            let pods = h.pods().await;
            let moved = pods.iter().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| n != broken)
            });
            Ok((nodes.len() == 1 && !nodes.contains(&broken) && moved).then_some(()))
        },
    )
    .await
    .expect("node repair replaces the NotReady node");
    let pool = format!("nodepool=\"{}\"", h.pool);
    assert_eq!(
        h.metric(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            &[
                "condition=\"ready\"",
                &pool,
                "termination_mode=\"forceful\""
            ]
        )
        .await,
        1.0
    );
    assert_eq!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"unhealthy\"", &pool]
        )
        .await,
        1.0
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_annotated_do_not_repair_is_left_broken() {
    let h = start("repair-veto", &[GATE_ON], kwok()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.claim_nodes().await;
    assert_eq!(before.len(), 1, "{before:?}");
    let node = before[0].clone();
    Api::<Node>::all(h.client.clone())
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"karpenter.sh/do-not-repair": "true"}}})),
        )
        .await
        .expect("annotating the node");
    h.break_node(&node).await;
    // Told only once the toleration has passed: repair would act now but for the veto.
    let told = h.wait_blocked(&node, "do-not-repair").await;
    assert!(
        told.contains("repair is blocked through the \"karpenter.sh/do-not-repair\" annotation"),
        "{told}"
    );
    h.wait_passes(2.0).await;
    assert_eq!(h.claim_nodes().await, before, "the vetoed node stays");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn three_broken_nodes_of_ten_are_not_repaired_and_the_event_says_why() {
    let h = start("repair-threshold", &[GATE_ON], kwok()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    // c5.large: one 1500m pod per node.
    h.create_deployment("web", 10, "1500m").await;
    h.wait_running(10, Duration::from_secs(180)).await;
    let before = h.claim_nodes().await;
    assert_eq!(before.len(), 10, "{before:?}");
    for node in &before[..3] {
        h.break_node(node).await;
    }
    let told = h
        .wait_object_event("NodePool", &h.pool, "NodeRepairBlocked", "(3 of 10)")
        .await;
    assert_eq!(
        told,
        format!(
            "more than 20% of nodes in nodepool \"{}\" are unhealthy (3 of 10)",
            h.pool
        )
    );
    h.wait_object_event("Node", &before[0], "NodeRepairBlocked", "(3 of 10)")
        .await;
    h.wait_passes(2.0).await;
    assert_eq!(h.claim_nodes().await, before, "none is repaired");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn with_the_gate_off_a_broken_node_is_left() {
    let h = start("repair-off", &[], kwok()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.claim_nodes().await;
    assert_eq!(before.len(), 1, "{before:?}");
    h.break_node(&before[0]).await;
    // Past the toleration, and then some passes: nothing acts.
    h.wait_passes(3.0).await;
    assert_eq!(h.claim_nodes().await, before, "the node stays");
    assert_eq!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"unhealthy\""]
        )
        .await,
        0.0
    );
    h.finish().await;
}

/// `condition` of NodeClaim `claim`: (status, reason).
fn claim_condition(claim: &karpenter_api::v1::NodeClaim, type_: &str) -> Option<(String, String)> {
    claim
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_asking_for_a_reboot_is_rebooted_in_place_not_replaced() {
    let h = start("repair-reboot", &[GATE_ON], kwok()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    // An empty node: the reboot's drain has nothing to move.
    h.scale("web", 0).await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1);
    let claim = claims[0].metadata.name.clone().unwrap_or_default();
    let node = claims[0]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim's node");
    let nodes = Api::<Node>::all(h.client.clone());
    let boot_before = nodes
        .get(&node)
        .await
        .expect("the node")
        .status
        .and_then(|s| s.node_info)
        .map(|i| i.boot_id)
        .unwrap_or_default();
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    nodes
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"status": {"conditions": [{
                "type": "KWOKRebootRequired",
                "status": "True",
                "reason": "Injected",
                "message": "injected by the test",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("asking for a reboot");
    wait_for(
        "the NodeClaim's reboot to succeed",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let ours = claims
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(claim.as_str()));
            Ok(ours
                .and_then(|c| claim_condition(c, "Rebooting"))
                .filter(|(status, reason)| status == "False" && reason == "RebootSucceeded"))
        },
    )
    .await
    .expect("node repair reboots the node in place");
    // A reboot clears the fault (KWOK keeps the injected condition: the test clears it).
    nodes
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"status": {"conditions": [{
                "type": "KWOKRebootRequired",
                "status": "False",
                "reason": "Rebooted",
                "message": "cleared by the test",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("clearing the fault");
    let after = nodes.get(&node).await.expect("the same node, still there");
    let boot_after = after
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default();
    assert_ne!(boot_after, boot_before, "the node booted again");
    assert!(boot_after.starts_with("kwok-"), "{boot_after}");
    let fenced = after
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/rebooting"));
    assert!(!fenced, "the reboot fence is gone");
    let claims = h.node_claims().await;
    assert!(
        claims
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(claim.as_str())
                && c.metadata.deletion_timestamp.is_none()),
        "the NodeClaim was not replaced"
    );
    assert_eq!(
        h.metric("karpenter_nodes_reboots_total", &["result=\"succeeded\""])
            .await,
        1.0
    );
    h.finish().await;
}
