//! Watches feeding the cluster-state index ([`karpenter_state::Cluster`]).
//!
//! One watcher per kind, each in its own task: `Apply` and `Delete` events go to
//! [`Cluster::apply`] / [`Cluster::delete`], a relist (`Init` .. `InitDone`) to
//! [`Cluster::reset`], so deletions missed while a watch was down are not kept. Every object,
//! watched or written by the controller itself, is slimmed ([`karpenter_state::slim`]) before
//! it is stored: managed fields, images, env, probes, statuses and the like are most of a Pod's
//! size and nothing reads them. Every change bumps a generation on a `watch` channel
//! that the provisioner and the lifecycle loop wait on; [`ClusterCache::synced`] turns true
//! once every kind has been listed once.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_state::{Cluster, Kind, Object, ObjectRef};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Change notifications of a [`ClusterCache`], coalesced to one per interval.
#[derive(Debug)]
pub struct Changes {
    receiver: watch::Receiver<u64>,
    interval: Duration,
    last: Option<Instant>,
}

impl Changes {
    /// Waits for the next change, then until `interval` has passed since the previous
    /// wake-up, so the changes of that interval are seen together. Never returns if the cache
    /// is gone (the caller selects on its cancellation token).
    pub async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
        if let Some(last) = self.last {
            tokio::time::sleep_until(last + self.interval).await;
        }
        self.receiver.mark_unchanged();
        self.last = Some(Instant::now());
    }
}

/// The kinds the controller always watches, in the order they are listed; NodeOverlays are
/// watched too with the `NodeOverlay` gate ([`ClusterCache::spawn_watchers`]).
pub const WATCHED: [Kind; 12] = [
    Kind::NodePool,
    Kind::NodeClaim,
    Kind::Node,
    Kind::Pod,
    Kind::DaemonSet,
    Kind::PodDisruptionBudget,
    Kind::PersistentVolumeClaim,
    Kind::PersistentVolume,
    Kind::StorageClass,
    Kind::Namespace,
    Kind::VolumeAttachment,
    Kind::EC2NodeClass,
];

/// The shared index, its change generation and which kinds have been listed.
#[derive(Debug, Clone)]
pub struct ClusterCache {
    cluster: Arc<Mutex<Cluster>>,
    changes: watch::Sender<u64>,
    listed: Arc<Mutex<Vec<Kind>>>,
    /// Kinds watched beyond [`WATCHED`] (gated ones), which must be listed too.
    gated: Arc<Mutex<Vec<Kind>>>,
    /// Per kind being relisted (`Init` seen, `InitDone` not yet): the objects the controller
    /// wrote meanwhile, which a list taken before the write does not have
    /// ([`Cluster::reset_keeping`]).
    relisting: Arc<Mutex<HashMap<Kind, BTreeSet<ObjectRef>>>>,
}

impl Default for ClusterCache {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterCache {
    pub fn new() -> Self {
        ClusterCache {
            cluster: Arc::new(Mutex::new(Cluster::new())),
            changes: watch::channel(0).0,
            listed: Arc::new(Mutex::new(Vec::new())),
            gated: Arc::new(Mutex::new(Vec::new())),
            relisting: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn relisting(&self) -> MutexGuard<'_, HashMap<Kind, BTreeSet<ObjectRef>>> {
        match self.relisting.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A relist of `kind` began (`Init`).
    fn begin_relist(&self, kind: Kind) {
        self.relisting().insert(kind, BTreeSet::new());
    }

    /// A relist of `kind` is complete (`InitDone`): the index's objects of that kind become
    /// `objects`, keeping what the controller wrote since the relist began.
    fn finish_relist(&self, kind: Kind, objects: Vec<Object>) {
        let written = self.relisting().remove(&kind).unwrap_or_default();
        if !written.is_empty() {
            tracing::debug!(kind = ?kind, written = written.len(), "relisted; keeping the objects written meanwhile");
        }
        self.lock().reset_keeping(kind, objects, &written);
    }

    /// The index, locked. Hold it briefly: watchers wait for it.
    pub fn lock(&self) -> MutexGuard<'_, Cluster> {
        match self.cluster.lock() {
            Ok(guard) => guard,
            // A panicking holder cannot leave the index half-updated in a way that matters
            // more than stopping every controller would: keep serving it.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Applies an object the controller itself just wrote (read-your-writes before the watch
    /// event arrives), and signals a change. An answer older than what a watch event already
    /// put there (the write raced a later change) is not applied.
    pub fn apply(&self, mut object: Object) {
        if self.is_stale(&object) {
            return;
        }
        karpenter_state::slim::slim(&mut object);
        let reference = object.reference();
        self.lock().apply(object);
        if let Some(written) = self.relisting().get_mut(&reference.kind) {
            written.insert(reference);
        }
        self.changed();
    }

    /// A watch event older than what the controller itself already wrote into the index
    /// (read-your-writes): applying it would step a NodeClaim or Node back and repeat a
    /// lifecycle step. Resource versions are compared as the etcd revisions they are; one that
    /// is not a number is never stale.
    fn is_stale(&self, object: &Object) -> bool {
        let version = karpenter_state::cluster::revision_of;
        let cluster = self.lock();
        let (incoming, stored) = match object {
            Object::NodeClaim(claim) => (
                version(&claim.metadata),
                claim
                    .metadata
                    .name
                    .as_deref()
                    .and_then(|n| cluster.node_claim(n))
                    .and_then(|c| version(&c.metadata)),
            ),
            Object::Node(node) => (
                version(&node.metadata),
                node.metadata
                    .name
                    .as_deref()
                    .and_then(|n| cluster.node(n))
                    .and_then(|n| version(&n.metadata)),
            ),
            _ => return false,
        };
        matches!((incoming, stored), (Some(incoming), Some(stored)) if incoming < stored)
    }

    /// Removes an object the controller itself just deleted.
    pub fn delete(&self, object: &ObjectRef) {
        self.lock().delete(object);
        if let Some(written) = self.relisting().get_mut(&object.kind) {
            written.remove(object);
        }
        self.changed();
    }

    /// Signals a change to the waiters.
    pub fn changed(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }

    /// Changes, at most one wake-up per `interval`: a loop that scans the whole index on each
    /// wake-up does so a bounded number of times per second however fast events arrive (a
    /// 1,000-pod rollout is ~5,000 pod events in a few seconds).
    pub fn changes(&self, interval: Duration) -> Changes {
        Changes {
            receiver: self.changes.subscribe(),
            interval,
            last: None,
        }
    }

    /// Every watched kind has been listed at least once.
    pub fn synced(&self) -> bool {
        let listed = match self.listed.lock() {
            Ok(listed) => listed,
            Err(poisoned) => poisoned.into_inner(),
        };
        let gated = match self.gated.lock() {
            Ok(gated) => gated,
            Err(poisoned) => poisoned.into_inner(),
        };
        WATCHED
            .iter()
            .chain(gated.iter())
            .all(|kind| listed.contains(kind))
    }

    /// Marks every kind listed, as if the watches had listed them (tests of loops without an
    /// API server).
    #[cfg(test)]
    pub fn mark_synced(&self) {
        for kind in WATCHED.into_iter().chain(Some(Kind::NodeOverlay)) {
            self.mark_listed(kind);
        }
        self.changed();
    }

    fn mark_listed(&self, kind: Kind) {
        let mut listed = match self.listed.lock() {
            Ok(listed) => listed,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !listed.contains(&kind) {
            listed.push(kind);
        }
    }

    /// Starts one watcher task per kind (NodeOverlays only when `node_overlays`: the gate
    /// `NodeOverlay`, whose CRD and RBAC an older chart may lack); they stop when `cancel` trips.
    pub fn spawn_watchers(&self, client: &Client, cancel: &CancellationToken, node_overlays: bool) {
        if node_overlays {
            match self.gated.lock() {
                Ok(mut gated) => gated.push(Kind::NodeOverlay),
                Err(poisoned) => poisoned.into_inner().push(Kind::NodeOverlay),
            }
            self.spawn::<NodeOverlay>(client, cancel, Kind::NodeOverlay, Object::NodeOverlay);
        }
        self.spawn::<NodePool>(client, cancel, Kind::NodePool, Object::NodePool);
        self.spawn::<NodeClaim>(client, cancel, Kind::NodeClaim, Object::NodeClaim);
        self.spawn::<Node>(client, cancel, Kind::Node, Object::Node);
        self.spawn::<Pod>(client, cancel, Kind::Pod, Object::Pod);
        self.spawn::<DaemonSet>(client, cancel, Kind::DaemonSet, Object::DaemonSet);
        self.spawn::<PodDisruptionBudget>(
            client,
            cancel,
            Kind::PodDisruptionBudget,
            Object::PodDisruptionBudget,
        );
        self.spawn::<PersistentVolumeClaim>(
            client,
            cancel,
            Kind::PersistentVolumeClaim,
            Object::PersistentVolumeClaim,
        );
        self.spawn::<PersistentVolume>(
            client,
            cancel,
            Kind::PersistentVolume,
            Object::PersistentVolume,
        );
        self.spawn::<StorageClass>(client, cancel, Kind::StorageClass, Object::StorageClass);
        self.spawn::<Namespace>(client, cancel, Kind::Namespace, Object::Namespace);
        self.spawn::<VolumeAttachment>(
            client,
            cancel,
            Kind::VolumeAttachment,
            Object::VolumeAttachment,
        );
        self.spawn::<EC2NodeClass>(client, cancel, Kind::EC2NodeClass, Object::EC2NodeClass);
    }

    fn spawn<K>(
        &self,
        client: &Client,
        cancel: &CancellationToken,
        kind: Kind,
        wrap: fn(K) -> Object,
    ) where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    {
        let api: Api<K> = Api::all(client.clone());
        let cache = self.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut buffer: Vec<Object> = Vec::new();
            loop {
                let event = tokio::select! {
                    () = cancel.cancelled() => return,
                    event = stream.next() => event,
                };
                match event {
                    None => return,
                    Some(Err(error)) => {
                        tracing::warn!(kind = ?kind, %error, "watch failed; retrying with backoff");
                    }
                    Some(Ok(Event::Apply(object))) => cache.apply(wrap(object)),
                    Some(Ok(Event::Delete(object))) => {
                        let reference = wrap(object).reference();
                        cache.delete(&reference);
                    }
                    Some(Ok(Event::Init)) => {
                        buffer.clear();
                        cache.begin_relist(kind);
                    }
                    Some(Ok(Event::InitApply(object))) => {
                        let mut object = wrap(object);
                        karpenter_state::slim::slim(&mut object);
                        buffer.push(object);
                    }
                    Some(Ok(Event::InitDone)) => {
                        let objects = std::mem::take(&mut buffer);
                        tracing::debug!(kind = ?kind, count = objects.len(), "listed");
                        cache.finish_relist(kind, objects);
                        cache.mark_listed(kind);
                        cache.changed();
                    }
                }
            }
        });
    }
}

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    kube::runtime::watcher(api, config)
}

/// `namespace/name` of an object, for logs.
pub fn describe<K: ResourceExt>(object: &K) -> String {
    match object.namespace() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}
