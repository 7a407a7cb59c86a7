//! The run loop: servers, leader election, and the caller's controllers: started at once so
//! a standby warms its caches (and reports ready) before it leads, acting only once
//! [`ControllerContext::leading`] says so; a drain in order on shutdown.
//!
//! Order on the way down (SIGTERM, or the caller's token): the controllers are
//! cancelled and awaited, the Lease is released (a standby takes over at
//! once), the HTTP servers close last so probes and metrics answer during the
//! drain. On lost leadership the controllers are cancelled the same way and
//! [`RunError::LostLeadership`] is returned: the process must exit, as
//! upstream's does. This module decides nothing about nodes or pods.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Clients;
use crate::http::{HttpError, HttpServers, Metrics, Readiness};
use crate::leader::{Fence, LeaderError, LeaderMetrics, LeaderState, Leadership, LeaseConfig};
use crate::settings::Settings;

/// The error a controller future may end with.
pub type ControllerError = Box<dyn std::error::Error + Send + Sync>;

/// How long controllers get to return after they are cancelled.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the controller stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The settings ask for what karpenter-rs does not do.
    #[error(transparent)]
    Refused(#[from] crate::settings::Refused),
    /// Logging could not be installed.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    /// Signal handlers could not be installed.
    #[error(transparent)]
    Shutdown(#[from] crate::shutdown::ShutdownError),
    /// The Kubernetes client could not be built.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// An HTTP server could not bind or failed.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The HTTP server task panicked.
    #[error("the HTTP server task ended abnormally")]
    HttpTask(#[source] tokio::task::JoinError),
    /// We led and lost the Lease: stop acting, exit.
    #[error("stopping: leadership lost")]
    LostLeadership(#[source] LeaderError),
    /// Leader election failed in another way (e.g. releasing the Lease).
    #[error("leader election")]
    Leader(#[source] LeaderError),
    /// The controllers returned an error.
    #[error("the controllers failed")]
    Controllers(#[source] ControllerError),
    /// The controllers did not return within [`DRAIN_TIMEOUT`] after cancel.
    #[error("the controllers did not stop within {0:?} of being cancelled")]
    DrainTimeout(Duration),
}

/// What the controllers get: clients, settings, the metrics registry, the
/// readiness flag, and a token that trips on shutdown or leadership loss.
#[derive(Debug, Clone)]
pub struct ControllerContext {
    /// The settings.
    pub settings: Arc<Settings>,
    /// The Kubernetes clients.
    pub clients: Clients,
    /// Register metrics here.
    pub metrics: Metrics,
    /// Set when caches are synced (drives `/readyz`).
    pub readiness: Readiness,
    /// Return promptly once this trips.
    pub cancel: CancellationToken,
    /// Whether this replica leads: watch caches may start at once, anything that writes to
    /// the cluster waits for [`Leading::wait`].
    pub leading: Leading,
    /// Checked before every write: open only while leadership is confirmed
    /// ([`crate::leader::Fence`]).
    pub fence: Fence,
    /// What the loops decided last, served at `/explain/...` on the metrics port.
    pub explanations: crate::explain::Explanations,
}

/// Tells the controllers when this replica starts leading (it never stops leading while they
/// run: a lost Lease cancels them).
#[derive(Debug, Clone)]
pub struct Leading(tokio::sync::watch::Receiver<bool>);

impl Leading {
    /// Waits until this replica leads; false if the run loop went away first.
    pub async fn wait(&mut self) -> bool {
        self.0.wait_for(|leading| *leading).await.is_ok()
    }
}

/// Everything the run loop needs, before binding.
#[derive(Debug)]
pub struct Runtime {
    settings: Arc<Settings>,
    clients: Clients,
    metrics: Metrics,
    readiness: Readiness,
    explanations: crate::explain::Explanations,
    lease: Option<LeaseConfig>,
    leader_metrics: LeaderMetrics,
    health_addr: SocketAddr,
    metrics_addr: SocketAddr,
}

impl Runtime {
    /// From the settings: ports on all interfaces, the Lease from
    /// `LEADER_ELECTION_*` unless `DISABLE_LEADER_ELECTION`. The Lease is
    /// managed through the eviction client (no rate limit, no retries).
    pub fn new(settings: Settings, clients: Clients) -> Self {
        let lease = (!settings.disable_leader_election)
            .then(|| LeaseConfig::from_settings(&settings, &clients.eviction));
        let any = |port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        let metrics = Metrics::new();
        clients.metrics.register(&metrics);
        let leader_metrics = LeaderMetrics::register(&metrics);
        Self {
            health_addr: any(settings.health_probe_port),
            metrics_addr: any(settings.metrics_port),
            settings: Arc::new(settings),
            clients,
            metrics,
            readiness: Readiness::new(),
            explanations: crate::explain::Explanations::default(),
            lease,
            leader_metrics,
        }
    }

    /// Overrides the Lease (`None`: no election). Tests use unique names and short timings.
    pub fn with_lease(mut self, lease: Option<LeaseConfig>) -> Self {
        self.lease = lease;
        self
    }

    /// Overrides where the servers listen (port 0: any free port).
    pub fn with_addresses(mut self, health: SocketAddr, metrics: SocketAddr) -> Self {
        self.health_addr = health;
        self.metrics_addr = metrics;
        self
    }

    /// The metrics registry (register before or during the run).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The readiness flag behind `/readyz`; starts not ready. Caches that
    /// warm up before leadership can set it, so standbys report ready too.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Binds the HTTP listeners.
    pub async fn bind(self) -> Result<BoundRuntime, RunError> {
        let servers = HttpServers::bind(
            self.health_addr,
            self.metrics_addr,
            self.readiness.clone(),
            self.metrics.clone(),
        )
        .await?
        .with_explanations(self.explanations.clone());
        Ok(BoundRuntime {
            runtime: self,
            servers,
        })
    }
}

/// A runtime whose listeners are bound.
#[derive(Debug)]
pub struct BoundRuntime {
    runtime: Runtime,
    servers: HttpServers,
}

impl BoundRuntime {
    /// Where the probes are served.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.servers.health_addr()
    }

    /// Where `/metrics` is served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.servers.metrics_addr()
    }

    /// Serves, elects, runs `controllers` while leading, drains on `shutdown`.
    /// `Ok` after a shutdown; an error after leadership loss or a failure.
    pub async fn run<F, Fut>(
        self,
        shutdown: CancellationToken,
        controllers: F,
    ) -> Result<(), RunError>
    where
        F: FnOnce(ControllerContext) -> Fut,
        Fut: Future<Output = Result<(), ControllerError>> + Send + 'static,
    {
        let Self { runtime, servers } = self;
        let servers_stop = CancellationToken::new();
        let servers_task = tokio::spawn(servers.serve(servers_stop.clone()));

        let election_stop = CancellationToken::new();
        let mut leadership = match runtime.lease.clone() {
            Some(lease) => Leadership::spawn_with(
                runtime.clients.eviction.clone(),
                lease,
                election_stop.clone(),
                runtime.leader_metrics.clone(),
            ),
            None => Leadership::unelected(election_stop.clone()),
        };

        let result = lead(&runtime, &shutdown, &mut leadership, controllers).await;

        election_stop.cancel();
        let election = leadership.join().await;
        servers_stop.cancel();
        let servers = servers_task
            .await
            .map_err(RunError::HttpTask)
            .and_then(|r| r.map_err(RunError::from));

        // The first failure wins: the controllers' or the loss, then the release, then the servers.
        match (result, election) {
            (Err(RunError::LostLeadership(_)), Err(lost @ LeaderError::Lost { .. })) => {
                return Err(RunError::LostLeadership(lost));
            }
            (Err(err), _) => return Err(err),
            (Ok(()), Err(LeaderError::Lost { .. }) | Ok(())) => {}
            (Ok(()), Err(err)) => return Err(RunError::Leader(err)),
        }
        servers
    }
}

/// Waits for leadership, runs the controllers while leading, stops them.
async fn lead<F, Fut>(
    runtime: &Runtime,
    shutdown: &CancellationToken,
    leadership: &mut Leadership,
    controllers: F,
) -> Result<(), RunError>
where
    F: FnOnce(ControllerContext) -> Fut,
    Fut: Future<Output = Result<(), ControllerError>> + Send + 'static,
{
    let cancel = CancellationToken::new();
    let (lead_tx, lead_rx) = tokio::sync::watch::channel(false);
    let context = ControllerContext {
        settings: runtime.settings.clone(),
        clients: runtime.clients.clone(),
        metrics: runtime.metrics.clone(),
        readiness: runtime.readiness.clone(),
        cancel: cancel.clone(),
        leading: Leading(lead_rx),
        fence: leadership.fence(),
        explanations: runtime.explanations.clone(),
    };
    // The controllers start now (a standby's caches warm up); they act once we lead.
    let mut task = tokio::spawn(controllers(context));
    let leading = tokio::select! {
        joined = &mut task => return finished(joined),
        () = shutdown.cancelled() => false,
        leading = leadership.wait_until_leading() => leading,
    };
    // Not leading: shut down, or the election ended before we led (it only ends by cancel
    // or loss).
    let lost = if leading {
        tracing::info!("leading: starting controllers");
        let _ = lead_tx.send(true);
        tokio::select! {
            joined = &mut task => return finished(joined),
            () = shutdown.cancelled() => None,
            state = leadership.wait_until_not_leading() => Some(state),
        }
    } else {
        None
    };
    cancel.cancel();
    let drained = match tokio::time::timeout(DRAIN_TIMEOUT, &mut task).await {
        Ok(joined) => finished(joined),
        Err(_) => {
            task.abort();
            Err(RunError::DrainTimeout(DRAIN_TIMEOUT))
        }
    };
    match lost {
        Some(LeaderState::Lost) => {
            tracing::error!("leadership lost: controllers stopped");
            Err(RunError::LostLeadership(LeaderError::Lost {
                name: runtime
                    .lease
                    .as_ref()
                    .map(|l| l.name.clone())
                    .unwrap_or_default(),
                reason: "the elector reported the loss".to_string(),
            }))
        }
        _ => drained,
    }
}

fn finished(
    joined: Result<Result<(), ControllerError>, tokio::task::JoinError>,
) -> Result<(), RunError> {
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(RunError::Controllers(err)),
        Err(join) => Err(RunError::Controllers(Box::new(join))),
    }
}

/// The process entry point: refuses settings karpenter-rs cannot honour
/// ([`Settings::validate`]), JSON logs at `LOG_LEVEL` to `LOG_OUTPUT_PATHS`, clients from the
/// kubeconfig or the pod, servers on the configured ports, leader election
/// unless disabled, `controllers` while leading, until SIGTERM/SIGINT.
pub async fn run<F, Fut>(settings: Settings, controllers: F) -> Result<(), RunError>
where
    F: FnOnce(ControllerContext) -> Fut,
    Fut: Future<Output = Result<(), ControllerError>> + Send + 'static,
{
    settings.validate()?;
    crate::telemetry::init(&settings)?;
    let shutdown = crate::shutdown::on_signals(&CancellationToken::new())?;
    let clients = Clients::infer(&settings).await?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        cloud_provider = %settings.cloud_provider,
        "starting karpenter controller"
    );
    Runtime::new(settings, clients)
        .bind()
        .await?
        .run(shutdown, controllers)
        .await
}
