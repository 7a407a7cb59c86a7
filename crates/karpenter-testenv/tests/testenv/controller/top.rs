//! `karpenter top --once` on the real control plane + KWOK, through the same calls the command
//! makes (`karpenter_top::list`, `view`, `render`): the controller's nodes with their type,
//! price, capacity type and pods, a node Karpenter is disrupting marked so, and a pending pod
//! with kube-scheduler's reason.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use karpenter_api::v1::NodeClaim;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use karpenter_top::view::TablePrices;
use karpenter_top::{Options, view};
use kube::api::{Api, DeleteParams, PostParams};

use super::{only, start};

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn top_once_lists_the_nodes_prices_and_pods_marks_a_disrupting_node_and_tells_a_pending_pods_reason()
 {
    let h = start("top", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    let namespace = h.scope.namespace().to_owned();
    let mut held = h.deployment("held", 2, "500m");
    if let Some(template) = held.spec.template.metadata.as_mut() {
        template.annotations = Some(BTreeMap::from([(
            "karpenter.sh/do-not-disrupt".to_owned(),
            "true".to_owned(),
        )]));
    }
    let mut stuck = h.deployment("stuck", 1, "100m");
    if let Some(spec) = stuck.spec.template.spec.as_mut() {
        spec.node_selector = Some(BTreeMap::from([(
            "topology.kubernetes.io/zone".to_owned(),
            "nowhere-1".to_owned(),
        )]));
    }
    let deployments = Api::<Deployment>::namespaced(h.client.clone(), &namespace);
    for d in [&held, &stuck] {
        deployments
            .create(&PostParams::default(), d)
            .await
            .expect("creating the Deployment");
    }
    h.wait_running(2, Duration::from_secs(120)).await;
    let prices = TablePrices::embedded(0.6).expect("the embedded catalog");
    let options = Options {
        node_selector: vec![("karpenter.sh/nodepool".into(), Some(h.pool.clone()))],
        ..Options::default()
    };
    let claim = h
        .node_claims()
        .await
        .into_iter()
        .next()
        .expect("a NodeClaim");
    let node = claim
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim's node");
    let mine = format!("{namespace}/");
    let reason_of_stuck = |v: &karpenter_top::View| {
        v.pending
            .iter()
            .find(|p| p.pod.starts_with(&mine) && p.pod.contains("stuck-"))
            .map(|p| p.reason.clone())
            .filter(|r| !r.is_empty())
    };
    let shown = wait_for(
        "top showing the node with its two pods and the stuck pod's scheduling reason",
        Duration::from_secs(60),
        || async {
            let listed = karpenter_top::list(&h.client).await.expect("listing");
            let v = view(&listed, &prices, &options, chrono::Utc::now());
            let ready = v.nodes.len() == 1 && v.nodes[0].pods == 2 && reason_of_stuck(&v).is_some();
            Ok(ready.then_some(v))
        },
    )
    .await
    .expect("top shows the cluster");
    let row = &shown.nodes[0];
    assert_eq!(row.name, node);
    assert_eq!(row.instance_type, "c5.large");
    assert_eq!(row.capacity_type, "on-demand");
    assert_eq!(row.node_pool, h.pool);
    assert_eq!(row.ready, "Ready");
    assert_eq!(row.usage[0].requested, 1.0, "two 500m pods");
    assert!(
        row.price.is_some_and(|p| p > 0.0),
        "c5.large is priced from the embedded catalog: {row:?}"
    );
    let reason = reason_of_stuck(&shown).unwrap_or_default();
    assert!(
        reason.contains("node affinity/selector"),
        "kube-scheduler's reason for the stuck pod: {reason}"
    );
    let text = karpenter_top::render(&shown, 160);
    assert!(text.contains(&node) && text.contains("c5.large"), "{text}");
    let stuck_line = text
        .lines()
        .find(|l| l.starts_with(&mine) && l.contains("stuck-"))
        .unwrap_or_default();
    assert!(
        stuck_line.contains("didn't match Pod's node affinity/selector"),
        "the stuck pod's line leads with what keeps it off the nodes:\n{text}"
    );
    // Delete the NodeClaim: the do-not-disrupt pods hold the drain, and top marks the node.
    Api::<NodeClaim>::all(h.client.clone())
        .delete(
            claim.metadata.name.as_deref().unwrap_or_default(),
            &DeleteParams::default(),
        )
        .await
        .expect("deleting the NodeClaim");
    let status = wait_for(
        "top marking the node Deleting and Disrupting",
        Duration::from_secs(60),
        || async {
            let listed = karpenter_top::list(&h.client).await.expect("listing");
            let v = view(&listed, &prices, &options, chrono::Utc::now());
            Ok(v.nodes
                .first()
                .map(|n| n.status.clone())
                .filter(|s| s.iter().any(|x| x == "Disrupting")))
        },
    )
    .await
    .expect("the node being drained is shown as disrupting");
    assert!(status.iter().any(|s| s == "Deleting"), "{status:?}");
    h.finish().await;
}
