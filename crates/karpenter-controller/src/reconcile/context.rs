//! What every loop executes its steps with: one [`Context`] instead of the same fields in
//! every loop.

use std::sync::{Arc, Mutex, MutexGuard};

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
