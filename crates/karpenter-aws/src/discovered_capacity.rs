//! Instance memory learned from registered nodes (upstream's `discoveredCapacityCache`, since
//! v1.1): the memory an instance type's nodes report (`status.capacity.memory`) replaces the
//! estimate (`DescribeInstanceTypes` minus `VM_MEMORY_OVERHEAD_PERCENT`) for that type under
//! the same AMIs.
//!
//! # What this module owns
//!
//! * [`DiscoveredMemory::learn`]: a registered node's memory is kept for its instance type and
//!   its class's current AMIs (the key is the type and a hash of `status.amis`, so a new AMI
//!   starts over), only when the node runs the AMI its type maps to now, and only when it is no
//!   more than what is already known (the smallest wins; an equal value refreshes the entry);
//! * [`DiscoveredMemory::apply`]: the class's instance types with the learned memory as their
//!   memory capacity;
//! * the entries' lifetime ([`DISCOVERED_FOR`], upstream's 60 days) and a version that changes
//!   whenever what `apply` does changes, for the caller's caches.
//!
//! # What it must not do
//!
//! Read the clock (the caller passes `now`, on any clock) or a Node itself: the caller hands in
//! the node's labels, its memory and the NodeClaim's image.

use std::collections::{BTreeMap, HashMap};
use std::ops::Add;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use karpenter_api::labels::INSTANCE_TYPE;
use karpenter_api::v1::ec2nodeclass::AmiStatus;
use karpenter_cloud::InstanceTypeInfo;
use sha2::{Digest, Sha256};

use crate::nodeclass::amis;

/// How long a learned value is kept without a node confirming it (upstream's
/// `DiscoveredCapacityCacheTTL`).
pub const DISCOVERED_FOR: Duration = Duration::from_secs(60 * 24 * 3600);

/// One learned value: bytes, and when it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry<T> {
    memory_bytes: i64,
    expires: T,
}

/// The learned memory per (instance type, AMIs), on the clock `T`.
#[derive(Debug)]
pub struct DiscoveredMemory<T> {
    entries: Mutex<HashMap<(String, u64), Entry<T>>>,
    version: AtomicU64,
}

impl<T> Default for DiscoveredMemory<T> {
    fn default() -> Self {
        DiscoveredMemory {
            entries: Mutex::new(HashMap::new()),
            version: AtomicU64::new(0),
        }
    }
}

/// What a registered node says.
#[derive(Debug, Clone, Copy)]
pub struct NodeReport<'a> {
    /// The Node's labels (its instance type and the facts AMI requirements read).
    pub labels: &'a BTreeMap<String, String>,
    /// `status.capacity.memory`, in bytes.
    pub memory_bytes: i64,
    /// The image its NodeClaim launched with (`status.imageID`).
    pub image_id: &'a str,
}

/// A hash of the class's AMIs (order does not matter): the part of the key that starts over
/// when the AMIs change.
pub fn amis_key(amis: &[AmiStatus]) -> u64 {
    let mut sorted: Vec<&AmiStatus> = amis.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    // Plain strings and structs of strings: serializing cannot fail.
    let canonical = serde_json::to_vec(&sorted).unwrap_or_default();
    let digest = Sha256::digest(&canonical);
    let mut first = [0u8; 8];
    for (slot, byte) in first.iter_mut().zip(digest.iter()) {
        *slot = *byte;
    }
    u64::from_be_bytes(first)
}

impl<T: Copy + Ord + Add<Duration, Output = T>> DiscoveredMemory<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, u64), Entry<T>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Learns from a registered node of a class whose AMIs are `amis`. Returns whether the
    /// learned value changed (a first value, or a smaller one).
    pub fn learn(&self, amis: &[AmiStatus], node: NodeReport<'_>, now: T) -> bool {
        let Some(instance_type) = node.labels.get(INSTANCE_TYPE) else {
            return false;
        };
        if node.memory_bytes <= 0
            || amis::ami_for(amis, node.labels).is_none_or(|ami| ami.id != node.image_id)
        {
            return false;
        }
        let key = (instance_type.clone(), amis_key(amis));
        let mut entries = self.lock();
        let fresh = Entry {
            memory_bytes: node.memory_bytes,
            expires: now + DISCOVERED_FOR,
        };
        let changed = match entries.get(&key) {
            Some(known) if known.expires > now && node.memory_bytes > known.memory_bytes => {
                return false;
            }
            Some(known) if known.expires > now => known.memory_bytes != node.memory_bytes,
            _ => true,
        };
        entries.insert(key, fresh);
        if changed {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    /// The learned memory of `instance_type` under `amis`, if any at `now`.
    pub fn get(&self, instance_type: &str, amis: &[AmiStatus], now: T) -> Option<i64> {
        self.lock()
            .get(&(instance_type.to_owned(), amis_key(amis)))
            .filter(|e| e.expires > now)
            .map(|e| e.memory_bytes)
    }

    /// Sets the memory capacity of each type of `infos` that has a learned value under `amis`.
    pub fn apply(&self, infos: &mut [InstanceTypeInfo], amis: &[AmiStatus], now: T) {
        let key = amis_key(amis);
        let mut entries = self.lock();
        let before = entries.len();
        entries.retain(|_, e| e.expires > now);
        if entries.len() != before {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
        if entries.is_empty() {
            return;
        }
        for info in infos {
            if let Some(entry) = entries.get(&(info.name.clone(), key)) {
                info.capacity.memory_bytes = entry.memory_bytes;
            }
        }
    }

    /// Changes whenever a value is learned or replaced (expiries are seen by [`Self::apply`]).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::labels::ARCH;

    fn amis(id: &str) -> Vec<AmiStatus> {
        serde_json::from_value(serde_json::json!([
            {"id": id, "requirements": [{"key": ARCH, "operator": "In", "values": ["amd64"]}]},
            {"id": "ami-arm", "requirements": [{"key": ARCH, "operator": "In", "values": ["arm64"]}]}
        ]))
        .unwrap()
    }

    fn labels(instance_type: &str, arch: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (INSTANCE_TYPE.to_owned(), instance_type.to_owned()),
            (ARCH.to_owned(), arch.to_owned()),
        ])
    }

    fn info(name: &str, memory: i64) -> InstanceTypeInfo {
        let mut info = InstanceTypeInfo {
            name: name.into(),
            labels: BTreeMap::new(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: Vec::new(),
            label_choices: BTreeMap::new(),
        };
        info.capacity.memory_bytes = memory;
        info
    }

    const GIB: i64 = 1 << 30;

    #[test]
    fn a_registered_nodes_memory_becomes_its_types_memory_under_the_same_amis() {
        let cache = DiscoveredMemory::<Duration>::new();
        let now = Duration::ZERO;
        let amd = labels("m5.large", "amd64");
        let node = NodeReport {
            labels: &amd,
            memory_bytes: 7 * GIB,
            image_id: "ami-1",
        };
        assert!(cache.learn(&amis("ami-1"), node, now));
        let mut infos = vec![info("m5.large", 8 * GIB), info("c5.large", 4 * GIB)];
        cache.apply(&mut infos, &amis("ami-1"), now);
        assert_eq!(infos[0].capacity.memory_bytes, 7 * GIB);
        assert_eq!(infos[1].capacity.memory_bytes, 4 * GIB, "not learned");
        let mut other = vec![info("m5.large", 8 * GIB)];
        cache.apply(&mut other, &amis("ami-2"), now);
        assert_eq!(
            other[0].capacity.memory_bytes,
            8 * GIB,
            "new AMIs start over"
        );
    }

    #[test]
    fn the_smallest_value_wins_and_an_equal_one_only_refreshes_it() {
        let cache = DiscoveredMemory::<Duration>::new();
        let amd = labels("m5.large", "amd64");
        let report = |memory_bytes| NodeReport {
            labels: &amd,
            memory_bytes,
            image_id: "ami-1",
        };
        let start = Duration::ZERO;
        assert!(cache.learn(&amis("ami-1"), report(7 * GIB), start));
        let v = cache.version();
        assert!(!cache.learn(&amis("ami-1"), report(8 * GIB), start));
        assert!(!cache.learn(&amis("ami-1"), report(7 * GIB), start));
        assert_eq!(cache.version(), v, "nothing changed");
        assert!(cache.learn(&amis("ami-1"), report(6 * GIB), start));
        assert_eq!(cache.get("m5.large", &amis("ami-1"), start), Some(6 * GIB));
        // Refreshed late, the entry lives on past its first expiry.
        let later = start + DISCOVERED_FOR - Duration::from_secs(1);
        cache.learn(&amis("ami-1"), report(6 * GIB), later);
        assert_eq!(
            cache.get("m5.large", &amis("ami-1"), start + DISCOVERED_FOR),
            Some(6 * GIB)
        );
        assert_eq!(
            cache.get("m5.large", &amis("ami-1"), later + DISCOVERED_FOR),
            None,
            "expired"
        );
    }

    #[test]
    fn a_node_on_an_ami_its_type_no_longer_maps_to_teaches_nothing() {
        let cache = DiscoveredMemory::<Duration>::new();
        let amd = labels("m5.large", "amd64");
        let stale = NodeReport {
            labels: &amd,
            memory_bytes: 7 * GIB,
            image_id: "ami-old",
        };
        assert!(!cache.learn(&amis("ami-1"), stale, Duration::ZERO));
        let no_type = BTreeMap::from([(ARCH.to_owned(), "amd64".to_owned())]);
        let untyped = NodeReport {
            labels: &no_type,
            memory_bytes: 7 * GIB,
            image_id: "ami-1",
        };
        assert!(!cache.learn(&amis("ami-1"), untyped, Duration::ZERO));
        assert_eq!(cache.version(), 0);
    }

    #[test]
    fn the_amis_key_ignores_their_order() {
        let mut reversed = amis("ami-1");
        reversed.reverse();
        assert_eq!(amis_key(&amis("ami-1")), amis_key(&reversed));
        assert_ne!(amis_key(&amis("ami-1")), amis_key(&amis("ami-2")));
    }
}
