//! Kubernetes clients: the main one (rate-limited at `KUBE_CLIENT_QPS` /
//! `KUBE_CLIENT_BURST`) and one for evictions with kube's retries off.
//!
//! Configuration comes from `kube::Config::infer`: `$KUBECONFIG` or
//! `~/.kube/config` when present, else the in-cluster service account.
//! Owns construction only; it must not make API calls.
//!
//! kube 5's default client retries 429/503/504 by itself (up to 15 times,
//! honouring Retry-After). For the eviction API a 429 is a PodDisruptionBudget
//! refusal that the drain must see at once (upstream: event + requeue with its
//! own per-pod backoff), so [`Clients::eviction`] has `default_retry = false`.
//! The leader-election Lease also uses that client: like upstream's separate
//! non-throttled rest config, renewals must neither queue behind the main
//! client's rate limit nor retry past the renew deadline.

pub mod metrics;
mod rate_limit;

use kube::client::ClientBuilder;
use kube::{Client, Config};

pub use metrics::ClientMetrics;
pub use rate_limit::{RateLimit, RateLimitLayer, TokenBucket};

use crate::settings::Settings;

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No kubeconfig and not in a cluster, or an unreadable configuration.
    #[error("inferring the Kubernetes client configuration (kubeconfig or in-cluster)")]
    Infer(#[source] kube::config::InferConfigError),
    /// The configuration could not make a client (TLS, proxy, auth).
    #[error("building the Kubernetes client")]
    Build(#[source] kube::Error),
}

/// The controller's clients.
#[derive(Clone)]
pub struct Clients {
    /// For everything except evictions and the Lease: rate-limited, kube's retries on.
    pub main: Client,
    /// For evictions and the leader Lease: not rate-limited, no automatic retries.
    pub eviction: Client,
    /// The API server's CA bundle as nodes take it (base64 of the PEM certificates), from the
    /// client configuration; `None` when the configuration trusts the system roots.
    pub ca_bundle: Option<String>,
    /// Both clients' requests (`client_go_request_*`), for the metrics registry.
    pub metrics: ClientMetrics,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("default_namespace", &self.main.default_namespace())
            .finish_non_exhaustive()
    }
}

impl Clients {
    /// Infers the configuration (kubeconfig, else in-cluster) and builds both clients.
    pub async fn infer(settings: &Settings) -> Result<Self, ClientError> {
        let config = Config::infer().await.map_err(ClientError::Infer)?;
        Self::from_config(config, settings)
    }

    /// Builds both clients from an explicit configuration.
    pub fn from_config(config: Config, settings: &Settings) -> Result<Self, ClientError> {
        let ca_bundle = config.root_cert.as_deref().and_then(ca_bundle);
        let metrics = ClientMetrics::default();
        let mut eviction_config = config.clone();
        eviction_config.default_retry = false;
        let main = ClientBuilder::try_from(config)
            .map_err(ClientError::Build)?
            .with_layer(&RateLimitLayer::new(
                settings.kube_client_qps,
                settings.kube_client_burst,
            ))
            .with_layer(&metrics.layer())
            .build();
        let eviction = ClientBuilder::try_from(eviction_config)
            .map_err(ClientError::Build)?
            .with_layer(&metrics.layer())
            .build();
        Ok(Self {
            main,
            eviction,
            ca_bundle,
            metrics,
        })
    }
}

/// DER certificates as the base64 PEM bundle `--b64-cluster-ca` and nodeadm take.
fn ca_bundle(certificates: &[Vec<u8>]) -> Option<String> {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    if certificates.is_empty() {
        return None;
    }
    let mut pem = String::new();
    for der in certificates {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = engine.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Some(engine.encode(pem))
}

#[cfg(test)]
mod tests {
    #[test]
    fn der_certificates_become_a_base64_pem_bundle() {
        use base64::Engine;
        let bundle = super::ca_bundle(&[vec![1, 2, 3]]).unwrap_or_default();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&pem),
            "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(super::ca_bundle(&[]), None);
    }
}
