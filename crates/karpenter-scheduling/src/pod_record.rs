//! [`PodRecord`]: a pod as the decisions read it, with its spec behind an [`Arc`].
//!
//! A Kubernetes `Pod` is 2.4 KB before any of its strings, and each of its containers another
//! 2.3 KB, mostly `None` fields for probes, lifecycle hooks and security contexts. A controller
//! holds every pod of the cluster, and the pods of one ReplicaSet on one node have the same
//! spec; holding the spec behind an `Arc` lets the cluster index keep one copy per distinct
//! spec (`karpenter-state` does the sharing) instead of one per pod. Reading code is unchanged:
//! `pod.spec.as_ref()` gives an `Arc<PodSpec>` that reads as a `PodSpec`.
//!
//! The fields mirror `Pod`'s. A `PodRecord` is never written back to the API server; it is
//! an input to decisions, built from a `Pod` with [`From`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod: metadata, a shareable spec and status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRecord {
    pub metadata: ObjectMeta,
    pub spec: Option<Arc<PodSpec>>,
    pub status: Option<PodStatus>,
}

impl PodRecord {
    /// The node the pod is bound to, if any.
    pub fn node_name(&self) -> Option<&str> {
        self.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
    }
}

impl From<Pod> for PodRecord {
    fn from(pod: Pod) -> Self {
        PodRecord {
            metadata: pod.metadata,
            spec: pod.spec.map(Arc::new),
            status: pod.status,
        }
    }
}

impl From<&PodRecord> for Pod {
    fn from(record: &PodRecord) -> Self {
        Pod {
            metadata: record.metadata.clone(),
            spec: record.spec.as_deref().cloned(),
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
        assert_eq!(Pod::from(&record), pod);
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
}
