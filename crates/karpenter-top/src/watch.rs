//! Keeping one [`Listed`] current from watches (the live view): one watcher per kind
//! (`kube::runtime::watcher`: a paged list, then a watch, relisting after a `410 Gone` or a
//! broken watch, with backoff) applies each change to the one [`Listed`] through
//! [`Listed::apply`] / [`Listed::delete`] / [`Listed::reset`], the way the controller's index
//! takes its watch events. Nothing is listed again while the watches hold.
//!
//! [`Watch`] shares the [`Listed`] behind a lock with whoever draws it (it reads a consistent
//! state under [`Watch::read`]) and tells every change on a [`Status`] channel, so the reader
//! rebuilds its view when something changed, at the pace it chooses. A kind whose CRD is not
//! installed (404) counts as empty; a watch that fails otherwise (RBAC, the API server gone)
//! leaves that kind as last seen and is told in [`Status::problems`] until it recovers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use karpenter_api::v1::{NodeClaim, NodePool};
use karpenter_state::object::{Kind, Object};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as Change};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::list::{Kept, Listed, REPORTING_CONTROLLER, keep};

/// What is watched: the four kinds the view reads, and Karpenter's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    Nodes,
    NodeClaims,
    NodePools,
    Pods,
    Events,
}

impl Source {
    pub const ALL: [Source; 5] = [
        Source::Nodes,
        Source::NodeClaims,
        Source::NodePools,
        Source::Pods,
        Source::Events,
    ];

    fn name(self) -> &'static str {
        match self {
            Source::Nodes => "Nodes",
            Source::NodeClaims => "NodeClaims",
            Source::NodePools => "NodePools",
            Source::Pods => "Pods",
            Source::Events => "Events",
        }
    }
}

/// The watches' state, sent on every change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// Bumped on every change of the [`Listed`].
    pub generation: u64,
    /// Sources listed at least once, or failed (each counts once answered, as a failed list
    /// did).
    pub answered: BTreeSet<Source>,
    /// Why a kind cannot be watched now (its objects stay as last seen); events' problem is
    /// [`Listed::events_problem`].
    pub problems: BTreeMap<Source, String>,
}

impl Status {
    /// Every source has answered: the [`Listed`] is a whole picture (the first screen waits
    /// for it, as it waited for the first list).
    pub fn synced(&self) -> bool {
        Source::ALL.iter().all(|s| self.answered.contains(s))
    }
}

/// A watcher task: the caller spawns it on its runtime; it runs until the [`Watch`] and every
/// [`Status`] receiver are gone.
pub type Watcher = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The one [`Listed`] the watchers keep current, and the channel that tells its changes.
#[derive(Debug, Clone)]
pub struct Watch {
    listed: Arc<Mutex<Listed>>,
    status: watch::Sender<Status>,
}

impl Default for Watch {
    fn default() -> Self {
        Self::new()
    }
}

impl Watch {
    pub fn new() -> Self {
        Watch {
            listed: Arc::new(Mutex::new(Listed::default())),
            status: watch::channel(Status::default()).0,
        }
    }

    /// Changes of the [`Listed`] and the watches' problems.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, Listed> {
        match self.listed.lock() {
            Ok(guard) => guard,
            // A change is applied whole or panicked before it wrote: keep serving the view.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Reads the [`Listed`] as it is between two changes (the watchers wait meanwhile: keep
    /// `f` short, e.g. building a view).
    pub fn read<R>(&self, f: impl FnOnce(&Listed) -> R) -> R {
        f(&self.lock())
    }

    /// Applies one change from `source` and tells it; `source` answered and has no problem.
    fn change(&self, source: Source, f: impl FnOnce(&mut Listed)) {
        f(&mut self.lock());
        self.status.send_modify(|s| {
            s.generation += 1;
            s.answered.insert(source);
            s.problems.remove(&source);
        });
    }

    /// `source` cannot be watched now: told, its objects kept.
    fn problem(&self, source: Source, problem: String) {
        self.status.send_if_modified(|s| {
            let answered = s.answered.insert(source);
            let told = s.problems.insert(source, problem.clone()) != Some(problem);
            answered || told
        });
    }

    /// The watchers of Nodes, NodeClaims, NodePools, Pods and Karpenter's events, to spawn.
    pub fn watchers(&self, client: &kube::Client) -> Vec<Watcher> {
        vec![
            Box::pin(self.clone().objects::<Node>(
                client.clone(),
                Source::Nodes,
                Kind::Node,
                Object::Node,
            )),
            Box::pin(self.clone().objects::<NodeClaim>(
                client.clone(),
                Source::NodeClaims,
                Kind::NodeClaim,
                Object::NodeClaim,
            )),
            Box::pin(self.clone().objects::<NodePool>(
                client.clone(),
                Source::NodePools,
                Kind::NodePool,
                Object::NodePool,
            )),
            Box::pin(self.clone().objects::<Pod>(
                client.clone(),
                Source::Pods,
                Kind::Pod,
                Object::Pod,
            )),
            Box::pin(self.clone().events(client.clone())),
        ]
    }

    /// Watches one kind into the [`Listed`]: a relist is gathered (slimmed as it comes) and
    /// replaces the kind whole at its end.
    async fn objects<K>(
        self,
        client: kube::Client,
        source: Source,
        kind: Kind,
        wrap: fn(K) -> Object,
    ) where
        K: kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        let stream = kube::runtime::watcher(Api::<K>::all(client), watcher::Config::default())
            .default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut relist: Vec<Kept> = Vec::new();
        let optional = matches!(kind, Kind::NodeClaim | Kind::NodePool);
        while let Some(change) = stream.next().await {
            if self.status.is_closed() {
                return;
            }
            match change {
                Ok(Change::Init) => relist.clear(),
                Ok(Change::InitApply(object)) => relist.push(Kept::new(wrap(object))),
                Ok(Change::InitDone) => {
                    let objects = std::mem::take(&mut relist);
                    self.change(source, |l| l.reset(kind, objects));
                }
                Ok(Change::Apply(object)) => {
                    let kept = Kept::new(wrap(object));
                    self.change(source, |l| l.apply(kept));
                }
                Ok(Change::Delete(object)) => {
                    let reference = wrap(object).reference();
                    self.change(source, |l| l.delete(&reference));
                }
                Err(e) if optional && code(&e) == Some(404) => {
                    // Karpenter's CRDs are not installed: no such objects (a retry after the
                    // backoff finds them once installed).
                    let known_empty = self.status.borrow().answered.contains(&source)
                        && self.read(|l| match kind {
                            Kind::NodeClaim => l.cluster.node_claims().next().is_none(),
                            _ => l.cluster.node_pools().next().is_none(),
                        });
                    if !known_empty {
                        self.change(source, |l| l.reset(kind, Vec::new()));
                    }
                }
                Err(e) => self.problem(source, format!("watching {}: {e}", source.name())),
            }
        }
    }

    /// Watches Karpenter's events into the [`Listed`], selected by the API server
    /// (`reportingController=karpenter`); one that refuses the selector (400) is watched for
    /// every event, and Karpenter's are kept here (as [`crate::list()`] does).
    async fn events(self, client: kube::Client) {
        let selector = format!("reportingController={REPORTING_CONTROLLER}");
        let mut config = watcher::Config::default().fields(&selector);
        let mut selected = true;
        let karpenters =
            |e: &Event| e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER);
        'watch: loop {
            let stream = kube::runtime::watcher(Api::<Event>::all(client.clone()), config.clone())
                .default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut relist: Vec<Event> = Vec::new();
            while let Some(change) = stream.next().await {
                if self.status.is_closed() {
                    return;
                }
                match change {
                    Ok(Change::Init) => relist.clear(),
                    Ok(Change::InitApply(e)) => {
                        if karpenters(&e) {
                            keep(&mut relist, e);
                        }
                    }
                    Ok(Change::InitDone) => {
                        let events = std::mem::take(&mut relist);
                        self.change(Source::Events, |l| l.reset_events(events));
                    }
                    Ok(Change::Apply(e)) => {
                        if karpenters(&e) {
                            self.change(Source::Events, |l| l.apply_event(e));
                        }
                    }
                    Ok(Change::Delete(e)) => {
                        if karpenters(&e) {
                            self.change(Source::Events, |l| l.delete_event(&e));
                        }
                    }
                    Err(e) if selected && code(&e) == Some(400) => {
                        selected = false;
                        config = watcher::Config::default();
                        continue 'watch;
                    }
                    Err(e) => {
                        let problem = format!("watching Events: {e}");
                        self.change(Source::Events, |l| l.events_problem = Some(problem));
                    }
                }
            }
            return;
        }
    }
}

/// The API server's status code of a failed list or watch.
fn code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    }
}
