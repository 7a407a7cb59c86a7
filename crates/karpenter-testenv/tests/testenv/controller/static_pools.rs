//! Static NodePools on the real control plane with KWOK (gate `StaticCapacity`): a pool with
//! `spec.replicas` gets its nodes with no pod asking for them, follows `kubectl scale nodepool`
//! (a patch of the scale subresource) up and down, and a template change replaces its nodes
//! one for one (replacement first; with `TerminateFirstDrift` at `limits.nodes`, the node
//! first).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::Duration;

use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, Patch, PatchParams};

use super::{Harness, claim_label, only, start};

const GATE_ON: &str = "--feature-gates=StaticCapacity=true";

/// NodeClaims not being deleted.
fn live(claims: &[NodeClaim]) -> Vec<&NodeClaim> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .collect()
}

fn initialized(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Initialized" && c.status == "True")
        })
}

impl Harness {
    /// The test's NodePool, static with `replicas` and disruption `budgets`.
    async fn static_node_pool(&self, replicas: i64, budgets: serde_json::Value) {
        let mut spec = self.node_pool_spec(
            only(&["c5.large"]),
            Some(serde_json::json!({"consolidateAfter": "Never", "budgets": budgets})),
        );
        spec["replicas"] = serde_json::json!(replicas);
        self.create_node_pool_with(&self.pool, spec).await;
    }

    /// `kubectl scale nodepool <pool> --replicas=<replicas>`: a merge patch of the scale
    /// subresource.
    async fn scale_pool(&self, replicas: i64) {
        Api::<NodePool>::all(self.client.clone())
            .patch_scale(
                &self.pool,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scaling the NodePool through its scale subresource");
    }

    /// Waits until the pool has exactly `count` NodeClaims, none being deleted, all
    /// initialized (their Nodes registered and Ready), and the scale subresource reports
    /// `count` (`status.nodes`); their names.
    async fn wait_static_nodes(&self, count: usize, timeout: Duration) -> BTreeSet<String> {
        let pools = Api::<NodePool>::all(self.client.clone());
        wait_for(
            &format!("{count} initialized NodeClaims and a scale status of {count}"),
            timeout,
            || async {
                let claims = self.node_claims().await;
                let settled = claims.len() == count && live(&claims).len() == count;
                let ready = claims.iter().all(initialized);
                let scale = pools
                    .get_scale(&self.pool)
                    .await
                    .ok()
                    .and_then(|s| s.status)
                    .map(|s| s.replicas);
                let reported = scale == Some(i32::try_from(count).unwrap_or(i32::MAX));
                Ok((settled && ready && reported).then(|| {
                    claims
                        .iter()
                        .filter_map(|c| c.metadata.name.clone())
                        .collect()
                }))
            },
        )
        .await
        .expect("the static pool reaches its replicas")
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_static_nodepool_gets_its_replicas_without_pods_and_follows_kubectl_scale() {
    let h = start("static-scale", &[GATE_ON], KwokOptions::default()).await;
    h.static_node_pool(3, serde_json::json!([{"nodes": "10%"}]))
        .await;
    let first = h.wait_static_nodes(3, Duration::from_secs(120)).await;
    assert!(h.pods().await.is_empty(), "no pod asked for these nodes");
    let claims = h.node_claims().await;
    for claim in &claims {
        assert_eq!(claim_label(claim, "karpenter.sh/nodepool"), h.pool);
        let annotations = claim.metadata.annotations.clone().unwrap_or_default();
        assert!(
            annotations.contains_key("karpenter.sh/nodepool-hash"),
            "a static NodeClaim carries the pool's hash as a dynamic launch does: {annotations:?}"
        );
    }

    h.scale_pool(5).await;
    let grown = h.wait_static_nodes(5, Duration::from_secs(120)).await;
    assert!(
        first.is_subset(&grown),
        "scaling up keeps the nodes there were"
    );

    h.scale_pool(2).await;
    let shrunk = h.wait_static_nodes(2, Duration::from_secs(120)).await;
    assert!(shrunk.is_subset(&grown), "scaling down launches nothing");
    let pool = format!("nodepool=\"{}\"", h.pool);
    assert_eq!(
        h.metric(
            "karpenter_nodeclaims_created_total",
            &["reason=\"provisioned\"", &pool]
        )
        .await,
        5.0
    );
    h.finish().await;
}

impl Harness {
    /// Changes the pool's template (label `rev`) and `merge` into its spec, then waits until
    /// every NodeClaim is a new, initialized one with that label, `count` of them; the most
    /// NodeClaims not being deleted at once meanwhile.
    async fn roll_static_pool(
        &self,
        rev: &str,
        merge: serde_json::Value,
        count: usize,
        old: &BTreeSet<String>,
    ) -> (usize, BTreeSet<String>) {
        let mut spec = serde_json::json!({"template": {"metadata": {"labels": {"rev": rev}}}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), merge.as_object()) {
            spec.extend(extra.clone());
        }
        Api::<NodePool>::all(self.client.clone())
            .patch(
                &self.pool,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": spec })),
            )
            .await
            .expect("changing the pool's template");
        let most_live = Cell::new(0usize);
        let fresh = wait_for(
            &format!("all {count} static nodes replaced by initialized nodes with rev={rev}"),
            Duration::from_secs(240),
            || {
                let most_live = &most_live;
                async move {
                    let claims = self.node_claims().await;
                    most_live.set(most_live.get().max(live(&claims).len()));
                    let fresh = claims.len() == count
                        && claims.iter().all(|c| {
                            !old.contains(c.metadata.name.as_deref().unwrap_or_default())
                                && claim_label(c, "rev") == rev
                                && initialized(c)
                        });
                    Ok(fresh.then(|| {
                        claims
                            .iter()
                            .filter_map(|c| c.metadata.name.clone())
                            .collect()
                    }))
                }
            },
        )
        .await
        .expect("static drift replaces every node");
        (most_live.get(), fresh)
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_static_nodepool_template_change_replaces_its_nodes_one_for_one_and_at_its_node_limit_terminates_first()
 {
    let h = start(
        "static-drift",
        &["--feature-gates=StaticCapacity=true,TerminateFirstDrift=true"],
        KwokOptions::default(),
    )
    .await;
    h.static_node_pool(2, serde_json::json!([{"nodes": "1"}]))
        .await;
    let old = h.wait_static_nodes(2, Duration::from_secs(120)).await;
    // Room under the (absent) node limit: each replacement launches first, even with the
    // terminate-first gate on.
    let (most_live, second) = h
        .roll_static_pool("2", serde_json::json!({}), 2, &old)
        .await;
    assert_eq!(
        most_live, 3,
        "each replacement launches before its node goes, one at a time (budget 1)"
    );
    assert!(
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"drifted\""]
        )
        .await
            >= 2.0
    );
    // At limits.nodes no replacement can be staged: TerminateFirstDrift deletes each drifted
    // node first and the static loop refills the pool, never past the limit.
    let (most_live, _) = h
        .roll_static_pool(
            "3",
            serde_json::json!({"limits": {"nodes": "2"}}),
            2,
            &second,
        )
        .await;
    assert!(
        most_live <= 2,
        "never more than limits.nodes live: {most_live}"
    );
    let pool = format!("nodepool=\"{}\"", h.pool);
    assert_eq!(
        h.metric(
            "karpenter_voluntary_disruption_terminate_first_decisions_total",
            &[&pool, "terminate_first_reason=\"static-at-limit\""]
        )
        .await,
        2.0,
        "one terminate-first decision per node at the limit"
    );
    h.finish().await;
}
