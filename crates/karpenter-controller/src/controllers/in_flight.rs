//! Which objects a loop has a step in flight for, so it starts at most one per object.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// Names of objects with a step in flight, shared by a loop and the tasks it spawns.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<Mutex<HashSet<String>>>);

impl InFlight {
    /// The set, to look at and mark names in one critical section (a panicked holder does not
    /// make it unusable: the set is only ever inserted to and removed from).
    pub fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        match self.0.lock() {
            Ok(set) => set,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The step for `name` ended.
    pub fn done(&self, name: &str) {
        self.lock().remove(name);
    }
}
