//! The instance types every live NodePool may launch, listed from the cloud and converted for
//! the solver once, then shared by the loops that read them (the provisioner, the disruption
//! pass and its simulations, the NodeClaim conditions) instead of each converting its own copy
//! per pass: one copy in memory, one listing per change.
//!
//! A conversion is reused while the NodePools and EC2NodeClasses (names, uids and spec
//! generations: a status update, such as a NodePool's node count after every launch, is not a
//! change)
//! and the cloud's [`CloudProvider::catalog_version`] (offerings marked unavailable or back,
//! a new instance-type listing or prices) are what they were, for at most [`MAX_AGE`], a
//! safety net for a change none of them shows. Concurrent callers wait for one listing rather
//! than each making one. A new conversion is made after the old one is let go and from
//! listings consumed as they are converted, so the two are not both whole in memory (with the
//! embedded catalog: ~2 MiB converted, ~3 MiB listed for one NodePool).
//!
//! NodeOverlays (gate `NodeOverlay`: the index holds none without it) are applied here, to the
//! converted types ([`karpenter_scheduling::overlay::apply`]), so every solve, every
//! consolidation decision and the NodeClaim conditions see the same overlaid prices and
//! capacities; an overlay's spec change (its generation) makes a new conversion. What became
//! of each overlay ([`PoolCatalogs::overlays`]) is what the `nodeoverlay.controller` loop
//! writes as its status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::v1::NodePool;
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_cloud::CloudProvider;
use karpenter_scheduling::{InstanceType, PoolInstanceTypes};

use crate::cluster::index::ClusterCache;
use crate::report::events::Events;

/// How long a conversion is reused at most.
pub const MAX_AGE: Duration = Duration::from_secs(300);

/// Live NodePools in the solver's form with their instance types.
#[derive(Debug, Clone, Default)]
pub struct PoolCatalogs {
    /// In the solver's form; a NodePool that does not convert is left out (logged).
    pub solver_pools: Vec<karpenter_scheduling::NodePool>,
    /// Instance types by NodePool name; a NodePool whose listing failed or came back empty is
    /// left out (logged, and a `NoCompatibleInstanceTypes` event for an empty one).
    pub instance_types: PoolInstanceTypes,
    /// The NodePools kept, by name.
    pub by_name: BTreeMap<String, NodePool>,
    /// What the NodeOverlays did: a verdict per overlay, the changed types.
    pub overlays: karpenter_scheduling::overlay::Outcome,
    /// The NodeOverlays applied (their names and spec generations), as the verdicts saw them.
    pub overlay_versions: Vec<(String, Option<i64>)>,
}

/// What a conversion was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    /// Each live NodePool's version.
    pools: Vec<Version>,
    /// Each EC2NodeClass's version (the kwok cloud reads its kubelet settings; the AWS
    /// cloud's own version counts its status changes too).
    classes: Vec<Version>,
    /// Each NodeOverlay's version.
    overlays: Vec<Version>,
    cloud: u64,
}

/// Name, uid and spec generation of an object: what the conversion reads is its spec (and
/// the uid, for the owner references of NodeClaims made from it). An object without a
/// generation counts by its resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    name: Option<String>,
    uid: Option<String>,
    generation: Option<i64>,
    resource_version: Option<String>,
}

impl Version {
    fn of(meta: &ObjectMeta) -> Version {
        Version {
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            generation: meta.generation,
            resource_version: meta
                .generation
                .is_none()
                .then(|| meta.resource_version.clone())
                .flatten(),
        }
    }
}

#[derive(Debug)]
struct Entry {
    key: Key,
    made: Instant,
    value: Arc<PoolCatalogs>,
}

/// The shared conversion (cheap to clone: every clone reads the same one).
#[derive(Debug, Clone, Default)]
pub struct Catalogs {
    entry: Arc<tokio::sync::Mutex<Option<Entry>>>,
}

impl Catalogs {
    /// The catalogs of the NodePools the index holds now (those being deleted left out).
    pub async fn get<C: CloudProvider>(
        &self,
        cache: &ClusterCache,
        cloud: &C,
        events: &Events,
    ) -> Arc<PoolCatalogs> {
        let (pools, classes, overlays): (Vec<NodePool>, Vec<_>, Vec<NodeOverlay>) = {
            let index = cache.lock();
            (
                index
                    .node_pools()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .cloned()
                    .collect(),
                index
                    .node_classes()
                    .map(|c| Version::of(&c.metadata))
                    .collect(),
                index
                    .node_overlays()
                    .filter(|o| o.metadata.deletion_timestamp.is_none())
                    .cloned()
                    .collect(),
            )
        };
        let key = Key {
            pools: pools.iter().map(|p| Version::of(&p.metadata)).collect(),
            classes,
            overlays: overlays.iter().map(|o| Version::of(&o.metadata)).collect(),
            // Read before listing: a change during the listing makes the next call list again.
            cloud: cloud.catalog_version(),
        };
        let mut entry = self.entry.lock().await;
        if let Some(fresh) = entry
            .as_ref()
            .filter(|e| e.key == key && e.made.elapsed() < MAX_AGE)
        {
            return fresh.value.clone();
        }
        // Let the old conversion go first: callers still holding it keep it alive, the cache
        // does not.
        *entry = None;
        let made = Instant::now();
        let value = Arc::new(pool_catalogs(cloud, events, pools, &overlays).await);
        *entry = Some(Entry {
            key,
            made,
            value: value.clone(),
        });
        value
    }

    /// The last conversion made, without listing (`None` before the first one, or while one
    /// is being made).
    pub fn latest(&self) -> Option<Arc<PoolCatalogs>> {
        let entry = self.entry.try_lock().ok()?;
        entry.as_ref().map(|e| e.value.clone())
    }

    /// Just the instance types by NodePool name.
    pub async fn instance_types<C: CloudProvider>(
        &self,
        cache: &ClusterCache,
        cloud: &C,
        events: &Events,
    ) -> PoolInstanceTypes {
        self.get(cache, cloud, events).await.instance_types.clone()
    }
}

/// Converts `pools` for the solver, lists their instance types from the cloud and applies
/// `overlays` to them.
pub async fn pool_catalogs<C: CloudProvider>(
    cloud: &C,
    events: &Events,
    pools: Vec<NodePool>,
    overlays: &[NodeOverlay],
) -> PoolCatalogs {
    let mut solver_pools = Vec::new();
    let mut instance_types: BTreeMap<String, Vec<InstanceType>> = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let converted = match karpenter_scheduling::v1::node_pool(&pool) {
            Ok(converted) => converted,
            Err(error) => {
                tracing::error!(nodepool = %name, %error, "NodePool left out: it does not convert");
                continue;
            }
        };
        match cloud.instance_types(&pool).await {
            Ok(infos) if !infos.is_empty() => {
                // Each listed type is dropped as soon as it is converted.
                instance_types.insert(
                    name.clone(),
                    infos.into_iter().map(InstanceType::from).collect(),
                );
            }
            Ok(_) => {
                events
                    .warn_node_pool(&pool, "NoCompatibleInstanceTypes", "NodePool requirements filtered out all compatible available instance types")
                    .await;
                continue;
            }
            Err(error) => {
                tracing::error!(nodepool = %name, %error, "instance types unavailable; NodePool left out this time");
                continue;
            }
        }
        solver_pools.push(converted);
        by_name.insert(name, pool);
    }
    let outcome =
        karpenter_scheduling::overlay::apply(overlays, &solver_pools, &mut instance_types);
    PoolCatalogs {
        solver_pools,
        instance_types: Arc::new(instance_types),
        by_name,
        overlays: outcome,
        overlay_versions: overlays
            .iter()
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    o.metadata.generation,
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use karpenter_api::v1::NodeClaim;
    use karpenter_cloud::{
        Catalog, CatalogOptions, CloudError, DriftReason, InstanceTypeInfo, OfferingRef,
    };
    use karpenter_state::Object;

    use super::*;

    /// A cloud that counts its instance-type listings.
    struct CountingCloud {
        types: Vec<InstanceTypeInfo>,
        listings: AtomicUsize,
        version: AtomicU64,
    }

    impl CountingCloud {
        fn new() -> Self {
            let types = Catalog::embedded()
                .unwrap_or_else(|e| panic!("embedded catalog: {e}"))
                .instance_types(&CatalogOptions::default())
                .unwrap_or_else(|e| panic!("default options: {e}"))
                .into_iter()
                .take(3)
                .collect();
            CountingCloud {
                types,
                listings: AtomicUsize::new(0),
                version: AtomicU64::new(0),
            }
        }

        fn listings(&self) -> usize {
            self.listings.load(Ordering::SeqCst)
        }
    }

    impl CloudProvider for CountingCloud {
        fn name(&self) -> &'static str {
            "counting"
        }
        async fn create(&self, _: &NodeClaim) -> Result<NodeClaim, CloudError> {
            unreachable!("not launched in these tests")
        }
        async fn delete(&self, _: &NodeClaim) -> Result<(), CloudError> {
            unreachable!("not deleted in these tests")
        }
        async fn get(&self, _: &str) -> Result<NodeClaim, CloudError> {
            unreachable!("not read in these tests")
        }
        async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
            Ok(Vec::new())
        }
        async fn instance_types(&self, _: &NodePool) -> Result<Vec<InstanceTypeInfo>, CloudError> {
            self.listings.fetch_add(1, Ordering::SeqCst);
            Ok(self.types.clone())
        }
        async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
            Ok(None)
        }
        fn mark_unavailable(&self, _: &[OfferingRef]) {
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        fn catalog_version(&self) -> u64 {
            self.version.load(Ordering::SeqCst)
        }
    }

    /// A NodePool at spec generation `generation` (its resourceVersion says which write).
    fn pool(name: &str, generation: i64) -> Object {
        pool_written(name, generation, &generation.to_string())
    }

    fn pool_written(name: &str, generation: i64, resource_version: &str) -> Object {
        let mut pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "generation": generation, "resourceVersion": resource_version},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        pool.metadata.uid = Some(format!("uid-{name}"));
        Object::NodePool(pool)
    }

    fn class(name: &str, generation: i64) -> Object {
        let mut class: karpenter_api::v1::EC2NodeClass =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                "metadata": {"name": name, "generation": generation, "resourceVersion": generation.to_string()},
                "spec": {
                    "role": "KarpenterNodeRole",
                    "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]
                }
            }))
            .unwrap_or_else(|e| panic!("{e}"));
        class.metadata.uid = Some(format!("uid-{name}"));
        Object::EC2NodeClass(class)
    }

    /// A NodeOverlay setting every type's price to `price`.
    fn overlay(name: &str, generation: i64, price: &str) -> Object {
        Object::NodeOverlay(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                "metadata": {"name": name, "generation": generation},
                "spec": {"requirements": [], "price": price}
            }))
            .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[tokio::test]
    async fn overlays_in_the_index_change_the_prices_every_loop_reads_and_their_verdicts_are_kept()
    {
        let (cache, cloud, events) = (ClusterCache::new(), CountingCloud::new(), events());
        cache.apply(pool("general", 1));
        cache.apply(overlay("cheap", 1, "0.001"));
        let catalogs = Catalogs::default();
        let got = catalogs.get(&cache, &cloud, &events).await;
        assert!(
            got.instance_types["general"]
                .iter()
                .flat_map(|t| &t.offerings)
                .all(|o| o.price == 0.001)
        );
        assert_eq!(
            got.overlays.verdicts["cheap"],
            karpenter_scheduling::overlay::Verdict::Applied { instance_types: 3 }
        );
        assert_eq!(got.overlay_versions, [("cheap".to_owned(), Some(1))]);
        cache.apply(overlay("cheap", 2, "5"));
        let edited = catalogs.get(&cache, &cloud, &events).await;
        assert!(
            edited.instance_types["general"]
                .iter()
                .flat_map(|t| &t.offerings)
                .all(|o| o.price == 5.0),
            "an edited overlay makes a new conversion"
        );
    }

    fn events() -> Events {
        let config = kube::Config::new(
            "http://127.0.0.1:9"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        Events::new(kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}")))
    }

    #[tokio::test]
    async fn loops_asking_for_an_unchanged_catalog_share_one_listing() {
        let (cache, cloud, events) = (ClusterCache::new(), CountingCloud::new(), events());
        cache.apply(pool("general", 1));
        let catalogs = Catalogs::default();
        let first = catalogs.get(&cache, &cloud, &events).await;
        let second = catalogs.clone().get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 1);
        assert!(Arc::ptr_eq(&first, &second), "one copy, shared");
        assert_eq!(first.instance_types["general"].len(), 3);
        assert_eq!(first.solver_pools.len(), 1);
    }

    #[tokio::test]
    async fn an_offering_marked_unavailable_or_an_edited_nodepool_or_nodeclass_lists_again() {
        let (cache, cloud, events) = (ClusterCache::new(), CountingCloud::new(), events());
        cache.apply(pool("general", 1));
        let catalogs = Catalogs::default();
        catalogs.get(&cache, &cloud, &events).await;
        cloud.mark_unavailable(&[]);
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 2, "after the cloud's catalog changed");
        cache.apply(pool("general", 2));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 3, "after the NodePool changed");
        cache.apply(pool_written("general", 2, "17"));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(
            cloud.listings(),
            3,
            "a status update (new resourceVersion, same generation) is not a change"
        );
        cache.apply(class("default", 7));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 4, "after an EC2NodeClass appeared");
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 4, "nothing changed");
        cache.apply(class("default", 8));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 5, "after the EC2NodeClass changed");
        cache.apply(pool("spot", 1));
        let both = catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 7, "a new NodePool: both listed");
        cache.apply(overlay("cheap", 1, "0.001"));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 9, "after a NodeOverlay appeared");
        cache.apply(overlay("cheap", 1, "0.001"));
        catalogs.get(&cache, &cloud, &events).await;
        assert_eq!(cloud.listings(), 9, "the same overlay again");
        assert_eq!(
            both.instance_types.keys().collect::<Vec<_>>(),
            ["general", "spot"]
        );
    }
}
