//! KWOK, started by `scripts/testenv up`, plays the kubelet of Nodes annotated
//! `kwok.x-k8s.io/node: fake` and of the pods bound to them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Node, NodeSpec as K8sNodeSpec, Pod, PodSpec, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_testenv::nodes::{
    KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE, NODE_LEASE_NAMESPACE, is_ready,
};
use karpenter_testenv::{Error, KubeEnv, NodeSpec, SimulatedNodes, TestScope, wait_for};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

const DEADLINE: Duration = Duration::from_secs(60);

fn kube_err(action: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |source| Error::Kube {
        action: action.to_string(),
        source,
    }
}

/// A Node as upstream Karpenter's KWOK provider creates one: annotated for
/// KWOK, `providerID: kwok://<name>`, in the test's scope.
fn kwok_node(scope: &TestScope, base: &str, taints: Vec<Taint>) -> Node {
    let name = scope.name(base);
    let mut meta = scope.meta(&name);
    meta.labels.get_or_insert_with(BTreeMap::new).extend([
        ("type".to_string(), "kwok".to_string()),
        ("kubernetes.io/hostname".to_string(), name.clone()),
    ]);
    meta.annotations = Some(BTreeMap::from([(
        KWOK_NODE_ANNOTATION.to_string(),
        KWOK_NODE_ANNOTATION_VALUE.to_string(),
    )]));
    Node {
        metadata: meta,
        spec: Some(K8sNodeSpec {
            provider_id: Some(format!("kwok://{name}")),
            taints: (!taints.is_empty()).then_some(taints),
            ..K8sNodeSpec::default()
        }),
        status: None,
    }
}

fn pod(scope: &TestScope, name: &str, node_name: Option<&str>) -> Pod {
    Pod {
        metadata: scope.namespaced_meta(name),
        spec: Some(PodSpec {
            node_name: node_name.map(str::to_string),
            node_selector: node_name.is_none().then(|| scope.node_selector()),
            containers: vec![Container {
                name: "app".into(),
                // Never pulled: no kubelet runs.
                image: Some("registry.invalid/pause:3.10".into()),
                resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "cpu".to_string(),
                        Quantity("100m".into()),
                    )])),
                    ..Default::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

async fn wait_node_ready(nodes: &Api<Node>, name: &str) -> Node {
    wait_for(
        &format!("KWOK to make Node {name} Ready"),
        DEADLINE,
        || async {
            let node = nodes
                .get(name)
                .await
                .map_err(kube_err("reading the node"))?;
            Ok(is_ready(&node).then_some(node))
        },
    )
    .await
    .expect("KWOK makes the annotated node Ready")
}

async fn wait_pod_running(pods: &Api<Pod>, name: &str, node: &str) -> Pod {
    wait_for(
        &format!("pod {name} to be Running and Ready on {node}"),
        DEADLINE,
        || async {
            let pod = pods.get(name).await.map_err(kube_err("reading the pod"))?;
            let on_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
            let status = pod.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            Ok((on_node && status.phase.as_deref() == Some("Running") && ready).then_some(pod))
        },
    )
    .await
    .expect("KWOK runs the pod")
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(&format!("{what} {name} to be gone"), DEADLINE, || async {
        let found = api.get_opt(name).await.map_err(kube_err("reading"))?;
        Ok(found.is_none().then_some(()))
    })
    .await
    .expect("the object goes away");
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn kwok_makes_an_annotated_node_ready_runs_a_pod_bound_to_it_and_completes_its_deletion() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("kwok-node-and-pod")
        .await
        .expect("creating a test scope");
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes
        .create(&PostParams::default(), &kwok_node(&scope, "kwok-a", vec![]))
        .await
        .expect("creating the node");
    let name = node.metadata.name.clone().expect("node name");

    let node = wait_node_ready(&nodes, &name).await;
    let status = node.status.expect("node status");
    assert!(
        status
            .addresses
            .unwrap_or_default()
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "127.0.0.1"),
        "KWOK reports --node-ip as the InternalIP"
    );
    let leases: Api<Lease> = Api::namespaced(env.client(), NODE_LEASE_NAMESPACE);
    let lease = wait_for("KWOK to create the node Lease", DEADLINE, || async {
        leases
            .get_opt(&name)
            .await
            .map_err(kube_err("reading the lease"))
    })
    .await
    .expect("KWOK holds a Lease for the node");
    assert!(
        lease.spec.and_then(|s| s.renew_time).is_some(),
        "the lease has been renewed"
    );

    let pods: Api<Pod> = Api::namespaced(env.client(), scope.namespace());
    pods.create(&PostParams::default(), &pod(&scope, "bound", Some(&name)))
        .await
        .expect("creating a pod bound to the node");
    let running = wait_pod_running(&pods, "bound", &name).await;
    assert!(
        running.status.and_then(|s| s.pod_ip).is_some(),
        "KWOK gives the pod an IP from --cidr"
    );

    // A graceful delete: no kubelet, KWOK's pod-delete stage finishes it.
    pods.delete("bound", &DeleteParams::default())
        .await
        .expect("deleting the pod");
    wait_gone(&pods, "bound", "pod").await;

    nodes
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the node");
    wait_gone(&nodes, &name, "node").await;
    wait_gone(&leases, &name, "node lease").await;
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn the_scheduler_binds_a_pending_pod_to_a_kwok_node_once_its_taint_is_removed() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("kwok-untaint")
        .await
        .expect("creating a test scope");
    let nodes: Api<Node> = Api::all(env.client());
    // A NoSchedule taint, not the NoExecute `karpenter.sh/unregistered`: with NoExecute, the
    // controller-manager's taint-eviction controller can see the binding before the untaint
    // (its node cache lags the scheduler's) and delete the just-bound pod, a known Kubernetes
    // race (kubernetes/kubernetes#139992, #119862) that failed this test once in CI.
    let tainted = Taint {
        key: "karpenter.sh/disrupted".into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    };
    let node = nodes
        .create(
            &PostParams::default(),
            &kwok_node(&scope, "kwok-tainted", vec![tainted]),
        )
        .await
        .expect("creating the node");
    let name = node.metadata.name.clone().expect("node name");
    wait_node_ready(&nodes, &name).await;

    let pods: Api<Pod> = Api::namespaced(env.client(), scope.namespace());
    pods.create(&PostParams::default(), &pod(&scope, "pending", None))
        .await
        .expect("creating a pod for the scope's nodes");
    wait_for(
        "the scheduler to report the pod unschedulable",
        DEADLINE,
        || async {
            let pod = pods
                .get("pending")
                .await
                .map_err(kube_err("reading the pod"))?;
            let unschedulable = pod
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                });
            Ok(unschedulable.then_some(()))
        },
    )
    .await
    .expect("the tainted node does not take the pod");

    let untaint = serde_json::json!({ "spec": { "taints": null } });
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&untaint))
        .await
        .expect("removing the taint");
    wait_pod_running(&pods, "pending", &name).await;

    pods.delete("pending", &DeleteParams::default())
        .await
        .expect("deleting the pod");
    wait_gone(&pods, "pending", "pod").await;
    nodes
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleting the node");
    wait_gone(&nodes, &name, "node").await;
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment: run scripts/test-integration"]
async fn a_kwok_simulated_node_keeps_the_requested_capacity_and_kubelet_version() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("kwok-simulated-node")
        .await
        .expect("creating a test scope");
    let nodes = SimulatedNodes::new(env.client());
    let name = scope.name("sim");
    let spec = NodeSpec::in_scope(&scope, "sim")
        .capacity("cpu", "2")
        .allocatable("cpu", "1900m")
        .provider_id(format!("kwok://{name}"));
    let node = nodes.create(spec).await.expect("creating a KWOK node");
    assert!(is_ready(&node), "create returns the node once Ready");
    assert_eq!(
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(KWOK_NODE_ANNOTATION))
            .map(String::as_str),
        Some(KWOK_NODE_ANNOTATION_VALUE)
    );
    let status = node.status.expect("node status");
    // Not KWOK's 1k-CPU default: SimulatedNodes sets the status once KWOK initialized the node.
    assert_eq!(
        status.capacity.as_ref().and_then(|c| c.get("cpu")),
        Some(&Quantity("2".into()))
    );
    assert_eq!(
        status.allocatable.as_ref().and_then(|c| c.get("cpu")),
        Some(&Quantity("1900m".into()))
    );
    assert_eq!(
        status.node_info.map(|i| i.kubelet_version),
        Some("v1.36.3".to_string())
    );
    assert!(
        matches!(nodes.stop_heartbeat(&name), Err(Error::Unsupported { .. })),
        "a KWOK node's heartbeat cannot be stopped alone"
    );

    nodes.delete(&name).await.expect("deleting the node");
    let leases: Api<Lease> = Api::namespaced(env.client(), NODE_LEASE_NAMESPACE);
    wait_gone(&Api::<Node>::all(env.client()), &name, "node").await;
    wait_gone(&leases, &name, "node lease").await;
    scope.cleanup().await.expect("cleaning up");
}
