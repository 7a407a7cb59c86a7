//! The HTTP endpoints: probes on `HEALTH_PROBE_PORT`, metrics and the `/explain/...`
//! answers ([`crate::explain`]) on `METRICS_PORT`.
//!
//! Owns binding the two listeners and serving until cancelled (in-flight
//! requests finish; then the listeners close). Like upstream it listens on all
//! interfaces. It does not compute health or metrics: see [`Readiness`] and
//! [`Metrics`].

mod explain;
mod health;
mod metrics;
mod summary;

use std::net::SocketAddr;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use health::Readiness;
pub use metrics::{BuildInfoLabels, Metrics, MetricsError, OPENMETRICS_CONTENT_TYPE};
pub use summary::{Summary, SummaryLabels};

/// Why an HTTP server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The port is taken or not allowed.
    #[error("binding the {what} server to {addr}")]
    Bind {
        /// `health probe` or `metrics`.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Accepting connections failed.
    #[error("serving the {what} endpoint")]
    Serve {
        /// `health probe` or `metrics`.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The two listeners, bound and ready to serve.
#[derive(Debug)]
pub struct HttpServers {
    health: TcpListener,
    metrics: TcpListener,
    readiness: Readiness,
    registry: Metrics,
    explanations: crate::explain::Explanations,
}

impl HttpServers {
    /// Binds both listeners (port 0 picks a free port: see the `*_addr` methods).
    pub async fn bind(
        health_addr: SocketAddr,
        metrics_addr: SocketAddr,
        readiness: Readiness,
        registry: Metrics,
    ) -> Result<Self, HttpError> {
        let bind = |what, addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| HttpError::Bind { what, addr, source })
        };
        Ok(Self {
            health: bind("health probe", health_addr).await?,
            metrics: bind("metrics", metrics_addr).await?,
            readiness,
            registry,
            explanations: crate::explain::Explanations::default(),
        })
    }

    /// Serves `explanations` at `/explain/...` beside `/metrics`.
    pub fn with_explanations(mut self, explanations: crate::explain::Explanations) -> Self {
        self.explanations = explanations;
        self
    }

    /// Where the probes are served.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health.local_addr().ok()
    }

    /// Where `/metrics` is served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.local_addr().ok()
    }

    /// Serves both until `cancel` trips, then lets in-flight requests finish.
    pub async fn serve(self, cancel: CancellationToken) -> Result<(), HttpError> {
        let health = serve_one(
            "health probe",
            self.health,
            health::router(self.readiness),
            cancel.clone(),
        );
        let metrics = serve_one(
            "metrics",
            self.metrics,
            metrics_router(self.registry).merge(explain::router(self.explanations)),
            cancel,
        );
        let (health, metrics) = tokio::join!(health, metrics);
        health.and(metrics)
    }
}

async fn serve_one(
    what: &'static str,
    listener: TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> Result<(), HttpError> {
    axum::serve(listener, router)
        .with_graceful_shutdown(cancel.cancelled_owned())
        .await
        .map_err(|source| HttpError::Serve { what, source })
}

fn metrics_router(registry: Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                match registry.encode() {
                    Ok(text) => {
                        ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response()
                    }
                    Err(err) => {
                        tracing::error!(error = %err, "serving /metrics");
                        (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response()
                    }
                }
            }
        }),
    )
}

#[cfg(test)]
mod tests;
