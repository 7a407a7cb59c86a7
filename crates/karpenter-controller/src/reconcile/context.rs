//! What every loop executes its steps with: one [`Context`] instead of the same fields in
//! every loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use karpenter_lifecycle::registration_health::RegistrationHealth;

use kube::Client;

use crate::cluster::index::ClusterCache;
use crate::cluster::writes::Writer;
use crate::leader::Fence;
use crate::reconcile::catalogs::Catalogs;
use crate::report::events::Events;
use crate::report::metrics::ControllerMetrics;
use crate::settings::Settings;

tokio::task_local! {
    /// The loop whose step is running (its upstream controller name): the `controller` label
    /// of what the step measures (upstream's `injection.WithControllerName`). Set by the driver
    /// around each step.
    pub static CONTROLLER: &'static str;
}

/// The loop whose step is running, or `""` outside a step (as upstream's
/// `injection.GetControllerName` of a context without one).
pub fn current_controller() -> &'static str {
    CONTROLLER.try_with(|name| *name).unwrap_or("")
}

/// The clients, the shared index, the cloud, events, metrics and settings.
pub struct Context<C> {
    /// The rate-limited Kubernetes client.
    pub client: Client,
    /// The cluster-state index every loop scans, and writes its answers back to.
    pub cache: ClusterCache,
    /// The cloud provider.
    pub cloud: Arc<C>,
    /// The event recorder.
    pub events: Events,
    /// The controllers' metrics.
    pub metrics: ControllerMetrics,
    /// The settings.
    pub settings: Arc<Settings>,
    /// The NodePools' instance types, converted once for every loop that reads them.
    pub catalogs: Catalogs,
    /// Checked before every write, eviction and cloud call that changes something.
    pub fence: Fence,
    /// Each NodePool's recent registration outcomes (the lifecycle records them, the NodePool
    /// status loop writes them as `NodeRegistrationHealthy`).
    pub registrations: Registrations,
    /// When the provisioner first saw each pending pod and decided about it (the pod metrics
    /// read them).
    pub pod_times: PodTimes,
    /// What the provisioner and the disruption loop decided last (`/explain/...`).
    pub explanations: crate::explain::Explanations,
}

/// When the provisioner first saw a pending pod, first decided about it, and first found it a
/// place (upstream's cluster state `podAcks`, `podsSchedulingAttempted`,
/// `podsSchedulableTimes`), by `namespace/name`. An entry goes once the pod started, finished or
/// is gone.
#[derive(Debug, Clone, Default)]
pub struct PodTimes(Arc<Mutex<HashMap<String, PodTime>>>);

/// One pod's times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodTime {
    pub acked: Option<DateTime<Utc>>,
    pub decided: Option<DateTime<Utc>>,
    pub schedulable: Option<DateTime<Utc>>,
}

impl PodTimes {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PodTime>> {
        // Timestamps only: a panicked holder leaves them usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The provisioner sees pending pod `key` (the first time counts).
    pub fn ack(&self, key: &str, now: DateTime<Utc>) {
        self.ack_all([key], now);
    }

    /// The provisioner sees the pending pods `keys` (the first time counts), under one lock.
    pub fn ack_all<K: AsRef<str>>(&self, keys: impl IntoIterator<Item = K>, now: DateTime<Utc>) {
        let mut times = self.lock();
        for key in keys {
            let key = key.as_ref();
            if let Some(time) = times.get_mut(key) {
                time.acked.get_or_insert(now);
            } else {
                times.insert(
                    key.to_owned(),
                    PodTime {
                        acked: Some(now),
                        ..PodTime::default()
                    },
                );
            }
        }
    }

    /// Pods with times kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A scheduling simulation decided about pods: `placed` found a place, `unplaced` did not
    /// (and is no longer known schedulable). Returns, for each pod decided about the first
    /// time, the seconds since it was first seen (upstream's
    /// `karpenter_pods_scheduling_decision_duration_seconds`).
    pub fn decided<'a>(
        &self,
        placed: impl IntoIterator<Item = &'a str>,
        unplaced: impl IntoIterator<Item = &'a str>,
        now: DateTime<Utc>,
    ) -> Vec<f64> {
        let mut times = self.lock();
        let mut first = Vec::new();
        let mut decide = |key: &str, schedulable: bool| {
            let time = times.entry(key.to_owned()).or_default();
            if schedulable {
                time.schedulable.get_or_insert(now);
            } else {
                time.schedulable = None;
            }
            if time.decided.is_none() {
                time.decided = Some(now);
                if let Some(acked) = time.acked {
                    first.push((now - acked).as_seconds_f64().max(0.0));
                }
            }
        };
        for key in placed {
            decide(key, true);
        }
        for key in unplaced {
            decide(key, false);
        }
        first
    }

    /// Pod `key`'s times.
    pub fn get(&self, key: &str) -> PodTime {
        self.lock().get(key).copied().unwrap_or_default()
    }

    /// Forgets pod `key` (it started or finished).
    pub fn clear(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Keeps only the pods `keep` says are still there.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.lock().retain(|key, _| keep(key));
    }
}

/// Each NodePool's recent registration outcomes, shared.
#[derive(Debug, Clone, Default)]
pub struct Registrations(Arc<Mutex<RegistrationHealth>>);

impl Registrations {
    /// The outcomes, locked (a poisoned lock still holds plain outcomes: keep using them).
    pub fn lock(&self) -> MutexGuard<'_, RegistrationHealth> {
        match self.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl<C> Context<C> {
    /// The write path ([`crate::cluster::writes`]) on this context's client and index.
    pub fn writer(&self) -> Writer {
        Writer::new(self.client.clone(), self.cache.clone(), self.fence.clone())
    }
}

impl<C> Clone for Context<C> {
    fn clone(&self) -> Self {
        Context {
            client: self.client.clone(),
            cache: self.cache.clone(),
            cloud: Arc::clone(&self.cloud),
            events: self.events.clone(),
            metrics: self.metrics.clone(),
            settings: Arc::clone(&self.settings),
            catalogs: self.catalogs.clone(),
            fence: self.fence.clone(),
            registrations: self.registrations.clone(),
            pod_times: self.pod_times.clone(),
            explanations: self.explanations.clone(),
        }
    }
}

impl<C> std::fmt::Debug for Context<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cloud_provider", &self.settings.cloud_provider)
            .field("cluster_name", &self.settings.cluster_name)
            .finish_non_exhaustive()
    }
}
