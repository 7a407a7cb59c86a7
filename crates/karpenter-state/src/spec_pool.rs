//! [`SpecPool`]: one copy of each distinct pod spec the index holds.
//!
//! The pods a ReplicaSet (or Job, StatefulSet, ...) makes carry the same spec until the
//! scheduler binds them, and the same spec again on each node they share. A `PodSpec` with one
//! container is 3.8 KB before its strings, most of a pod's memory in the index, so the index
//! keeps one `Arc<PodSpec>` per (controller, node, spec) and hands it to every pod that has
//! it. Sharing is by equality, never by assumption: a spec is shared only with one it equals,
//! so no pod reads another's spec. A pod without a controller keeps its own.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use karpenter_scheduling::PodRecord;

/// Shared pod specs, by the pod's controller and node.
#[derive(Debug, Default, Clone)]
pub struct SpecPool {
    specs: HashMap<u64, Weak<PodSpec>>,
    /// Entries after the last sweep of dead ones.
    swept_len: usize,
}

impl SpecPool {
    /// `pod` as a record whose spec is shared with the pods of the same controller on the same
    /// node that have an equal spec.
    pub fn record(&mut self, pod: Pod) -> PodRecord {
        let key = share_key(&pod);
        let spec = match (pod.spec, key) {
            (Some(spec), Some(key)) => Some(self.share(key, spec)),
            (spec, _) => spec.map(Arc::new),
        };
        PodRecord {
            metadata: pod.metadata,
            spec,
            status: pod.status,
        }
    }

    fn share(&mut self, key: u64, spec: PodSpec) -> Arc<PodSpec> {
        if let Some(shared) = self.specs.get(&key).and_then(Weak::upgrade)
            && *shared == spec
        {
            return shared;
        }
        let spec = Arc::new(spec);
        self.specs.insert(key, Arc::downgrade(&spec));
        if self.specs.len() > 2 * self.swept_len + 64 {
            self.specs.retain(|_, spec| spec.strong_count() > 0);
            self.specs.shrink_to_fit();
            self.swept_len = self.specs.len();
        }
        spec
    }

    /// Distinct specs alive.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.specs.values().filter(|s| s.strong_count() > 0).count()
    }
}

/// The pod's namespace, controller uid and node: pods that share these usually share a spec.
fn share_key(pod: &Pod) -> Option<u64> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let mut hasher = DefaultHasher::new();
    pod.metadata.namespace.hash(&mut hasher);
    owner.uid.hash(&mut hasher);
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn pod(name: &str, owner: Option<&str>, node: Option<&str>, image: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "web-abc".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                scheduler_name: Some(image.into()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    fn same(a: &PodRecord, b: &PodRecord) -> bool {
        Arc::ptr_eq(a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap())
    }

    #[test]
    fn pods_of_one_controller_on_one_node_share_one_spec() {
        let mut pool = SpecPool::default();
        let a = pool.record(pod("a", Some("rs-1"), Some("n1"), "x"));
        let b = pool.record(pod("b", Some("rs-1"), Some("n1"), "x"));
        assert!(same(&a, &b));
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn a_different_spec_node_or_controller_is_not_shared() {
        let mut pool = SpecPool::default();
        let a = pool.record(pod("a", Some("rs-1"), Some("n1"), "x"));
        let other_spec = pool.record(pod("b", Some("rs-1"), Some("n1"), "y"));
        let other_node = pool.record(pod("c", Some("rs-1"), Some("n2"), "x"));
        let other_owner = pool.record(pod("d", Some("rs-2"), Some("n1"), "x"));
        let no_owner = pool.record(pod("e", None, Some("n1"), "x"));
        for other in [&other_spec, &other_node, &other_owner, &no_owner] {
            assert!(!same(&a, other));
        }
        assert_eq!(
            other_spec.spec.as_ref().unwrap().scheduler_name.as_deref(),
            Some("y")
        );
        assert_eq!(other_node.node_name(), Some("n2"));
    }

    #[test]
    fn specs_no_pod_holds_are_swept() {
        let mut pool = SpecPool::default();
        for i in 0..1_000 {
            let node = format!("n{i}");
            drop(pool.record(pod("a", Some("rs-1"), Some(&node), "x")));
        }
        assert!(pool.specs.len() <= 2 * pool.swept_len + 64);
        assert!(pool.specs.len() < 200, "{} entries kept", pool.specs.len());
        assert_eq!(pool.live(), 0);
    }
}
