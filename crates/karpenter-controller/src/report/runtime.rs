//! controller-runtime's queue and reconciler metrics, as the reconcile driver
//! ([`crate::reconcile::driver`]) produces them for each loop: `workqueue_*{controller,name}`
//! (both the loop's name, as controller-runtime names a controller's queue after it) and the
//! `controller_runtime_*` counters besides `reconcile_total`/`reconcile_errors_total`/
//! `reconcile_time_seconds` (which [`super::metrics::ControllerMetrics::reconciled`] keeps).
//!
//! The driver's queue: a step the scan finds is *added* (`adds_total`, `depth` +1) and waits
//! for a worker (one of the loop's `Shape::concurrency`); when it gets one it leaves
//! the queue (`depth` -1, `queue_duration_seconds`) and runs (`work_duration_seconds` when it
//! ends; `unfinished_work_seconds` and `longest_running_processor_seconds` while it runs,
//! computed when `/metrics` is read, as controller-runtime's 500 ms refresh approximates). A
//! step that failed, or that asks to run again after a delay, is a *retry* (`retries_total`,
//! controller-runtime's "added with a non-zero delay"). The queue has one priority: `depth`
//! carries `priority="0"`, controller-runtime's default priority.
//!
//! The driver has no reconcile timeout and no terminal errors (every failure is retried), and
//! the controller serves no conversion webhook: `controller_runtime_reconcile_timeouts_total`,
//! `controller_runtime_terminal_reconcile_errors_total` and
//! `controller_runtime_conversion_webhook_panics_total` stay 0, as controller-runtime's do
//! under the same conditions (it creates each controller's series at 0).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::series::{FloatGauge, Labels};
use crate::http::Metrics;

/// controller-runtime's workqueue latency buckets: `ExponentialBuckets(10e-9, 10, 12)`, 10 ns
/// to 1,000 s.
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// The steps running now, per queue: when each started.
#[derive(Debug, Clone, Default)]
struct Running(Arc<Mutex<BTreeMap<&'static str, HashMap<u64, Instant>>>>);

impl Running {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<&'static str, HashMap<u64, Instant>>> {
        // Start times only: a panicked holder leaves them usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`,
/// computed from [`Running`] whenever the registry is encoded.
#[derive(Debug)]
struct RunningCollector(Running);

impl Collector for RunningCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let unfinished = Family::<Labels, FloatGauge>::default();
        let longest = Family::<Labels, FloatGauge>::default();
        let now = Instant::now();
        for (name, steps) in self.0.lock().iter() {
            let ages = steps
                .values()
                .map(|started| now.saturating_duration_since(*started).as_secs_f64());
            let (total, oldest) = ages.fold((0.0, 0.0_f64), |(t, o), age| (t + age, o.max(age)));
            let labels = queue_labels(name);
            unfinished.get_or_create(&labels).set(total);
            longest.get_or_create(&labels).set(oldest);
        }
        unfinished.encode(encoder.encode_descriptor(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            None,
            unfinished.metric_type(),
        )?)?;
        longest.encode(encoder.encode_descriptor(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            None,
            longest.metric_type(),
        )?)?;
        Ok(())
    }
}

fn queue_labels(name: &str) -> Labels {
    vec![("name", name.to_owned()), ("controller", name.to_owned())]
}

fn controller_labels(controller: &str) -> Labels {
    vec![("controller", controller.to_owned())]
}

/// The driver's queue and reconciler metrics (cheap to clone: clones share their series).
#[derive(Debug, Clone)]
pub struct RuntimeMetrics {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    retries: Family<Labels, Counter>,
    running: Running,
    terminal_errors: Family<Labels, Counter>,
    panics: Family<Labels, Counter>,
    timeouts: Family<Labels, Counter>,
    next_step: Arc<std::sync::atomic::AtomicU64>,
}

/// A step holding a worker: it leaves [`RuntimeMetrics`]'s running steps, and its work is
/// timed, when dropped (a step that panics included).
#[derive(Debug)]
pub struct Working {
    metrics: RuntimeMetrics,
    queue: &'static str,
    id: u64,
    started: Instant,
}

impl Drop for Working {
    fn drop(&mut self) {
        let mut running = self.metrics.running.lock();
        if let Some(steps) = running.get_mut(self.queue) {
            steps.remove(&self.id);
        }
        drop(running);
        self.metrics
            .work_duration
            .get_or_create(&queue_labels(self.queue))
            .observe(self.started.elapsed().as_secs_f64());
    }
}

impl RuntimeMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Metrics) -> Self {
        let metrics = RuntimeMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            retries: Family::default(),
            running: Running::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            next_step: Arc::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            metrics.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            metrics.retries.clone(),
        );
        registry.with_registry(|r| {
            r.register_collector(Box::new(RunningCollector(metrics.running.clone())));
        });
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            metrics.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            metrics.panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            metrics.timeouts.clone(),
        );
        registry.register(
            "controller_runtime_conversion_webhook_panics",
            "Total number of conversion webhook panics",
            Counter::<u64>::default(),
        );
        metrics
    }

    /// A loop's queue starts: its series at 0, as controller-runtime creates them.
    pub fn queue_started(&self, queue: &'static str) {
        let labels = queue_labels(queue);
        let _ = self.adds.get_or_create(&labels);
        let _ = self.queue_duration.get_or_create(&labels);
        let _ = self.work_duration.get_or_create(&labels);
        let _ = self.retries.get_or_create(&labels);
        self.running.lock().entry(queue).or_default();
        let controller = controller_labels(queue);
        let _ = self.terminal_errors.get_or_create(&controller);
        let _ = self.panics.get_or_create(&controller);
        let _ = self.timeouts.get_or_create(&controller);
    }

    fn depth_labels(queue: &str) -> Labels {
        let mut labels = queue_labels(queue);
        labels.push(("priority", "0".to_owned()));
        labels
    }

    /// A step was added to `queue`.
    pub fn added(&self, queue: &'static str) {
        self.adds.get_or_create(&queue_labels(queue)).inc();
        self.depth.get_or_create(&Self::depth_labels(queue)).inc();
    }

    /// A step of `queue` got a worker after waiting `waited` seconds; it runs until the returned
    /// guard is dropped.
    pub fn working(&self, queue: &'static str, waited: f64) -> Working {
        self.depth.get_or_create(&Self::depth_labels(queue)).dec();
        self.queue_duration
            .get_or_create(&queue_labels(queue))
            .observe(waited);
        let id = self
            .next_step
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = Instant::now();
        self.running
            .lock()
            .entry(queue)
            .or_default()
            .insert(id, started);
        Working {
            metrics: self.clone(),
            queue,
            id,
            started,
        }
    }

    /// A step of `queue` is to run again after a delay (it failed, or asked to).
    pub fn retried(&self, queue: &'static str) {
        self.retries.get_or_create(&queue_labels(queue)).inc();
    }

    /// A step of `controller` panicked.
    pub fn panicked(&self, controller: &str) {
        self.panics
            .get_or_create(&controller_labels(controller))
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, starts: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(starts))
            .unwrap_or_else(|| panic!("no {starts} in:\n{text}"))
    }

    #[test]
    fn a_step_is_queued_then_worked_and_its_work_counted_while_it_runs() {
        let registry = Metrics::new();
        let metrics = RuntimeMetrics::register(&registry);
        metrics.queue_started("provisioner");
        metrics.added("provisioner");
        let text = registry.encode().expect("encodes");
        assert!(
            line(
                &text,
                "workqueue_depth{name=\"provisioner\",controller=\"provisioner\",priority=\"0\"}"
            )
            .ends_with(" 1")
        );
        assert!(line(&text, "workqueue_adds_total{").ends_with(" 1"));
        assert!(
            line(
                &text,
                "controller_runtime_reconcile_panics_total{controller=\"provisioner\"}"
            )
            .ends_with(" 0")
        );
        assert!(line(&text, "workqueue_longest_running_processor_seconds{").ends_with(" 0.0"));
        let working = metrics.working("provisioner", 0.5);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let text = registry.encode().expect("encodes");
        assert!(line(&text, "workqueue_depth{").ends_with(" 0"));
        let longest: f64 = line(&text, "workqueue_longest_running_processor_seconds{")
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a value");
        assert!(longest >= 0.02, "{longest}");
        drop(working);
        let text = registry.encode().expect("encodes");
        assert!(line(&text, "workqueue_unfinished_work_seconds{").ends_with(" 0.0"));
        assert!(line(&text, "workqueue_work_duration_seconds_count{").ends_with(" 1"));
        assert!(line(&text, "workqueue_queue_duration_seconds_sum{").ends_with(" 0.5"));
    }
}
