//! Disruption on the real control plane with KWOK: emptiness, consolidation (delete and
//! replace), do-not-disrupt, budgets, drift, expiration and the switch from upstream, each
//! asserted on the cluster as a user would see it (NodeClaims, pods, events, metrics).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use super::{Harness, claim_label, healthy, only, start};

/// Consolidation a test can wait for: 5 s of quiet, both policies.
fn consolidating() -> serde_json::Value {
    serde_json::json!({"consolidateAfter": "5s", "consolidationPolicy": "WhenEmptyOrUnderutilized"})
}

fn names(claims: &[NodeClaim]) -> BTreeSet<String> {
    claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

pub(super) fn node_name(claim: &NodeClaim) -> Option<String> {
    claim.status.as_ref()?.node_name.clone()
}

fn has_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Pods of the namespace bound to a node and Running.
fn running_on(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect()
}

impl Harness {
    /// Events about Node `node` with `reason` (Node events live in `default`).
    async fn node_events(&self, node: &str, reason: &str) -> Vec<Event> {
        self.object_events("Node", node, reason).await
    }

    /// Events about the cluster-scoped `kind` object `name` with `reason` (in `default`).
    async fn object_events(&self, kind: &str, name: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default().fields(&format!(
                "involvedObject.kind={kind},involvedObject.name={name}"
            )))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// The sum of every sample of `/metrics` whose line starts with `metric` and contains
    /// each of `labels`.
    pub(super) async fn metric(&self, metric: &str, labels: &[&str]) -> f64 {
        let scraped =
            crate::leader_election::http_get(self.controllers[0].metrics, "/metrics").await;
        scraped
            .lines()
            .filter(|l| l.starts_with(metric))
            .filter(|l| labels.iter().all(|want| l.contains(want)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    pub(super) async fn patch_pool(&self, patch: serde_json::Value) {
        Api::<NodePool>::all(self.client.clone())
            .patch(&self.pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patching the NodePool");
    }

    pub(super) async fn pdb(&self, app: &str, min_available: i32) {
        let (selector, _) = self.workload(app, "1");
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), self.scope.namespace())
            .create(
                &PostParams::default(),
                &PodDisruptionBudget {
                    metadata: self.scope.namespaced_meta(app),
                    spec: Some(PodDisruptionBudgetSpec {
                        min_available: Some(IntOrString::Int(min_available)),
                        selector: Some(selector),
                        ..PodDisruptionBudgetSpec::default()
                    }),
                    status: None,
                },
            )
            .await
            .expect("creating the PDB");
    }

    /// Waits for a `DisruptionBlocked` event on `node` whose message contains `text`.
    pub(super) async fn wait_blocked(&self, node: &str, text: &str) -> String {
        self.wait_object_event("Node", node, "DisruptionBlocked", text)
            .await
    }

    /// Waits for a `reason` event on the `kind` object `name` whose message contains `text`.
    pub(super) async fn wait_object_event(
        &self,
        kind: &str,
        name: &str,
        reason: &str,
        text: &str,
    ) -> String {
        wait_for(
            &format!("a {reason} event on {kind} {name} containing {text:?}"),
            Duration::from_secs(90),
            || async {
                Ok(self
                    .object_events(kind, name, reason)
                    .await
                    .into_iter()
                    .filter_map(|e| e.message)
                    .find(|m| m.contains(text)))
            },
        )
        .await
        .expect("the node is told why it stays")
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn nodes_left_empty_by_a_scale_down_are_removed_at_once_when_consolidate_after_is_left_to_its_default()
 {
    let h = start("disrupt-empty", &[], KwokOptions::default()).await;
    // A v1.15 manifest: no consolidateAfter. It defaults to 0s (the API server's default is
    // proven by the differential CRD test's `defaulted` cases).
    h.node_pool_disrupting(
        serde_json::json!({"consolidationPolicy": "WhenEmpty"}),
        only(&["c5.large"]),
    )
    .await;
    let stored = Api::<NodePool>::all(h.client.clone())
        .get(&h.pool)
        .await
        .expect("reading the NodePool");
    assert_eq!(
        serde_json::to_value(&stored.spec.disruption).expect("serializes")["consolidateAfter"],
        "0s",
        "consolidateAfter defaults to 0s"
    );
    // c5.large: one 1500m pod per node.
    h.create_deployment("web", 3, "1500m").await;
    h.wait_running(3, Duration::from_secs(120)).await;
    assert_eq!(h.node_claims().await.len(), 3);
    h.scale("web", 1).await;
    let kept = wait_for(
        "the two empty nodes removed, the busy one kept",
        Duration::from_secs(120),
        || async {
            let claims = h.node_claims().await;
            let busy = running_on(&h.pods().await);
            Ok((claims.len() == 1 && busy.len() == 1).then(|| (names(&claims), busy)))
        },
    )
    .await
    .expect("emptiness removes the empty nodes");
    let (_, busy) = kept;
    let claims = h.node_claims().await;
    assert_eq!(
        claims.iter().filter_map(node_name).collect::<BTreeSet<_>>(),
        busy,
        "the node kept is the one running the pod ({claims:?})"
    );
    let pool = format!("nodepool=\"{}\"", h.pool);
    assert_eq!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"empty\"", &pool]
        )
        .await,
        2.0
    );
    assert!(
        h.metric(
            "karpenter_voluntary_disruption_decisions_total",
            &["decision=\"delete\"", "reason=\"empty\""]
        )
        .await
            >= 1.0
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn under_used_nodes_are_merged_without_ever_breaking_a_pdb() {
    let h = start("disrupt-merge", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(consolidating(), only(&["c5.large"]))
        .await;
    // Two nodes, each with a 1200m pod and room for one 600m pod beside it.
    h.create_deployment("big", 2, "1200m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    h.pdb("small", 1).await;
    h.create_deployment("small", 2, "600m").await;
    h.wait_running(4, Duration::from_secs(120)).await;
    assert_eq!(
        h.node_claims().await.len(),
        2,
        "the small pods fit beside the big ones"
    );
    // Without the big pods, both nodes are 30% used: one node holds both small pods.
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        h.client.clone(),
        h.scope.namespace(),
    )
    .delete("big", &Default::default())
    .await
    .expect("deleting the big Deployment");
    let lowest = Cell::new(usize::MAX);
    wait_for(
        "the two small pods on one node, one NodeClaim left",
        Duration::from_secs(180),
        || {
            let (h, lowest) = (&h, &lowest);
            async move {
                let pods: Vec<Pod> = h
                    .pods()
                    .await
                    .into_iter()
                    .filter(|p| {
                        p.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with("small"))
                    })
                    .collect();
                let up = healthy(&pods);
                lowest.set(lowest.get().min(up));
                assert!(up >= 1, "the PDB keeps one small pod up; {up} healthy");
                let claims = h.node_claims().await;
                let nodes = running_on(&pods);
                Ok((claims.len() == 1 && up == 2 && nodes.len() == 1).then_some(()))
            }
        },
    )
    .await
    .expect("consolidation merges the nodes");
    assert!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"underutilized\""]
        )
        .await
            >= 1.0
    );
    assert!(
        h.metric(
            "karpenter_pods_drained_total",
            &["reason=\"Underutilized\""]
        )
        .await
            >= 1.0,
        "the moved pod was drained for the node's disruption reason"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_bigger_than_its_pods_need_is_replaced_by_a_cheaper_one() {
    let h = start("disrupt-replace", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(consolidating(), only(&["c5.xlarge"]))
        .await;
    h.create_deployment("web", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    assert_eq!(before.len(), 1);
    assert_eq!(
        claim_label(&before[0], "node.kubernetes.io/instance-type"),
        "c5.xlarge"
    );
    // Requirements are not part of the NodePool hash: allowing c5.large drifts nothing, it
    // makes a cheaper home possible.
    h.patch_pool(serde_json::json!({"spec": {"template": {"spec": {"requirements": only(&["c5.large", "c5.xlarge"])}}}}))
        .await;
    let old = names(&before);
    wait_for(
        "the pod on a c5.large that replaced the c5.xlarge",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let new: Vec<&NodeClaim> = claims
                .iter()
                .filter(|c| !old.contains(c.metadata.name.as_deref().unwrap_or_default()))
                .collect();
            let running = running_on(&h.pods().await);
            let done = claims.len() == 1
                && new.len() == 1
                && claim_label(new[0], "node.kubernetes.io/instance-type") == "c5.large"
                && node_name(new[0]).is_some_and(|n| running.contains(&n));
            Ok(done.then_some(()))
        },
    )
    .await
    .expect("single-node consolidation replaces the node with a cheaper one");
    let old_claim = before[0].metadata.name.clone().unwrap_or_default();
    let told = h
        .object_events("NodeClaim", &old_claim, "ConsolidationCandidate")
        .await;
    assert!(
        told.iter().any(|e| e.message.as_deref().is_some_and(|m| m
            .starts_with("Consolidation candidate: ")
            && m.contains("(savings: $"))),
        "the replaced NodeClaim was told it was a consolidation candidate: {told:?}"
    );
    assert!(
        h.metric(
            "karpenter_voluntary_disruption_decisions_total",
            &["decision=\"replace\"", "reason=\"underutilized\""]
        )
        .await
            >= 1.0
    );
    assert!(
        h.metric(
            "karpenter_nodeclaims_created_total",
            &["reason=\"underutilized\""]
        )
        .await
            >= 1.0,
        "the replacement is counted as created for disruption"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_do_not_disrupt_pod_keeps_its_node_from_consolidation() {
    let h = start("disrupt-dnd", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(consolidating(), only(&["c5.xlarge"]))
        .await;
    let mut deployment = h.deployment("pinned", 1, "500m");
    if let Some(meta) = deployment.spec.template.metadata.as_mut() {
        meta.annotations =
            Some([("karpenter.sh/do-not-disrupt".to_owned(), "true".to_owned())].into());
    }
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        h.client.clone(),
        h.scope.namespace(),
    )
    .create(&PostParams::default(), &deployment)
    .await
    .expect("creating the Deployment");
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    let node = before
        .first()
        .and_then(node_name)
        .expect("a registered node");
    h.patch_pool(serde_json::json!({"spec": {"template": {"spec": {"requirements": only(&["c5.large", "c5.xlarge"])}}}}))
        .await;
    let why = h.wait_blocked(&node, "do-not-disrupt").await;
    // The pass that said so ran after the cheaper type was allowed: it would have replaced
    // the node without the annotation (the test above).
    let after = h.node_claims().await;
    assert_eq!(names(&after), names(&before), "the node stays: {why}");
    assert!(
        after
            .iter()
            .all(|c| c.metadata.deletion_timestamp.is_none())
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_node_consolidation_leaves_is_told_unconsolidatable_on_its_node_and_node_claim() {
    let h = start("disrupt-unconsolidatable", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"}),
        only(&["c5.xlarge"]),
    )
    .await;
    h.create_deployment("web", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    let claim = claims.first().expect("a NodeClaim");
    let node = node_name(claim).expect("a registered node");
    let text = "consolidates only empty nodes (WhenEmpty)";
    let on_node = h
        .wait_object_event("Node", &node, "Unconsolidatable", text)
        .await;
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let on_claim = h
        .wait_object_event("NodeClaim", &claim_name, "Unconsolidatable", text)
        .await;
    assert_eq!(
        on_node, on_claim,
        "the same message on the Node and its NodeClaim"
    );
    assert!(
        h.node_events(&node, "DisruptionBlocked")
            .await
            .iter()
            .all(|e| !e.message.as_deref().unwrap_or_default().contains(text)),
        "a consolidation verdict is not told as DisruptionBlocked"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn consolidation_keeps_scheduler_config_default_spread_for_pods_without_their_own() {
    let config = r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]}}"#;
    let h = start(
        "disrupt-default-spread",
        &["--scheduler-config", config],
        KwokOptions::default(),
    )
    .await;
    // Three 500m pods, one per zone by the default spread: without it, consolidation packs
    // them onto one c5.large (the three pods fit) and removes two nodes. Consolidation starts
    // once the pods sit one per node.
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "Never", "consolidationPolicy": "WhenEmptyOrUnderutilized"}),
        only(&["c5.large"]),
    )
    .await;
    h.create_deployment("spread", 3, "500m").await;
    h.wait_running(3, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    assert_eq!(before.len(), 3, "one NodeClaim per zone");
    // kube-scheduler is not given the default spread (the test environment's scheduler is
    // shared), and binds pods to whichever node is ready first: it may put two or three on one
    // node. A pod deleted from a crowded node comes back on an empty one (its default
    // scoring prefers the least allocated node) once all three are ready.
    wait_for(
        "the three pods one per node",
        Duration::from_secs(120),
        || async {
            let pods = h.pods().await;
            let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for p in &pods {
                if p.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if let (Some(node), Some(name)) = (
                    p.spec.as_ref().and_then(|s| s.node_name.clone()),
                    p.metadata.name.clone(),
                ) {
                    by_node.entry(node).or_default().push(name);
                }
            }
            if by_node.len() == 3 && by_node.values().all(|p| p.len() == 1) {
                return Ok(Some(()));
            }
            if let Some(crowded) = by_node.values().find(|p| p.len() > 1) {
                let _ = Api::<Pod>::namespaced(h.client.clone(), h.scope.namespace())
                    .delete(&crowded[0], &DeleteParams::default())
                    .await;
            }
            Ok(None)
        },
    )
    .await
    .expect("kube-scheduler spreads the pods over the three nodes");
    h.wait_running(3, Duration::from_secs(60)).await;
    h.patch_pool(serde_json::json!({"spec": {"disruption": {"consolidateAfter": "0s"}}}))
        .await;
    // Every node is judged and left: moving its pod to another zone would break the skew,
    // and a new node in its zone costs the same.
    // (An event from before the patch says `consolidateAfter: Never`: not that one.)
    for claim in &before {
        let node = node_name(claim).expect("a registered node");
        wait_for(
            &format!("an Unconsolidatable event on Node {node} from a pass with consolidation on"),
            Duration::from_secs(90),
            || async {
                Ok(h.object_events("Node", &node, "Unconsolidatable")
                    .await
                    .into_iter()
                    .filter_map(|e| e.message)
                    .find(|m| !m.contains("Never")))
            },
        )
        .await
        .expect("the node is told why it stays");
    }
    let after = h.node_claims().await;
    assert_eq!(names(&after), names(&before), "no node was consolidated");
    assert!(
        after
            .iter()
            .all(|c| c.metadata.deletion_timestamp.is_none())
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_zero_budget_blocks_emptiness_until_its_schedule_window_is_not_active() {
    let h = start("disrupt-budget", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "5s", "consolidationPolicy": "WhenEmpty", "budgets": [{"nodes": "0"}]}),
        only(&["c5.large"]),
    )
    .await;
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    assert_eq!(before.len(), 2);
    h.scale("web", 0).await;
    let node = before
        .first()
        .and_then(node_name)
        .expect("a registered node");
    h.wait_blocked(&node, "budget").await;
    assert_eq!(
        names(&h.node_claims().await),
        names(&before),
        "nodes: \"0\" disrupts nothing"
    );
    assert_eq!(
        h.metric(
            "karpenter_nodepools_allowed_disruptions",
            &[&format!("nodepool=\"{}\"", h.pool), "reason=\"Empty\""]
        )
        .await,
        0.0
    );
    // The same budget, active only one minute a year (January 1st, 00:00): not now.
    h.patch_pool(serde_json::json!({"spec": {"disruption": {"budgets": [
        {"nodes": "0", "schedule": "0 0 1 1 *", "duration": "1m"}
    ]}}}))
    .await;
    wait_for(
        "both empty nodes removed",
        Duration::from_secs(120),
        || async { Ok(h.node_claims().await.is_empty().then_some(())) },
    )
    .await
    .expect("outside its window the budget no longer blocks");
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_template_change_drifts_nodes_and_replaces_them_one_budget_at_a_time() {
    let h = start("disrupt-drift", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]}),
        only(&["c5.large"]),
    )
    .await;
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    let old = names(&h.node_claims().await);
    assert_eq!(old.len(), 2);
    h.patch_pool(serde_json::json!({"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}}))
        .await;
    let saw_drifted = Cell::new(false);
    let most_disrupting = Cell::new(0usize);
    wait_for(
        "both nodes replaced by nodes with the new label, 2 pods running on them",
        Duration::from_secs(240),
        || {
            let (h, old) = (&h, &old);
            let (saw_drifted, most_disrupting) = (&saw_drifted, &most_disrupting);
            async move {
                let claims = h.node_claims().await;
                let nodes = h.nodes().await;
                let tainted: BTreeSet<String> = nodes
                    .iter()
                    .filter(|n| {
                        n.spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/disrupted"))
                    })
                    .filter_map(|n| n.metadata.name.clone())
                    .collect();
                let disrupting = claims
                    .iter()
                    .filter(|c| old.contains(c.metadata.name.as_deref().unwrap_or_default()))
                    // As the budget counts them: draining or tainted, until the instance
                    // terminates.
                    .filter(|c| !has_condition(c, "InstanceTerminating"))
                    .filter(|c| {
                        c.metadata.deletion_timestamp.is_some()
                            || node_name(c).is_some_and(|n| tainted.contains(&n))
                    })
                    .count();
                most_disrupting.set(most_disrupting.get().max(disrupting));
                assert!(
                    disrupting <= 1,
                    "the budget allows one node at a time; {disrupting} disrupting"
                );
                saw_drifted
                    .set(saw_drifted.get() || claims.iter().any(|c| has_condition(c, "Drifted")));
                let fresh = claims.iter().all(|c| {
                    !old.contains(c.metadata.name.as_deref().unwrap_or_default())
                        && claim_label(c, "rev") == "2"
                });
                let running = running_on(&h.pods().await).len();
                Ok((claims.len() == 2 && fresh && running == 2).then_some(()))
            }
        },
    )
    .await
    .expect("drift replaces both nodes");
    assert!(saw_drifted.get(), "the old NodeClaims showed Drifted=True");
    assert_eq!(most_disrupting.get(), 1);
    assert!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"drifted\""]
        )
        .await
            >= 2.0
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn an_expired_node_is_replaced_and_its_pod_moves() {
    let h = start("disrupt-expire", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.patch_pool(serde_json::json!({"spec": {"template": {"spec": {"expireAfter": "20s"}}}}))
        .await;
    h.create_deployment("web", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let first = names(&h.node_claims().await);
    assert_eq!(first.len(), 1);
    wait_for(
        "the first NodeClaim expired and gone, the pod running on another node",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let gone = claims
                .iter()
                .all(|c| !first.contains(c.metadata.name.as_deref().unwrap_or_default()));
            let homes: BTreeSet<String> = claims.iter().filter_map(node_name).collect();
            let running = running_on(&h.pods().await);
            Ok((gone && running.len() == 1 && running.is_subset(&homes)).then_some(()))
        },
    )
    .await
    .expect("expiration replaces the node");
    assert!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"expired\""]
        )
        .await
            >= 1.0
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn switching_from_upstream_restamps_node_claims_and_drifts_none() {
    use karpenter_api::labels::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};

    let mut h = start("disrupt-switch", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    assert_eq!(before.len(), 2);
    // Stop our controller and leave the objects as upstream v1 writes them: its hash, version v3.
    h.crash(0).await;
    let upstream = serde_json::json!({"metadata": {"annotations": {
        NODEPOOL_HASH: "6391212960592001234",
        NODEPOOL_HASH_VERSION: "v3"
    }}});
    h.patch_pool(upstream.clone()).await;
    for claim in &before {
        Api::<NodeClaim>::all(h.client.clone())
            .patch(
                claim.metadata.name.as_deref().unwrap_or_default(),
                &PatchParams::default(),
                &Patch::Merge(&upstream),
            )
            .await
            .expect("writing upstream's annotations");
    }
    let controller = super::spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    h.controllers.push(controller);
    let restamped = |c: &NodeClaim| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODEPOOL_HASH_VERSION))
            .is_some_and(|v| v != "v3")
    };
    wait_for(
        "NodeClaims re-stamped with our hash version",
        Duration::from_secs(60),
        || async { Ok(h.node_claims().await.iter().all(restamped).then_some(())) },
    )
    .await
    .expect("the hash controller re-stamps upstream's NodeClaims");
    // Two disruption passes and their condition writes after the re-stamp: nothing drifted,
    // nothing deleted.
    let passes = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count";
    let start_count = h.metric(passes, &[]).await;
    wait_for(
        "two more disruption passes",
        Duration::from_secs(60),
        || async { Ok((h.metric(passes, &[]).await >= start_count + 2.0).then_some(())) },
    )
    .await
    .expect("disruption keeps running");
    let after = h.node_claims().await;
    assert_eq!(names(&after), names(&before), "no NodeClaim replaced");
    for claim in &after {
        assert!(claim.metadata.deletion_timestamp.is_none());
        assert!(
            !has_condition(claim, "Drifted"),
            "{:?} drifted",
            claim.metadata.name
        );
    }
    let pool = Api::<NodePool>::all(h.client.clone())
        .get(&h.pool)
        .await
        .expect("reading the NodePool");
    let pool_hash = pool
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODEPOOL_HASH));
    assert!(
        after.iter().all(|c| c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODEPOOL_HASH))
            == pool_hash),
        "NodeClaims carry the NodePool's (our) hash: {pool_hash:?}"
    );
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_controller_killed_during_a_replacement_leaves_nothing_leaked_or_unplaced() {
    let mut h = start("disrupt-crash", &[], KwokOptions::default()).await;
    h.node_pool_disrupting(consolidating(), only(&["c5.xlarge"]))
        .await;
    h.create_deployment("web", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let old = names(&h.node_claims().await);
    h.patch_pool(serde_json::json!({"spec": {"template": {"spec": {"requirements": only(&["c5.large", "c5.xlarge"])}}}}))
        .await;
    wait_for(
        "a replacement NodeClaim launched",
        Duration::from_secs(120),
        || async {
            let claims = h.node_claims().await;
            Ok(claims
                .iter()
                .any(|c| !old.contains(c.metadata.name.as_deref().unwrap_or_default()))
                .then_some(()))
        },
    )
    .await
    .expect("consolidation starts a replacement");
    // Killed mid-command: the candidate is tainted, the replacement launching.
    h.crash(0).await;
    let controller = super::spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    h.controllers.push(controller);
    wait_for(
        "one NodeClaim with its Node, the pod running on it, no node tainted",
        Duration::from_secs(240),
        || async {
            let claims = h.node_claims().await;
            let nodes = h.nodes().await;
            let tainted = nodes.iter().any(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/disrupted"))
            });
            let running = running_on(&h.pods().await);
            let homes: BTreeSet<String> = claims.iter().filter_map(node_name).collect();
            let steady = claims.len() == 1
                && nodes.len() == 1
                && !tainted
                && running.len() == 1
                && running == homes;
            Ok(steady.then_some(()))
        },
    )
    .await
    .expect("the restarted controller converges");
    h.assert_one_node_per_claim(1, "after the crash").await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_leaked_instance_is_collected() {
    use k8s_openapi::api::core::v1::Node;

    let h = start("disrupt-leak", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    // An instance of ours (KWOK's Node is the kwok cloud's instance) that no NodeClaim claims,
    // as a crash between launch and the NodeClaim's status write would leave it.
    let name = h.scope.name("leaked");
    let mut labels = h.scope.labels();
    labels.insert("karpenter.sh/nodepool".into(), h.pool.clone());
    labels.insert("type".into(), "kwok".into());
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"}
        },
        "spec": {"providerID": format!("kwok://{name}")}
    }))
    .expect("the Node parses");
    Api::<Node>::all(h.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("creating the leaked Node");
    wait_for(
        "the leaked instance terminated",
        Duration::from_secs(150),
        || async {
            let gone = Api::<Node>::all(h.client.clone())
                .get_opt(&name)
                .await
                .map_err(|e| karpenter_testenv::Error::Kube {
                    action: "reading the leaked Node".into(),
                    source: e,
                })?
                .is_none();
            Ok(gone.then_some(()))
        },
    )
    .await
    .expect("garbage collection terminates instances nothing claims");
    // Disruption passes ran while it lived (every 10 s, the collection waits 30 s): a node
    // without a NodeClaim is not Karpenter's to explain.
    assert!(
        h.node_events(&name, "DisruptionBlocked").await.is_empty(),
        "no DisruptionBlocked event on a node Karpenter does not manage"
    );
    h.finish().await;
}
