//! The metrics registry every module registers into, and `karpenter_build_info`.
//!
//! Owns the one prometheus-client [`Registry`] of the process and its
//! OpenMetrics text encoding. It does not define the domain metrics: the
//! modules that observe something register their own metric here, under
//! upstream's exact name. prometheus-client appends `_total` to counters
//! itself, so a counter exported as `karpenter_nodes_created_total` is
//! registered as `karpenter_nodes_created`. Summaries, which prometheus-client lacks, are
//! registered with [`Metrics::register_summary`] and written after the registry's metrics.

use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

use super::summary::Summary;

/// The OpenMetrics text content type served on `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the metrics could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A metric failed to encode (prometheus-client reports no detail).
    #[error("encoding the metrics registry as OpenMetrics text")]
    Encode(#[source] std::fmt::Error),
}

/// The process-wide metrics registry; cheap to clone, shared by all modules.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    summaries: Arc<Mutex<Vec<RegisteredSummary>>>,
}

#[derive(Debug)]
struct RegisteredSummary {
    name: String,
    help: String,
    summary: Summary,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The last line of an OpenMetrics exposition.
const EOF: &str = "# EOF\n";

/// Labels of `karpenter_build_info`. Upstream's names are kept; for a Rust
/// build `goversion` holds the compiler (`rust1.91.0`) and `goarch` the
/// architecture in Go's spelling (`amd64`, `arm64`).
pub type BuildInfoLabels = Vec<(&'static str, String)>;

impl Metrics {
    /// An empty registry with `karpenter_build_info` registered.
    pub fn new() -> Self {
        let metrics = Self {
            registry: Arc::new(Mutex::new(Registry::default())),
            summaries: Arc::new(Mutex::new(Vec::new())),
        };
        let build_info = Family::<BuildInfoLabels, Gauge>::default();
        build_info.get_or_create(&build_info_labels()).set(1);
        metrics.register(
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            build_info,
        );
        metrics
    }

    /// Registers `metric` under its full name (e.g. `karpenter_nodes_created`
    /// for the counter `karpenter_nodes_created_total`). Keep a clone of the
    /// metric to update it: prometheus-client metrics share their value.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.lock().register(name, help, metric);
    }

    /// Registers a summary under its full name (`_sum`, `_count` and the `quantile` series
    /// are derived from it). Keep a clone to observe into it.
    pub fn register_summary(&self, name: &str, help: &str, summary: Summary) {
        self.summaries().push(RegisteredSummary {
            name: name.to_owned(),
            help: help.to_owned(),
            summary,
        });
    }

    /// Direct access for what [`Metrics::register`] does not cover
    /// (units, collectors, sub-registries).
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        f(&mut self.lock())
    }

    /// The registry as OpenMetrics text (ends with `# EOF`).
    pub fn encode(&self) -> Result<String, MetricsError> {
        let mut out = String::new();
        encode(&mut out, &self.lock()).map_err(MetricsError::Encode)?;
        let summaries = self.summaries();
        if summaries.is_empty() {
            return Ok(out);
        }
        // The summaries go before the registry's closing `# EOF`.
        if out.ends_with(EOF) {
            out.truncate(out.len() - EOF.len());
        }
        let now = std::time::Instant::now();
        for s in summaries.iter() {
            s.summary.encode(&s.name, &s.help, &mut out, now);
        }
        out.push_str(EOF);
        Ok(out)
    }

    fn summaries(&self) -> MutexGuard<'_, Vec<RegisteredSummary>> {
        self.summaries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves the registry usable: recover it.
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn build_info_labels() -> BuildInfoLabels {
    vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("goversion", env!("KARPENTER_RUSTC_VERSION").to_string()),
        ("goarch", go_arch(std::env::consts::ARCH).to_string()),
        ("commit", env!("KARPENTER_BUILD_COMMIT").to_string()),
    ]
}

/// Rust's architecture names in Go's spelling (what upstream's dashboards see).
fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn a_new_registry_exports_build_info_with_upstream_labels() {
        let text = Metrics::new().encode().expect("encodes");
        let line = text
            .lines()
            .find(|l| l.starts_with("karpenter_build_info{"))
            .unwrap_or_else(|| panic!("no build info in:\n{text}"));
        assert!(
            line.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
            "{line}"
        );
        assert!(line.contains("goversion=\"rust"), "{line}");
        assert!(line.contains("goarch=\""), "{line}");
        assert!(line.contains("commit=\""), "{line}");
        assert!(line.ends_with(" 1"), "{line}");
        assert!(text.contains("# TYPE karpenter_build_info gauge"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_registered_counter_is_exported_with_the_total_suffix_and_its_value() {
        let metrics = Metrics::new();
        let created = Family::<Vec<(&'static str, String)>, Counter>::default();
        metrics.register(
            "karpenter_nodes_created",
            "Number of nodes created.",
            created.clone(),
        );
        created
            .get_or_create(&vec![("nodepool", "default".to_string())])
            .inc_by(3);
        let text = metrics.encode().expect("encodes");
        assert!(
            text.contains("karpenter_nodes_created_total{nodepool=\"default\"} 3"),
            "{text}"
        );
    }

    #[test]
    fn a_registered_summary_is_exported_before_the_end_marker() {
        let metrics = Metrics::new();
        let summary = Summary::default();
        metrics.register_summary(
            "karpenter_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
            summary.clone(),
        );
        summary.observe(Vec::new(), 2.5);
        let text = metrics.encode().expect("encodes");
        assert!(
            text.contains("# TYPE karpenter_pods_startup_duration_seconds summary\n"),
            "{text}"
        );
        assert!(
            text.contains("karpenter_pods_startup_duration_seconds{quantile=\"0.5\"} 2.5\n"),
            "{text}"
        );
        assert!(
            text.contains("karpenter_pods_startup_duration_seconds_count 1\n"),
            "{text}"
        );
        assert!(text.contains("karpenter_build_info{"), "{text}");
        assert!(text.ends_with("\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    }

    #[test]
    fn architectures_use_go_names() {
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("riscv64"), "riscv64");
    }
}
