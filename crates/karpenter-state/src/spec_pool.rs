//! [`SpecPool`]: one copy of each distinct pod spec the index holds.
//!
//! The pods a ReplicaSet (or Job, StatefulSet, ...) makes carry the same spec, whether
//! pending or bound: a [`PodRecord`] keeps the pod's `nodeName` beside its spec, not in it. A
//! `PodSpec` with one container is 3.8 KB before its strings, most of a pod's memory in the
//! index, so the index keeps one `Arc<PodSpec>` per (namespace, controller, spec) and hands it
//! to every pod that has it, on every node. Sharing is by equality, never by assumption: a
//! spec is shared only with one it equals, so no pod reads another's spec. A pod without a
//! controller keeps its own.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use karpenter_scheduling::PodRecord;

/// Shared pod specs, by the pod's namespace and controller.
#[derive(Debug, Default, Clone)]
pub struct SpecPool {
    specs: HashMap<u64, Weak<PodSpec>>,
    /// Entries after the last sweep of dead ones.
    swept_len: usize,
}

impl SpecPool {
    /// `pod` as a record whose spec is shared with the pods of the same controller (on any
    /// node, or none) that have an equal spec.
    pub fn record(&mut self, pod: Pod) -> PodRecord {
        let mut record = PodRecord::from(pod);
        if let Some(key) = share_key(&record)
            && let Some(spec) = record.spec.take()
        {
            record.spec = Some(self.share(key, spec));
        }
        record
    }

    fn share(&mut self, key: u64, spec: Arc<PodSpec>) -> Arc<PodSpec> {
        if let Some(shared) = self.specs.get(&key).and_then(Weak::upgrade)
            && *shared == *spec
        {
            return shared;
        }
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

/// The pod's namespace and controller uid: pods that share these usually share a spec (the
/// node is not in the key: a record's spec has no node name).
fn share_key(pod: &PodRecord) -> Option<u64> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let mut hasher = DefaultHasher::new();
    pod.metadata.namespace.hash(&mut hasher);
    owner.uid.hash(&mut hasher);
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
    fn pods_of_one_controller_share_one_spec_on_every_node_and_pending() {
        let mut pool = SpecPool::default();
        let a = pool.record(pod("a", Some("rs-1"), Some("n1"), "x"));
        let b = pool.record(pod("b", Some("rs-1"), Some("n1"), "x"));
        let c = pool.record(pod("c", Some("rs-1"), Some("n2"), "x"));
        let pending = pool.record(pod("d", Some("rs-1"), None, "x"));
        for other in [&b, &c, &pending] {
            assert!(same(&a, other), "{:?}", other.metadata.name);
        }
        assert_eq!(pool.live(), 1);
        let nodes = [&a, &b, &c, &pending].map(PodRecord::node_name);
        assert_eq!(nodes, [Some("n1"), Some("n1"), Some("n2"), None]);
        assert_eq!(a.spec.as_ref().unwrap().node_name, None);
    }

    #[test]
    fn a_different_spec_or_controller_is_not_shared() {
        let mut pool = SpecPool::default();
        let a = pool.record(pod("a", Some("rs-1"), Some("n1"), "x"));
        let other_spec = pool.record(pod("b", Some("rs-1"), Some("n2"), "y"));
        let other_owner = pool.record(pod("d", Some("rs-2"), Some("n1"), "x"));
        let no_owner = pool.record(pod("e", None, Some("n1"), "x"));
        for other in [&other_spec, &other_owner, &no_owner] {
            assert!(!same(&a, other));
        }
        assert_eq!(
            other_spec.spec.as_ref().unwrap().scheduler_name.as_deref(),
            Some("y")
        );
        assert_eq!(other_spec.node_name(), Some("n2"));
    }

    #[test]
    fn specs_no_pod_holds_are_swept() {
        let mut pool = SpecPool::default();
        for i in 0..1_000 {
            let owner = format!("rs-{i}");
            drop(pool.record(pod("a", Some(&owner), Some("n1"), "x")));
        }
        assert!(pool.specs.len() <= 2 * pool.swept_len + 64);
        assert!(pool.specs.len() < 200, "{} entries kept", pool.specs.len());
        assert_eq!(pool.live(), 0);
    }
}
