//! Simulated nodes (KWOK by default, or the builtin agent) are real enough for the real
//! kube-scheduler and kube-controller-manager.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodSpec, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_testenv::nodes::NODE_LEASE_NAMESPACE;
use karpenter_testenv::{
    KubeEnv, NodeSpec, SimulatedNodes, SimulatedNodesConfig, TestScope, wait_for,
};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

fn deployment(scope: &TestScope, name: &str, replicas: i32) -> Deployment {
    let labels = BTreeMap::from([("app".to_string(), name.to_string())]);
    Deployment {
        metadata: scope.namespaced_meta(name),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    node_selector: Some(scope.node_selector()),
                    containers: vec![Container {
                        name: "app".into(),
                        // Never pulled: no kubelet runs.
                        image: Some("registry.invalid/pause:3.10".into()),
                        resources: Some(ResourceRequirements {
                            requests: Some(BTreeMap::from([
                                ("cpu".to_string(), Quantity("500m".into())),
                                ("memory".to_string(), Quantity("256Mi".into())),
                            ])),
                            ..ResourceRequirements::default()
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn the_scheduler_binds_a_deployments_pods_to_a_kwok_node_and_they_become_available() {
    deployment_becomes_available_and_goes_away(
        "deployment-on-kwok-node",
        SimulatedNodesConfig::default(),
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn the_scheduler_binds_a_deployments_pods_to_a_builtin_simulated_node_and_they_become_available()
 {
    deployment_becomes_available_and_goes_away(
        "deployment-on-builtin-node",
        SimulatedNodesConfig::builtin(),
    )
    .await;
}

/// A 3-replica Deployment lands on one simulated node, becomes available (the
/// agent plays the kubelet), and its pods finish terminating when it is deleted.
async fn deployment_becomes_available_and_goes_away(test: &str, config: SimulatedNodesConfig) {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env.scope(test).await.expect("creating a test scope");
    let nodes = SimulatedNodes::with_config(env.client(), config);
    let node = nodes
        .create(
            NodeSpec::in_scope(&scope, "node-a")
                .label("node.kubernetes.io/instance-type", "m5.xlarge"),
        )
        .await
        .expect("creating a simulated node");
    let node_name = node.metadata.name.clone().expect("node name");

    let deployments: Api<Deployment> = Api::namespaced(env.client(), scope.namespace());
    deployments
        .create(&PostParams::default(), &deployment(&scope, "web", 3))
        .await
        .expect("creating the deployment");

    let pods: Api<Pod> = Api::namespaced(env.client(), scope.namespace());
    let bound = wait_for(
        "3 pods bound to the simulated node",
        Duration::from_secs(60),
        || async {
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| karpenter_testenv::Error::Kube {
                    action: "listing pods".into(),
                    source: e,
                })?;
            let on_node: Vec<String> = list
                .items
                .iter()
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name.as_str())
                })
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            Ok((on_node.len() == 3).then_some(on_node))
        },
    )
    .await
    .expect("the scheduler binds the pods");
    assert_eq!(bound.len(), 3);

    // The agent (KWOK or the builtin pod agent) plays the kubelet: the deployment becomes available.
    wait_for(
        "the deployment to have 3 available replicas",
        Duration::from_secs(60),
        || async {
            let d = deployments
                .get("web")
                .await
                .map_err(|e| karpenter_testenv::Error::Kube {
                    action: "reading the deployment".into(),
                    source: e,
                })?;
            Ok((d.status.and_then(|s| s.available_replicas) == Some(3)).then_some(()))
        },
    )
    .await
    .expect("the deployment becomes available");

    // The node lifecycle controller considers the node healthy: no not-ready/unreachable taints.
    let node = Api::<Node>::all(env.client())
        .get(&node_name)
        .await
        .expect("reading the node");
    let taints: Vec<String> = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert!(
        !taints.iter().any(|k| k.starts_with("node.kubernetes.io/")),
        "unexpected taints on a healthy simulated node: {taints:?}"
    );

    // Graceful deletion completes (KWOK's pod-delete stage or the pod agent finishes what a
    // kubelet would).
    deployments
        .delete("web", &DeleteParams::foreground())
        .await
        .expect("deleting the deployment");
    wait_for("the pods to be gone", Duration::from_secs(60), || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| karpenter_testenv::Error::Kube {
                action: "listing pods".into(),
                source: e,
            })?;
        Ok(list.items.is_empty().then_some(()))
    })
    .await
    .expect("pods on simulated nodes finish terminating");

    nodes
        .delete_all()
        .await
        .expect("deleting the simulated node");
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn a_builtin_simulated_node_renews_its_lease_and_deleting_it_removes_node_and_lease() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("node-lease")
        .await
        .expect("creating a test scope");
    let config = SimulatedNodesConfig {
        renew_interval: Duration::from_millis(500),
        run_pods: false,
        ..SimulatedNodesConfig::builtin()
    };
    let nodes = SimulatedNodes::with_config(env.client(), config);
    let spec = NodeSpec::in_scope(&scope, "leased")
        .capacity("cpu", "2")
        .allocatable("cpu", "1900m")
        .taint("example.com/dedicated", Some("tests"), "NoSchedule")
        .provider_id("aws:///us-west-2a/i-0123456789abcdef0");
    let node = nodes.create(spec).await.expect("creating a simulated node");
    let name = node.metadata.name.clone().expect("node name");

    let status = node.status.clone().expect("node status");
    assert_eq!(
        status.capacity.as_ref().and_then(|c| c.get("cpu")),
        Some(&Quantity("2".into()))
    );
    assert_eq!(
        status.allocatable.as_ref().and_then(|c| c.get("cpu")),
        Some(&Quantity("1900m".into()))
    );
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(ready.status, "True");
    let spec = node.spec.clone().expect("node spec");
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("aws:///us-west-2a/i-0123456789abcdef0")
    );

    let leases: Api<Lease> = Api::namespaced(env.client(), NODE_LEASE_NAMESPACE);
    let first = leases.get(&name).await.expect("the node lease exists");
    let first_renew = first.spec.and_then(|s| s.renew_time).expect("a renew time");
    wait_for(
        "the lease to be renewed",
        Duration::from_secs(15),
        || async {
            let lease = leases
                .get(&name)
                .await
                .map_err(|e| karpenter_testenv::Error::Kube {
                    action: "reading the lease".into(),
                    source: e,
                })?;
            let renew = lease.spec.and_then(|s| s.renew_time);
            Ok((renew.as_ref() != Some(&first_renew)).then_some(()))
        },
    )
    .await
    .expect("the lease is renewed");

    nodes.delete(&name).await.expect("deleting the node");
    assert!(
        Api::<Node>::all(env.client())
            .get_opt(&name)
            .await
            .expect("reading the node")
            .is_none()
    );
    assert!(
        leases
            .get_opt(&name)
            .await
            .expect("reading the lease")
            .is_none()
    );
    scope.cleanup().await.expect("cleaning up");
}
