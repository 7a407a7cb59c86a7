//! What the index keeps of an object: the fields some decision reads, nothing else.
//!
//! A controller watching a cluster holds every Pod and Node; most of their bytes (managed
//! fields, the last-applied annotation, container images, commands, env, probes, mounts,
//! container statuses, a Node's image list) are read by nothing here. [`slim`] drops them
//! before an object is stored, so the index (and every solver input copied from it) stays
//! small. What stays is exactly what the scheduling, disruption and lifecycle decisions and
//! the drain read: metadata (labels, annotations, owners, timestamps, finalizers), the pod's
//! scheduling constraints, its containers' names, resources, host ports and restart policy,
//! its PVC and generic ephemeral volumes, priority and grace period, its phase, conditions,
//! nomination and start time; a Node's spec, labels, taints, capacity, allocatable and
//! conditions.
//!
//! Objects are only ever written back by merge patches built from scratch, never by replacing
//! them with what the index holds, so nothing dropped here can be lost from the cluster.

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, PodStatus, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Object;

/// The annotation `kubectl apply` writes: a copy of the whole object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no decision reads from `object`.
pub fn slim(object: &mut Object) {
    match object {
        Object::Pod(pod) => slim_pod(pod),
        Object::Node(node) => slim_node(node),
        Object::NodeClaim(o) => slim_meta(&mut o.metadata),
        Object::NodePool(o) => slim_meta(&mut o.metadata),
        Object::DaemonSet(o) => slim_meta(&mut o.metadata),
        Object::PodDisruptionBudget(o) => slim_meta(&mut o.metadata),
        Object::PersistentVolumeClaim(o) => slim_meta(&mut o.metadata),
        Object::PersistentVolume(o) => slim_meta(&mut o.metadata),
        Object::StorageClass(o) => slim_meta(&mut o.metadata),
        Object::Namespace(o) => slim_meta(&mut o.metadata),
    }
}

/// Managed fields and the last-applied annotation.
pub fn slim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// A pod reduced to its scheduling, disruption and drain inputs.
pub fn slim_pod(pod: &mut Pod) {
    slim_meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        slim_pod_spec(spec);
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            conditions: status.conditions,
            nominated_node_name: status.nominated_node_name,
            start_time: status.start_time,
            reason: status.reason,
            qos_class: status.qos_class,
            ..PodStatus::default()
        });
    }
}

fn slim_pod_spec(spec: &mut PodSpec) {
    for container in &mut spec.containers {
        slim_container(container);
    }
    for container in spec.init_containers.iter_mut().flatten() {
        slim_container(container);
    }
    // Ephemeral (debug) containers have no resources and are never scheduled.
    spec.ephemeral_containers = None;
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
        for volume in volumes.iter_mut() {
            *volume = Volume {
                name: std::mem::take(&mut volume.name),
                persistent_volume_claim: volume.persistent_volume_claim.take(),
                ephemeral: volume.ephemeral.take(),
                ..Volume::default()
            };
        }
    }
    spec.security_context = None;
    spec.dns_config = None;
    spec.host_aliases = None;
    spec.image_pull_secrets = None;
    spec.readiness_gates = None;
}

fn slim_container(container: &mut Container) {
    let ports = container.ports.take().map(|ports| {
        ports
            .into_iter()
            .filter(|p| p.host_port.is_some_and(|port| port > 0))
            .collect::<Vec<_>>()
    });
    *container = Container {
        name: std::mem::take(&mut container.name),
        resources: container.resources.take(),
        restart_policy: container.restart_policy.take(),
        ports: ports.filter(|p| !p.is_empty()),
        ..Container::default()
    };
}

/// A node reduced to its labels, taints, resources and conditions.
pub fn slim_node(node: &mut Node) {
    slim_meta(&mut node.metadata);
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            capacity: status.capacity,
            allocatable: status.allocatable,
            conditions: status.conditions,
            phase: status.phase,
            ..NodeStatus::default()
        });
    }
}
