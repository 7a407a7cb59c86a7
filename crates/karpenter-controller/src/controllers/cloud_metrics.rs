//! Upstream's `cloudprovider.metrics` (and the instance-type provider's gauges): every minute,
//! from the instance types the NodePools were last listed ([`crate::reconcile::catalogs`]), each
//! offering's availability and price (`karpenter_cloudprovider_instance_type_offering_available`,
//! `karpenter_cloudprovider_instance_type_offering_price_estimate`, by instance type, capacity
//! type and zone: available if any NodePool can launch it, the price of the last NodePool that
//! lists it) and each instance type's vCPUs and memory (`karpenter_cloudprovider_instance_type_cpu_cores`,
//! `karpenter_cloudprovider_instance_type_memory_bytes`, from its `karpenter.k8s.aws/instance-cpu`
//! and `instance-memory` labels, as EC2 describes them: before any overhead).
//!
//! Upstream lists, for each NodePool, every instance type of its node class; karpenter-rs lists
//! only those the NodePool's requirements allow (`karpenter_cloud::pool_types::narrow`), so the
//! series cover the instance types the NodePools may launch. An offering or type no NodePool
//! lists any more loses its series (upstream's stay until the process restarts).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_scheduling::InstanceType;
use karpenter_state::Cluster;
use prometheus_client::metrics::family::Family;

use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::{FloatGauge, Labels};

/// Upstream's interval.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// The loop.
#[derive(Debug)]
pub struct CloudMetrics<C> {
    pub ctx: Context<C>,
    series: Mutex<Series>,
}

impl<C> CloudMetrics<C> {
    pub fn new(ctx: Context<C>) -> Self {
        CloudMetrics {
            ctx,
            series: Mutex::default(),
        }
    }
}

/// The series the last pass set, per gauge.
#[derive(Debug, Default)]
struct Series {
    available: HashSet<Labels>,
    price: HashSet<Labels>,
    cpu: HashSet<Labels>,
    memory: HashSet<Labels>,
}

/// The one step: rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuild;

/// What the gauges say, from every NodePool's instance types.
#[derive(Debug, Default, PartialEq)]
pub struct Gauges {
    /// (instance type, capacity type, zone) -> available in some NodePool.
    pub available: HashMap<(String, String, String), bool>,
    /// (instance type, capacity type, zone) -> price.
    pub price: HashMap<(String, String, String), f64>,
    /// instance type -> vCPUs.
    pub cpu: HashMap<String, f64>,
    /// instance type -> bytes.
    pub memory: HashMap<String, f64>,
}

/// The value of the instance type's `key` label, as a number.
fn label_number(it: &InstanceType, key: &str) -> Option<f64> {
    it.requirements
        .iter()
        .find(|r| r.key == key)
        .and_then(|r| r.values.first())
        .and_then(|v| v.parse().ok())
}

/// The gauges of `pools` (each NodePool's instance types, in NodePool order).
pub fn gauges<'a>(pools: impl IntoIterator<Item = &'a Vec<InstanceType>>) -> Gauges {
    let mut out = Gauges::default();
    for types in pools {
        for it in types {
            for offering in &it.offerings {
                let key = (
                    it.name.clone(),
                    offering.capacity_type.clone(),
                    offering.zone.clone(),
                );
                *out.available.entry(key.clone()).or_default() |= offering.available;
                out.price.insert(key, offering.price);
            }
            if let Some(cpu) = label_number(it, labels::INSTANCE_CPU) {
                out.cpu.insert(it.name.clone(), cpu);
            }
            if let Some(mib) = label_number(it, labels::INSTANCE_MEMORY) {
                out.memory.insert(it.name.clone(), mib * 1024.0 * 1024.0);
            }
        }
    }
    out
}

/// Sets `wanted` in `family`, removes what `previous` had that is not wanted any more, and
/// remembers `wanted`.
fn replace(
    family: &Family<Labels, FloatGauge>,
    previous: &mut HashSet<Labels>,
    wanted: HashMap<Labels, f64>,
) {
    for old in previous.iter() {
        if !wanted.contains_key(old) {
            family.remove(old);
        }
    }
    previous.clear();
    for (labels, value) in wanted {
        family.get_or_create(&labels).set(value);
        previous.insert(labels);
    }
}

fn offering_labels((it, capacity_type, zone): (String, String, String)) -> Labels {
    vec![
        ("instance_type", it),
        ("capacity_type", capacity_type),
        ("zone", zone),
    ]
}

impl<C: Send + Sync + 'static> Reconciler for CloudMetrics<C> {
    type Step = Rebuild;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "cloudprovider.metrics";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Rebuild> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Rebuild);
        }
        scan
    }

    async fn execute(&self, _: Rebuild) -> Result<Action, std::convert::Infallible> {
        // None listed yet (or a listing under way): look again soon.
        let Some(catalogs) = self.ctx.catalogs.latest() else {
            return Ok(Action::RequeueAfter(Duration::from_secs(5)));
        };
        let gauges = gauges(catalogs.instance_types.values());
        let metrics = &self.ctx.metrics;
        let mut series = match self.series.lock() {
            Ok(series) => series,
            // Only the label sets of the last pass: keep using them.
            Err(poisoned) => poisoned.into_inner(),
        };
        let available = gauges
            .available
            .into_iter()
            .map(|(k, v)| (offering_labels(k), if v { 1.0 } else { 0.0 }))
            .collect();
        replace(
            &metrics.instance_type_offering_available,
            &mut series.available,
            available,
        );
        let price = gauges
            .price
            .into_iter()
            .map(|(k, v)| (offering_labels(k), v))
            .collect();
        replace(
            &metrics.instance_type_offering_price,
            &mut series.price,
            price,
        );
        let by_type = |m: HashMap<String, f64>| -> HashMap<Labels, f64> {
            m.into_iter()
                .map(|(it, v)| (vec![("instance_type", it)], v))
                .collect()
        };
        replace(
            &metrics.instance_type_cpu_cores,
            &mut series.cpu,
            by_type(gauges.cpu),
        );
        replace(
            &metrics.instance_type_memory_bytes,
            &mut series.memory,
            by_type(gauges.memory),
        );
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Rebuild) -> &'static str {
        "gauges"
    }
}

#[cfg(test)]
mod tests {
    use karpenter_scheduling::{Offering, Operator, RequirementSpec, ResourceList};

    use super::*;

    fn it(name: &str, offerings: &[(&str, &str, f64, bool)]) -> InstanceType {
        let requirement = |key: &str, value: &str| RequirementSpec {
            key: key.to_owned(),
            operator: Operator::In,
            values: vec![value.to_owned()],
            min_values: None,
        };
        InstanceType {
            name: name.to_owned(),
            requirements: vec![
                requirement(labels::INSTANCE_CPU, "2"),
                requirement(labels::INSTANCE_MEMORY, "8192"),
            ],
            offerings: offerings
                .iter()
                .map(|(zone, ct, price, available)| Offering {
                    zone: (*zone).to_owned(),
                    capacity_type: (*ct).to_owned(),
                    price: *price,
                    available: *available,
                    requirements: Vec::new(),
                    reservation_capacity: 0,
                })
                .collect(),
            capacity: ResourceList::new(),
            overhead: Default::default(),
        }
    }

    #[test]
    fn an_offering_is_available_if_any_nodepool_can_launch_it() {
        let general = vec![it("m5.large", &[("us-east-1a", "spot", 0.04, false)])];
        let critical = vec![it(
            "m5.large",
            &[
                ("us-east-1a", "spot", 0.05, true),
                ("us-east-1a", "on-demand", 0.096, true),
            ],
        )];
        let g = gauges([&general, &critical]);
        let key = |ct: &str| {
            (
                "m5.large".to_owned(),
                ct.to_owned(),
                "us-east-1a".to_owned(),
            )
        };
        assert!(g.available[&key("spot")]);
        assert_eq!(g.price[&key("spot")], 0.05, "the last NodePool's price");
        assert_eq!(g.price[&key("on-demand")], 0.096);
        assert_eq!(g.cpu["m5.large"], 2.0);
        assert_eq!(g.memory["m5.large"], 8_589_934_592.0);
    }
}
