//! The EC2 provider's metrics, under upstream's names and labels: the AWS SDK's requests
//! (`aws_sdk_go_request_*`, as upstream's aws-sdk-go-prometheus publishes them; recorded by
//! [`crate::clients::SdkMetrics`], the interceptor every client this crate builds carries), the
//! offerings a `CreateFleet` could not launch (`karpenter_cloudprovider_instance_launch_failures_total`),
//! failed terminations (`karpenter_cloudprovider_instance_termination_failures_total`), the
//! size of each EC2NodeClass's user data (`karpenter_ec2nodeclasses_userdata_bytes`) and the
//! request batchers' windows and batch sizes (`karpenter_cloudprovider_batcher_*`, recorded by
//! [`crate::batcher`]).
//!
//! Like upstream's (client_golang's default registry), they are process-wide: [`metrics`] is the
//! one set every client and provider records into, and the controller registers it in its
//! registry ([`AwsMetrics::register`]); this crate has no registry of its own.

use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A series' labels, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// `prometheus.ExponentialBuckets(0.01, 1.5, 20)`: the request latency buckets.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 1.5, 20))
}

/// Upstream's duration buckets: the batching windows.
fn window_histogram() -> Histogram {
    Histogram::new(karpenter_cloud::metrics::DURATION_BUCKETS)
}

/// Upstream's size buckets: the batches.
fn batch_size_histogram() -> Histogram {
    Histogram::new(karpenter_aws::batch::SIZE_BUCKETS)
}

/// 0 to 10 retries.
fn retry_histogram() -> Histogram {
    Histogram::new((0..=10).map(f64::from))
}

/// The provider's metrics (cheap to clone: clones share their series).
#[derive(Debug, Clone)]
pub struct AwsMetrics {
    requests: Family<Labels, Counter>,
    attempts: Family<Labels, Counter>,
    request_duration: Family<Labels, Histogram, fn() -> Histogram>,
    attempt_duration: Family<Labels, Histogram, fn() -> Histogram>,
    retries: Family<Labels, Histogram, fn() -> Histogram>,
    launch_failures: Family<Labels, Counter>,
    termination_failures: Family<Labels, Counter>,
    userdata_bytes: Family<Labels, Gauge>,
    batch_time: Family<Labels, Histogram, fn() -> Histogram>,
    batch_size: Family<Labels, Histogram, fn() -> Histogram>,
}

static METRICS: LazyLock<AwsMetrics> = LazyLock::new(AwsMetrics::new);

/// The process's metrics of the EC2 provider.
pub fn metrics() -> &'static AwsMetrics {
    &METRICS
}

/// What one SDK request did: its service (the SDK's service id, `EC2`), action (`CreateFleet`),
/// each attempt's HTTP status (`-1` without a response) and time on the wire, and the whole
/// request's time.
#[derive(Debug, Clone, PartialEq)]
pub struct SdkRequest {
    pub service: String,
    pub action: String,
    pub attempts: Vec<(i32, f64)>,
    pub seconds: f64,
}

/// A duration as aws-sdk-go-prometheus observes it: whole milliseconds, in seconds.
fn milliseconds(seconds: f64) -> f64 {
    (seconds * 1000.0).trunc() / 1000.0
}

impl AwsMetrics {
    fn new() -> Self {
        AwsMetrics {
            requests: Family::default(),
            attempts: Family::default(),
            request_duration: Family::new_with_constructor(latency_histogram),
            attempt_duration: Family::new_with_constructor(latency_histogram),
            retries: Family::new_with_constructor(retry_histogram),
            launch_failures: Family::default(),
            termination_failures: Family::default(),
            userdata_bytes: Family::default(),
            batch_time: Family::new_with_constructor(window_histogram),
            batch_size: Family::new_with_constructor(batch_size_histogram),
        }
    }

    /// Registers every metric in `registry` (counters without `_total`: prometheus-client adds
    /// it).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "aws_sdk_go_request",
            "The total number of AWS SDK Go requests",
            self.requests.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt",
            "The total number of AWS SDK Go request attempts",
            self.attempts.clone(),
        );
        registry.register(
            "aws_sdk_go_request_duration_seconds",
            "Latency of AWS SDK Go requests",
            self.request_duration.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt_duration_seconds",
            "Latency of AWS SDK Go request attempts",
            self.attempt_duration.clone(),
        );
        registry.register(
            "aws_sdk_go_request_retry_count",
            "The total number of AWS SDK Go retry attempts per request",
            self.retries.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_instance_launch_failures",
            "Number of instance launch (CreateFleet offering) failures, dimensioned by availability zone, zone ID, capacity type, and launch failure reason.",
            self.launch_failures.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_instance_termination_failures",
            "Number of instance termination (TerminateInstances) failures, dimensioned by availability zone and zone ID.",
            self.termination_failures.clone(),
        );
        registry.register(
            "karpenter_ec2nodeclasses_userdata_bytes",
            "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass",
            self.userdata_bytes.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            self.batch_time.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_batcher_batch_size",
            "Size of the request batch per batcher",
            self.batch_size.clone(),
        );
    }

    /// One SDK request, as aws-sdk-go-prometheus publishes it: the request counted and timed
    /// under its last attempt's status (`0` without an attempt), its retries (attempts - 1),
    /// each attempt counted under its own status and timed under the request's.
    pub fn sdk_request(&self, request: &SdkRequest) {
        let labels = |code: i32| {
            vec![
                ("service", request.service.clone()),
                ("action", request.action.clone()),
                ("code", code.to_string()),
            ]
        };
        let status = request.attempts.last().map_or(0, |(code, _)| *code);
        let final_labels = labels(status);
        self.requests.get_or_create(&final_labels).inc();
        self.request_duration
            .get_or_create(&final_labels)
            .observe(milliseconds(request.seconds));
        self.retries
            .get_or_create(&final_labels)
            .observe(request.attempts.len() as f64 - 1.0);
        for (code, seconds) in &request.attempts {
            self.attempts.get_or_create(&labels(*code)).inc();
            self.attempt_duration
                .get_or_create(&final_labels)
                .observe(milliseconds(*seconds));
        }
    }

    /// An offering of a `CreateFleet` failed: its zone (and zone id, empty when unknown), the
    /// capacity type asked for, and upstream's reason for the error code.
    pub fn launch_failure(&self, zone: &str, zone_id: &str, capacity_type: &str, reason: &str) {
        self.launch_failures
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("zone_id", zone_id.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }

    /// A `TerminateInstances` of an instance in `zone` failed.
    pub fn termination_failure(&self, zone: &str, zone_id: &str) {
        self.termination_failures
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("zone_id", zone_id.to_owned()),
            ])
            .inc();
    }

    /// The user data of a launch template made for `node_class` is `bytes` long (raw).
    pub fn userdata_bytes(&self, node_class: &str, bytes: usize) {
        self.userdata_bytes
            .get_or_create(&vec![("nodeclass", node_class.to_owned())])
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A window of the batcher `batcher` (`create_fleet`, ...) closed after `seconds`.
    pub fn batch_window(&self, batcher: &str, seconds: f64) {
        self.batch_time
            .get_or_create(&vec![("batcher", batcher.to_owned())])
            .observe(seconds);
    }

    /// The batcher `batcher` made one call for `size` requests.
    pub fn batch_size(&self, batcher: &str, size: usize) {
        self.batch_size
            .get_or_create(&vec![("batcher", batcher.to_owned())])
            .observe(size as f64);
    }

    /// `node_class`'s launch templates are gone.
    pub fn forget_node_class(&self, node_class: &str) {
        self.userdata_bytes
            .remove(&vec![("nodeclass", node_class.to_owned())]);
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn text(metrics: &AwsMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut out = String::new();
        encode(&mut out, &registry).expect("encodes");
        out
    }

    #[test]
    fn a_retried_request_is_counted_per_attempt_and_timed_in_whole_milliseconds() {
        let metrics = AwsMetrics::new();
        metrics.sdk_request(&SdkRequest {
            service: "EC2".into(),
            action: "CreateFleet".into(),
            attempts: vec![(503, 0.0209), (200, 0.1)],
            seconds: 0.3456,
        });
        let text = text(&metrics);
        for line in [
            "aws_sdk_go_request_total{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1",
            "aws_sdk_go_request_attempt_total{service=\"EC2\",action=\"CreateFleet\",code=\"503\"} 1",
            "aws_sdk_go_request_attempt_total{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1",
            "aws_sdk_go_request_duration_seconds_sum{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 0.345",
            "aws_sdk_go_request_attempt_duration_seconds_count{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 2",
            "aws_sdk_go_request_retry_count_sum{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[test]
    fn batches_are_observed_per_batcher_in_upstreams_buckets() {
        let metrics = AwsMetrics::new();
        metrics.batch_size("create_fleet", 3);
        metrics.batch_window("create_fleet", 0.04);
        let text = text(&metrics);
        for line in [
            "karpenter_cloudprovider_batcher_batch_size_bucket{le=\"2.0\",batcher=\"create_fleet\"} 0",
            "karpenter_cloudprovider_batcher_batch_size_bucket{le=\"4.0\",batcher=\"create_fleet\"} 1",
            "karpenter_cloudprovider_batcher_batch_size_bucket{le=\"1000.0\",batcher=\"create_fleet\"} 1",
            "karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le=\"0.025\",batcher=\"create_fleet\"} 0",
            "karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le=\"0.05\",batcher=\"create_fleet\"} 1",
            "karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le=\"600.0\",batcher=\"create_fleet\"} 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[test]
    fn a_node_class_whose_templates_are_gone_loses_its_user_data_size() {
        let metrics = AwsMetrics::new();
        metrics.userdata_bytes("default", 1234);
        assert!(
            text(&metrics)
                .contains("karpenter_ec2nodeclasses_userdata_bytes{nodeclass=\"default\"} 1234")
        );
        metrics.forget_node_class("default");
        assert!(!text(&metrics).contains("nodeclass=\"default\""));
    }
}
