//! The driver's guarantees, on a fake loop and tokio's paused clock (no API server).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_state::Cluster;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::cluster::index::ClusterCache;
use crate::http::Metrics;
use crate::leader::Fence;
use crate::report::metrics::ControllerMetrics;

/// What the fake's step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeed,
    Fail(Retry),
}

/// A loop whose scan offers `keys` every time, and whose steps take `takes` and end as
/// `outcome` says; it records what ran when.
#[derive(Debug)]
struct Fake {
    keys: Vec<String>,
    takes: Duration,
    outcome: Outcome,
    shape: Shape,
    /// Asked of every scan.
    requeue_after: Option<Duration>,
    scans: AtomicUsize,
    /// (key, started at) of every step.
    started: Mutex<Vec<(String, Instant)>>,
    running: Mutex<HashSet<String>>,
    peak: AtomicUsize,
    finished: AtomicUsize,
    /// A key ran twice at once.
    overlapped: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
#[error("fake failure")]
struct FakeError(Retry);

impl Fake {
    fn new(keys: &[&str], shape: Shape) -> Self {
        Fake {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            takes: Duration::from_millis(10),
            outcome: Outcome::Succeed,
            shape,
            requeue_after: None,
            scans: AtomicUsize::new(0),
            started: Mutex::new(Vec::new()),
            running: Mutex::new(HashSet::new()),
            peak: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            overlapped: AtomicUsize::new(0),
        }
    }

    fn starts(&self, key: &str) -> Vec<Instant> {
        self.started
            .lock()
            .map(|s| {
                s.iter()
                    .filter(|(k, _)| k == key)
                    .map(|(_, t)| *t)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Reconciler for Fake {
    type Step = String;
    type Error = FakeError;
    const NAME: &'static str = "fake";

    fn shape(&self) -> Shape {
        self.shape
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, _: Busy<'_>) -> Scan<String> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        let mut scan = Scan::new();
        for key in &self.keys {
            scan.step(key.clone(), key.clone());
        }
        if let Some(after) = self.requeue_after {
            scan.requeue_after(after);
        }
        scan
    }

    async fn execute(&self, key: String) -> Result<Action, FakeError> {
        if let Ok(mut started) = self.started.lock() {
            started.push((key.clone(), Instant::now()));
        }
        let now_running = match self.running.lock() {
            Ok(mut running) => {
                if !running.insert(key.clone()) {
                    self.overlapped.fetch_add(1, Ordering::SeqCst);
                }
                running.len()
            }
            Err(_) => 0,
        };
        self.peak.fetch_max(now_running, Ordering::SeqCst);
        tokio::time::sleep(self.takes).await;
        if let Ok(mut running) = self.running.lock() {
            running.remove(&key);
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        match self.outcome {
            Outcome::Succeed => Ok(Action::AwaitChange),
            Outcome::Fail(retry) => Err(FakeError(retry)),
        }
    }

    fn error_policy(&self, error: &FakeError) -> Retry {
        error.0
    }

    fn step_name(_: &String) -> &'static str {
        "step"
    }
}

/// A synced index, metrics and a registry to read them from.
fn world() -> (ClusterCache, ControllerMetrics, Metrics) {
    let cache = ClusterCache::new();
    cache.mark_synced();
    let registry = Metrics::new();
    let metrics = ControllerMetrics::register(&registry);
    (cache, metrics, registry)
}

/// Runs `fake` for `virtual_time`, then cancels it and waits for the driver to return.
async fn drive_for(
    fake: Arc<Fake>,
    cache: ClusterCache,
    metrics: ControllerMetrics,
    virtual_time: Duration,
) {
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(run(
        fake,
        cache,
        metrics,
        Fence::unelected(),
        cancel.clone(),
    ));
    tokio::time::sleep(virtual_time).await;
    cancel.cancel();
    if let Err(error) = driver.await {
        panic!("the driver task failed: {error}");
    }
}

fn gaps(starts: &[Instant]) -> Vec<Duration> {
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn one_step_per_key_runs_at_a_time_and_no_more_than_the_bound_at_once() {
    let (cache, metrics, _) = world();
    let mut fake = Fake::new(
        &["a", "b", "c", "d", "e", "f"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(50)).concurrency(2),
    );
    fake.takes = Duration::from_secs(1);
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(3500)).await;
    assert_eq!(
        fake.overlapped.load(Ordering::SeqCst),
        0,
        "a key ran twice at once"
    );
    assert_eq!(
        fake.peak.load(Ordering::SeqCst),
        2,
        "the bound of 2 was used, never passed"
    );
    // Six keys, two at a time, one second each: every key ran by the end of the third second.
    for key in ["a", "b", "c", "d", "e", "f"] {
        assert!(!fake.starts(key).is_empty(), "{key} never ran");
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_step_backs_off_per_key_doubling() {
    let (cache, metrics, registry) = world();
    let mut fake = Fake::new(
        &["a"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(100)),
    );
    fake.outcome = Outcome::Fail(Retry::Backoff);
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(15_500)).await;
    let gaps = gaps(&fake.starts("a"));
    assert!(gaps.len() >= 4, "{gaps:?}");
    // Each wait is the backoff (1 s, 2 s, 4 s, 8 s) after the step's 10 ms, within a scan.
    for (gap, backoff) in gaps.iter().zip([1u64, 2, 4, 8]) {
        let least = Duration::from_secs(backoff);
        assert!(
            *gap >= least && *gap < least + Duration::from_millis(200),
            "waited {gap:?}, expected {least:?} after the step: {gaps:?}"
        );
    }
    let text = registry.encode().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        text.contains(r#"controller_runtime_reconcile_total{controller="fake",result="error"} 5"#),
        "{text}"
    );
    assert!(
        text.contains(r#"controller_runtime_reconcile_errors_total{controller="fake"} 5"#),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn each_step_goes_through_the_loops_queue_and_each_failure_is_a_retry() {
    let (cache, metrics, registry) = world();
    let mut fake = Fake::new(
        &["a", "b"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(100)),
    );
    fake.outcome = Outcome::Fail(Retry::Backoff);
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(1_500)).await;
    let text = registry.encode().unwrap_or_else(|e| panic!("{e}"));
    let queue = r#"{name="fake",controller="fake"}"#;
    for line in [
        format!("workqueue_adds_total{queue} 4"),
        format!("workqueue_retries_total{queue} 4"),
        format!("workqueue_work_duration_seconds_count{queue} 4"),
        format!("workqueue_queue_duration_seconds_count{queue} 4"),
        r#"workqueue_depth{name="fake",controller="fake",priority="0"} 0"#.to_owned(),
        format!("workqueue_unfinished_work_seconds{queue} 0.0"),
        r#"controller_runtime_reconcile_panics_total{controller="fake"} 0"#.to_owned(),
        r#"controller_runtime_reconcile_total{controller="fake",result="success"} 0"#.to_owned(),
    ] {
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_retried_at_the_next_scan_without_backoff() {
    let (cache, metrics, _) = world();
    let mut fake = Fake::new(
        &["a"],
        Shape::new(Duration::from_millis(10), Duration::from_secs(60)),
    );
    fake.outcome = Outcome::Fail(Retry::Now);
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(500)).await;
    let starts = fake.starts("a");
    // Each try: 10 ms of step, then the next scan 10 ms later.
    assert!(starts.len() >= 20, "only {} tries in 500 ms", starts.len());
    assert!(gaps(&starts).iter().all(|g| *g < Duration::from_millis(50)));
}

#[tokio::test(start_paused = true)]
async fn an_error_that_names_its_delay_is_tried_again_after_exactly_that() {
    let (cache, metrics, _) = world();
    let mut fake = Fake::new(
        &["a"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(100)),
    );
    fake.outcome = Outcome::Fail(Retry::After(Duration::from_secs(5)));
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(12_000)).await;
    let gaps = gaps(&fake.starts("a"));
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    for gap in gaps {
        assert!(gap >= Duration::from_secs(5) && gap < Duration::from_millis(5200));
    }
}

#[tokio::test(start_paused = true)]
async fn a_scan_that_names_a_time_is_repeated_then_not_at_the_resync() {
    let (cache, metrics, _) = world();
    let mut fake = Fake::new(
        &[],
        Shape::new(Duration::from_millis(10), Duration::from_secs(600)),
    );
    fake.requeue_after = Some(Duration::from_secs(5));
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_millis(16_000)).await;
    // At 0, 5, 10 and 15 s: the resync alone would have scanned once.
    assert_eq!(fake.scans.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn nothing_is_scanned_before_the_index_is_synced() {
    let cache = ClusterCache::new();
    let metrics = ControllerMetrics::register(&Metrics::new());
    let fake = Arc::new(Fake::new(
        &["a"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(100)),
    ));
    drive_for(fake.clone(), cache, metrics, Duration::from_secs(2)).await;
    assert_eq!(fake.scans.load(Ordering::SeqCst), 0);
    assert!(fake.starts("a").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_change_of_the_index_wakes_a_scan_within_the_debounce() {
    let (cache, metrics, _) = world();
    let fake = Arc::new(Fake::new(
        &[],
        Shape::new(Duration::from_millis(100), Duration::from_secs(600)),
    ));
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(run(
        fake.clone(),
        cache.clone(),
        metrics,
        Fence::unelected(),
        cancel.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = fake.scans.load(Ordering::SeqCst);
    cache.changed();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fake.scans.load(Ordering::SeqCst), before + 1);
    // A burst of changes is one scan per debounce, not one per change.
    for _ in 0..50 {
        cache.changed();
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(fake.scans.load(Ordering::SeqCst) <= before + 4);
    cancel.cancel();
    if let Err(error) = driver.await {
        panic!("{error}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_driver_lets_the_steps_in_flight_finish_and_starts_none() {
    let (cache, metrics, registry) = world();
    let mut fake = Fake::new(
        &["a", "b"],
        Shape::new(Duration::from_millis(10), Duration::from_millis(100)).concurrency(4),
    );
    fake.takes = Duration::from_secs(5);
    let fake = Arc::new(fake);
    drive_for(fake.clone(), cache, metrics, Duration::from_secs(1)).await;
    assert_eq!(
        fake.finished.load(Ordering::SeqCst),
        2,
        "both finished before run returned"
    );
    assert_eq!(fake.started.lock().map(|s| s.len()).unwrap_or(0), 2);
    let text = registry.encode().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="fake",result="success"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="fake"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(r#"controller_runtime_active_workers{controller="fake"} 0"#),
        "{text}"
    );
}

#[test]
fn a_scan_keeps_the_soonest_requeue() {
    let mut scan: Scan<()> = Scan::new();
    scan.requeue_after(Duration::from_secs(10));
    scan.requeue_after(Duration::from_secs(3));
    scan.requeue_after(Duration::from_secs(7));
    assert_eq!(scan.requeue(), Some(Duration::from_secs(3)));
}

#[test]
fn busy_keys_are_seen_by_the_scan() {
    let set: HashSet<String> = ["a".to_owned()].into();
    let busy = Busy(&set);
    assert!(busy.contains("a"));
    assert!(!busy.contains("b"));
    assert!(!Busy::none().contains("a"));
    let _: HashMap<(), ()> = HashMap::new();
}

#[tokio::test(start_paused = true)]
async fn no_step_starts_once_the_fence_closes_and_the_scans_go_on() {
    let (cache, metrics, _) = world();
    let fake = Arc::new(Fake::new(
        &["a"],
        Shape::new(Duration::from_millis(100), Duration::from_secs(1)),
    ));
    let fence = Fence::closed();
    let closes = Instant::now() + Duration::from_millis(2_500);
    fence.extend_to(closes);
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(run(fake.clone(), cache, metrics, fence, cancel.clone()));
    tokio::time::sleep_until(closes).await;
    let scans_then = fake.scans.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(10)).await;
    cancel.cancel();
    if let Err(error) = driver.await {
        panic!("the driver task failed: {error}");
    }
    let starts = fake.starts("a");
    assert!(!starts.is_empty(), "steps ran while the fence was open");
    assert!(
        starts.iter().all(|t| *t < closes),
        "no step started after the fence closed: {starts:?}"
    );
    assert!(
        fake.scans.load(Ordering::SeqCst) >= scans_then + 9,
        "scans go on (reading is not fenced)"
    );
}
