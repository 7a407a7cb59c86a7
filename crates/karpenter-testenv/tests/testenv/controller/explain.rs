//! `/explain/...` on the real control plane + KWOK, asked the way `karpenter explain
//! --controller-url` asks (`karpenter_controller::explain::client`): a pod no NodePool can take
//! is told why per pool, a pod that got a node is told which NodeClaim, and a node kept by a
//! do-not-disrupt pod says so, in the pass's verdict and in its removal simulation; nodes
//! kept by a zero budget and by a PDB are told so, the consolidation command explain shows is
//! the one the controller carries out, node for node, and a pod held by its NodePool's limit
//! is told so.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_controller::explain::client::{Target, ask, paths};
use karpenter_controller::explain::model::{
    DisruptionAnswer, NodeAnswer, NodePoolAnswer, NodeVerdict, PlaceReason, PodAnswer, PodOutcome,
    RemovalAnswer,
};
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, PostParams};

use super::{only, start};

/// Waits until the controller's answer for pod `namespace/pod` is unschedulable with a reason
/// that is `wanted`: its reasons; on timeout, panics with `what` and the last answer.
async fn wait_unschedulable(
    what: &str,
    target: &Target,
    namespace: &str,
    pod: &str,
    wanted: impl Fn(&PlaceReason) -> bool,
) -> Vec<PlaceReason> {
    let found = wait_for(what, Duration::from_secs(60), || async {
        let answer: Result<PodAnswer, _> = ask(target, &paths::pod(namespace, pod))
            .await
            .expect("the controller answers");
        Ok(match answer.map(|a| a.outcome) {
            Ok(PodOutcome::Unschedulable { reasons }) if reasons.iter().any(&wanted) => {
                Some(reasons)
            }
            _ => None,
        })
    })
    .await;
    match found {
        Ok(reasons) => reasons,
        Err(timeout) => {
            let last: Result<Result<PodAnswer, _>, _> =
                ask(target, &paths::pod(namespace, pod)).await;
            panic!("{what}: {timeout:?}; its last answer: {last:?}")
        }
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn explain_tells_why_a_pod_fits_nowhere_where_another_went_and_why_its_node_stays() {
    let h = start("explain", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(
        serde_json::json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}),
        only(&["c5.large"]),
    )
    .await;
    let target = Target::Url(
        format!("http://{}", h.controllers[0].metrics)
            .parse()
            .expect("the controller's URL"),
    );
    let namespace = h.scope.namespace().to_owned();
    // A pod selecting a zone no instance type is offered in, and one held by do-not-disrupt.
    let mut stuck = h.deployment("stuck", 1, "100m");
    if let Some(spec) = stuck.spec.template.spec.as_mut() {
        spec.node_selector = Some(BTreeMap::from([(
            "topology.kubernetes.io/zone".to_owned(),
            "nowhere-1".to_owned(),
        )]));
    }
    let mut held = h.deployment("held", 1, "100m");
    if let Some(template) = held.spec.template.metadata.as_mut() {
        template.annotations = Some(BTreeMap::from([(
            "karpenter.sh/do-not-disrupt".to_owned(),
            "true".to_owned(),
        )]));
    }
    let deployments = Api::<Deployment>::namespaced(h.client.clone(), &namespace);
    for d in [&stuck, &held] {
        deployments
            .create(&PostParams::default(), d)
            .await
            .expect("creating the Deployment");
    }
    let (stuck_pod, held_pod) = wait_for(
        "a pod of each Deployment",
        Duration::from_secs(60),
        || async {
            let names: Vec<String> = h
                .pods()
                .await
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            let of = |prefix: &str| names.iter().find(|n| n.starts_with(prefix)).cloned();
            Ok(of("stuck-").zip(of("held-")))
        },
    )
    .await
    .expect("the Deployments make their pods");

    // The stuck pod: fits nowhere, and the test's pool says why.
    let pool_line = format!("nodepool {}", h.pool);
    let reasons = wait_unschedulable(
        "the stuck pod's explanation naming the test's NodePool",
        &target,
        &namespace,
        &stuck_pod,
        |r| r.place == pool_line,
    )
    .await;
    let line = reasons
        .iter()
        .find(|r| r.place == pool_line)
        .map(|r| r.reason.clone())
        .unwrap_or_default();
    assert!(
        line.contains("nowhere-1") || line.contains("zone"),
        "the reason names the zone the pod asks for: {line}"
    );

    // The held pod: its NodeClaim, named, while it was launched.
    h.wait_running(1, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "one NodeClaim, for the held pod");
    let claim = claims[0].metadata.name.clone().unwrap_or_default();
    let node = claims[0]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    // Depending on when the last batch ran: the batch that launched its NodeClaim, a later
    // one that saw it still pending and nominated it to that NodeClaim's node (bound by
    // kube-scheduler since), or none since it left the queue.
    let answer: Result<PodAnswer, _> = ask(&target, &paths::pod(&namespace, &held_pod))
        .await
        .expect("the controller answers");
    match answer.map(|a| a.outcome) {
        Ok(PodOutcome::NewNodeClaim { node_claim, .. }) => {
            assert_eq!(node_claim.as_deref(), Some(claim.as_str()));
        }
        Ok(PodOutcome::ExistingNode { node: nominated }) => assert_eq!(
            nominated, node,
            "the held pod was nominated to its NodeClaim's node"
        ),
        Err(none) => assert!(
            none.message.contains("not in the last provisioning batch"),
            "{}",
            none.message
        ),
        other => panic!("the held pod went to {claim} (node {node}), not {other:?}"),
    }

    // Its node stays: the do-not-disrupt pod, named, is the reason.
    let verdict = wait_for(
        "the node's explanation from a disruption pass that saw it, past any nomination",
        Duration::from_secs(90),
        || async {
            let answer: Result<NodeAnswer, _> = ask(&target, &paths::node(&node))
                .await
                .expect("the controller answers");
            // A node nominated for the held pod by a later batch is kept for that until the
            // nomination ends (2 × the batch max duration): wait it out.
            Ok(match answer.map(|a| a.verdict) {
                Ok(NodeVerdict::NotConsidered) | Err(_) => None,
                Ok(NodeVerdict::Kept { reasons })
                    if reasons.iter().all(|r| r.code == "Nominated") =>
                {
                    None
                }
                Ok(verdict) => Some(verdict),
            })
        },
    )
    .await
    .expect("a disruption pass considered the node");
    match verdict {
        NodeVerdict::Kept { reasons } => assert!(
            reasons
                .iter()
                .any(|r| r.code == "PodDoNotDisrupt" && r.text.contains(&held_pod)),
            "the do-not-disrupt pod keeps the node: {reasons:?}"
        ),
        other => panic!("the node stays, not {other:?}"),
    }
    // Its removal simulation (`explain consolidation --node`), computed on request over the
    // last pass's snapshot: it cannot be removed, for the same pod.
    let removal: RemovalAnswer = ask(&target, &paths::removal(&node))
        .await
        .expect("the controller answers")
        .expect("the node was in the last pass");
    assert!(!removal.removable, "{removal:?}");
    assert!(
        removal
            .reasons
            .iter()
            .any(|r| r.code == "PodDoNotDisrupt" && r.text.contains(&held_pod)),
        "the do-not-disrupt pod keeps the node in the simulation too: {removal:?}"
    );
    let unknown: Result<RemovalAnswer, _> = ask(&target, &paths::removal("no-such-node"))
        .await
        .expect("the controller answers");
    assert!(
        unknown
            .as_ref()
            .is_err_and(|none| none.message.contains("no-such-node")),
        "{unknown:?}"
    );
    // The pool: Ready first, its one node, a budget per reason (the default 10% of 1 node
    // rounds up to 1).
    let pool: NodePoolAnswer = ask(&target, &paths::node_pool(&h.pool))
        .await
        .expect("the controller answers")
        .expect("the pool was in the last pass");
    assert_eq!(
        pool.conditions
            .first()
            .map(|c| (c.type_.as_str(), c.status.as_str())),
        Some(("Ready", "True")),
        "{pool:?}"
    );
    assert_eq!(pool.nodes.total, 1, "{pool:?}");
    let reasons: Vec<&str> = pool.budgets.iter().map(|b| b.reason.as_str()).collect();
    for reason in ["Empty", "Drifted", "Underutilized"] {
        assert!(reasons.contains(&reason), "a {reason} budget: {pool:?}");
    }
    assert!(
        pool.budgets.iter().all(|b| b.budget == 1),
        "10% of one node rounds up to one: {pool:?}"
    );
    // An unknown pod has no answer, and says why.
    let unknown: Result<PodAnswer, _> = ask(&target, &paths::pod(&namespace, "no-such-pod"))
        .await
        .expect("the controller answers");
    assert!(unknown.is_err(), "{unknown:?}");
    h.finish().await;
}

/// `karpenter explain ARGS --no-controller -o json` against the test's cluster: its answer
/// (recomputed from the listed objects, without the controller), or its exit code and
/// standard error.
fn explain_without_controller(
    h: &super::Harness,
    args: &[&str],
) -> Result<serde_json::Value, String> {
    let out = std::process::Command::new(super::top::karpenter_binary())
        .arg("explain")
        .args(args)
        .args(["--no-controller", "-o", "json", "--kubeconfig"])
        .arg(h.env.kubeconfig_path())
        .output()
        .expect("running karpenter explain");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("exit {:?}: {stderr}", out.status.code()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "not JSON ({e}): {}; {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The nodes the live pods whose names start with `app` run on.
async fn node_of(h: &super::Harness, app: &str) -> Vec<String> {
    h.pods()
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(app))
        })
        .filter_map(|p| p.spec?.node_name)
        .collect()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn explain_names_a_zero_budget_a_pdb_and_a_limit_and_the_consolidation_it_predicts_is_the_one_taken()
 {
    let h = start("explain-predicts", &[], KwokOptions::default()).await;
    // Nothing may be disrupted while the cluster is arranged: a budget of zero nodes.
    h.node_pool_disrupting(
        serde_json::json!({
            "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
            "budgets": [{"nodes": "0"}]
        }),
        only(&["c5.large"]),
    )
    .await;
    let target = Target::Url(
        format!("http://{}", h.controllers[0].metrics)
            .parse()
            .expect("the controller's URL"),
    );
    // Two nodes (c5.large holds one 1500m pod), two small pods on them, then the big pods
    // gone: two under-used nodes, one is enough.
    h.create_deployment("big", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    h.create_deployment("small", 2, "100m").await;
    h.wait_running(4, Duration::from_secs(60)).await;
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .delete("big", &Default::default())
        .await
        .expect("deleting the big pods");
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 2, "two NodeClaims for the big pods");
    let nodes: Vec<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.node_name.clone())
        .collect();

    // The zero budget: every node is kept for it, and the pool says why.
    for node in &nodes {
        let reasons = wait_for(
            &format!("node {node} kept by the zero budget, the big pods gone"),
            Duration::from_secs(90),
            || async {
                let big_left = node_of(&h, "big-").await.len();
                let answer: Result<NodeAnswer, _> = ask(&target, &paths::node(node))
                    .await
                    .expect("the controller answers");
                Ok(match answer.map(|a| a.verdict) {
                    Ok(NodeVerdict::Kept { reasons })
                        if big_left == 0 && reasons.iter().any(|r| r.code == "BudgetExhausted") =>
                    {
                        Some(reasons)
                    }
                    _ => None,
                })
            },
        )
        .await
        .expect("explain names the zero budget");
        assert!(
            reasons
                .iter()
                .any(|r| r.code == "BudgetExhausted" && r.text.contains(&h.pool)),
            "the budget's sentence names the pool: {reasons:?}"
        );
    }
    let pool: NodePoolAnswer = ask(&target, &paths::node_pool(&h.pool))
        .await
        .expect("the controller answers")
        .expect("the pool was in the last pass");
    assert!(
        pool.budgets.iter().all(|b| b.allowed == 0),
        "no node may be disrupted, for any reason: {pool:?}"
    );
    // The same answer without the controller, recomputed from the listed cluster.
    let recomputed = explain_without_controller(&h, &["node", &nodes[0]])
        .expect("explain --no-controller answers");
    let answer: NodeAnswer = serde_json::from_value(recomputed.clone()).expect("a node answer");
    assert!(
        matches!(&answer.verdict, NodeVerdict::Kept { reasons } if reasons.iter().any(|r| r.code == "BudgetExhausted")),
        "recomputed from the cluster, the zero budget keeps the node too: {recomputed}"
    );
    let unknown = explain_without_controller(&h, &["node", "no-such-node"]);
    assert!(
        unknown.as_ref().is_err_and(
            |e| e.contains("exit Some(1)") && e.contains("no-such-node is not in the cluster")
        ),
        "{unknown:?}"
    );

    // A PDB allowing no small pod down: a node running one cannot be removed, for that PDB.
    h.pdb("small", 2).await;
    let guarded = node_of(&h, "small-").await;
    let node = guarded.first().cloned().expect("a small pod runs");
    let removal = wait_for(
        &format!("node {node}'s removal simulation blocked by the PDB"),
        Duration::from_secs(60),
        || async {
            let answer: Result<RemovalAnswer, _> = ask(&target, &paths::removal(&node))
                .await
                .expect("the controller answers");
            Ok(answer
                .ok()
                .filter(|r| r.reasons.iter().any(|r| r.code == "PodDisruptionBudget")))
        },
    )
    .await
    .expect("explain names the PDB");
    assert!(!removal.removable, "{removal:?}");
    assert!(
        removal
            .reasons
            .iter()
            .any(|r| r.code == "PodDisruptionBudget" && r.text.contains("small")),
        "the PDB is named: {removal:?}"
    );
    let recomputed = explain_without_controller(&h, &["consolidation", "--node", &node])
        .expect("explain --no-controller answers");
    let answer: RemovalAnswer =
        serde_json::from_value(recomputed.clone()).expect("a removal answer");
    assert!(
        !answer.removable
            && answer
                .reasons
                .iter()
                .any(|r| r.code == "PodDisruptionBudget"),
        "recomputed from the cluster, the PDB keeps the node too: {recomputed}"
    );

    // The PDB gone and the budget opened: the command explain shows is the one the
    // controller carries out, node for node.
    Api::<PodDisruptionBudget>::namespaced(h.client.clone(), h.scope.namespace())
        .delete("small", &Default::default())
        .await
        .expect("deleting the PDB");
    h.patch_pool(serde_json::json!({"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}}))
        .await;
    let command = wait_for(
        "a disruption command in the last pass",
        Duration::from_secs(90),
        || async {
            let answer: Result<DisruptionAnswer, _> = ask(&target, paths::DISRUPTION)
                .await
                .expect("the controller answers");
            Ok(answer.ok().and_then(|a| a.commands.into_iter().next()))
        },
    )
    .await
    .expect("consolidation decides");
    let removed: BTreeSet<String> = command.nodes.iter().cloned().collect();
    assert!(
        !removed.is_empty() && removed.iter().all(|n| nodes.contains(n)),
        "the command removes some of the test's nodes: {command:?}"
    );
    let kept: BTreeSet<String> = nodes
        .iter()
        .filter(|n| !removed.contains(*n))
        .cloned()
        .collect();
    let replacements = command.replacements.len();
    let remaining = wait_for(
        "the controller removing exactly the nodes explain named",
        Duration::from_secs(120),
        || async {
            let claims = h.node_claims().await;
            let live: BTreeSet<String> = claims
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| c.status.as_ref()?.node_name.clone())
                .collect();
            let launched = claims
                .iter()
                .filter(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.node_name.as_ref())
                        .is_none_or(|n| !nodes.contains(n))
                })
                .count();
            // Gone, not only being deleted: their pods are evicted and placed again first.
            let names: BTreeSet<String> = claims
                .iter()
                .filter_map(|c| c.status.as_ref()?.node_name.clone())
                .collect();
            let done = names.is_disjoint(&removed) && kept.is_subset(&live);
            Ok((done && launched == replacements).then_some(live))
        },
    )
    .await
    .expect("the nodes named are removed, the others stay");
    wait_for(
        "both small pods running again, on the nodes left",
        Duration::from_secs(90),
        || async {
            let pods = h.pods().await;
            let running = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_ref())
                        .is_some_and(|n| !removed.contains(n))
                })
                .count();
            Ok((running == 2 && pods.len() == 2).then_some(()))
        },
    )
    .await
    .expect("the evicted pod is placed again");
    assert!(
        kept.is_subset(&remaining),
        "{kept:?} stay ({remaining:?}); {command:?}"
    );

    // A NodePool limit: no new node may be launched, and a pod that fits no existing node
    // is told so for the pool.
    h.patch_pool(serde_json::json!({"spec": {"limits": {"cpu": "1"}}}))
        .await;
    h.create_deployment("over", 1, "1800m").await;
    let over = wait_for("the over-limit pod", Duration::from_secs(30), || async {
        Ok(h.pods()
            .await
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .find(|n| n.starts_with("over-")))
    })
    .await
    .expect("the Deployment makes its pod");
    let namespace = h.scope.namespace().to_owned();
    let pool_line = format!("nodepool {}", h.pool);
    let reasons = wait_unschedulable(
        "the over-limit pod's explanation naming the pool's limit",
        &target,
        &namespace,
        &over,
        |r| r.place == pool_line && r.reason.contains("limit"),
    )
    .await;
    let recomputed = explain_without_controller(&h, &["pod", &format!("{namespace}/{over}")])
        .expect("explain --no-controller answers");
    let answer: PodAnswer = serde_json::from_value(recomputed.clone()).expect("a pod answer");
    assert!(
        matches!(&answer.outcome, PodOutcome::Unschedulable { reasons } if reasons.iter().any(|r| r.place == pool_line && r.reason.contains("limit"))),
        "recomputed from the cluster, the limit holds the pod too: {recomputed}"
    );
    assert!(
        h.node_claims().await.len() <= 1 + replacements,
        "no NodeClaim launched past the limit: {reasons:?}"
    );
    h.finish().await;
}
