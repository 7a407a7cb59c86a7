//! Small numeric helpers shared by the plan, the lower bound and the timeline.

use k8s_openapi::api::core::v1::PodSpec;
use karpenter_scheduling::ResourceList;

/// One GiB in bytes.
pub const GIB: i64 = 1024 * 1024 * 1024;
/// Hours in a month, as AWS bills them.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Rounds a USD amount to six decimals (prices have at most five).
pub fn round_price(amount: f64) -> f64 {
    // `+ 0.0` turns the -0.0 of an empty float sum into 0.0, so nothing prints "$-0.00".
    (amount * 1e6).round() / 1e6 + 0.0
}

/// CPU millicores of a resource list.
pub fn cpu_millis(list: &ResourceList) -> i64 {
    list.get("cpu").millis_i64()
}

/// Memory bytes of a resource list.
pub fn memory_bytes(list: &ResourceList) -> i64 {
    i64::try_from(list.get("memory").millis() / 1000).unwrap_or(i64::MAX)
}

/// A pod's effective requests (zero when they do not parse; the solver reports those pods).
pub fn pod_requests(spec: Option<&PodSpec>) -> ResourceList {
    karpenter_scheduling::pod::pod_requests(spec).unwrap_or_default()
}
