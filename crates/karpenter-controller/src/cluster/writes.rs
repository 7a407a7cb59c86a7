//! The one write path: every write the loops make to the API server, with one set of rules.
//!
//! - Every write names the field manager `karpenter` ([`params`]).
//! - A write that replaces a list or a whole status (finalizers, taints, conditions, status)
//!   starts from the index's latest copy and carries that copy's `resourceVersion`, so a
//!   concurrent writer's change is never lost: the API server answers 409 and the step is tried
//!   again from a fresher copy ([`WriteError::is_conflict`], [`retry`]). Writes of map entries
//!   (labels, annotations) are merge patches, which merge key by key.
//! - The API server's answer goes back into the index (read-your-writes before the watch
//!   event arrives).
//! - An object that is gone (404) needs nothing: a delete of a gone object succeeded, a write
//!   to one has nothing left to write ([`is_not_found`], the one place that says so).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_lifecycle::lifecycle::set_condition;
use karpenter_lifecycle::termination::disrupted_taint;
use karpenter_state::{Kind, Object, ObjectRef};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::index::ClusterCache;
use crate::leader::{Fence, Fenced};
use crate::reconcile::Retry;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "karpenter";

/// Patch parameters of every write: the field manager `karpenter`.
pub fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// The object is gone.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Someone wrote the object since the copy the write started from.
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// What a failed API call means for the step that made it: a conflict is tried again from a
/// fresher copy at the next scan; anything else backs off.
pub fn retry(error: &kube::Error) -> Retry {
    if is_conflict(error) {
        Retry::Now
    } else {
        Retry::Backoff
    }
}

/// A write failed.
#[derive(Debug, thiserror::Error)]
#[error("{step} of {kind} {name}: {source}")]
pub struct WriteError {
    /// What the write was for ("registering", "removing the finalizer", ...).
    pub step: &'static str,
    /// The object's kind, lower case (`nodeclaim`, `node`, ...).
    pub kind: &'static str,
    /// The object's name (`namespace/name` for namespaced objects).
    pub name: String,
    #[source]
    pub source: WriteFailure,
}

/// Why a write failed: the API server's answer, or it was never sent.
#[derive(Debug, thiserror::Error)]
pub enum WriteFailure {
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// Leadership is not confirmed ([`Fence`]): nothing was sent.
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

impl WriteError {
    /// The write conflicted with another writer's.
    pub fn is_conflict(&self) -> bool {
        matches!(&self.source, WriteFailure::Api(e) if is_conflict(e))
    }

    /// What the failed write means for its step.
    pub fn retry(&self) -> Retry {
        match &self.source {
            WriteFailure::Api(e) => retry(e),
            WriteFailure::Fenced(_) => Retry::Backoff,
        }
    }
}

/// A cluster-scoped kind the controller writes and the index holds.
pub trait Written:
    Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The kind in lower case, for errors and logs.
    const KIND: &'static str;
    /// The index's kind.
    const INDEX: Kind;
    /// Wrapped for the index.
    fn into_object(self) -> Object;
}

impl Written for NodeClaim {
    const KIND: &'static str = "nodeclaim";
    const INDEX: Kind = Kind::NodeClaim;
    fn into_object(self) -> Object {
        Object::NodeClaim(self)
    }
}

impl Written for Node {
    const KIND: &'static str = "node";
    const INDEX: Kind = Kind::Node;
    fn into_object(self) -> Object {
        Object::Node(self)
    }
}

impl Written for NodePool {
    const KIND: &'static str = "nodepool";
    const INDEX: Kind = Kind::NodePool;
    fn into_object(self) -> Object {
        Object::NodePool(self)
    }
}

impl Written for EC2NodeClass {
    const KIND: &'static str = "ec2nodeclass";
    const INDEX: Kind = Kind::EC2NodeClass;
    fn into_object(self) -> Object {
        Object::EC2NodeClass(self)
    }
}

impl Written for NodeOverlay {
    const KIND: &'static str = "nodeoverlay";
    const INDEX: Kind = Kind::NodeOverlay;
    fn into_object(self) -> Object {
        Object::NodeOverlay(self)
    }
}

/// The API server writes go to and the index their answers go into.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    cache: ClusterCache,
    fence: Fence,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// Where the patch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Object,
    Status,
}

impl Writer {
    pub fn new(client: Client, cache: ClusterCache, fence: Fence) -> Self {
        Writer {
            client,
            cache,
            fence,
        }
    }

    /// The client (for calls that are not writes of indexed objects: evictions, creates).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The fence this writer checks (for writes made outside it: evictions).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    fn error<K: Written>(
        step: &'static str,
        name: &str,
        source: impl Into<WriteFailure>,
    ) -> WriteError {
        WriteError {
            step,
            kind: K::KIND,
            name: name.to_owned(),
            source: source.into(),
        }
    }

    /// Refuses the write when leadership is not confirmed; nothing is sent then.
    fn fenced<K: Written>(&self, step: &'static str, name: &str) -> Result<(), WriteError> {
        self.fence
            .check()
            .map_err(|fenced| Self::error::<K>(step, name, fenced))
    }

    /// Sends `patch` (a JSON merge patch) for object `name`; the answer goes into the index.
    /// A gone object: `Ok(None)`.
    async fn patch<K: Written>(
        &self,
        name: &str,
        patch: &serde_json::Value,
        target: Target,
        step: &'static str,
    ) -> Result<Option<K>, WriteError> {
        self.fenced::<K>(step, name)?;
        let api: Api<K> = Api::all(self.client.clone());
        let result = match target {
            Target::Object => api.patch(name, &params(), &Patch::Merge(patch)).await,
            Target::Status => {
                api.patch_status(name, &params(), &Patch::Merge(patch))
                    .await
            }
        };
        match result {
            Ok(patched) => {
                self.remember(&patched);
                Ok(Some(patched))
            }
            Err(e) if is_not_found(&e) => {
                // Gone: whatever the index still holds of it (e.g. kept through a relist)
                // goes too.
                self.cache.delete(&ObjectRef::new(K::INDEX, None, name));
                Ok(None)
            }
            Err(source) => Err(Self::error::<K>(step, name, source)),
        }
    }

    /// Puts a write's answer into the index. An answer being deleted without a finalizer left
    /// is an object the API server has removed: it leaves the index (were it applied, a watch
    /// event of its deletion that arrived first would leave it there for good).
    fn remember<K: Written>(&self, answer: &K) {
        let meta = answer.meta();
        let removed =
            meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty);
        if removed {
            let name = meta.name.as_deref().unwrap_or_default();
            self.cache.delete(&ObjectRef::new(K::INDEX, None, name));
        } else {
            self.cache.apply(answer.clone().into_object());
        }
    }

    /// Merges `labels` and `annotations` maps (either may be `null`) into object `name`'s
    /// metadata: entries merge key by key, so no `resourceVersion` is needed.
    pub async fn merge_metadata<K: Written>(
        &self,
        name: &str,
        metadata: serde_json::Value,
        step: &'static str,
    ) -> Result<Option<K>, WriteError> {
        self.patch::<K>(name, &json!({ "metadata": metadata }), Target::Object, step)
            .await
    }

    /// Writes the fields of `status` into `current`'s status, guarded by `current`'s
    /// `resourceVersion` (lists in it replace the stored ones).
    pub async fn patch_status<K: Written>(
        &self,
        current: &K,
        status: serde_json::Value,
        step: &'static str,
    ) -> Result<Option<K>, WriteError> {
        let meta = current.meta();
        let name = meta.name.clone().unwrap_or_default();
        let patch = json!({
            "metadata": {"resourceVersion": meta.resource_version},
            "status": status,
        });
        self.patch::<K>(&name, &patch, Target::Status, step).await
    }

    /// Merges `patch` into `current`, guarded by `current`'s `resourceVersion` (for patches
    /// that replace lists: finalizers, owner references, taints).
    pub async fn patch_guarded<K: Written>(
        &self,
        current: &K,
        mut patch: serde_json::Value,
        step: &'static str,
    ) -> Result<Option<K>, WriteError> {
        let meta = current.meta();
        let name = meta.name.clone().unwrap_or_default();
        if let Some(object) = patch.as_object_mut() {
            let metadata = object.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("resourceVersion".to_owned(), json!(meta.resource_version));
            }
        }
        self.patch::<K>(&name, &patch, Target::Object, step).await
    }

    /// Adds (`present`) or removes `finalizer` on `current`, guarded by its `resourceVersion`;
    /// nothing when it already is as asked.
    pub async fn set_finalizer<K: Written>(
        &self,
        current: &K,
        finalizer: &str,
        present: bool,
        step: &'static str,
    ) -> Result<Option<K>, WriteError> {
        let meta = current.meta();
        let mut finalizers = meta.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == finalizer) == present {
            return Ok(Some(current.clone()));
        }
        if present {
            finalizers.push(finalizer.to_owned());
        } else {
            finalizers.retain(|f| f != finalizer);
        }
        self.patch_guarded(
            current,
            json!({"metadata": {"finalizers": finalizers}}),
            step,
        )
        .await
    }

    /// Deletes object `name` (its finalizers then run); one already gone is deleted.
    pub async fn delete<K: Written>(
        &self,
        name: &str,
        step: &'static str,
    ) -> Result<(), WriteError> {
        self.fenced::<K>(step, name)?;
        let api: Api<K> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => {
                self.cache.delete(&ObjectRef::new(K::INDEX, None, name));
                Ok(())
            }
            Err(source) => Err(Self::error::<K>(step, name, source)),
        }
    }

    /// Creates `object`; the answer goes into the index.
    pub async fn create<K: Written>(
        &self,
        object: &K,
        step: &'static str,
    ) -> Result<K, WriteError> {
        let name = object
            .meta()
            .generate_name
            .as_deref()
            .or(object.meta().name.as_deref())
            .unwrap_or_default();
        self.fenced::<K>(step, name)?;
        let api: Api<K> = Api::all(self.client.clone());
        match api
            .create(
                &kube::api::PostParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..kube::api::PostParams::default()
                },
                object,
            )
            .await
        {
            Ok(created) => {
                self.remember(&created);
                Ok(created)
            }
            Err(source) => Err(Self::error::<K>(step, name, source)),
        }
    }

    /// Adds (`tainted`) or removes the `karpenter.sh/disrupted:NoSchedule` taint on Node `node`
    /// (from the index's copy); nothing when it already is as asked, or the Node is gone.
    pub async fn set_disrupted_taint(&self, node: &str, tainted: bool) -> Result<(), WriteError> {
        self.set_taint(node, disrupted_taint(), tainted).await
    }

    /// Adds (`tainted`) or removes `taint` (by key and effect) on Node `node` (the index's
    /// copy), guarded by its `resourceVersion`; nothing when it already is as asked.
    pub async fn set_taint(
        &self,
        node: &str,
        taint: k8s_openapi::api::core::v1::Taint,
        tainted: bool,
    ) -> Result<(), WriteError> {
        let Some(current) = self.cache.lock().node(node).cloned() else {
            return Ok(());
        };
        let mut taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let has = taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect);
        if has == tainted {
            return Ok(());
        }
        if tainted {
            taints.push(taint);
        } else {
            taints.retain(|t| !(t.key == taint.key && t.effect == taint.effect));
        }
        let step = if tainted { "tainting" } else { "untainting" };
        self.patch_guarded(&current, json!({"spec": {"taints": taints}}), step)
            .await
            .map(drop)
    }

    /// Sets condition `type_` of NodeClaim `claim` (from the index's copy) to
    /// `Some((status, reason, message))`, or removes it (`None`); writes only when the status,
    /// reason or message changes.
    pub async fn set_claim_condition(
        &self,
        claim: &str,
        type_: &str,
        desired: Option<(&str, &str, &str)>,
        now: DateTime<Utc>,
    ) -> Result<(), WriteError> {
        let Some(current) = self.cache.lock().node_claim(claim).cloned() else {
            return Ok(());
        };
        let existing = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_));
        let same = match (existing, desired) {
            (None, None) => true,
            (Some(c), Some((status, reason, message))) => {
                c.status == status && c.reason == reason && c.message == message
            }
            _ => false,
        };
        if same {
            return Ok(());
        }
        let mut updated = current.clone();
        match desired {
            Some((status, reason, message)) => {
                set_condition(&mut updated, type_, status, reason, message, now);
            }
            None => {
                if let Some(conditions) =
                    updated.status.as_mut().and_then(|s| s.conditions.as_mut())
                {
                    conditions.retain(|c| c.type_ != type_);
                }
            }
        }
        let conditions = updated
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        self.patch_status(
            &current,
            json!({ "conditions": conditions }),
            "writing a condition",
        )
        .await
        .map(drop)
    }

    /// Sets annotation `key` of pod `namespace/name` to `value`, or removes it (`None`), by a
    /// merge patch guarded by `resource_version` (upstream's optimistic lock: a pod written
    /// since answers 409, [`WriteError::is_conflict`]); the answer goes into the index. A gone
    /// pod: `Ok(None)`.
    pub async fn annotate_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
        key: &str,
        value: Option<&str>,
        step: &'static str,
    ) -> Result<Option<Pod>, WriteError> {
        let error = |source: WriteFailure| WriteError {
            step,
            kind: "pod",
            name: format!("{namespace}/{name}"),
            source,
        };
        self.fence.check().map_err(|f| error(f.into()))?;
        let patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "annotations": {key: value},
        }});
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.patch(name, &params(), &Patch::Merge(&patch)).await {
            Ok(patched) => {
                self.cache.apply(Object::Pod(patched.clone()));
                Ok(Some(patched))
            }
            Err(e) if is_not_found(&e) => {
                self.cache
                    .delete(&ObjectRef::new(Kind::Pod, Some(namespace), name));
                Ok(None)
            }
            Err(source) => Err(error(source.into())),
        }
    }
}
