//! A slimmed object decides exactly as the full one: the solver places it the same way and
//! disruption reads the same facts, while the bytes nothing reads are gone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_scheduling::fixtures::{benchmark_node_pool, fake_instance_types};
use karpenter_scheduling::{SolveInput, solve};
use karpenter_state::Object;
use karpenter_state::slim::{slim, slim_node, slim_pod};
use serde_json::json;

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    match serde_json::from_value(value) {
        Ok(object) => object,
        Err(e) => panic!("test object parses: {e}"),
    }
}

/// A pod as the API server returns it for a Deployment replica, with a host port, a sidecar
/// (an init container that keeps running, whose requests count), a PVC, a projected
/// service-account volume, env, probes and container statuses.
fn full_pod(name: &str, claim: &str) -> Pod {
    parse(json!({
        "metadata": {
            "name": name, "namespace": "shop", "uid": format!("uid-{name}"),
            "labels": {"app": "web"},
            "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": \"copy\"}"
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                 "uid": "rs", "controller": true}],
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {}}}]
        },
        "spec": {
            "containers": [{
                "name": "web", "image": "registry.example/web:1.2.3",
                "command": ["/bin/web"], "args": ["--port", "8080"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"},
                          {"containerPort": 9090}],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                              "limits": {"memory": "2Gi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                 {"name": "kube-api-access", "mountPath": "/var/run/secrets"}]
            }],
            "initContainers": [{
                "name": "proxy", "image": "registry.example/proxy:9", "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}
            }],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
                {"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}
            ],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                             "effect": "NoSchedule"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "priority": 1000,
            "terminationGracePeriodSeconds": 45,
            "securityContext": {"runAsNonRoot": true},
            "imagePullSecrets": [{"name": "registry"}]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": "0/3 nodes are available: 3 Insufficient cpu."},
                           {"type": "PodReadyToStartContainers", "status": "False"}],
            "startTime": "2026-01-01T10:00:01Z",
            "qosClass": "Burstable",
            "containerStatuses": [{"name": "web", "ready": false, "restartCount": 0,
                                   "image": "registry.example/web:1.2.3", "imageID": ""}]
        }
    }))
}

fn solve_all(pods: Vec<Pod>) -> karpenter_scheduling::SolveResult {
    let input = SolveInput {
        node_pools: vec![benchmark_node_pool()],
        default_instance_types: fake_instance_types(40),
        pods: pods
            .into_iter()
            .map(|p| std::sync::Arc::new(p.into()))
            .collect(),
        ..Default::default()
    };
    solve(&input)
}

fn slimmed(mut pod: Pod) -> Pod {
    slim_pod(&mut pod);
    pod
}

#[test]
fn a_slimmed_pod_is_placed_exactly_as_the_full_pod() {
    // Two pods sharing host port 8080 need two nodes; the third names a claim that does not
    // exist and cannot be placed: each fact survives slimming or the results differ.
    let claims = [("web-a", ""), ("web-b", ""), ("web-c", "missing")];
    let full: Vec<Pod> = claims
        .iter()
        .map(|(name, claim)| {
            let mut pod = full_pod(name, claim);
            if claim.is_empty()
                && let Some(volumes) = pod.spec.as_mut().and_then(|s| s.volumes.as_mut())
            {
                volumes.retain(|v| v.persistent_volume_claim.is_none());
            }
            pod
        })
        .collect();
    let slim: Vec<Pod> = full.iter().cloned().map(slimmed).collect();

    let from_full = solve_all(full);
    let from_slim = solve_all(slim);
    assert_eq!(from_full.new_node_claims.len(), 2, "{from_full:?}");
    assert_eq!(from_full.unschedulable.len(), 1, "{from_full:?}");
    assert_eq!(format!("{from_full:?}"), format!("{from_slim:?}"));
}

#[test]
fn a_slimmed_pod_keeps_what_disruption_and_drain_read() {
    use karpenter_disruption::pods;
    let full = karpenter_scheduling::PodRecord::from(full_pod("web-a", "data"));
    let slim = karpenter_scheduling::PodRecord::from(slimmed(full_pod("web-a", "data")));
    assert_eq!(full.is_reschedulable(), slim.is_reschedulable());
    assert_eq!(pods::started(&full), pods::started(&slim));
    assert!(karpenter_state::provisionable::is_unschedulable(&slim));
    assert_eq!(
        karpenter_state::provisionable::is_provisionable(&full),
        karpenter_state::provisionable::is_provisionable(&slim)
    );
    assert_eq!(slim.annotation("karpenter.sh/do-not-disrupt"), Some("true"));
    let spec = slim.spec.as_ref().expect("spec kept");
    assert_eq!(spec.termination_grace_period_seconds, Some(45));
    assert_eq!(spec.priority, Some(1000));
    assert_eq!(
        spec.tolerations,
        full.spec.as_ref().and_then(|s| s.tolerations.clone())
    );
    assert_eq!(
        slim.metadata.owner_references,
        full.metadata.owner_references
    );
}

#[test]
fn a_slimmed_pod_drops_what_nothing_reads() {
    let slim = slimmed(full_pod("web-a", "data"));
    let text = serde_json::to_string(&slim).expect("serializes");
    for gone in [
        "registry.example",
        "managedFields",
        "last-applied-configuration",
        "readinessProbe",
        "\"env\"",
        "kube-api-access",
        "containerStatuses",
        "9090",
        "nodes are available",
        "PodReadyToStartContainers",
    ] {
        assert!(!text.contains(gone), "{gone} is still in {text}");
    }
}

#[test]
fn a_slimmed_node_keeps_labels_taints_resources_and_conditions_only() {
    let full: Node = parse(json!({
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"providerID": "kwok://n1",
                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        "status": {
            "capacity": {"cpu": "4"}, "allocatable": {"cpu": "3900m"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": [{"names": ["registry.example/big:1"], "sizeBytes": 123456789}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b",
                         "kernelVersion": "6", "osImage": "al2023",
                         "containerRuntimeVersion": "containerd://2",
                         "kubeletVersion": "v1.34.0", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"}
        }
    }));
    let mut slim = full.clone();
    slim_node(&mut slim);
    assert_eq!(slim.spec, full.spec);
    assert_eq!(slim.metadata.labels, full.metadata.labels);
    assert_eq!(slim.metadata.managed_fields, None);
    let (status, full_status) = (slim.status.expect("status"), full.status.expect("status"));
    assert_eq!(status.capacity, full_status.capacity);
    assert_eq!(status.allocatable, full_status.allocatable);
    assert_eq!(status.conditions, full_status.conditions);
    assert_eq!(status.images, None);
    assert_eq!(
        status.node_info.map(|i| (i.boot_id, i.kubelet_version)),
        full_status.node_info.map(|i| (i.boot_id, String::new())),
        "the boot id alone stays"
    );
}

#[test]
fn slimming_any_object_drops_its_managed_fields() {
    let mut object = Object::Pod(full_pod("web-a", "data"));
    slim(&mut object);
    let Object::Pod(pod) = object else {
        panic!("still a pod")
    };
    assert_eq!(pod.metadata.managed_fields, None);
}

#[test]
fn a_slimmed_pod_keeps_no_room_for_the_volumes_it_dropped() {
    // Only the PVC volume of two is kept, and the vector holds exactly it: a `Volume` is
    // 3 KB inline, so the token volume's slot would otherwise stay allocated for every pod.
    let with_claim = slimmed(full_pod("web-a", "data"));
    let volumes = with_claim
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .expect("the PVC volume is kept");
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes.capacity(), 1);

    // A pod whose only volume is its service-account token keeps no volume list at all.
    let mut token_only = full_pod("web-b", "");
    if let Some(volumes) = token_only.spec.as_mut().and_then(|s| s.volumes.as_mut()) {
        volumes.retain(|v| v.persistent_volume_claim.is_none());
    }
    let slim = slimmed(token_only);
    assert_eq!(slim.spec.as_ref().and_then(|s| s.volumes.as_ref()), None);
}
