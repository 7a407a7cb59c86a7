//! The order of evictions across the nodes that drain at once: larger pods first.
//!
//! kube-scheduler places each evicted pod's replacement where its default scoring sends it
//! (`NodeResourcesFit` `LeastAllocated`: the node with the most free share), in the order the
//! replacements arrive. When a scale-down's small pods arrive first they spread over the
//! emptiest nodes and take the room a large pod was planned into: the large pod is left
//! pending and a node is launched right after a consolidation whose plan had room for every
//! pod (#31). Evicted largest first, across every node whose drain began less than
//! [`ORDER_HOLD`] ago, the replacements arrive in the order consolidation's placement check
//! simulates (`karpenter_disruption::simulate::Simulator::spread`: largest first, each to the
//! node with the most free share).
//!
//! Pods are ordered by [`size_class`], a power-of-two bucket of their larger request (cpu, or
//! memory at 4 GiB a cpu), not by exact size: pods within a factor of two fragment room alike,
//! and each class present costs at most one [`ORDER_GAP`]. A pod waits while a pod of a larger
//! class awaits eviction on an ordered node, and for [`ORDER_GAP`] after the last eviction of a
//! larger class (for its replacement to be created and placed). The wait is bounded: a node's
//! pods are ordered only in the first [`ORDER_HOLD`] of its drain; after that they are evicted
//! whatever else waits and hold nobody (a PDB refusing a large pod holds the others 10 s at
//! most). Deletions past a termination deadline are never held.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::pod::pod_requests;

use crate::termination::{DrainPlan, PodAction};

/// A smaller pod is evicted this long after the last eviction of a larger class.
pub const ORDER_GAP: Duration = Duration::from_secs(1);
/// A node's evictions are ordered for this long after its drain began.
pub const ORDER_HOLD: Duration = Duration::from_secs(10);

/// Memory weighed as one cpu (the general-purpose ratio).
pub const GIB_PER_CPU: f64 = 4.0;

/// The pod's size class: `floor(log2(size * 8))` of its larger request in cpus (memory at
/// [`GIB_PER_CPU`]), so 1/8 cpu is class 0, one cpu class 3, 4 cpus or 16 GiB class 5. A pod
/// without requests (or with requests that do not parse) is in the lowest class.
pub fn size_class(pod: &PodRecord) -> i32 {
    let Ok(requests) = pod_requests(pod.spec.as_deref()) else {
        return i32::MIN;
    };
    let cpus = requests.get("cpu").millis_i64() as f64 / 1000.0;
    let gib = requests.get("memory").value() as f64 / f64::from(1u32 << 30);
    let size = cpus.max(gib / GIB_PER_CPU);
    if size.is_nan() || size <= 0.0 {
        return i32::MIN;
    }
    // Finite for any quantity a pod can hold; clamped so the cast cannot saturate oddly.
    (size * 8.0).log2().floor().clamp(-64.0, 64.0) as i32
}

/// Whether a node whose drain began at `since` still has its evictions ordered at `now`.
pub fn ordered(since: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    (now - since)
        .to_std()
        .map_or(true, |held| held < ORDER_HOLD)
}

/// The last eviction of each class, across the nodes: the state the order keeps between passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionOrder {
    last: BTreeMap<i32, DateTime<Utc>>,
}

/// What the order lets go at one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Front {
    /// The smallest class evicted now on an ordered node (`None`: nothing waits on another).
    pub class: Option<i32>,
    /// When the front may fall by time alone (the gap after the last larger eviction ends).
    pub recheck: Option<Duration>,
}

impl EvictionOrder {
    /// The front at `now`: the largest class that awaits eviction on an ordered node
    /// (`awaiting`), or was evicted less than [`ORDER_GAP`] ago.
    pub fn front(&self, awaiting: impl IntoIterator<Item = i32>, now: DateTime<Utc>) -> Front {
        let recent = self
            .last
            .iter()
            .filter_map(|(&class, &at)| Some((class, gap_left(at, now)?)))
            .max_by_key(|&(class, _)| class);
        let awaiting = awaiting.into_iter().max();
        match (awaiting, recent) {
            (None, None) => Front {
                class: None,
                recheck: None,
            },
            (Some(a), Some((r, left))) if r > a => Front {
                class: Some(r),
                recheck: Some(left),
            },
            (Some(a), _) => Front {
                class: Some(a),
                recheck: None,
            },
            (None, Some((r, left))) => Front {
                class: Some(r),
                recheck: Some(left),
            },
        }
    }

    /// Pods of `class` were asked for at `at` (gaps ended long ago are forgotten).
    pub fn evicted(&mut self, class: i32, at: DateTime<Utc>) {
        self.last.retain(|_, &mut t| gap_left(t, at).is_some());
        let last = self.last.entry(class).or_insert(at);
        *last = (*last).max(at);
    }

    /// Keeps in `plan` (of a node whose drain began at `since`) the evictions the order lets go
    /// at `now` under `front`, records them, and returns how many it held back. `class_of`
    /// names each pod's [`size_class`] by its key (a pod it does not know is not held).
    pub fn admit(
        &mut self,
        plan: &mut DrainPlan,
        class_of: impl Fn(&str) -> Option<i32>,
        front: Front,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> usize {
        let before = plan.actions.len();
        let keep = |class: Option<i32>| match (class, front.class) {
            (Some(c), Some(f)) => c >= f || !ordered(since, now),
            _ => true,
        };
        let mut admitted = Vec::new();
        plan.actions.retain(|(key, action)| {
            if *action != PodAction::Evict {
                return true;
            }
            let class = class_of(key);
            let kept = keep(class);
            if kept {
                admitted.extend(class);
            }
            kept
        });
        for class in admitted {
            self.evicted(class, now);
        }
        before - plan.actions.len()
    }
}

/// What is left at `now` of the gap after an eviction at `at` (`None` once it ended).
fn gap_left(at: DateTime<Utc>, now: DateTime<Utc>) -> Option<Duration> {
    let since = (now - at).to_std().unwrap_or_default();
    ORDER_GAP.checked_sub(since).filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests;
