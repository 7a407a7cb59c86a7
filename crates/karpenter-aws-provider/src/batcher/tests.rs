//! The window logic on tokio's paused clock (time only moves when every task waits).

use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt;

use super::*;

const OPTIONS: BatchOptions = BatchOptions {
    name: "test",
    idle: Duration::from_millis(35),
    max_wait: Duration::from_secs(1),
    max_items: 1_000,
};

/// The calls made, as (key, inputs); each input answered with itself times ten.
type Calls = Arc<Mutex<Vec<(&'static str, Vec<u32>)>>>;

fn recording(options: BatchOptions) -> (Batcher<&'static str, u32, u32>, Calls) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let execute: Execute<&'static str, u32, u32> = Arc::new(move |key, inputs: Vec<u32>| {
        if let Ok(mut calls) = seen.lock() {
            calls.push((key, inputs.clone()));
        }
        async move { inputs.into_iter().map(|i| i * 10).collect() }.boxed()
    });
    (Batcher::start(options, execute), calls)
}

fn sizes(calls: &Calls) -> Vec<usize> {
    calls
        .lock()
        .map(|c| c.iter().map(|(_, inputs)| inputs.len()).collect())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn requests_arriving_together_share_one_call_and_each_gets_its_own_answer() {
    let (batcher, calls) = recording(OPTIONS);
    let answers = futures::future::join_all((1..=5).map(|i| batcher.add("a", i))).await;
    assert_eq!(
        answers,
        (1..=5)
            .map(|i| Ok(i * 10))
            .collect::<Vec<Result<u32, NoAnswer>>>()
    );
    assert_eq!(sizes(&calls), vec![5]);
}

#[tokio::test(start_paused = true)]
async fn a_request_after_the_idle_time_gets_a_call_of_its_own() {
    let (batcher, calls) = recording(OPTIONS);
    assert_eq!(batcher.add("a", 1).await, Ok(10));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(batcher.add("a", 2).await, Ok(20));
    assert_eq!(sizes(&calls), vec![1, 1]);
}

#[tokio::test(start_paused = true)]
async fn requests_closer_than_the_idle_time_are_gathered_until_the_longest_wait() {
    let (batcher, calls) = recording(OPTIONS);
    // One request every 30 ms (under the 35 ms idle time) for 1.5 s: the first window closes
    // at its 1 s longest wait.
    let spaced = (0..50u32).map(|i| {
        let batcher = &batcher;
        async move {
            tokio::time::sleep(Duration::from_millis(30 * u64::from(i))).await;
            batcher.add("a", i).await
        }
    });
    let answers = futures::future::join_all(spaced).await;
    assert!(answers.iter().all(Result::is_ok));
    let sizes = sizes(&calls);
    assert_eq!(sizes.iter().sum::<usize>(), 50);
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    // Requests at 0, 30, ..., 990 ms: 34 in the first second.
    assert_eq!(sizes[0], 34, "{sizes:?}");
}

#[tokio::test(start_paused = true)]
async fn a_full_batch_is_called_without_waiting_for_the_window() {
    let (batcher, calls) = recording(BatchOptions {
        max_items: 2,
        ..OPTIONS
    });
    let answers = futures::future::join_all((1..=5).map(|i| batcher.add("a", i))).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(sizes(&calls), vec![2, 2, 1]);
}

#[tokio::test(start_paused = true)]
async fn requests_with_different_keys_are_separate_calls_of_one_window() {
    let (batcher, calls) = recording(OPTIONS);
    let (a, b, c) = tokio::join!(
        batcher.add("a", 1),
        batcher.add("b", 2),
        batcher.add("a", 3)
    );
    assert_eq!((a, b, c), (Ok(10), Ok(20), Ok(30)));
    let mut calls = calls.lock().map(|c| c.clone()).unwrap_or_default();
    calls.sort();
    assert_eq!(calls, vec![("a", vec![1, 3]), ("b", vec![2])]);
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_stops_waiting_does_not_break_the_batch() {
    let (batcher, calls) = recording(OPTIONS);
    let impatient = tokio::time::timeout(Duration::from_millis(1), batcher.add("a", 1));
    let (gave_up, answer) = tokio::join!(impatient, batcher.add("a", 2));
    assert!(gave_up.is_err(), "the first caller stopped waiting");
    assert_eq!(answer, Ok(20));
    assert_eq!(sizes(&calls), vec![2]);
}

#[tokio::test(start_paused = true)]
async fn requests_a_call_left_unanswered_get_no_answer() {
    let execute: Execute<(), u32, u32> = Arc::new(|(), inputs: Vec<u32>| {
        async move { inputs.into_iter().take(1).collect() }.boxed()
    });
    let batcher = Batcher::start(OPTIONS, execute);
    let (a, b) = tokio::join!(batcher.add((), 1), batcher.add((), 2));
    assert_eq!(a, Ok(1));
    assert_eq!(b, Err(NoAnswer { batcher: "test" }));
}
