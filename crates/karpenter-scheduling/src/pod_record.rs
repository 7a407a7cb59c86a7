//! [`PodRecord`]: a pod as the decisions read it, with its spec behind an [`Arc`].
//!
//! A Kubernetes `Pod` is 2.4 KB before any of its strings, and each of its containers another
//! 2.3 KB, mostly `None` fields for probes, lifecycle hooks and security contexts. A controller
//! holds every pod of the cluster, and the pods of one ReplicaSet have the same spec; holding
//! the spec behind an `Arc` lets the cluster index keep one copy per distinct spec
//! (`karpenter-state` does the sharing) instead of one per pod. Reading code is unchanged:
//! `pod.spec.as_ref()` gives an `Arc<PodSpec>` that reads as a `PodSpec`.
//!
//! The one field of a spec that differs between replicas of one ReplicaSet is `nodeName`, so
//! it lives beside the spec, in the record's `node_name` field: the spec a record holds always
//! has `node_name: None`, and the replicas of a ReplicaSet on every node, and its pending ones,
//! share one spec. Read the binding with [`PodRecord::node_name()`] and write it to the field;
//! `spec.node_name` of a record is never read. [`From`] moves `nodeName` out of a `Pod`'s spec
//! into the field and back into the spec of the `Pod` made from a record.
//!
//! The other fields mirror `Pod`'s. A `PodRecord` is never written back to the API server; it
//! is an input to decisions, built from a `Pod` with [`From`].
//!
//! It is also the one home of what every decision asks of a pod: its key (`namespace/name`,
//! [`key`] for a bare `ObjectMeta`; its solver output form is `PodRef::of`), and the predicates (terminal,
//! terminating, active, DaemonSet or mirror pod, reschedulable, ready) that the solver, the
//! cluster index, disruption, termination and the metrics all read the same way.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The kubelet marks static (mirror) pods with this annotation.
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// The namespace of an object that names none.
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// `namespace/name` of a pod's metadata (`default` when it names no namespace): the key the
/// cluster index, the simulator and the reports know a pod by.
pub fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// A pod: metadata, a shareable spec, status, and the node it is bound to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRecord {
    pub metadata: ObjectMeta,
    /// The pod's spec without its `nodeName` (always `node_name: None`, so that equal specs of
    /// pods on different nodes are equal and can be one shared `Arc`).
    pub spec: Option<Arc<PodSpec>>,
    pub status: Option<PodStatus>,
    /// `spec.nodeName`: the node the pod is bound to, `None` while it is unbound (an empty
    /// name counts as unbound). Binding or unbinding a record writes this field, never the
    /// spec.
    pub node_name: Option<String>,
}

impl PodRecord {
    /// The node the pod is bound to, if any (the `node_name` field; the spec's `nodeName` is
    /// not read).
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref().filter(|n| !n.is_empty())
    }

    /// `namespace/name` ([`key`]).
    pub fn key(&self) -> String {
        key(&self.metadata)
    }

    /// The pod's uid, or its key when it has none (pods of manifests and tests).
    pub fn uid_or_key(&self) -> String {
        self.metadata.uid.clone().unwrap_or_else(|| self.key())
    }

    /// `status.phase` (`""` when unset).
    pub fn phase(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default()
    }

    /// Succeeded or Failed.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase(), "Succeeded" | "Failed")
    }

    /// Has a deletion timestamp.
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// Neither terminal nor terminating.
    pub fn is_active(&self) -> bool {
        !self.is_terminal() && !self.is_terminating()
    }

    /// The kind of the owner that controls the pod (an owner reference without `controller`
    /// counts as controlling).
    fn owner_kind(&self) -> Option<&str> {
        self.metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller.unwrap_or(true)))
            .map(|r| r.kind.as_str())
    }

    /// Controlled by an owner of `api_version` and `kind`: its owner reference marked
    /// `controller: true` names them (upstream `IsControlledBy`; an owner reference without
    /// the mark is garbage-collection linkage, not control).
    pub fn controlled_by(&self, api_version: &str, kind: &str) -> bool {
        self.metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
            .is_some_and(|r| r.api_version == api_version && r.kind == kind)
    }

    /// Controlled by a DaemonSet.
    pub fn is_daemonset(&self) -> bool {
        self.owner_kind() == Some("DaemonSet")
    }

    /// A static pod's mirror: owned by its Node, or annotated [`MIRROR_POD`].
    pub fn is_mirror(&self) -> bool {
        self.owner_kind() == Some("Node")
            || self
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(MIRROR_POD))
    }

    /// Pods that need a new home when the node goes: active (or terminating StatefulSet) pods
    /// that are neither DaemonSet nor mirror pods.
    pub fn is_reschedulable(&self) -> bool {
        let alive =
            self.is_active() || (self.is_terminating() && self.owner_kind() == Some("StatefulSet"));
        alive && !self.is_terminal() && !self.is_daemonset() && !self.is_mirror()
    }

    /// The pod asks for devices through dynamic resource allocation: pod-level
    /// `resourceClaims`, or a container or init container naming claims in its resources
    /// (upstream `HasDRARequirements`).
    pub fn has_dra_requirements(&self) -> bool {
        let Some(spec) = self.spec.as_deref() else {
            return false;
        };
        if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
            return true;
        }
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.claims.as_ref())
                    .is_some_and(|claims| !claims.is_empty())
            })
    }

    /// Pod condition `Ready=True` (a pod without a `Ready` condition counts as ready).
    pub fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_none_or(|c| c.status == "True")
    }

    /// The value of annotation `key`, if the pod has it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }
}

impl From<Pod> for PodRecord {
    /// Moves `spec.nodeName` into the `node_name` field (an empty name is no binding).
    fn from(pod: Pod) -> Self {
        let mut spec = pod.spec;
        let node_name = spec
            .as_mut()
            .and_then(|s| s.node_name.take())
            .filter(|n| !n.is_empty());
        PodRecord {
            metadata: pod.metadata,
            spec: spec.map(Arc::new),
            status: pod.status,
            node_name,
        }
    }
}

impl From<&PodRecord> for Pod {
    /// The pod with the record's `node_name` back in `spec.nodeName`.
    fn from(record: &PodRecord) -> Self {
        let mut spec = record.spec.as_deref().cloned();
        if let Some(node) = record.node_name() {
            spec.get_or_insert_with(PodSpec::default).node_name = Some(node.to_owned());
        }
        Pod {
            metadata: record.metadata.clone(),
            spec,
            status: record.status.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_converts_to_a_record_and_back_unchanged() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-a".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        let record = PodRecord::from(pod.clone());
        assert_eq!(record.node_name(), Some("node-a"));
        assert_eq!(
            record.spec.as_ref().and_then(|s| s.node_name.clone()),
            None,
            "the node name lives beside the spec"
        );
        assert_eq!(Pod::from(&record), pod);
    }

    #[test]
    fn replicas_on_different_nodes_have_equal_specs_and_their_own_node_names() {
        let on = |node: &str| {
            PodRecord::from(Pod {
                spec: Some(PodSpec {
                    node_name: Some(node.into()),
                    scheduler_name: Some("default-scheduler".into()),
                    ..PodSpec::default()
                }),
                ..Pod::default()
            })
        };
        let (a, b) = (on("node-a"), on("node-b"));
        assert_eq!(a.spec, b.spec);
        assert_ne!(a, b, "records still differ by their binding");
        assert_eq!(
            (a.node_name(), b.node_name()),
            (Some("node-a"), Some("node-b"))
        );
        let mut unbound = a.clone();
        unbound.node_name = None;
        let pod = Pod::from(&unbound);
        assert_eq!(pod.spec.and_then(|s| s.node_name), None);
    }

    #[test]
    fn an_empty_node_name_is_no_binding() {
        let record = PodRecord::from(Pod {
            spec: Some(PodSpec {
                node_name: Some(String::new()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        });
        assert_eq!(record.node_name(), None);
    }

    fn record(namespace: Option<&str>, name: &str) -> PodRecord {
        PodRecord {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: namespace.map(Into::into),
                ..ObjectMeta::default()
            },
            ..PodRecord::default()
        }
    }

    fn deleted_at() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        )
    }

    fn owned_by(kind: &str, controller: Option<bool>) -> PodRecord {
        let mut pod = record(Some("shop"), "p");
        pod.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: kind.into(),
                controller,
                ..Default::default()
            },
        ]);
        pod
    }

    #[test]
    fn a_pod_without_a_namespace_is_keyed_in_the_default_namespace() {
        assert_eq!(record(None, "web-1").key(), "default/web-1");
        assert_eq!(record(Some("shop"), "web-1").key(), "shop/web-1");
        assert_eq!(key(&record(None, "web-1").metadata), "default/web-1");
    }

    #[test]
    fn a_pod_without_a_uid_is_referred_to_by_its_key() {
        let mut pod = record(None, "web-1");
        let r = crate::PodRef::of(&pod);
        assert_eq!(
            (r.namespace.as_str(), r.name.as_str(), r.uid.as_str()),
            ("default", "web-1", "default/web-1")
        );
        pod.metadata.uid = Some("u-1".into());
        assert_eq!(pod.uid_or_key(), "u-1");
        assert_eq!(crate::PodRef::of(&pod).uid, "u-1");
    }

    #[test]
    fn finished_and_deleted_pods_are_not_active() {
        let mut pod = record(None, "p");
        assert!(pod.is_active());
        pod.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..PodStatus::default()
        });
        assert!(pod.is_terminal() && !pod.is_active());
        let mut deleted = record(None, "q");
        deleted.metadata.deletion_timestamp = Some(deleted_at());
        assert!(deleted.is_terminating() && !deleted.is_terminal() && !deleted.is_active());
    }

    #[test]
    fn daemonset_and_mirror_pods_need_no_new_home() {
        assert!(owned_by("DaemonSet", Some(true)).is_daemonset());
        assert!(!owned_by("DaemonSet", Some(true)).is_reschedulable());
        assert!(
            !owned_by("DaemonSet", Some(false)).is_daemonset(),
            "only the controlling owner counts"
        );
        assert!(owned_by("Node", None).is_mirror());
        let mut annotated = record(None, "static");
        annotated.metadata.annotations = Some([(MIRROR_POD.to_owned(), "x".to_owned())].into());
        assert!(annotated.is_mirror() && !annotated.is_reschedulable());
        assert!(owned_by("ReplicaSet", Some(true)).is_reschedulable());
    }

    #[test]
    fn only_an_owner_reference_marked_controller_makes_a_pod_controlled_by_its_kind() {
        let mut pod = owned_by("ReplicaSet", Some(true));
        assert!(!pod.controlled_by("apps/v1", "ReplicaSet"), "no apiVersion");
        if let Some(o) = pod.metadata.owner_references.as_mut() {
            o[0].api_version = "apps/v1".into();
        }
        assert!(pod.controlled_by("apps/v1", "ReplicaSet"));
        assert!(!pod.controlled_by("batch/v1", "Job"));
        if let Some(o) = pod.metadata.owner_references.as_mut() {
            o[0].controller = None;
        }
        assert!(
            !pod.controlled_by("apps/v1", "ReplicaSet"),
            "an unmarked owner reference does not control"
        );
    }

    #[test]
    fn a_terminating_statefulset_pod_still_needs_a_new_home() {
        let mut pod = owned_by("StatefulSet", Some(true));
        pod.metadata.deletion_timestamp = Some(deleted_at());
        assert!(pod.is_reschedulable());
        let mut other = owned_by("ReplicaSet", Some(true));
        other.metadata.deletion_timestamp = Some(deleted_at());
        assert!(!other.is_reschedulable());
    }

    #[test]
    fn a_pod_has_dra_requirements_with_pod_or_container_resource_claims() {
        let with_spec = |spec: serde_json::Value| {
            PodRecord::from(Pod {
                spec: Some(serde_json::from_value(spec).unwrap()),
                ..Pod::default()
            })
        };
        let plain = with_spec(serde_json::json!({"containers": [{"name": "c"}]}));
        assert!(!plain.has_dra_requirements());
        let pod_level = with_spec(serde_json::json!({
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
        }));
        assert!(pod_level.has_dra_requirements());
        let init_container = with_spec(serde_json::json!({
            "containers": [{"name": "c"}],
            "initContainers": [{"name": "i", "resources": {"claims": [{"name": "gpu"}]}}]
        }));
        assert!(init_container.has_dra_requirements());
    }

    #[test]
    fn a_pod_is_ready_unless_its_ready_condition_says_otherwise() {
        let mut pod = record(None, "p");
        assert!(pod.is_ready());
        pod.status = Some(PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..PodStatus::default()
        });
        assert!(!pod.is_ready());
    }
}
