//! Isolation of one test inside the shared control plane.
//!
//! Tests run in parallel against one API server, and NodePools, NodeClaims,
//! EC2NodeClasses and Nodes are cluster-scoped. A [`TestScope`] gives a test a
//! unique id, its own namespace, a label that marks everything it creates,
//! unique names for cluster-scoped objects, and a cleanup that removes them.
//!
//! Pods of a test should carry [`TestScope::node_selector`] so that the
//! scheduler only places them on that test's simulated nodes.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Client, Resource};

use crate::error::{Result, kube_err};

/// The label every scoped object carries: `<SCOPE_LABEL>=<scope id>`.
pub const SCOPE_LABEL: &str = "testenv.karpenter-rs.dev/scope";

/// One test's slice of the shared cluster.
pub struct TestScope {
    client: Client,
    id: String,
    namespace: String,
    cluster_kinds: Mutex<Vec<ApiResource>>,
    cleaned: bool,
}

impl std::fmt::Debug for TestScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestScope")
            .field("id", &self.id)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl TestScope {
    /// Creates the scope and its namespace.
    pub async fn create(client: Client, test_name: &str) -> Result<Self> {
        let id = unique_id(test_name);
        let namespace = dns_name(&format!("{id}-{test_name}"));
        let scope = Self {
            client,
            id,
            namespace,
            cluster_kinds: Mutex::new(vec![ApiResource::erase::<Node>(&())]),
            cleaned: false,
        };
        let ns = Namespace {
            metadata: scope.meta(&scope.namespace),
            ..Namespace::default()
        };
        Api::<Namespace>::all(scope.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {}", scope.namespace)))?;
        Ok(scope)
    }

    /// The admin client this scope was created with.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The unique id, e.g. `t3f9a1c`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The test's own namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A unique DNS-1123 name for a cluster-scoped object: `<id>-<base>`.
    pub fn name(&self, base: &str) -> String {
        dns_name(&format!("{}-{base}", self.id))
    }

    /// The scope label, to put on every object the test creates.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(SCOPE_LABEL.to_string(), self.id.clone())])
    }

    /// `testenv.karpenter-rs.dev/scope=<id>`, for list calls.
    pub fn label_selector(&self) -> String {
        format!("{SCOPE_LABEL}={}", self.id)
    }

    /// A pod nodeSelector that matches only this scope's simulated nodes.
    pub fn node_selector(&self) -> BTreeMap<String, String> {
        self.labels()
    }

    /// Object metadata with `name` and the scope label.
    pub fn meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(self.labels()),
            ..ObjectMeta::default()
        }
    }

    /// Object metadata in the scope's namespace.
    pub fn namespaced_meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(self.namespace.clone()),
            ..self.meta(name)
        }
    }

    /// Adds the scope label to existing metadata.
    pub fn label(&self, meta: &mut ObjectMeta) {
        meta.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(SCOPE_LABEL.to_string(), self.id.clone());
    }

    /// Registers a cluster-scoped kind whose scope-labelled objects [`cleanup`](Self::cleanup)
    /// deletes. Nodes are always registered.
    pub fn track_kind(&self, resource: ApiResource) {
        let mut kinds = self
            .cluster_kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !kinds
            .iter()
            .any(|k| k.plural == resource.plural && k.group == resource.group)
        {
            kinds.push(resource);
        }
    }

    /// Registers a typed cluster-scoped kind for cleanup.
    pub fn track<K>(&self)
    where
        K: Resource<DynamicType = ()>,
    {
        self.track_kind(ApiResource::erase::<K>(&()));
    }

    /// Deletes the scope's cluster-scoped objects (by label) and its namespace.
    ///
    /// Call it at the end of a passing test. A failing test leaves its objects
    /// behind for inspection (`kubectl get all,nodes -l testenv.karpenter-rs.dev/scope=<id>`);
    /// they disappear with the environment.
    pub async fn cleanup(mut self) -> Result<()> {
        let kinds = self
            .cluster_kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let selector = ListParams::default().labels(&self.label_selector());
        for kind in kinds {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &kind);
            api.delete_collection(&DeleteParams::default(), &selector)
                .await
                .map_err(kube_err(format!(
                    "deleting {} labelled {}",
                    kind.plural,
                    self.label_selector()
                )))?;
        }
        match Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                return Err(kube_err(format!("deleting namespace {}", self.namespace))(
                    e,
                ));
            }
        }
        self.cleaned = true;
        Ok(())
    }
}

impl Drop for TestScope {
    fn drop(&mut self) {
        if !self.cleaned {
            eprintln!(
                "karpenter-testenv: scope {} was not cleaned up; its objects stay for inspection: \
                 namespace {}, cluster objects labelled {}",
                self.id,
                self.namespace,
                self.label_selector()
            );
        }
    }
}

/// `t` + 6 hex digits, different for every call in every process.
fn unique_id(salt: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(salt.as_bytes());
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(nanos);
    format!("t{:06x}", hasher.finish() & 0xff_ffff)
}

/// Lower-cases, replaces anything outside `[a-z0-9-]` with `-`, trims to 63 characters.
pub fn dns_name(raw: &str) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.truncate(63);
    name.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_are_lower_case_and_at_most_63_characters() {
        let name = dns_name(
            "T123-Scheduler_Binds::Pods To_Nodes-and-a-very-long-tail-that-goes-on-and-on",
        );
        assert!(name.len() <= 63);
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(name.starts_with("t123-scheduler-binds--pods-to-nodes"));
    }

    #[test]
    fn unique_ids_differ_between_calls() {
        let a = unique_id("x");
        let b = unique_id("x");
        assert_ne!(a, b);
        assert_eq!(a.len(), 7);
    }
}
