//! The labels of a `karpenter_pods_state` series, kept small: one series per pod is the
//! controller's largest metric.
//!
//! As a list of thirteen owned strings a pod's labels took ~1 KB, held twice (by the family and
//! by the loop that compares them each pass) and built again for every pod every 5 s: 10.8 MiB
//! of a 34 MiB heap with 5,000 pods (heaptrack, `scripts/bench-controller --pods 5000`). Here
//! a label set is ten shared strings and three flags (~170 bytes, cloned by reference counts);
//! the values pods share (namespace, owner, node, zone, NodePool, ...) are one string each,
//! through an [`Interner`] that forgets what no series holds any more.
//!
//! Owns only the label set and its encoding; which pods have series is
//! [`crate::controllers::gauges`]'s.

use std::collections::HashSet;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

/// A `karpenter_pods_state` label set (upstream's labels, written in this order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodStateLabels {
    pub name: Arc<str>,
    pub namespace: Arc<str>,
    pub owner: Arc<str>,
    pub scheduled: bool,
    pub node: Arc<str>,
    pub zone: Arc<str>,
    pub arch: Arc<str>,
    pub capacity_type: Arc<str>,
    pub instance_type: Arc<str>,
    pub managed: bool,
    pub nodepool: Arc<str>,
    pub phase: Arc<str>,
    pub ready: bool,
}

fn flag(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

impl PodStateLabels {
    /// The labels as written, in order.
    pub fn pairs(&self) -> [(&'static str, &str); 13] {
        [
            ("name", &self.name),
            ("namespace", &self.namespace),
            ("owner", &self.owner),
            ("scheduled", flag(self.scheduled)),
            ("node", &self.node),
            ("zone", &self.zone),
            ("arch", &self.arch),
            ("capacity_type", &self.capacity_type),
            ("instance_type", &self.instance_type),
            ("managed", flag(self.managed)),
            ("nodepool", &self.nodepool),
            ("phase", &self.phase),
            ("ready", flag(self.ready)),
        ]
    }
}

impl EncodeLabelSet for PodStateLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.pairs().encode(encoder)
    }
}

/// One shared copy of each label value in use.
#[derive(Debug, Default)]
pub struct Interner {
    values: HashSet<Arc<str>>,
}

impl Interner {
    /// The shared copy of `value` (made on first use).
    pub fn get(&mut self, value: &str) -> Arc<str> {
        if let Some(shared) = self.values.get(value) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(value);
        self.values.insert(Arc::clone(&shared));
        shared
    }

    /// Forgets the values nothing else holds (pods, nodes and owners that are gone).
    pub fn forget_unused(&mut self) {
        self.values.retain(|v| Arc::strong_count(v) > 1);
        if self.values.len() < self.values.capacity() / 4 {
            self.values.shrink_to_fit();
        }
    }

    /// Values kept now.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_shared_and_forgotten_once_nothing_holds_it() {
        let mut interner = Interner::default();
        let a = interner.get("shop");
        let b = interner.get("shop");
        assert!(Arc::ptr_eq(&a, &b), "one copy");
        let other = interner.get("n1");
        drop(other);
        interner.forget_unused();
        assert_eq!(interner.len(), 1, "n1 is held by nothing");
        drop((a, b));
        interner.forget_unused();
        assert!(interner.is_empty());
    }

    #[test]
    fn labels_are_written_in_upstreams_order() {
        let mut i = Interner::default();
        let labels = PodStateLabels {
            name: i.get("web"),
            namespace: i.get("shop"),
            owner: i.get("/apis/apps/v1/namespaces/shop/replicasets/web-1"),
            scheduled: true,
            node: i.get("n1"),
            zone: i.get("z"),
            arch: i.get("amd64"),
            capacity_type: i.get("spot"),
            instance_type: i.get("c5.large"),
            managed: true,
            nodepool: i.get("general"),
            phase: i.get("Running"),
            ready: false,
        };
        let names: Vec<&str> = labels.pairs().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            names,
            [
                "name",
                "namespace",
                "owner",
                "scheduled",
                "node",
                "zone",
                "arch",
                "capacity_type",
                "instance_type",
                "managed",
                "nodepool",
                "phase",
                "ready"
            ]
        );
        assert_eq!(labels.pairs()[3], ("scheduled", "true"));
        assert_eq!(labels.pairs()[12], ("ready", "false"));
    }
}
