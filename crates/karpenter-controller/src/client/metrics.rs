//! The Kubernetes clients' requests as upstream counts them (operatorpkg's client-go adapters):
//! `client_go_request_total{code,method}` (the HTTP status, `<error>` without an answer, and
//! the HTTP method) and `client_go_request_duration_seconds{verb,group,version,kind,subresource}`
//! (the resource the path names; the verb as operatorpkg rewrites it: `CREATE` for a POST or a
//! PUT of a collection, `UPDATE` for a PUT of an object, `LIST` for a GET of a collection,
//! `GET`, `PATCH` and `DELETE` otherwise). A tower layer on each client, like the rate limiter.
//!
//! Differences with client-go: a request is counted once, with kube's own retries of a 429 or
//! 503 inside it (client-go counts each try), and its time starts once the client's rate
//! limiter let it go (client-go's includes the wait).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::http::{Request, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tower::{Layer, Service};

use crate::http::Metrics;
use crate::report::metrics::Labels;

/// `prometheus.ExponentialBuckets(0.001, 1.5, 20)`.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 1.5, 20))
}

/// The clients' request metrics (cheap to clone: clones share their series).
#[derive(Debug, Clone)]
pub struct ClientMetrics {
    requests: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        ClientMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
        }
    }
}

/// What a request's path names (operatorpkg's `parsePath`): `None` for a path outside `/api`
/// and `/apis` or too short to name a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub subresource: &'a str,
    /// The path names one object (client-go's URL template has `{name}`).
    pub named: bool,
}

/// Reads a request path.
pub fn resource(path: &str) -> Option<Resource<'_>> {
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    let group_idx = match parts.first() {
        Some(&"api") => 0,
        Some(&"apis") => 1,
        _ => return None,
    };
    if parts.len() < group_idx + 3 {
        return None;
    }
    let version_idx = group_idx + 1;
    let kind_idx = if parts[group_idx + 2] == "namespaces" && parts.len() > group_idx + 4 {
        version_idx + 3
    } else {
        version_idx + 1
    };
    Some(Resource {
        group: if group_idx == 0 { "" } else { parts[group_idx] },
        version: parts[version_idx],
        kind: parts[kind_idx],
        subresource: if parts.len() == kind_idx + 3 {
            parts[kind_idx + 2]
        } else {
            ""
        },
        named: parts.len() > kind_idx + 1,
    })
}

/// operatorpkg's verb for a request of `method` on `resource`.
pub fn verb(method: &str, resource: &Resource<'_>) -> String {
    match method {
        "POST" => "CREATE".to_owned(),
        "GET" if !resource.named => "LIST".to_owned(),
        "PUT" if !resource.named => "CREATE".to_owned(),
        "PUT" => "UPDATE".to_owned(),
        other => other.to_owned(),
    }
}

impl ClientMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &Metrics) {
        registry.register(
            "client_go_request",
            "Number of HTTP requests, partitioned by status code and method.",
            self.requests.clone(),
        );
        registry.register(
            "client_go_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, group, version, kind, and subresource.",
            self.duration.clone(),
        );
    }

    /// The layer that counts a client's requests here.
    pub fn layer(&self) -> ClientMetricsLayer {
        ClientMetricsLayer(self.clone())
    }

    /// A request of `method` to `path` was answered with `status` (`None`: no answer) after
    /// `seconds`.
    pub fn request(&self, method: &str, path: &str, status: Option<u16>, seconds: f64) {
        let code = status.map_or_else(|| "<error>".to_owned(), |s| s.to_string());
        self.requests
            .get_or_create(&vec![("code", code), ("method", method.to_owned())])
            .inc();
        if let Some(r) = resource(path) {
            self.duration
                .get_or_create(&vec![
                    ("verb", verb(method, &r)),
                    ("group", r.group.to_owned()),
                    ("version", r.version.to_owned()),
                    ("kind", r.kind.to_owned()),
                    ("subresource", r.subresource.to_owned()),
                ])
                .observe(seconds);
        }
    }
}

/// The tower layer ([`ClientMetrics::layer`]).
#[derive(Debug, Clone)]
pub struct ClientMetricsLayer(ClientMetrics);

impl<S> Layer<S> for ClientMetricsLayer {
    type Service = Measured<S>;
    fn layer(&self, inner: S) -> Measured<S> {
        Measured {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// A client service whose requests are counted and timed.
#[derive(Debug, Clone)]
pub struct Measured<S> {
    inner: S,
    metrics: ClientMetrics,
}

impl<S, B, RB> Service<Request<B>> for Measured<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        let path = request.uri().path().to_owned();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let status = answer.as_ref().ok().map(|r| r.status().as_u16());
            metrics.request(&method, &path, status, started.elapsed().as_secs_f64());
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_resource_as_operatorpkg_reads_it() {
        let pod = resource("/api/v1/namespaces/shop/pods/web-1").expect("a resource");
        assert_eq!(
            (pod.group, pod.version, pod.kind, pod.subresource, pod.named),
            ("", "v1", "pods", "", true)
        );
        let eviction = resource("/api/v1/namespaces/shop/pods/web-1/eviction").expect("one");
        assert_eq!((eviction.kind, eviction.subresource), ("pods", "eviction"));
        let status = resource("/apis/karpenter.sh/v1/nodeclaims/general-x/status").expect("one");
        assert_eq!(
            (
                status.group,
                status.version,
                status.kind,
                status.subresource
            ),
            ("karpenter.sh", "v1", "nodeclaims", "status")
        );
        let list = resource("/apis/karpenter.sh/v1/nodepools").expect("one");
        assert!(!list.named);
        assert_eq!(verb("GET", &list), "LIST");
        assert_eq!(verb("GET", &pod), "GET");
        assert_eq!(verb("POST", &list), "CREATE");
        assert_eq!(verb("PUT", &status), "UPDATE");
        assert_eq!(verb("PATCH", &status), "PATCH");
        let namespace = resource("/api/v1/namespaces/shop").expect("one");
        assert_eq!((namespace.kind, namespace.named), ("namespaces", true));
        let leases =
            resource("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases").expect("one");
        assert_eq!((leases.kind, leases.named), ("leases", false));
        assert_eq!(resource("/version"), None);
        assert_eq!(resource("/apis"), None);
    }

    #[test]
    fn a_request_is_counted_by_status_and_method_and_timed_by_resource() {
        let registry = Metrics::new();
        let metrics = ClientMetrics::default();
        metrics.register(&registry);
        metrics.request(
            "POST",
            "/api/v1/namespaces/shop/pods/web-1/eviction",
            Some(429),
            0.01,
        );
        metrics.request("GET", "/api/v1/nodes", None, 0.02);
        let text = registry.encode().expect("encodes");
        assert!(
            text.contains("client_go_request_total{code=\"429\",method=\"POST\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("client_go_request_total{code=\"<error>\",method=\"GET\"} 1"),
            "{text}"
        );
        assert!(text.contains("client_go_request_duration_seconds_count{verb=\"CREATE\",group=\"\",version=\"v1\",kind=\"pods\",subresource=\"eviction\"} 1"), "{text}");
        assert!(text.contains("client_go_request_duration_seconds_count{verb=\"LIST\",group=\"\",version=\"v1\",kind=\"nodes\",subresource=\"\"} 1"), "{text}");
    }
}
