//! What the index keeps of an object: the fields some decision reads, nothing else.
//!
//! A controller watching a cluster holds every Pod and Node; most of their bytes (managed
//! fields, the last-applied annotation, container images, commands, env, probes, mounts,
//! container statuses, a Node's image list) are read by nothing here. [`slim`] drops them
//! before an object is stored, so the index (and every solver input copied from it) stays
//! small. What stays is exactly what the scheduling, disruption and lifecycle decisions and
//! the drain read: metadata (labels, annotations, owners, timestamps, finalizers), the pod's
//! scheduling constraints, its containers' names, resources, host ports and restart policy,
//! its PVC and generic ephemeral volumes, priority and grace period, its phase, its
//! `PodScheduled` and `Ready` conditions (without messages),
//! nomination and start time; a Node's spec, labels, taints, capacity, allocatable and
//! conditions and boot id.
//!
//! Objects are only ever written back by merge patches built from scratch, never by replacing
//! them with what the index holds, so nothing dropped here can be lost from the cluster.

use k8s_openapi::api::core::v1::{
    Container, Node, NodeStatus, NodeSystemInfo, Pod, PodCondition, PodSpec, PodStatus, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use karpenter_api::labels::LAST_APPLIED_CONFIGURATION as LAST_APPLIED;

use crate::Object;

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
        Object::VolumeAttachment(o) => {
            slim_meta(&mut o.metadata);
            o.status = None;
        }
        Object::EC2NodeClass(o) => slim_meta(&mut o.metadata),
        Object::NodeOverlay(o) => slim_meta(&mut o.metadata),
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
            conditions: status.conditions.map(slim_pod_conditions),
            nominated_node_name: status.nominated_node_name,
            start_time: status.start_time,
            reason: status.reason,
            qos_class: status.qos_class,
            ..PodStatus::default()
        });
    }
}

/// The pod conditions a decision reads (`PodScheduled` for provisioning, `Ready` for
/// disruption), without their messages: the scheduler's `Unschedulable` message names every
/// node's reason and is the longest string a pending pod carries.
fn slim_pod_conditions(conditions: Vec<PodCondition>) -> Vec<PodCondition> {
    let mut kept: Vec<PodCondition> = conditions
        .into_iter()
        .filter(|c| c.type_ == "PodScheduled" || c.type_ == "Ready")
        .map(|c| PodCondition {
            message: None,
            last_probe_time: None,
            ..c
        })
        .collect();
    kept.shrink_to_fit();
    kept
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
    // A `Volume` is 3 KB inline (one field per volume source): a pod's service-account token
    // volume alone would cost more than the rest of the slimmed pod, so the vector is rebuilt
    // (not `retain`ed, which keeps its capacity) and dropped when no volume is left.
    spec.volumes = spec.volumes.take().and_then(|volumes| {
        let mut kept: Vec<Volume> = volumes
            .into_iter()
            .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
            .map(|v| Volume {
                name: v.name,
                persistent_volume_claim: v.persistent_volume_claim,
                ephemeral: v.ephemeral,
                ..Volume::default()
            })
            .collect();
        // `collect` reuses the source's allocation here (same element type): shrink it.
        kept.shrink_to_fit();
        (!kept.is_empty()).then_some(kept)
    });
    spec.containers.shrink_to_fit();
    if let Some(init) = spec.init_containers.as_mut() {
        init.shrink_to_fit();
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
            // The boot id alone: an in-place reboot is seen by its change.
            node_info: status.node_info.map(|info| NodeSystemInfo {
                boot_id: info.boot_id,
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        });
    }
}
