//! A prepared simulation: NodePools converted, their instance types resolved from the catalog,
//! workloads expanded into pods, existing nodes with their bound pods. [`Scenario::solve`] runs
//! the solver on it; the plan and the timeline both start here.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_cloud::{Catalog, CatalogOptions, InstanceTypeInfo};
use karpenter_scheduling::{ExistingNode, SolveInput, SolveOptions, SolveResult};

use crate::error::SimulateError;
use crate::load::{Ignored, Manifests};
use crate::nodepool::{default_nodeclass, default_nodepool, name_of, to_scheduling};
use crate::workload::{Workload, expand_all};
use karpenter_cloud::pool_types::{CatalogCache, PoolTypes, PricingOptions, narrow, options_for};

/// Everything the solver needs that does not change between solves, plus the initial pods.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub pricing: PricingOptions,
    /// The v1 NodePools (the default one when the manifests have none).
    pub node_pools: Vec<karpenter_api::v1::NodePool>,
    pub node_classes: Vec<karpenter_api::v1::EC2NodeClass>,
    /// Solver NodePools, in the order of `node_pools`.
    pub pools: Vec<karpenter_scheduling::NodePool>,
    /// Instance types by NodePool name.
    pub pool_types: BTreeMap<String, PoolTypes>,
    /// Every priced type for the default node class (AL2023) and the region.
    pub all_types: Vec<InstanceTypeInfo>,
    pub workloads: Vec<Workload>,
    pub daemonsets: Vec<DaemonSet>,
    /// Given claims plus the StatefulSets' claims.
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub namespaces: Vec<Namespace>,
    /// Nodes from the manifests, with their bound pods.
    pub existing_nodes: Vec<ExistingNode>,
    /// Pods without a node.
    pub pending: Vec<Pod>,
    pub default_node_pool: bool,
    pub ignored: Vec<Ignored>,
    /// What the simulation assumed, for humans.
    pub notes: Vec<String>,
    /// The solver's options (the defaults; `simulate --no-zone-pinning` turns zone pinning
    /// off to compare with upstream).
    pub solve_options: SolveOptions,
    /// What the manifests' NodeOverlays did to the NodePools' instance types (applied to
    /// `pool_types[..].scheduling`, as the controller applies them to its catalogs).
    pub overlays: karpenter_scheduling::overlay::Outcome,
}

/// The EC2NodeClass a NodePool's `nodeClassRef` names, or the default one (AL2023) with a note
/// when the manifests do not have it.
fn node_class_for(
    pool: &karpenter_api::v1::NodePool,
    classes: &[karpenter_api::v1::EC2NodeClass],
    notes: &mut Vec<String>,
) -> Result<karpenter_api::v1::EC2NodeClass, SimulateError> {
    let reference = &pool.spec.template.spec.node_class_ref;
    match classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(reference.name.as_str()))
    {
        Some(class) => Ok(class.clone()),
        None => {
            notes.push(format!(
                "NodePool {}: EC2NodeClass {} is not in the manifests; assuming AL2023 defaults",
                name_of(pool),
                reference.name
            ));
            default_nodeclass()
        }
    }
}

impl Scenario {
    /// Prepares the manifests for simulation.
    pub fn prepare(
        manifests: &Manifests,
        catalog: &Catalog,
        pricing: &PricingOptions,
    ) -> Result<Self, SimulateError> {
        let mut notes = Vec::new();
        notes.extend(karpenter_cloud::regions::price_note(
            &pricing.region,
            catalog.prices().region(),
        ));
        let default_node_pool = manifests.node_pools.is_empty();
        let node_pools = if default_node_pool {
            notes.push("no NodePool in the manifests: using the default NodePool (on-demand and spot, amd64, linux, categories c/m/r, generation > 2)".to_string());
            vec![default_nodepool()?]
        } else {
            manifests.node_pools.clone()
        };
        let mut cache = CatalogCache::new(catalog);
        let PoolCatalog {
            pools,
            pool_types,
            overlays,
        } = pool_catalog(
            &node_pools,
            &manifests.node_classes,
            &manifests.node_overlays,
            &mut cache,
            pricing,
            &mut notes,
        )?;
        let unused = [
            (manifests.node_claims.len(), "NodeClaim(s)"),
            (
                manifests.pod_disruption_budgets.len(),
                "PodDisruptionBudget(s)",
            ),
        ];
        for (count, kind) in unused.into_iter().filter(|(count, _)| *count > 0) {
            notes.push(format!(
                "{count} {kind} not simulated (`karpenter explain -f` reads them)"
            ));
        }
        let all_types = cache
            .instance_types(&CatalogOptions {
                region: pricing.region.clone(),
                spot_discount: pricing.spot_discount,
                ..CatalogOptions::default()
            })?
            .to_vec();
        let expanded = expand_all(&manifests.workloads);
        let mut bound = expanded.bound;
        // Nodes and their pods go through the cluster-state index, the one producer of node
        // shapes (the controller feeds the same index from watches).
        let mut cluster = karpenter_state::Cluster::new();
        for node in &manifests.nodes {
            cluster.apply(karpenter_state::Object::Node(node.clone()));
            for pod in bound.remove(node_name(node)).unwrap_or_default() {
                cluster.apply(karpenter_state::Object::Pod(pod));
            }
        }
        let existing_nodes = manifests
            .nodes
            .iter()
            .filter_map(|node| cluster.state_node_named(node_name(node)))
            .map(|node| node.to_existing())
            .collect();
        let mut pending = expanded.pending;
        for (node, pods) in bound {
            notes.push(format!(
                "{} pod(s) bound to node {node}, which is not in the manifests, are simulated as pending",
                pods.len()
            ));
            pending.extend(pods.into_iter().map(|mut pod| {
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = None;
                }
                pod
            }));
        }
        let mut persistent_volume_claims = manifests.persistent_volume_claims.clone();
        persistent_volume_claims.extend(expanded.persistent_volume_claims);
        Ok(Scenario {
            pricing: pricing.clone(),
            node_pools,
            node_classes: manifests.node_classes.clone(),
            pools,
            pool_types,
            all_types,
            workloads: manifests.workloads.clone(),
            daemonsets: manifests.daemonsets.clone(),
            persistent_volume_claims,
            persistent_volumes: manifests.persistent_volumes.clone(),
            storage_classes: manifests.storage_classes.clone(),
            namespaces: manifests.namespaces.clone(),
            existing_nodes,
            pending,
            default_node_pool,
            ignored: manifests.ignored.clone(),
            notes,
            solve_options: SolveOptions::default(),
            overlays,
        })
    }

    /// The instance types of a NodePool.
    pub fn types_of(&self, pool: &str) -> Option<&PoolTypes> {
        self.pool_types.get(pool)
    }

    /// Runs the solver for `pods` with `existing` nodes in the cluster. The pods are taken by
    /// value: a copy of 100,000 pods is ~0.5 GB (a `Pod` is ~2.4 KB before its heap parts).
    pub fn solve(&self, pods: Vec<Pod>, existing: &[ExistingNode]) -> SolveResult {
        self.solve_returning(pods, existing).0
    }

    /// [`Self::solve`], handing the pods back.
    pub fn solve_returning(
        &self,
        pods: Vec<Pod>,
        existing: &[ExistingNode],
    ) -> (SolveResult, Vec<Pod>) {
        let input = SolveInput {
            node_pools: self.pools.clone(),
            instance_types: self
                .pool_types
                .iter()
                .map(|(name, types)| (name.clone(), types.scheduling.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into(),
            default_instance_types: Vec::new(),
            existing_nodes: existing.to_vec(),
            daemonsets: self.daemonsets.clone(),
            pods: pods.into_iter().map(|p| Arc::new(p.into())).collect(),
            persistent_volume_claims: self.persistent_volume_claims.clone(),
            persistent_volumes: self.persistent_volumes.clone(),
            storage_classes: self.storage_classes.clone(),
            namespaces: self.namespaces.clone(),
            options: self.solve_options.clone(),
            relocating: Default::default(),
            planned: Default::default(),
        };
        let result = karpenter_scheduling::solve(&input);
        let pods = input.pods.into_iter().map(|p| Pod::from(&*p)).collect();
        (result, pods)
    }
}

/// NodePools in the solver's form with their instance types ([`pool_catalog`]).
#[derive(Debug, Clone, Default)]
pub struct PoolCatalog {
    /// Solver NodePools (static ones left out), in the order given.
    pub pools: Vec<karpenter_scheduling::NodePool>,
    /// Instance types by NodePool name, the NodeOverlays applied.
    pub pool_types: BTreeMap<String, PoolTypes>,
    /// What the NodeOverlays did.
    pub overlays: karpenter_scheduling::overlay::Outcome,
}

impl PoolCatalog {
    /// The solver's instance types by NodePool name.
    pub fn instance_types(&self) -> karpenter_scheduling::PoolInstanceTypes {
        self.pool_types
            .iter()
            .map(|(name, types)| (name.clone(), types.scheduling.clone()))
            .collect::<BTreeMap<_, _>>()
            .into()
    }
}

/// Converts `node_pools` for the solver and resolves each one's instance types from the
/// catalog (its EC2NodeClass from `node_classes`, or the default one with a note), then
/// applies `node_overlays`: what `simulate` and `explain -f` both start from, as the
/// controller's catalogs are what its provisioner and disruption pass start from. Static
/// NodePools (`spec.replicas`) are left out, with a note.
pub fn pool_catalog(
    node_pools: &[karpenter_api::v1::NodePool],
    node_classes: &[karpenter_api::v1::EC2NodeClass],
    node_overlays: &[karpenter_api::v1alpha1::NodeOverlay],
    cache: &mut CatalogCache<'_>,
    pricing: &PricingOptions,
    notes: &mut Vec<String>,
) -> Result<PoolCatalog, SimulateError> {
    let mut static_pools = Vec::new();
    let mut pools = Vec::new();
    let mut pool_types = BTreeMap::new();
    for pool in node_pools {
        if pool.spec.replicas.is_some() {
            static_pools.push(name_of(pool));
            continue;
        }
        let converted = to_scheduling(pool)?;
        let class = node_class_for(pool, node_classes, notes)?;
        let types = match options_for(pool, &class, pricing, notes) {
            Some(options) => narrow(cache.instance_types(&options)?, &converted.requirements),
            None => PoolTypes::default(),
        };
        pool_types.insert(converted.name.clone(), types);
        pools.push(converted);
    }
    let overlays = apply_overlays(node_overlays, &pools, &mut pool_types);
    if !static_pools.is_empty() {
        notes.push(format!(
            "static NodePools (spec.replicas) are not simulated: {}",
            static_pools.join(", ")
        ));
    }
    Ok(PoolCatalog {
        pools,
        pool_types,
        overlays,
    })
}

/// Applies `overlays` to every NodePool's solver types, in place (the instance-type infos,
/// the cloud's own view, stay as they are).
fn apply_overlays(
    overlays: &[karpenter_api::v1alpha1::NodeOverlay],
    pools: &[karpenter_scheduling::NodePool],
    pool_types: &mut BTreeMap<String, PoolTypes>,
) -> karpenter_scheduling::overlay::Outcome {
    if overlays.is_empty() {
        return Default::default();
    }
    let mut types: BTreeMap<String, Vec<karpenter_scheduling::InstanceType>> = pool_types
        .iter_mut()
        .map(|(name, t)| (name.clone(), std::mem::take(&mut t.scheduling)))
        .collect();
    let outcome = karpenter_scheduling::overlay::apply(overlays, pools, &mut types);
    for (name, scheduling) in types {
        if let Some(t) = pool_types.get_mut(&name) {
            t.scheduling = scheduling;
        }
    }
    outcome
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}
