//! What each controller's last scheduling simulation observed, as upstream v1.15's scheduler
//! gauges: `karpenter_scheduler_queue_depth{controller,scheduling_id}` (the pods still in the
//! solver's queue when it stopped: 0 when all found a place) and
//! `karpenter_scheduler_pending_pods_by_effective_zone_count{controller,zone}` (the simulation's
//! pending pods per effective zone: a zone, `flexible` or `none`).
//!
//! Upstream deletes a controller's series when its next simulation starts and sets them as it
//! goes; here a controller's series are replaced when its simulation ends (the solver runs a
//! batch in one call), and encoded from that record when the registry is read.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use karpenter_scheduling::SolveStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::metrics::Labels;

/// One simulation's observations, with its id.
#[derive(Debug, Clone)]
struct Observed {
    scheduling_id: String,
    stats: SolveStats,
}

/// The last observations per controller.
#[derive(Debug, Clone, Default)]
pub struct SchedulerGauges(Arc<Mutex<BTreeMap<String, Observed>>>);

impl SchedulerGauges {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Observed>> {
        // Plain values replaced whole: a panicked holder leaves them usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `controller`'s simulation `scheduling_id` ended having observed `stats`; its series
    /// replace the controller's previous ones.
    pub fn observed(&self, controller: &str, scheduling_id: &str, stats: &SolveStats) {
        self.lock().insert(
            controller.to_owned(),
            Observed {
                scheduling_id: scheduling_id.to_owned(),
                stats: stats.clone(),
            },
        );
    }

    /// The collector to register, reading this record.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(SchedulerCollector(self.clone()))
    }
}

#[derive(Debug)]
struct SchedulerCollector(SchedulerGauges);

fn gauge(value: usize) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

impl Collector for SchedulerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let depth = Family::<Labels, Gauge>::default();
        let zones = Family::<Labels, Gauge>::default();
        for (controller, observed) in self.0.lock().iter() {
            depth
                .get_or_create(&vec![
                    ("controller", controller.clone()),
                    ("scheduling_id", observed.scheduling_id.clone()),
                ])
                .set(gauge(observed.stats.queue_depth).get());
            for (zone, pods) in &observed.stats.pending_by_effective_zone {
                zones
                    .get_or_create(&vec![
                        ("controller", controller.clone()),
                        ("zone", zone.clone()),
                    ])
                    .set(gauge(*pods).get());
            }
        }
        depth.encode(encoder.encode_descriptor(
            "karpenter_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            None,
            depth.metric_type(),
        )?)?;
        zones.encode(encoder.encode_descriptor(
            "karpenter_scheduler_pending_pods_by_effective_zone_count",
            "Pending pods dimensioned by effective zone constraint, or the intersection of pod-level zone signals, volume topology (PVC zones), and topology constraints. Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), or 'none' (no valid intersection).",
            None,
            zones.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Metrics;

    fn stats(depth: usize, zones: &[(&str, usize)]) -> SolveStats {
        SolveStats {
            queue_depth: depth,
            pending_by_effective_zone: zones.iter().map(|(z, n)| ((*z).to_owned(), *n)).collect(),
        }
    }

    #[test]
    fn a_controllers_next_simulation_replaces_its_series() {
        let registry = Metrics::default();
        let gauges = SchedulerGauges::default();
        registry.with_registry(|r| r.register_collector(gauges.collector()));
        gauges.observed(
            "provisioner",
            "id-1",
            &stats(2, &[("us-west-2a", 3), ("flexible", 1)]),
        );
        let text = registry.encode().expect("encodes");
        assert!(text.contains(
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id="id-1"} 2"#
        ), "{text}");
        assert!(text.contains(
            r#"karpenter_scheduler_pending_pods_by_effective_zone_count{controller="provisioner",zone="us-west-2a"} 3"#
        ), "{text}");
        gauges.observed("provisioner", "id-2", &stats(0, &[("none", 1)]));
        let text = registry.encode().expect("encodes");
        assert!(text.contains(
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id="id-2"} 0"#
        ), "{text}");
        assert!(!text.contains("id-1"), "{text}");
        assert!(!text.contains(r#"zone="us-west-2a""#), "{text}");
        assert!(text.contains(r#"zone="none"} 1"#), "{text}");
    }
}
