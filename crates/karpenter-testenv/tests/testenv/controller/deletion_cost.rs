//! Pod deletion cost (`PodDeletionCostManagement`) on the real control plane with KWOK: the
//! kube-controller-manager's ReplicaSet controller really scales down, and honours
//! `controller.kubernetes.io/pod-deletion-cost`.
//!
//! Both cases run the same scenario: a Deployment of 24 pods on 6 full nodes (c5.large, 4 pods
//! of 400m each), scaled to 12, with consolidation on. With the gate on, the ReplicaSet deletes
//! the pods of the three nodes ranked lowest, which empty and go without a single eviction; with
//! it off, no annotation is written and the scale-down leaves pods spread over the nodes, which
//! consolidation then evicts. Each case prints its evictions: the measurement of
//! `docs/parity.md`'s PodDeletionCostManagement row (`scripts/test-integration deletion_cost --
//! --nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;

use super::{Harness, only, start};

const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
const REPLICAS: i32 = 24;
const SCALED_TO: i32 = 12;
/// c5.large holds four 400m pods (1930m allocatable).
const NODES: usize = 6;

/// Consolidation at once, every node in budget (the default 10% ranks one node in ten).
fn consolidating() -> serde_json::Value {
    serde_json::json!({
        "consolidateAfter": "5s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "100%"}]
    })
}

/// Live (not terminating) pods by node.
fn by_node(pods: &[Pod]) -> BTreeMap<String, Vec<&Pod>> {
    let mut out: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            out.entry(node).or_default().push(pod);
        }
    }
    out
}

fn cost(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(POD_DELETION_COST)
        .map(String::as_str)
}

impl Harness {
    /// The scenario up to the scale-down: the pool, the Deployment, its pods running on
    /// [`NODES`] nodes.
    async fn full_nodes(&self) {
        self.node_pool_disrupting(consolidating(), only(&["c5.large"]))
            .await;
        self.create_deployment("web", REPLICAS, "400m").await;
        self.wait_running(
            usize::try_from(REPLICAS).unwrap_or_default(),
            Duration::from_secs(180),
        )
        .await;
        assert_eq!(self.node_claims().await.len(), NODES, "four pods a node");
    }

    /// Scales to [`SCALED_TO`] and waits until consolidation has left the fewest nodes that
    /// hold them; the nodes left, the successful evictions and the seconds it took.
    async fn scale_down_and_consolidate(&self) -> (BTreeSet<String>, f64, f64) {
        let evicted_before = self
            .metric("karpenter_pods_eviction_requests_total", &["code=\"200\""])
            .await;
        let started = Instant::now();
        self.scale("web", SCALED_TO).await;
        let want = usize::try_from(SCALED_TO).unwrap_or_default() / 4;
        let left = wait_for(
            "consolidation down to the nodes the scaled Deployment fills",
            Duration::from_secs(300),
            || async {
                let claims = self.node_claims().await;
                let pods = self.pods().await;
                let running = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count();
                let nodes: BTreeSet<String> = by_node(&pods).into_keys().collect();
                Ok((claims.len() == want
                    && running == usize::try_from(SCALED_TO).unwrap_or_default()
                    && nodes.len() == want)
                    .then_some(nodes))
            },
        )
        .await
        .expect("consolidation removes the nodes the scale-down left spare");
        let seconds = started.elapsed().as_secs_f64();
        let evicted = self
            .metric("karpenter_pods_eviction_requests_total", &["code=\"200\""])
            .await
            - evicted_before;
        (left, evicted, seconds)
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn with_pod_deletion_cost_management_a_scale_down_empties_the_nodes_consolidation_removes_without_evictions()
 {
    let h = start(
        "deletion-cost-on",
        &["--feature-gates=PodDeletionCostManagement=true"],
        KwokOptions::default(),
    )
    .await;
    h.full_nodes().await;
    // Every pod carries its node's rank: one value a node, -6 (removed first) to -1.
    let ranks: BTreeMap<String, i32> = wait_for(
        "every pod annotated with its node's rank",
        Duration::from_secs(180),
        || async {
            let pods = h.pods().await;
            let mut ranks = BTreeMap::new();
            for (node, pods) in by_node(&pods) {
                let values: BTreeSet<Option<&str>> = pods.iter().map(|p| cost(p)).collect();
                let [Some(value)] = values.into_iter().collect::<Vec<_>>()[..] else {
                    return Ok(None);
                };
                ranks.insert(node, value.parse::<i32>().unwrap_or_default());
            }
            let mut values: Vec<i32> = ranks.values().copied().collect();
            values.sort_unstable();
            Ok((values == [-6, -5, -4, -3, -2, -1]).then_some(ranks))
        },
    )
    .await
    .expect("the controller ranks the nodes");
    let mut order: Vec<(&i32, &String)> = ranks.iter().map(|(n, r)| (r, n)).collect();
    order.sort();
    let kept: BTreeSet<String> = order[3..].iter().map(|(_, n)| (*n).clone()).collect();
    assert!(
        h.metric(
            "karpenter_pod_deletion_cost_pod_annotation_writes_total",
            &["result=\"updated\""]
        )
        .await
            >= f64::from(REPLICAS)
    );

    let (left, evicted, seconds) = h.scale_down_and_consolidate().await;
    println!(
        "deletion-cost measurement: PodDeletionCostManagement=true: {REPLICAS} pods on {NODES} nodes scaled to {SCALED_TO}: {evicted} evictions, {} nodes left, {seconds:.0} s",
        left.len()
    );
    assert_eq!(
        left, kept,
        "the ReplicaSet deleted the pods of the three lowest-ranked nodes ({ranks:?})"
    );
    assert_eq!(evicted, 0.0, "the emptied nodes went without evictions");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn without_pod_deletion_cost_management_no_pod_is_annotated_and_consolidation_evicts_what_the_scale_down_spread()
 {
    let h = start("deletion-cost-off", &[], KwokOptions::default()).await;
    h.full_nodes().await;
    let (left, evicted, seconds) = h.scale_down_and_consolidate().await;
    println!(
        "deletion-cost measurement: PodDeletionCostManagement=false: {REPLICAS} pods on {NODES} nodes scaled to {SCALED_TO}: {evicted} evictions, {} nodes left, {seconds:.0} s",
        left.len()
    );
    let annotated: Vec<String> = h
        .pods()
        .await
        .iter()
        .filter(|p| cost(p).is_some())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(annotated.is_empty(), "annotated: {annotated:?}");
    assert_eq!(
        h.metric(
            "karpenter_pod_deletion_cost_pod_annotation_writes_total",
            &[]
        )
        .await,
        0.0
    );
    h.finish().await;
}
