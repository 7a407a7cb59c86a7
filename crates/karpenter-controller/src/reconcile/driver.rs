//! The driver every controller loop runs on: [`Reconciler`] is the contract a loop implements,
//! [`run`] the one place that schedules it.
//!
//! A loop says three things: which steps to take now (`scan`, a synchronous function of the
//! index and `now`), how to take one (`execute`, thin I/O), and what a failure means
//! (`error_policy`). The driver owns the rest, once for every loop:
//!
//! - **gating**: nothing is scanned before every watched kind has been listed once;
//! - **debounce**: changes of the index wake a scan at most once per [`Shape::debounce`];
//! - **resync**: a scan at least every [`Shape::resync`], and sooner when a scan or a step
//!   asks for it (`requeue_after`);
//! - **dedupe**: at most one step in flight per key; a key whose step is running is offered
//!   to the scan as [`Busy`] so it can skip it before doing any work;
//! - **concurrency**: at most [`Shape::concurrency`] steps execute at once;
//! - **backoff**: a failed step waits per key and step, exponentially
//!   ([`Shape::backoff_first`] doubling up to [`Shape::backoff_max`]) or as long as its error
//!   says ([`Retry::After`]); a conflict is retried at the next scan ([`Retry::Now`]); a failure
//!   is logged as a warning the first time and when its message changes, otherwise at debug;
//! - **metrics**: `controller_runtime_reconcile_total{controller,result}`,
//!   `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_time_seconds`,
//!   `controller_runtime_reconcile_panics_total`, `controller_runtime_active_workers` and
//!   `controller_runtime_max_concurrent_reconciles`, labelled with the loop's upstream name, and
//!   its queue's `workqueue_*{controller,name}` ([`crate::report::runtime`]); the step runs with
//!   its loop's name as [`super::context::CONTROLLER`], for what it measures (the cloud's calls);
//! - **shutdown**: once cancelled, no step starts and the steps in flight finish (the run loop
//!   bounds that with its drain timeout).
//!
//! kube-runtime's `Controller` is not used: it opens a watch and a reflector store per kind
//! and controller, while every loop here reads the one shared, slimmed index
//! ([`crate::cluster::index::ClusterCache`]) that is why the controller needs a sixth of
//! upstream's memory. The driver gives the loops what `Controller` would: its guarantees are
//! those listed above.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_state::Cluster;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::context::CONTROLLER;
use crate::cluster::index::ClusterCache;
use crate::leader::Fence;
use crate::report::metrics::{ControllerMetrics, Reconciled};

/// How the driver paces a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Changes of the index wake a scan at most this often.
    pub debounce: Duration,
    /// A scan at least this often, changes or not.
    pub resync: Duration,
    /// Whether changes of the index wake a scan at all (a periodic loop's do not).
    pub on_change: bool,
    /// Steps executing at once, at most.
    pub concurrency: usize,
    /// A failed step's first wait (doubling after each further failure).
    pub backoff_first: Duration,
    /// Its longest wait.
    pub backoff_max: Duration,
}

impl Shape {
    /// A loop woken by changes (at most every `debounce`) and every `resync`, one step at a
    /// time, failures backing off 1 s doubling to 5 minutes.
    pub const fn new(debounce: Duration, resync: Duration) -> Self {
        Shape {
            debounce,
            resync,
            on_change: true,
            concurrency: 1,
            backoff_first: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }

    /// A loop that runs every `interval`, whatever changes.
    pub const fn periodic(interval: Duration) -> Self {
        Shape {
            on_change: false,
            ..Shape::new(interval, interval)
        }
    }

    /// At most `concurrency` steps at once.
    pub const fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Failed steps wait `first`, doubling, at most `max`.
    pub const fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff_first = first;
        self.backoff_max = max;
        self
    }
}

/// The keys with a step in flight, as a scan sees them.
#[derive(Debug, Clone, Copy)]
pub struct Busy<'a>(&'a HashSet<String>);

impl Busy<'_> {
    /// Nothing is in flight (tests, one-off scans).
    pub fn none() -> Busy<'static> {
        Busy(&EMPTY)
    }

    /// These keys in flight (tests of a scan).
    #[cfg(test)]
    pub fn new(keys: &HashSet<String>) -> Busy<'_> {
        Busy(keys)
    }

    /// A step for `key` is in flight: the driver will not start another.
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }
}

static EMPTY: std::sync::LazyLock<HashSet<String>> = std::sync::LazyLock::new(HashSet::new);

/// What a scan found to do: steps by key, and when to look again if nothing changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan<S> {
    steps: Vec<(String, S)>,
    requeue_after: Option<Duration>,
}

impl<S> Default for Scan<S> {
    fn default() -> Self {
        Scan {
            steps: Vec::new(),
            requeue_after: None,
        }
    }
}

impl<S> Scan<S> {
    /// Nothing to do.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `step` for `key` (one per key: a later one for the same key is dropped).
    pub fn step(&mut self, key: impl Into<String>, step: S) {
        self.steps.push((key.into(), step));
    }

    /// Look again after `after` at the latest (the soonest of every call wins).
    pub fn requeue_after(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }

    /// The steps, in the order found.
    pub fn steps(&self) -> &[(String, S)] {
        &self.steps
    }

    /// When to look again, if a step's time is known.
    pub fn requeue(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The steps, taken.
    pub fn into_steps(self) -> Vec<(String, S)> {
        self.steps
    }
}

/// How a step ended well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Done: the next step for the key waits for a change (or the resync).
    AwaitChange,
    /// Done for now: look again after this long even if nothing changes.
    RequeueAfter(Duration),
}

/// What to do after a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again with the key's exponential backoff (a transient failure).
    Backoff,
    /// Try again at the next scan, from what the index then holds (a conflict: someone
    /// wrote the object first).
    Now,
    /// Try again after exactly this long (the failure said when).
    After(Duration),
}

/// A controller loop: what the driver needs of it.
pub trait Reconciler: Send + Sync + 'static {
    /// What the loop does to one key.
    type Step: Send + 'static;
    /// Why a step failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The loop's name (upstream's controller name): the `controller` label of the reconcile
    /// metrics and the `controller` field of its logs.
    const NAME: &'static str;

    /// How the driver paces it.
    fn shape(&self) -> Shape;

    /// The steps to take now, from the index at `now`. Pure: it reads and decides, it does not
    /// write. Keys in `busy` will not be started; skip them before doing any work.
    fn scan(&self, cluster: &Cluster, now: DateTime<Utc>, busy: Busy<'_>) -> Scan<Self::Step>;

    /// Performs one step.
    fn execute(&self, step: Self::Step)
    -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// What a failure means.
    fn error_policy(&self, error: &Self::Error) -> Retry;

    /// A step's name, for logs and backoff (a different step of a key is a new start).
    fn step_name(step: &Self::Step) -> &'static str;

    /// The `controller` label a step's reconcile metrics carry: [`Reconciler::NAME`], unless
    /// one loop does the work of two upstream controllers.
    fn controller(step: &Self::Step) -> &'static str {
        let _ = step;
        Self::NAME
    }
}

/// How one executed step ended, as its task reports it.
struct Finished<E> {
    key: String,
    step: &'static str,
    controller: &'static str,
    /// `None`: not executed, leadership was not confirmed when its turn came.
    result: Option<Result<Action, E>>,
    seconds: f64,
}

/// Runs `reconciler` on `cache` until `cancel` trips, then lets the steps in flight finish.
/// A step starts only while `fence` is open (leadership confirmed).
pub async fn run<R: Reconciler>(
    reconciler: Arc<R>,
    cache: ClusterCache,
    metrics: ControllerMetrics,
    fence: Fence,
    cancel: CancellationToken,
) {
    let shape = reconciler.shape();
    let mut driver = Driver::<R> {
        shape,
        busy: HashSet::new(),
        running: HashMap::new(),
        backoff: Backoff::new(shape.backoff_first, shape.backoff_max),
        metrics: metrics.clone(),
        permits: Arc::new(Semaphore::new(shape.concurrency.max(1))),
        tasks: JoinSet::new(),
        fence,
    };
    metrics.loop_started(R::NAME);
    metrics.max_concurrent_reconciles(R::NAME, shape.concurrency.max(1));
    metrics.active_workers(R::NAME, 0);
    let mut changes = cache.changes(shape.debounce);
    let mut next_scan = Instant::now();
    loop {
        if Instant::now() >= next_scan {
            next_scan = driver.scan(&reconciler, &cache);
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = changes.changed(), if shape.on_change => next_scan = Instant::now(),
            Some(joined) = driver.tasks.join_next_with_id(), if !driver.tasks.is_empty() => {
                let wake = driver.finished(&reconciler, joined);
                next_scan = next_scan.min(wake);
            }
            () = tokio::time::sleep_until(next_scan) => {}
        }
    }
    while let Some(joined) = driver.tasks.join_next_with_id().await {
        driver.finished(&reconciler, joined);
    }
    metrics.active_workers(R::NAME, 0);
}

/// The driver's memory of one loop.
struct Driver<R: Reconciler> {
    shape: Shape,
    /// Keys with a step in flight.
    busy: HashSet<String>,
    /// Which key and step each task runs (a task that panicked is known by its id only).
    running: HashMap<tokio::task::Id, (String, &'static str)>,
    backoff: Backoff,
    metrics: ControllerMetrics,
    permits: Arc<Semaphore>,
    tasks: JoinSet<Finished<R::Error>>,
    fence: Fence,
}

impl<R: Reconciler> Driver<R> {
    /// Scans (once the index is synced) and starts the steps found; when to scan next.
    fn scan(&mut self, reconciler: &Arc<R>, cache: &ClusterCache) -> Instant {
        let now = Instant::now();
        let mut next = now + self.shape.resync;
        if !cache.synced() {
            // Listing takes a moment; look again soon rather than after a whole resync.
            return now + self.shape.debounce.min(self.shape.resync);
        }
        let scan = {
            let cluster = cache.lock();
            reconciler.scan(&cluster, chrono::Utc::now(), Busy(&self.busy))
        };
        if let Some(after) = scan.requeue() {
            next = next.min(now + after);
        }
        let mut seen: HashSet<String> = HashSet::new();
        for (key, step) in scan.into_steps() {
            if self.busy.contains(&key) || !seen.insert(key.clone()) {
                continue;
            }
            let name = R::step_name(&step);
            if let Some(until) = self.backoff.waiting(&key, name, now) {
                next = next.min(until);
                continue;
            }
            self.start(reconciler, key, name, step);
        }
        next
    }

    fn start(&mut self, reconciler: &Arc<R>, key: String, name: &'static str, step: R::Step) {
        tracing::trace!(controller = R::NAME, %key, step = name, "starting a step");
        self.busy.insert(key.clone());
        let (reconciler, permits, metrics, fence) = (
            Arc::clone(reconciler),
            Arc::clone(&self.permits),
            self.metrics.clone(),
            self.fence.clone(),
        );
        let task_key = key.clone();
        let controller = R::controller(&step);
        let concurrency = self.shape.concurrency.max(1);
        metrics.runtime.added(R::NAME);
        let queued = Instant::now();
        let handle = self.tasks.spawn(async move {
            let semaphore = Arc::clone(&permits);
            // The semaphore is never closed: acquiring cannot fail (and would only mean
            // running without the bound).
            let _permit = permits.acquire_owned().await;
            // Until the step ends (or panics): it runs, holding a worker.
            let _working = metrics
                .runtime
                .working(R::NAME, queued.elapsed().as_secs_f64());
            metrics.active_workers(
                R::NAME,
                concurrency.saturating_sub(semaphore.available_permits()),
            );
            let started = std::time::Instant::now();
            // Checked after the wait for a permit, which can be long: a replica paused past
            // its renew deadline starts nothing when it wakes up.
            let result = match fence.check() {
                Ok(()) => Some(CONTROLLER.scope(controller, reconciler.execute(step)).await),
                Err(fenced) => {
                    tracing::warn!(controller = R::NAME, key = %task_key, step = name, %fenced, "step not started");
                    None
                }
            };
            Finished {
                key: task_key,
                step: name,
                controller,
                result,
                seconds: started.elapsed().as_secs_f64(),
            }
        });
        self.running.insert(handle.id(), (key, name));
    }

    /// Records a finished step; when to scan next because of it.
    fn finished(
        &mut self,
        reconciler: &Arc<R>,
        joined: Result<(tokio::task::Id, Finished<R::Error>), tokio::task::JoinError>,
    ) -> Instant {
        let now = Instant::now();
        // A finished step may have left work its key could not be given while it ran: a loop
        // woken by changes looks again after its debounce.
        let mut wake = if self.shape.on_change {
            now + self.shape.debounce
        } else {
            now + self.shape.resync
        };
        self.metrics.active_workers(
            R::NAME,
            (self.shape.concurrency.max(1)).saturating_sub(self.permits.available_permits()),
        );
        let finished = match joined {
            Ok((id, finished)) => {
                self.running.remove(&id);
                finished
            }
            Err(join_error) => {
                let (key, step) = self
                    .running
                    .remove(&join_error.id())
                    .unwrap_or_else(|| (String::new(), "unknown"));
                tracing::error!(controller = R::NAME, %key, step, error = %join_error, "a step panicked; it is retried with backoff");
                if join_error.is_panic() {
                    self.metrics.runtime.panicked(R::NAME);
                }
                self.metrics.reconciled(R::NAME, Reconciled::Error, 0.0);
                self.metrics.runtime.retried(R::NAME);
                self.busy.remove(&key);
                let failed = self
                    .backoff
                    .failed(&key, step, &join_error.to_string(), now);
                return wake.min(now + failed.delay);
            }
        };
        self.busy.remove(&finished.key);
        let Finished {
            key,
            step,
            controller,
            result,
            seconds,
        } = finished;
        let Some(result) = result else {
            // Not executed: the election ends this run shortly; nothing is counted.
            return wake;
        };
        match result {
            Ok(action) => {
                self.backoff.succeeded(&key, step);
                let result = match action {
                    Action::AwaitChange => Reconciled::Success,
                    Action::RequeueAfter(after) => {
                        wake = wake.min(now + after);
                        if !after.is_zero() {
                            self.metrics.runtime.retried(R::NAME);
                        }
                        Reconciled::RequeueAfter
                    }
                };
                self.metrics.reconciled(controller, result, seconds);
            }
            Err(error) => {
                self.metrics
                    .reconciled(controller, Reconciled::Error, seconds);
                // Retried: at once from a fresher copy, or after a backoff.
                self.metrics.runtime.retried(R::NAME);
                let message = error.to_string();
                match reconciler.error_policy(&error) {
                    Retry::Now => {
                        tracing::debug!(controller = R::NAME, %key, step, error = %message, "step conflicted; retried from a fresher copy");
                    }
                    retry => {
                        let failed = match retry {
                            Retry::After(delay) => {
                                self.backoff.failed_for(&key, step, &message, delay, now)
                            }
                            _ => self.backoff.failed(&key, step, &message, now),
                        };
                        if failed.news {
                            tracing::warn!(controller = R::NAME, %key, step, error = %message, failures = failed.count, retry_in = ?failed.delay, "step failed; retrying");
                        } else {
                            tracing::debug!(controller = R::NAME, %key, step, error = %message, failures = failed.count, retry_in = ?failed.delay, "step failed again");
                        }
                        wake = wake.min(now + failed.delay);
                    }
                }
            }
        }
        wake
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
