//! NodeOverlays (`karpenter.sh/v1alpha1`, gate `NodeOverlay`) on the real control plane with
//! KWOK: the controller watches them, writes their conditions, and the provisioner launches
//! from the overlaid catalog (a lowered price picks the type; added extended-resource capacity
//! makes a pod requesting it schedulable).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use super::{Harness, claim_label, only, start};

const GATE: &str = "--feature-gates=NodeOverlay=true";
const FUSE: &str = "example.com/fuse";

impl Harness {
    /// Creates a NodeOverlay named `<scope>-<base>` that selects this test's NodePool (plus
    /// `requirements`) and sets `spec` (price, capacity, weight); its name.
    async fn create_overlay(
        &self,
        base: &str,
        requirements: serde_json::Value,
        spec: serde_json::Value,
    ) -> String {
        let name = self.scope.name(base);
        let mut requirements = requirements.as_array().cloned().unwrap_or_default();
        requirements.push(
            serde_json::json!({"key": "karpenter.sh/nodepool", "operator": "In", "values": [self.pool]}),
        );
        let mut full = spec;
        full["requirements"] = requirements.into();
        let overlay: NodeOverlay = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": name, "labels": self.scope.labels()},
            "spec": full,
        }))
        .expect("the test NodeOverlay parses");
        Api::<NodeOverlay>::all(self.client.clone())
            .create(&PostParams::default(), &overlay)
            .await
            .expect("creating the NodeOverlay");
        name
    }

    /// Waits until condition `type_` of NodeOverlay `name` has `status` and `reason`.
    async fn wait_overlay_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> Condition {
        let api = Api::<NodeOverlay>::all(self.client.clone());
        wait_for(
            &format!("NodeOverlay {name}: {type_}={status} ({reason})"),
            Duration::from_secs(60),
            || async {
                let found =
                    api.get(name)
                        .await
                        .map_err(|source| karpenter_testenv::Error::Kube {
                            action: "reading the NodeOverlay".to_owned(),
                            source,
                        })?;
                Ok(found
                    .status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .find(|c| c.type_ == type_ && c.status == status && c.reason == reason))
            },
        )
        .await
        .expect("the NodeOverlay's condition")
    }

    async fn delete_overlays(&self, names: &[&str]) {
        for name in names {
            let _ = Api::<NodeOverlay>::all(self.client.clone())
                .delete(name, &DeleteParams::default())
                .await;
        }
    }

    /// A pod of this test requesting 100m CPU and `fuse` of [`FUSE`] (requests = limits, as
    /// Kubernetes requires of extended resources).
    async fn create_fuse_pod(&self, name: &str, fuse: &str) {
        let requests = BTreeMap::from([
            ("cpu".to_owned(), Quantity("100m".to_owned())),
            (FUSE.to_owned(), Quantity(fuse.to_owned())),
        ]);
        let pod = Pod {
            metadata: self.scope.namespaced_meta(name),
            spec: Some(PodSpec {
                node_selector: Some(self.scope.node_selector()),
                tolerations: Some(vec![self.toleration()]),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("registry.invalid/pause:3.10".into()),
                    resources: Some(ResourceRequirements {
                        limits: Some(BTreeMap::from([(
                            FUSE.to_owned(),
                            Quantity(fuse.to_owned()),
                        )])),
                        requests: Some(requests),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        };
        Api::<Pod>::namespaced(self.client.clone(), self.scope.namespace())
            .create(&PostParams::default(), &pod)
            .await
            .expect("creating the pod");
    }
}

fn annotation<'a>(claim: &'a karpenter_api::v1::NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn an_overlay_lowering_a_types_price_makes_the_next_launch_pick_it() {
    let h = start("overlay-price", &[GATE], KwokOptions::default()).await;
    // c5.large is the cheaper of the two on-demand (0.085 against 0.096 an hour).
    h.node_pool(None, only(&["c5.large", "m5.large"])).await;
    let m5 = serde_json::json!([
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
    ]);
    let cheap = h
        .create_overlay(
            "cheap-m5",
            m5.clone(),
            serde_json::json!({"priceAdjustment": "-50%", "weight": 7}),
        )
        .await;
    // Same weight, same offerings: the one whose name comes first in the alphabet conflicts.
    let conflicting = h
        .create_overlay(
            "also-m5",
            m5,
            serde_json::json!({"price": "9", "weight": 7}),
        )
        .await;
    h.wait_overlay_condition(&cheap, "Ready", "True", "Ready")
        .await;
    let conflict = h
        .wait_overlay_condition(&conflicting, "ValidationSucceeded", "False", "Conflict")
        .await;
    assert!(
        conflict.message.contains(&cheap) && conflict.message.contains("m5.large"),
        "the conflict names the other overlay and the instance type: {}",
        conflict.message
    );
    h.wait_overlay_condition(&conflicting, "Ready", "False", "UnhealthyDependents")
        .await;

    h.create_deployment("priced", 1, "500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "one NodeClaim");
    assert_eq!(
        claim_label(&claims[0], "node.kubernetes.io/instance-type"),
        "m5.large",
        "the overlay made m5.large the cheapest"
    );
    assert_eq!(
        annotation(&claims[0], "karpenter.sh/price-overlay-applied"),
        Some("true")
    );
    h.delete_overlays(&[&cheap, &conflicting]).await;
    h.finish().await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn an_overlay_adding_an_extended_resource_lets_a_pod_requesting_it_be_placed() {
    let h = start("overlay-capacity", &[GATE], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    h.create_fuse_pod("fuse", "1").await;
    // Without an overlay no instance type has the resource: the pod stays pending.
    let told = h
        .wait_pod_event("FailedScheduling", &["Failed to schedule pod", FUSE])
        .await;
    assert!(
        h.node_claims().await.is_empty(),
        "nothing launched for it: {told}"
    );

    let fuse = h
        .create_overlay(
            "fuse",
            serde_json::json!([]),
            serde_json::json!({"capacity": {FUSE: 10}}),
        )
        .await;
    h.wait_overlay_condition(&fuse, "Ready", "True", "Ready")
        .await;
    let claims = wait_for(
        "a NodeClaim for the pod",
        Duration::from_secs(60),
        || async {
            let claims = h.node_claims().await;
            Ok((!claims.is_empty()).then_some(claims))
        },
    )
    .await
    .expect("the overlay makes the pod schedulable");
    assert_eq!(claims.len(), 1);
    let requested = claims[0]
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(FUSE))
        .map(|q| q.0.clone());
    assert_eq!(requested.as_deref(), Some("1"), "the NodeClaim asks for it");
    assert_eq!(
        annotation(&claims[0], "karpenter.sh/capacity-overlay-applied"),
        Some("true")
    );

    // A device plugin would advertise the resource once the node is up; do its part, and the
    // kube-scheduler binds the pod there.
    let nodes = wait_for("the NodeClaim's Node", Duration::from_secs(60), || async {
        let nodes = h.nodes().await;
        Ok((!nodes.is_empty()).then_some(nodes))
    })
    .await
    .expect("the Node registers");
    let node: &Node = &nodes[0];
    let name = node.metadata.name.clone().unwrap_or_default();
    Api::<Node>::all(h.client.clone())
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "status": {"capacity": {FUSE: "10"}, "allocatable": {FUSE: "10"}}
            })),
        )
        .await
        .expect("advertising the extended resource");
    h.wait_running(1, Duration::from_secs(120)).await;
    h.delete_overlays(&[&fuse]).await;
    h.finish().await;
}
