//! What the metric files share: a series' labels, a float gauge, upstream's bucket sets.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::gauge::Gauge;

/// A series' labels, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// A float gauge.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// Upstream's `metrics.DurationBuckets()` (shared with the providers' metrics).
pub use karpenter_cloud::metrics::DURATION_BUCKETS;

/// client_golang's `prometheus.DefBuckets`.
pub const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
