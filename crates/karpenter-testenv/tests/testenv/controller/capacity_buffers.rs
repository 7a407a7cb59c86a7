//! CapacityBuffers on the real control plane with KWOK (gate `CapacityBuffer`): a buffer of 4
//! chunks of 500m makes a node exist with that headroom and no real pod; a Deployment of 4 such
//! pods then runs on it at once (the kube-scheduler binds them to the headroom, no launch for
//! them), and the buffer gets its headroom back on a new node. Meanwhile emptiness leaves the
//! buffer's node alone (it is told why), although it is empty and `consolidateAfter` is 0s.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PodTemplate};
use karpenter_api::autoscaling::v1beta1::{CapacityBuffer, CapacityBufferSpec, LocalObjectRef};
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, ListParams, PostParams};

use super::disruption::node_name;
use super::{Harness, only, start};

impl Harness {
    /// Waits until buffer `name`'s condition `type_` has `reason`; the buffer.
    async fn wait_buffer_reason(&self, name: &str, type_: &str, reason: &str) -> CapacityBuffer {
        let api: Api<CapacityBuffer> = Api::namespaced(self.client.clone(), self.scope.namespace());
        wait_for(
            &format!("CapacityBuffer {name} {type_} with reason {reason}"),
            Duration::from_secs(120),
            || async {
                let Ok(buffer) = api.get(name).await else {
                    return Ok(None);
                };
                let found = karpenter_api::conditions::get(
                    buffer.status.as_ref().and_then(|s| s.conditions.as_deref()),
                    type_,
                )
                .is_some_and(|c| c.reason == reason);
                Ok(found.then_some(buffer))
            },
        )
        .await
        .expect("the buffer's status")
    }

    /// The nodes the namespace's pods are bound to.
    async fn pod_nodes(&self) -> BTreeSet<String> {
        self.pods()
            .await
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect()
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_capacity_buffer_keeps_headroom_that_real_pods_take_at_once_and_is_given_back() {
    let h = start(
        "buffer",
        &["--feature-gates=CapacityBuffer=true"],
        KwokOptions::default(),
    )
    .await;
    h.node_pool_disrupting(
        serde_json::json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"}),
        only(&["c5.xlarge"]),
    )
    .await;
    let (_, template) = h.workload("web", "500m");
    let namespace = h.scope.namespace().to_owned();
    Api::<PodTemplate>::namespaced(h.client.clone(), &namespace)
        .create(
            &PostParams::default(),
            &PodTemplate {
                metadata: h.scope.namespaced_meta("chunk"),
                template: Some(template),
            },
        )
        .await
        .expect("creating the PodTemplate");
    let mut buffer = CapacityBuffer::new(
        "headroom",
        CapacityBufferSpec {
            pod_template_ref: Some(LocalObjectRef {
                name: "chunk".into(),
            }),
            replicas: Some(4),
            ..CapacityBufferSpec::default()
        },
    );
    buffer.metadata.namespace = Some(namespace.clone());
    Api::<CapacityBuffer>::namespaced(h.client.clone(), &namespace)
        .create(&PostParams::default(), &buffer)
        .await
        .expect("creating the CapacityBuffer");

    // The buffer alone: one node with its headroom, no real pod.
    let ready = h
        .wait_buffer_reason("headroom", "ReadyForProvisioning", "Resolved")
        .await;
    assert_eq!(ready.status.and_then(|s| s.replicas), Some(4));
    h.wait_buffer_reason("headroom", "Provisioning", "FitsExistingCapacity")
        .await;
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 1, "4 x 500m fit one c5.xlarge");
    let first = node_name(&claims[0]).expect("the buffer's node registered");
    assert!(h.pods().await.is_empty(), "no real pod asked for this node");
    // Emptiness looked at the empty node and left it for the buffer.
    h.wait_object_event("Node", &first, "Unconsolidatable", "has buffer pods")
        .await;

    // Real pods take the headroom at once: all four on the buffer's node.
    h.create_deployment("web", 4, "500m").await;
    h.wait_running(4, Duration::from_secs(60)).await;
    assert_eq!(
        h.pod_nodes().await,
        BTreeSet::from([first.clone()]),
        "the Deployment ran on the buffer's headroom"
    );

    // The buffer gets its headroom back: a second node, the real pods where they were.
    wait_for(
        "a second NodeClaim for the buffer",
        Duration::from_secs(120),
        || async { Ok((h.node_claims().await.len() == 2).then_some(())) },
    )
    .await
    .expect("the buffer relaunches its headroom");
    h.wait_buffer_reason("headroom", "Provisioning", "FitsExistingCapacity")
        .await;
    assert_eq!(h.pod_nodes().await, BTreeSet::from([first]));
    // Virtual pods are never told anything.
    let events = Api::<Event>::namespaced(h.client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let about_virtual: Vec<_> = events
        .iter()
        .filter(|e| {
            e.involved_object
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("capacity-buffer-"))
        })
        .filter_map(|e| e.message.clone())
        .collect();
    assert!(about_virtual.is_empty(), "{about_virtual:?}");
    let _ = Api::<CapacityBuffer>::namespaced(h.client.clone(), &namespace)
        .delete("headroom", &Default::default())
        .await;
    h.finish().await;
}
