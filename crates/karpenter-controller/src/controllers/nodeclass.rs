//! The EC2NodeClass controller (`--cloud-provider aws`): keeps each class's status, hash
//! annotations and finalizer as upstream's `nodeclass` controllers do.
//!
//! Per class, at most every `AMI_REFRESH_INTERVAL`/`SUBNET_REFRESH_INTERVAL` (the shorter) and
//! at once when its generation changes: the finalizer `karpenter.k8s.aws/termination`; the
//! hash annotations; the NodeClaims of the class re-stamped when their hash version is not
//! ours (a switch from upstream drifts nothing); the subnets, security groups, AMIs and
//! instance profile resolved against AWS ([`karpenter_aws_provider::nodeclass`]) and written
//! to the status with its conditions. A class being deleted keeps its finalizer until no
//! NodeClaim uses it, then its managed instance profile and its launch templates are deleted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use karpenter_api::hash::{node_class_annotations, node_class_hash, restamp_node_class};
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::nodeclass::status;
use karpenter_aws_provider::nodeclass::NodeClassResolver;
use karpenter_aws_provider::{AwsCloud, NodeClasses};
use karpenter_state::Object;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cache::ClusterCache;
use super::events::Events;

/// The finalizer on EC2NodeClasses.
pub const FINALIZER: &str = "karpenter.k8s.aws/termination";
/// How often a class being deleted looks again for NodeClaims that still use it.
const WAIT_FOR_CLAIMS: Duration = Duration::from_secs(10);

/// EC2NodeClasses from the cluster-state index, for the provider.
#[derive(Debug, Clone)]
pub struct CachedClasses(pub ClusterCache);

impl NodeClasses for CachedClasses {
    fn node_class(&self, name: &str) -> Option<EC2NodeClass> {
        self.0.lock().node_class(name).cloned()
    }

    fn version(&self) -> u64 {
        let cluster = self.0.lock();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for class in cluster.node_classes() {
            for part in [
                class.metadata.name.as_deref().unwrap_or_default(),
                class
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default(),
            ] {
                for byte in part.bytes().chain(std::iter::once(0)) {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
        hash
    }
}

/// The controller.
pub struct NodeClassController<L> {
    pub cache: ClusterCache,
    pub client: Client,
    pub cloud: Arc<AwsCloud<L>>,
    pub resolver: NodeClassResolver,
    pub events: Events,
    /// The API server's version (`v1.36.3`), for AMI aliases.
    pub k8s_version: String,
    /// The CA bundle nodes get (it is hashed: a rotation drifts nodes).
    pub ca_bundle: Option<String>,
    pub refresh: Duration,
}

impl<L> std::fmt::Debug for NodeClassController<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeClassController")
            .field("k8s_version", &self.k8s_version)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

fn uses(claim: &NodeClaim, class: &str) -> bool {
    claim.spec.node_class_ref.kind == "EC2NodeClass" && claim.spec.node_class_ref.name == class
}

/// When each class was last resolved, at which generation.
type Resolved = HashMap<String, (Option<i64>, Instant)>;

impl<L: NodeClasses + 'static> NodeClassController<L> {
    pub async fn run(self, cancel: CancellationToken) {
        let mut changes = self.cache.changes(Duration::from_millis(500));
        let mut resolved: Resolved = HashMap::new();
        let mut next_sweep = Instant::now();
        loop {
            let classes: Vec<EC2NodeClass> = self.cache.lock().node_classes().cloned().collect();
            for class in &classes {
                self.reconcile(class, &mut resolved).await;
            }
            resolved.retain(|name, _| {
                classes
                    .iter()
                    .any(|c| c.metadata.name.as_deref() == Some(name))
            });
            if next_sweep <= Instant::now() {
                self.cloud
                    .launch_templates()
                    .sweep(self.cloud.clients())
                    .await;
                next_sweep = Instant::now() + Duration::from_secs(60);
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
                () = tokio::time::sleep(WAIT_FOR_CLAIMS) => {}
            }
        }
    }

    fn api(&self) -> Api<EC2NodeClass> {
        Api::all(self.client.clone())
    }

    async fn patch(
        &self,
        name: &str,
        patch: &serde_json::Value,
        on_status: bool,
    ) -> Option<EC2NodeClass> {
        let params = PatchParams::default();
        let result = if on_status {
            self.api()
                .patch_status(name, &params, &Patch::Merge(patch))
                .await
        } else {
            self.api().patch(name, &params, &Patch::Merge(patch)).await
        };
        match result {
            Ok(patched) => {
                self.cache.apply(Object::EC2NodeClass(patched.clone()));
                Some(patched)
            }
            Err(error) => {
                tracing::warn!(ec2nodeclass = name, %error, "writing the EC2NodeClass failed; retried");
                None
            }
        }
    }

    async fn reconcile(&self, class: &EC2NodeClass, resolved: &mut Resolved) {
        let name = class.metadata.name.clone().unwrap_or_default();
        let finalizers = class.metadata.finalizers.clone().unwrap_or_default();
        if class.metadata.deletion_timestamp.is_some() {
            if finalizers.iter().any(|f| f == FINALIZER) {
                self.finalize(class, &name, finalizers).await;
            }
            return;
        }
        let mut class = class.clone();
        if !finalizers.iter().any(|f| f == FINALIZER) {
            let mut with = finalizers.clone();
            with.push(FINALIZER.to_owned());
            match self.patch(&name, &json!({"metadata": {"finalizers": with, "resourceVersion": class.metadata.resource_version}}), false).await {
                Some(patched) => class = patched,
                None => return,
            }
        }
        if let Some(annotations) = node_class_annotations(&class, self.ca_bundle.as_deref()) {
            match self
                .patch(
                    &name,
                    &json!({"metadata": {"annotations": annotations}}),
                    false,
                )
                .await
            {
                Some(patched) => class = patched,
                None => return,
            }
        }
        self.restamp_claims(&class, &name).await;
        let due = match resolved.get(&name) {
            Some((generation, at)) => {
                *generation != class.metadata.generation || at.elapsed() >= self.refresh
            }
            None => true,
        };
        if !due {
            return;
        }
        let (resolution, _ips) = self
            .resolver
            .resolve(&class, &self.k8s_version, Utc::now())
            .await;
        let Some(at) = karpenter_state::conditions::api_time(Utc::now()) else {
            return;
        };
        // Transition times move only with a status, so an unchanged resolution is an equal
        // status and nothing is written.
        let new = status::status(
            class.status.as_ref(),
            class.metadata.generation,
            &resolution,
            at,
        );
        if class.status.as_ref() == Some(&new) {
            resolved.insert(name, (class.metadata.generation, Instant::now()));
            return;
        }
        let ready =
            karpenter_api::conditions::get(new.conditions.as_deref(), status::READY).cloned();
        if self
            .patch(&name, &json!({"status": new}), true)
            .await
            .is_some()
        {
            resolved.insert(name.clone(), (class.metadata.generation, Instant::now()));
            if let Some(ready) = ready {
                if ready.status == "True" {
                    tracing::info!(ec2nodeclass = %name, "EC2NodeClass ready");
                } else {
                    tracing::warn!(ec2nodeclass = %name, reason = %ready.reason, message = %ready.message, "EC2NodeClass not ready");
                    self.events
                        .warn_node_class(&class, "NodeClassNotReady", &ready.message)
                        .await;
                }
            }
        }
    }

    /// NodeClaims of the class stamped by another hash version get ours (upstream's rule).
    async fn restamp_claims(&self, class: &EC2NodeClass, name: &str) {
        let hash = node_class_hash(class, self.ca_bundle.as_deref());
        let claims: Vec<NodeClaim> = self
            .cache
            .lock()
            .node_claims()
            .filter(|c| uses(c, name))
            .cloned()
            .collect();
        for claim in claims {
            let drifted = karpenter_api::conditions::is_true(
                claim.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "Drifted",
            );
            let Some(annotations) =
                restamp_node_class(&hash, claim.metadata.annotations.as_ref(), drifted)
            else {
                continue;
            };
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            if let Err(error) = super::writes::patch_claim(
                &self.client,
                &self.cache,
                &claim_name,
                &json!({"metadata": {"annotations": annotations}}),
                false,
                "re-stamping the EC2NodeClass hash",
            )
            .await
            {
                tracing::warn!(%error, "retried next pass");
            }
        }
    }

    async fn finalize(&self, class: &EC2NodeClass, name: &str, finalizers: Vec<String>) {
        let using: Vec<String> = self
            .cache
            .lock()
            .node_claims()
            .filter(|c| uses(c, name))
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        if !using.is_empty() {
            tracing::info!(ec2nodeclass = name, nodeclaims = ?using, "EC2NodeClass deletion waits for its NodeClaims");
            return;
        }
        if let Err(error) = self.resolver.delete_instance_profile(class).await {
            tracing::warn!(ec2nodeclass = name, %error, "deleting the instance profile failed; retried");
            self.events
                .warn_node_class(class, "FailedDeletingInstanceProfile", &error.to_string())
                .await;
            return;
        }
        match self
            .cloud
            .launch_templates()
            .delete_for_class(
                self.cloud.clients(),
                &self.cloud.settings().cluster_name,
                name,
            )
            .await
        {
            Ok(count) => tracing::info!(
                ec2nodeclass = name,
                launch_templates = count,
                "deleted the EC2NodeClass's launch templates"
            ),
            Err(error) => {
                tracing::warn!(ec2nodeclass = name, %error, "deleting launch templates failed; retried");
                return;
            }
        }
        let remaining: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        if self
            .patch(name, &json!({"metadata": {"finalizers": remaining, "resourceVersion": class.metadata.resource_version}}), false)
            .await
            .is_some()
        {
            tracing::info!(ec2nodeclass = name, "EC2NodeClass finalized");
        }
    }
}
