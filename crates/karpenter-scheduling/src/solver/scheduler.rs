//! The solver: setup (compile pods, DaemonSets, NodePool templates, catalogs, topology and
//! existing nodes) and the main loop in upstream order.
//!
//! Pods are queued by CPU desc, memory desc, creation time, UID. Each popped pod tries existing
//! nodes (initialized first, then by name), then the NodeClaims created so far (fewest pods first,
//! stable), then a new NodeClaim per NodePool in weight order. A pod that fails is relaxed one
//! preference at a time and retried; if it still fails it goes back to the queue unrelaxed. The
//! loop ends when the queue is empty or a full cycle made no progress.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::hash::{FxHashMap, FxHashSet};
use crate::input::{MinValuesPolicy, SolveInput};

use crate::intern::{Interner, Sym};
use crate::output::{PodRef, SolveResult};
use crate::pod_record::PodRecord;
use crate::requirement::Requirement;
use crate::requirements::Requirements;
use crate::solver::daemons::{daemon_compatible, overhead_groups};
use crate::solver::dims::{self, Dims};
use crate::solver::pod::{Compiler, PodInfo, PodShape, ShapeCache};
use crate::solver::preferences::{self, Relaxation};
use crate::solver::reservations::Reservations;
use crate::solver::selector::{Labels, label_value};
use crate::solver::state::{Attempt, Claim, ExistingPod, ExistingState, PoolState, Reasons};
use crate::solver::topology::{GroupKind, GroupRef, GroupSpec, PodView, Topology};
use crate::solver::type_index::TypeIndex;
use crate::solver::volumes::VolumeIndex;
use crate::taints;

/// Existing pods (node index, pod index) by label (key, value).
type PodsByLabel = FxHashMap<(Sym, Sym), Vec<(u32, u32)>>;

/// Interned well-known keys.
#[derive(Debug, Clone, Copy)]
pub struct Keys {
    pub hostname: Sym,
    pub zone: Sym,
    pub capacity_type: Sym,
    pub instance_type: Sym,
    pub nodepool: Sym,
    pub reservation_id: Sym,
}

/// All state of one solve.
#[derive(Debug)]
pub struct Solver<'a> {
    pub(crate) input: &'a SolveInput,
    pub(crate) interner: Interner,
    pub(crate) dims: Dims,
    pub(crate) keys: Keys,
    pub(crate) well_known: FxHashSet<Sym>,
    pub(crate) strict_keys: FxHashSet<Sym>,
    pub(crate) pods: Vec<PodInfo>,
    /// The pods' compiled shapes, shared by pods of one controller.
    pub(crate) shapes: ShapeCache,
    pub(crate) pod_errors: Vec<(PodRef, String)>,
    pub(crate) daemons: Vec<PodInfo>,
    /// The existing nodes ranked by free share, kept as pods land
    /// ([`crate::SolveOptions::spread_over_existing`]; built at its first use).
    pub(crate) spread_rank: Option<crate::solver::spread::SpreadRank>,
    pub(crate) pools: Vec<PoolState<'a>>,
    pub(crate) existing: Vec<ExistingState>,
    pub(crate) existing_pods: Vec<Vec<ExistingPod>>,
    /// The existing nodes' pods by label (key, value), as (node, pod) indexes in node order:
    /// built on the first new topology group, so a group counts only the pods that carry its
    /// selector's required label instead of every pod of the cluster.
    existing_by_label: Option<PodsByLabel>,
    pub(crate) claims: Vec<Claim>,
    pub(crate) order: BTreeMap<(usize, i64), usize>,
    pub(crate) order_front: i64,
    pub(crate) order_back: i64,
    pub(crate) topology: Topology,
    pub(crate) hostname_counter: usize,
    pub(crate) tolerate_prefer_no_schedule: bool,
    /// `(pod, existing node index)` placements.
    pub(crate) placements: Vec<(usize, usize)>,
    /// Pods left unscheduled with their reasons.
    pub(crate) failures: Vec<(usize, Reasons)>,
    pub(crate) min_values_policy: MinValuesPolicy,
    /// Per owned group: claims whose hostname already holds a pod the (hostname anti-affinity)
    /// group selects.
    pub(crate) host_blocked: Vec<usize>,
    pub(crate) namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub(crate) volumes: VolumeIndex<'a>,
    /// Topology keys whose domain universe is built.
    pub(crate) universe_built: FxHashSet<Sym>,
    /// What the loop reports besides its decisions ([`crate::SolveStats`]).
    pub(crate) stats: crate::output::SolveStats,
    /// Free slots of the capacity reservations the catalogs offer.
    pub(crate) reservations: Reservations,
    /// Per pod: its last attempt was deferred for reserved capacity (strict mode).
    pub(crate) deferred: Vec<bool>,
}

/// Runs one scheduling simulation.
pub fn solve(input: &SolveInput) -> SolveResult {
    let mut solver = Solver::new(input);
    solver.run();
    solver.result()
}

/// Runs one scheduling simulation over `input` plus pods fed in chunks (each chunk is compiled
/// and dropped before the next is produced), for very large batches.
pub fn solve_chunked(
    input: &SolveInput,
    chunks: impl IntoIterator<Item = Vec<PodRecord>>,
) -> SolveResult {
    let mut solver = Solver::new(input);
    for chunk in chunks {
        solver.add_pods(&chunk);
    }
    solver.run();
    solver.result()
}

/// What an existing node's pod contributes, compiled: namespace, labels, shape, DaemonSet-owned.
type ExistingFacts = (Sym, Labels, Arc<PodShape>, bool);

/// What one solve leaves to the next over the same cluster: the interned strings, the resource
/// dimensions, the compiled pod shapes, and each existing pod's compiled facts by its record.
/// A disruption pass simulates the same 5,000 nodes' pods a dozen times; compiling them once
/// (their labels interned, their specs compiled) is most of what each simulation saved.
///
/// Valid only across inputs with the same namespaces and options (one simulator's); it keeps
/// the records and specs it has seen alive, so an address it is keyed by is never reused.
#[derive(Debug, Default)]
pub struct SolveCache {
    interner: Option<Interner>,
    dims: Option<Dims>,
    shapes: ShapeCache,
    existing: FxHashMap<usize, (Arc<PodRecord>, ExistingFacts)>,
}

/// [`solve`] with what earlier solves over the same cluster compiled ([`SolveCache`]).
pub fn solve_cached(input: &SolveInput, cache: &mut SolveCache) -> SolveResult {
    let mut solver = Solver::build(
        input,
        cache.interner.take().unwrap_or_default(),
        cache.dims.take().unwrap_or_default(),
        std::mem::take(&mut cache.shapes),
        Some(&mut cache.existing),
    );
    solver.add_pods(input.pods.iter().map(|p| &**p));
    solver.run();
    let result = solver.result();
    cache.interner = Some(solver.interner);
    cache.dims = Some(solver.dims);
    cache.shapes = solver.shapes;
    result
}

impl<'a> Solver<'a> {
    /// A solver for `input` without compiling `input.pods` (see [`Self::add_pods`]).
    pub fn without_pods(input: &'a SolveInput) -> Self {
        Self::build(
            input,
            Interner::new(),
            Dims::default(),
            ShapeCache::default(),
            None,
        )
    }

    /// [`Self::without_pods`] starting from `interner`, `dims` and `shapes`, and, with
    /// `memo`, each existing pod compiled once across solves.
    fn build(
        input: &'a SolveInput,
        mut interner: Interner,
        mut dims: Dims,
        mut shapes: ShapeCache,
        mut memo: Option<&mut FxHashMap<usize, (Arc<PodRecord>, ExistingFacts)>>,
    ) -> Self {
        use karpenter_api::labels as l;
        let keys = Keys {
            hostname: interner.intern(l::HOSTNAME),
            zone: interner.intern(l::ZONE),
            capacity_type: interner.intern(l::CAPACITY_TYPE),
            instance_type: interner.intern(l::INSTANCE_TYPE),
            nodepool: interner.intern(l::NODEPOOL),
            reservation_id: interner.intern(l::CAPACITY_RESERVATION_ID),
        };
        let mut well_known: FxHashSet<Sym> = l::WELL_KNOWN_LABELS
            .iter()
            .chain(l::AWS_WELL_KNOWN_LABELS)
            .map(|k| interner.intern(k))
            .collect();
        for k in &input.options.extra_well_known_labels {
            well_known.insert(interner.intern(k));
        }
        for pool in &input.node_pools {
            for name in pool.limits.0.keys() {
                if name != l::RESOURCE_NODES {
                    dims.index(name);
                }
            }
        }
        let namespaces: BTreeMap<String, BTreeMap<String, String>> = input
            .namespaces
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    n.metadata.labels.clone().unwrap_or_default(),
                )
            })
            .collect();
        let volumes = VolumeIndex::new(
            &input.persistent_volume_claims,
            &input.persistent_volumes,
            &input.storage_classes,
        );
        let pods = Vec::with_capacity(input.pods.len());
        let pod_errors = Vec::new();
        let mut daemons = Vec::new();
        {
            let mut compiler = Compiler {
                interner: &mut interner,
                dims: &mut dims,
                namespaces: &namespaces,
                shapes: &mut shapes,
            };
            for (i, ds) in input.daemonsets.iter().enumerate() {
                let template = &ds.spec.template;
                let pod = PodRecord::from(k8s_openapi::api::core::v1::Pod {
                    metadata: template.metadata.clone().unwrap_or_default(),
                    spec: template.spec.clone(),
                    status: None,
                });
                if let Ok(info) = compiler.compile(i, &pod, crate::input::PreferencePolicy::Ignore)
                {
                    daemons.push(info);
                }
            }
        }
        // Existing nodes.
        let mut topology = Topology::new(keys.hostname);
        let mut existing = Vec::new();
        let mut existing_pods = Vec::new();
        let pools_by_name: BTreeMap<&str, &crate::input::NodePool> = input
            .node_pools
            .iter()
            .map(|p| (p.name.as_str(), p))
            .collect();
        let mut inverse_specs: Vec<(GroupSpec, usize, Sym)> = Vec::new();
        for (ni, node) in input.existing_nodes.iter().enumerate() {
            let mut reqs = Requirements::from_labels(node.labels.iter(), &mut interner);
            let host = node
                .labels
                .get(l::HOSTNAME)
                .cloned()
                .unwrap_or_else(|| node.name.clone());
            let host = interner.intern(&host);
            reqs.set(keys.hostname, Requirement::is_in([host]));
            let pool = node
                .labels
                .get(l::NODEPOOL)
                .and_then(|p| pools_by_name.get(p.as_str()));
            let taints: Vec<_> = node
                .taints
                .iter()
                .filter(|t| {
                    node.initialized
                        || !node.labels.contains_key(l::NODEPOOL)
                        || !(taints::is_ephemeral(t)
                            || pool.is_some_and(|p| {
                                p.startup_taints
                                    .iter()
                                    .any(|s| s.key == t.key && s.effect == t.effect)
                            }))
                })
                .cloned()
                .collect();
            let taint_set = topology.taint_set(&taints);
            let mut remaining = dims.res_known(&node.allocatable);
            let allocatable = remaining.clone();
            let mut host_ports = Vec::new();
            let mut ds_used = dims::Res::new();
            let mut metas = Vec::new();
            for p in &node.pods {
                let mut compiler = Compiler {
                    interner: &mut interner,
                    dims: &mut dims,
                    namespaces: &namespaces,
                    shapes: &mut shapes,
                };
                if !p.is_active() {
                    continue;
                }
                let address = Arc::as_ptr(p) as usize;
                let cached = memo
                    .as_ref()
                    .and_then(|m| m.get(&address))
                    .map(|(_, facts)| facts.clone());
                let (namespace, labels, shape, owned_by_daemonset) = match cached {
                    Some(facts) => facts,
                    None => {
                        let Ok(facts) = compiler.existing(p) else {
                            continue;
                        };
                        if let Some(m) = memo.as_mut() {
                            m.insert(address, (Arc::clone(p), facts.clone()));
                        }
                        facts
                    }
                };
                dims::sub(&mut remaining, &shape.requests);
                host_ports.extend(shape.host_ports.iter().cloned());
                if owned_by_daemonset {
                    dims::add(&mut ds_used, &shape.requests);
                }
                for t in shape.affinity_terms.iter().filter(|t| t.anti && t.required) {
                    inverse_specs.push((
                        GroupSpec {
                            kind: GroupKind::AntiAffinity,
                            key: t.key,
                            namespaces: t.namespaces.clone(),
                            selector: t.selector.clone(),
                            max_skew: i32::MAX,
                            min_domains: None,
                            filter: Default::default(),
                        },
                        ni,
                        t.key,
                    ));
                }
                metas.push(ExistingPod { namespace, labels });
            }
            let empty = FxHashSet::default();
            let mut ds_needed = dims::Res::new();
            for d in &daemons {
                if daemon_compatible(d, &node.taints, &reqs, &empty, &interner) {
                    dims::add(&mut ds_needed, &d.requests);
                }
            }
            dims::sub(&mut ds_needed, &ds_used);
            for v in ds_needed.iter_mut() {
                *v = (*v).max(0);
            }
            dims::sub(&mut remaining, &ds_needed);
            existing.push(ExistingState {
                index: ni,
                name: node.name.clone(),
                requirements: reqs,
                taints,
                taint_set,
                remaining,
                allocatable,
                host_ports,
                initialized: node.initialized,
                deleting: node.deleting,
                refuses_relocated_pods: node.refuses_relocated_pods,
            });
            existing_pods.push(metas);
        }
        let mut solver = Solver {
            spread_rank: None,
            shapes,
            input,
            interner,
            dims,
            keys,
            well_known,
            strict_keys: FxHashSet::default(),
            pods,
            pod_errors,
            daemons,
            pools: Vec::new(),
            existing,
            existing_pods,
            existing_by_label: None,
            claims: Vec::new(),
            order: BTreeMap::new(),
            order_front: 0,
            order_back: 0,
            topology,
            hostname_counter: 0,
            tolerate_prefer_no_schedule: false,
            placements: Vec::new(),
            failures: Vec::new(),
            min_values_policy: input.options.min_values_policy,
            host_blocked: Vec::new(),
            namespaces,
            volumes,
            universe_built: FxHashSet::default(),
            stats: crate::output::SolveStats::default(),
            reservations: Reservations::default(),
            deferred: Vec::new(),
        };
        solver.build_pools();
        solver.reservations = Reservations::new(
            solver.pools.iter().map(|p| &p.catalog),
            input.options.reserved_offering_mode,
        );
        solver.build_topology(inverse_specs);
        // Initialized first, then by name; the pods of each node move with it.
        let mut nodes: Vec<(ExistingState, Vec<ExistingPod>)> =
            std::mem::take(&mut solver.existing)
                .into_iter()
                .zip(std::mem::take(&mut solver.existing_pods))
                .collect();
        nodes.sort_by(|(a, _), (b, _)| {
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        for (e, p) in nodes {
            solver.existing.push(e);
            solver.existing_pods.push(p);
        }
        // Indexes of the node order above, never of the one before.
        solver.existing_by_label = None;
        solver
    }

    /// A solver for `input` with `input.pods` compiled.
    pub fn new(input: &'a SolveInput) -> Self {
        let mut solver = Solver::without_pods(input);
        solver.add_pods(input.pods.iter().map(|p| &**p));
        solver
    }

    /// Compiles more pods to place (the input's own pods are not added). Callers with many pods
    /// can feed them in chunks and drop each chunk, keeping memory low.
    pub fn add_pods<'p>(&mut self, pods: impl IntoIterator<Item = &'p PodRecord>) {
        let policy = self.input.options.preference_policy;
        let first = self.pods.len();
        // Existing node name -> index, only when there are plans to resolve.
        let planned_nodes: Option<FxHashMap<&str, usize>> =
            (!self.input.planned.is_empty()).then(|| {
                self.existing
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.name.as_str(), i))
                    .collect()
            });
        let mut compiler = Compiler {
            interner: &mut self.interner,
            dims: &mut self.dims,
            namespaces: &self.namespaces,
            shapes: &mut self.shapes,
        };
        for pod in pods {
            let index = self.pods.len();
            match compiler.compile(index, pod, policy) {
                Ok(mut info) => {
                    info.relocating = !self.input.relocating.is_empty()
                        && self.input.relocating.contains(&info.pod_ref.uid);
                    info.planned = planned_nodes
                        .as_ref()
                        .and_then(|nodes| {
                            nodes.get(self.input.planned.get(&info.pod_ref.uid)?.as_str())
                        })
                        .copied();
                    if !info.claims.is_empty() {
                        match self.volumes.alternatives(
                            &info.pod_ref.namespace,
                            &info.claims,
                            compiler.interner,
                        ) {
                            Ok(alts) => info.volume_alternatives = alts,
                            Err(e) => {
                                self.pod_errors.push((info.pod_ref.clone(), e));
                                continue;
                            }
                        }
                    }
                    self.pods.push(info);
                }
                Err(e) => self.pod_errors.push((PodRef::of(pod), e.to_string())),
            }
        }
        // Groups of every pod as written (unrelaxed), counted from existing pods.
        for i in first..self.pods.len() {
            let relax = Relaxation::new(&self.pods[i]);
            let tolerations = preferences::tolerations(&self.pods[i], &relax);
            let specs =
                preferences::group_specs(&self.pods[i], &relax, &tolerations, &self.interner);
            for s in specs {
                self.ensure_group(s);
            }
        }
    }

    fn build_pools(&mut self) {
        use karpenter_api::labels as l;
        let input = self.input;
        let mut order: Vec<&crate::input::NodePool> = input.node_pools.iter().collect();
        order.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));
        let registered = self.interner.intern(l::REGISTERED);
        let initialized = self.interner.intern(l::INITIALIZED);
        let yes = self.interner.intern("true");
        for p in &order {
            for it in input.instance_types_for(&p.name) {
                for name in it.capacity.0.keys() {
                    self.dims.index(name);
                }
            }
        }
        let catalogs: Vec<TypeIndex> = order
            .iter()
            .map(|p| {
                TypeIndex::build(
                    input.instance_types_for(&p.name),
                    &mut self.interner,
                    &self.dims,
                )
            })
            .collect();
        for c in &catalogs {
            self.well_known.extend(c.defined_keys());
            self.well_known.extend(c.offering_keys.iter().copied());
        }
        for (spec, catalog) in order.into_iter().zip(catalogs) {
            let name = self.interner.intern(&spec.name);
            let mut template = Requirements::from_specs(&spec.requirements, &mut self.interner);
            let labels = Requirements::from_labels(spec.labels.iter(), &mut self.interner);
            template.add_all(&labels, &self.interner);
            template.add(
                self.keys.nodepool,
                Requirement::is_in([name]),
                &self.interner,
            );
            template.add(registered, Requirement::is_in([yes]), &self.interner);
            template.add(initialized, Requirement::is_in([yes]), &self.interner);
            let mut template_its = catalog.all.clone();
            catalog.narrow_by_requirements(&mut template_its, &template, &self.interner);
            catalog.narrow_by_offerings(&mut template_its, &template, &self.interner);
            let disabled = if catalog.is_empty() {
                Some("no instance types are offered to this nodepool".to_string())
            } else if template_its.is_empty() {
                Some("no instance type is compatible with the nodepool requirements".to_string())
            } else {
                None
            };
            if spec.taints.iter().any(|t| t.effect == "PreferNoSchedule") {
                self.tolerate_prefer_no_schedule = true;
            }
            let overhead_groups = overhead_groups(
                &self.daemons,
                &spec.taints,
                &template,
                &catalog,
                &template_its,
                &self.well_known,
                &self.interner,
            );
            let taint_set = self.topology.taint_set(&spec.taints);
            // Limits minus what existing nodes of the pool already hold.
            let mut remaining: Vec<Option<i128>> = vec![None; self.dims.len()];
            let mut nodes_remaining = None;
            let pool_nodes: Vec<&crate::input::ExistingNode> = input
                .existing_nodes
                .iter()
                .filter(|n| n.labels.get(l::NODEPOOL) == Some(&spec.name))
                .collect();
            for (res, q) in spec.limits.iter() {
                if res == l::RESOURCE_NODES {
                    nodes_remaining = Some(
                        q.value()
                            .saturating_sub(pool_nodes.len() as i128)
                            .clamp(0, i128::from(i64::MAX)) as i64,
                    );
                    continue;
                }
                if let Some(d) = self.dims.lookup(res) {
                    let used: i128 = pool_nodes
                        .iter()
                        .map(|n| n.capacity.get(res).millis())
                        .sum();
                    remaining[d] = Some(q.millis().saturating_sub(used));
                }
            }
            self.pools.push(PoolState {
                spec,
                catalog,
                template,
                template_its,
                overhead_groups,
                taint_set,
                remaining,
                nodes_remaining,
                disabled,
            });
        }
    }

    /// Builds the domain universe of `key` from NodePools, their instance types and existing
    /// nodes, once.
    fn ensure_universe(&mut self, key: Sym) {
        if !self.universe_built.insert(key) {
            return;
        }
        for pi in 0..self.pools.len() {
            let pool = &self.pools[pi];
            let mut adds: Vec<Sym> = Vec::new();
            if let Some(req) = pool.template.get(key)
                && !req.complement
            {
                adds.extend(req.values.iter().copied());
            }
            for it in &pool.catalog.its {
                let Some(req) = it.requirements.get(key) else {
                    continue;
                };
                let merged = match pool.template.get(key) {
                    Some(t) => t.intersection(req, &self.interner),
                    None => req.clone(),
                };
                if !merged.complement {
                    adds.extend(merged.values.iter().copied());
                }
            }
            let ts = pool.taint_set;
            for v in adds {
                self.topology.add_domain(key, v, ts);
            }
        }
        for e in &self.existing {
            if let Some(v) = e.requirements.get(key).and_then(Requirement::single_value) {
                self.topology.add_domain(key, v, e.taint_set);
            }
        }
    }

    fn build_topology(&mut self, inverse_specs: Vec<(GroupSpec, usize, Sym)>) {
        let hostname = self.keys.hostname;
        self.ensure_universe(hostname);
        for (s, _, _) in &inverse_specs {
            self.ensure_universe(s.key);
        }
        // Inverse anti-affinity from existing pods.
        for (spec, node, key) in inverse_specs {
            let gi = self.topology.inverse_group(spec);
            if let Some(e) = self.existing.iter().find(|e| e.index == node)
                && let Some(v) = e.requirements.get(key).and_then(Requirement::single_value)
            {
                let ts = e.taint_set;
                self.topology.record_in(GroupRef::Inverse(gi), v, ts);
            }
        }
    }

    /// The group for `spec`, counting existing pods when it is new.
    pub fn ensure_group(&mut self, spec: GroupSpec) -> usize {
        self.ensure_universe(spec.key);
        let (gi, new) = self.topology.group(spec);
        if new {
            let mut hits = Vec::new();
            let existing_pods = &self.existing_pods;
            let by_label = self.existing_by_label.get_or_insert_with(|| {
                let mut index = PodsByLabel::default();
                for (n, pods) in existing_pods.iter().enumerate() {
                    for (p, pod) in pods.iter().enumerate() {
                        for &(k, v) in &pod.labels {
                            index.entry((k, v)).or_default().push((n as u32, p as u32));
                        }
                    }
                }
                index
            });
            let g = &self.topology.groups[gi].spec;
            // Nodes in order, then their pods in order: the order of the counts is the same
            // whether every pod is looked at or only those with the required label.
            let all: Vec<(u32, u32)>;
            let candidates: &[(u32, u32)] =
                match g.selector.as_ref().and_then(|s| s.required_label()) {
                    Some(label) => by_label.get(&label).map_or(&[], Vec::as_slice),
                    None => {
                        all = existing_pods
                            .iter()
                            .enumerate()
                            .flat_map(|(n, pods)| {
                                (0..pods.len()).map(move |p| (n as u32, p as u32))
                            })
                            .collect();
                        &all
                    }
                };
            let mut node_ok: Option<(u32, Option<Sym>)> = None;
            for &(n, p) in candidates {
                let e = &self.existing[n as usize];
                let domain = match node_ok {
                    Some((m, d)) if m == n => d,
                    _ => {
                        let d = e
                            .requirements
                            .get(g.key)
                            .and_then(Requirement::single_value)
                            .filter(|_| {
                                g.kind != GroupKind::Spread
                                    || g.filter.matches(
                                        &e.taints,
                                        &e.requirements,
                                        &self.strict_keys,
                                        &self.interner,
                                    )
                            });
                        node_ok = Some((n, d));
                        d
                    }
                };
                let Some(domain) = domain else {
                    continue;
                };
                let pod = &existing_pods[n as usize][p as usize];
                if g.selects(pod.namespace, &pod.labels, &self.interner) {
                    hits.push((domain, e.taint_set));
                }
            }
            for (d, ts) in hits {
                self.topology.record_in(GroupRef::Owned(gi), d, ts);
            }
        }
        gi
    }

    /// Builds what a pod looks like at a relaxation step.
    pub fn attempt(&mut self, pi: usize, relax: &Relaxation) -> Attempt {
        let pod = &self.pods[pi];
        let (requirements, strict) = preferences::requirements(pod, relax, &self.interner);
        let tolerations = preferences::tolerations(pod, relax);
        let specs = preferences::group_specs(pod, relax, &tolerations, &self.interner);
        let mut groups: Vec<GroupRef> = specs
            .into_iter()
            .map(|s| GroupRef::Owned(self.ensure_group(s)))
            .collect();
        let pod = &self.pods[pi];
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &tolerations,
        };
        groups.extend(self.topology.inverse_for(&view, &self.interner));
        let pin_keys = if self.input.options.pin_anti_affinity_domains {
            self.topology.pin_keys(&view, &self.interner)
        } else {
            Vec::new()
        };
        let pool_taint = self
            .pools
            .iter()
            .map(|p| taints::first_untolerated(&p.spec.taints, &tolerations).map(taints::describe))
            .collect();
        Attempt {
            requirements,
            strict,
            tolerations,
            groups,
            pool_taint,
            pin_keys,
        }
    }

    /// The main loop.
    pub fn run(&mut self) {
        for pi in 0..self.pods.len() {
            if self.pods[pi].pending {
                let zone = self.effective_zone(pi);
                *self
                    .stats
                    .pending_by_effective_zone
                    .entry(zone)
                    .or_default() += 1;
            }
        }
        let mut order: Vec<usize> = (0..self.pods.len()).collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&self.pods[a], &self.pods[b]);
            // Pods an earlier batch planned first, so pods without a plan do not take their
            // room (`SolveInput::planned`).
            pa.planned
                .is_none()
                .cmp(&pb.planned.is_none())
                .then_with(|| pb.cpu().cmp(&pa.cpu()))
                .then_with(|| pb.memory().cmp(&pa.memory()))
                .then_with(|| pa.created.cmp(&pb.created))
                .then_with(|| pa.pod_ref.uid.cmp(&pb.pod_ref.uid))
        });
        let mut queue: VecDeque<usize> = order.into_iter().collect();
        let mut last_len = vec![0usize; self.pods.len()];
        let mut errors: Vec<Option<Reasons>> = vec![None; self.pods.len()];
        let mut base: Vec<Option<Attempt>> = vec![None; self.pods.len()];
        while let Some(&pi) = queue.front() {
            if last_len[pi] == queue.len() {
                break;
            }
            queue.pop_front();
            let attempt = match base[pi].take() {
                Some(a) => a,
                None => {
                    let relax = Relaxation::new(&self.pods[pi]);
                    self.attempt(pi, &relax)
                }
            };
            match self.try_schedule(pi, &attempt) {
                Ok(()) => errors[pi] = None,
                Err(reasons) => {
                    errors[pi] = Some(reasons);
                    base[pi] = Some(attempt);
                    queue.push_back(pi);
                    last_len[pi] = queue.len();
                }
            }
        }
        self.stats.queue_depth = queue.len();
        for pi in queue {
            let reasons = errors[pi].take().unwrap_or_default();
            self.failures.push((pi, reasons));
        }
    }

    /// Tries a pod, relaxing preferences one step at a time (never when it was deferred for
    /// reserved capacity: it may fit as it is once a slot frees, in this solve or the next).
    fn try_schedule(&mut self, pi: usize, base: &Attempt) -> Result<(), Reasons> {
        let mut reasons = match self.add(pi, base) {
            Ok(()) => return Ok(()),
            Err(r) => r,
        };
        let mut relax = Relaxation::new(&self.pods[pi]);
        while !self.is_deferred(pi)
            && relax
                .relax(&self.pods[pi], self.tolerate_prefer_no_schedule)
                .is_some()
        {
            let attempt = self.attempt(pi, &relax);
            match self.add(pi, &attempt) {
                Ok(()) => return Ok(()),
                Err(r) => reasons = r,
            }
        }
        Err(reasons)
    }

    pub(crate) fn is_deferred(&self, pi: usize) -> bool {
        self.deferred.get(pi).copied().unwrap_or(false)
    }

    pub(crate) fn set_deferred(&mut self, pi: usize, deferred: bool) {
        if self.deferred.len() <= pi {
            if !deferred {
                return;
            }
            self.deferred.resize(pi + 1, false);
        }
        self.deferred[pi] = deferred;
    }

    fn add(&mut self, pi: usize, a: &Attempt) -> Result<(), Reasons> {
        self.set_deferred(pi, false);
        if self.add_to_existing(pi, a) {
            return Ok(());
        }
        if self.add_to_inflight(pi, a) {
            return Ok(());
        }
        self.add_to_new(pi, a)
    }

    /// Registers a claim at the back of its pod-count bucket.
    pub fn order_push_back(&mut self, ci: usize) {
        self.order_back += 1;
        let key = (self.claims[ci].pods.len(), self.order_back);
        self.claims[ci].order_key = key;
        self.order.insert(key, ci);
    }

    /// Moves a claim whose pod count grew to the front of its new bucket (what a stable sort
    /// by pod count does).
    pub fn order_bump(&mut self, ci: usize) {
        let old = self.claims[ci].order_key;
        self.order.remove(&old);
        self.order_front -= 1;
        let key = (self.claims[ci].pods.len(), self.order_front);
        self.claims[ci].order_key = key;
        self.order.insert(key, ci);
    }

    /// Label value helper for existing pods.
    pub fn label(&self, pi: usize, key: Sym) -> Option<Sym> {
        label_value(&self.pods[pi].labels, key)
    }
}

/// Joins reasons as `nodepool a: ...; nodepool b: ...`.
pub fn format_reasons(reasons: &Reasons) -> String {
    if reasons.is_empty() {
        return "no nodepool could launch a node for the pod".into();
    }
    reasons
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("; ")
}
