//! Request batching: concurrent calls of one kind gathered into one AWS call (upstream's
//! `pkg/batcher`). Which requests share a call, the windows and how an answer is split are
//! `karpenter_aws::batch`'s; this module is the async shell around them.
//!
//! A [`Batcher`] is a task fed by a channel: a window opens with the first request and closes
//! after the batcher's idle time without another, after its longest wait, or at its most
//! requests ([`karpenter_aws::batch::BatchOptions`]). The window's requests are grouped by key
//! ([`karpenter_aws::batch::group`]); each group is one call of the batcher's executor (on a
//! task of its own, at most [`MAX_CALLS_IN_FLIGHT`] at once), whose answers go back in the
//! group's order through one-shot channels. A caller that stops waiting (its future dropped)
//! leaves its request in the call and its answer unread; the others are not affected. Each
//! window's length and each call's size are recorded
//! (`karpenter_cloudprovider_batcher_batch_time_seconds` and `_batch_size`).
//!
//! The EC2 batchers built on it are [`ec2`]. The task ends when its [`Batcher`] is dropped.

pub mod ec2;

use std::sync::Arc;

use futures::future::BoxFuture;
use karpenter_aws::batch::{self, BatchOptions};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::{Instant, sleep_until};

use crate::metrics::metrics;

#[cfg(test)]
mod tests;

/// At most this many calls of one batcher in flight (upstream's default request workers).
pub const MAX_CALLS_IN_FLIGHT: usize = 100;

/// A batcher gave no answer to a request: it stopped, or its call returned fewer answers than
/// it had requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {batcher} request batcher gave no answer")]
pub struct NoAnswer {
    /// The batcher's name (`create_fleet`, ...).
    pub batcher: &'static str,
}

/// Makes one call for a group's inputs (all of one key) and answers each, in order.
pub type Execute<K, I, O> = Arc<dyn Fn(K, Vec<I>) -> BoxFuture<'static, Vec<O>> + Send + Sync>;

struct Request<K, I, O> {
    key: K,
    input: I,
    reply: oneshot::Sender<O>,
}

/// Gathers requests of key `K` and input `I` into calls answering `O` each.
pub struct Batcher<K, I, O> {
    options: BatchOptions,
    requests: mpsc::UnboundedSender<Request<K, I, O>>,
}

impl<K, I, O> std::fmt::Debug for Batcher<K, I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<K, I, O> Batcher<K, I, O>
where
    K: PartialEq + Send + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    /// Starts the batcher's task (on the current tokio runtime).
    pub fn start(options: BatchOptions, execute: Execute<K, I, O>) -> Self {
        let (requests, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(options, receiver, execute));
        Batcher { options, requests }
    }

    /// The batcher's options.
    pub fn options(&self) -> BatchOptions {
        self.options
    }

    /// Adds a request and waits for its answer.
    pub async fn add(&self, key: K, input: I) -> Result<O, NoAnswer> {
        let no_answer = NoAnswer {
            batcher: self.options.name,
        };
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request { key, input, reply })
            .map_err(|_| no_answer.clone())?;
        answer.await.map_err(|_| no_answer)
    }
}

/// The batcher's task: one window after another until the batcher is dropped.
async fn run<K, I, O>(
    options: BatchOptions,
    mut requests: mpsc::UnboundedReceiver<Request<K, I, O>>,
    execute: Execute<K, I, O>,
) where
    K: PartialEq + Send + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    let workers = Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT));
    while let Some(first) = requests.recv().await {
        let opened = Instant::now();
        let window = gather(&options, first, &mut requests).await;
        metrics().batch_window(options.name, opened.elapsed().as_secs_f64());
        let groups = batch::group(window.iter().map(|r| &r.key));
        let positions: Vec<Vec<usize>> = groups.into_iter().map(|(_, p)| p).collect();
        let mut slots: Vec<Option<Request<K, I, O>>> = window.into_iter().map(Some).collect();
        for group in positions {
            let members: Vec<Request<K, I, O>> = group
                .iter()
                .filter_map(|at| slots.get_mut(*at).and_then(Option::take))
                .collect();
            tokio::spawn(call(
                options.name,
                members,
                execute.clone(),
                workers.clone(),
            ));
        }
    }
}

/// The window that `first` opened: requests until the idle time passes without one, the
/// longest wait is over or the batch is full.
async fn gather<K, I, O>(
    options: &BatchOptions,
    first: Request<K, I, O>,
    requests: &mut mpsc::UnboundedReceiver<Request<K, I, O>>,
) -> Vec<Request<K, I, O>> {
    let deadline = Instant::now() + options.max_wait;
    let mut window = vec![first];
    while window.len() < options.max_items {
        let idle = (Instant::now() + options.idle).min(deadline);
        tokio::select! {
            next = requests.recv() => match next {
                Some(request) => window.push(request),
                None => break,
            },
            () = sleep_until(idle) => break,
        }
    }
    window
}

/// One call for a group's requests (one key); each answer to its request's caller.
async fn call<K, I, O>(
    name: &'static str,
    members: Vec<Request<K, I, O>>,
    execute: Execute<K, I, O>,
    workers: Arc<Semaphore>,
) {
    let Ok(_permit) = workers.acquire_owned().await else {
        return;
    };
    let mut key = None;
    let mut inputs = Vec::with_capacity(members.len());
    let mut replies = Vec::with_capacity(members.len());
    for member in members {
        key.get_or_insert(member.key);
        inputs.push(member.input);
        replies.push(member.reply);
    }
    let Some(key) = key else {
        return;
    };
    metrics().batch_size(name, inputs.len());
    let answers = execute(key, inputs).await;
    // A caller that stopped waiting has dropped its receiver: its answer is dropped with it.
    // Requests without an answer get `NoAnswer` as their sender drops here.
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer);
    }
}
