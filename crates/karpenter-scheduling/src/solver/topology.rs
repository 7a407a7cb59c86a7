//! Topology groups (spread constraints, pod affinity, pod anti-affinity) with incremental
//! per-domain counts, following upstream Karpenter's `Topology`:
//!
//! - the domain universe of a key comes from NodePool requirements/labels intersected with
//!   instance types, plus existing nodes' labels and registered hostnames;
//! - groups are deduplicated by (kind, key, namespaces, selector, maxSkew, minDomains, node
//!   filter) and shared by every pod that has the same term;
//! - spread picks the least-populated domain within maxSkew of the global minimum (hostname: the
//!   minimum is always 0); affinity picks domains already holding a match (bootstrapping one for
//!   self-selecting pods); anti-affinity picks only empty domains;
//! - placements are recorded into every group that selects the pod: anti-affinity records every
//!   domain the node could still be in, spread and affinity only a collapsed (single) domain.

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::hash::{FxHashMap, FxHashSet};
use crate::intern::{Interner, Sym};
use crate::requirement::Requirement;
use crate::requirements::Requirements;
use crate::solver::selector::{Labels, NamespaceSet, Selector};
use crate::taints::first_untolerated;

/// The three kinds of topology group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKind {
    Spread,
    Affinity,
    AntiAffinity,
}

/// Which nodes count for a spread constraint (nodeAffinityPolicy / nodeTaintsPolicy).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeFilter {
    /// OR of requirement sets (nodeSelector ∩ each required term); empty: every node.
    pub terms: Vec<Requirements>,
    /// When set, nodes must have only taints these tolerations tolerate.
    pub tolerations: Option<Vec<TolerationKey>>,
}

/// A hashable toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TolerationKey(pub [Option<String>; 4]);

impl TolerationKey {
    pub fn of(t: &Toleration) -> Self {
        TolerationKey([
            t.key.clone(),
            t.operator.clone(),
            t.value.clone(),
            t.effect.clone(),
        ])
    }

    fn to_toleration(&self) -> Toleration {
        let [key, operator, value, effect] = self.0.clone();
        Toleration {
            key,
            operator,
            value,
            effect,
            ..Default::default()
        }
    }
}

impl NodeFilter {
    /// True when a node with these taints and requirements takes part in the topology.
    pub fn matches(
        &self,
        taints: &[Taint],
        reqs: &Requirements,
        allow_undefined: &FxHashSet<Sym>,
        interner: &Interner,
    ) -> bool {
        let affinity_ok = self.terms.is_empty()
            || self
                .terms
                .iter()
                .any(|t| reqs.compatible(t, allow_undefined, interner).is_ok());
        let taints_ok = match &self.tolerations {
            None => true,
            Some(tols) => {
                let tols: Vec<Toleration> = tols.iter().map(TolerationKey::to_toleration).collect();
                first_untolerated(taints, &tols).is_none()
            }
        };
        affinity_ok && taints_ok
    }
}

/// What identifies a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupSpec {
    pub kind: GroupKind,
    pub key: Sym,
    pub namespaces: NamespaceSet,
    pub selector: Option<Selector>,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: NodeFilter,
}

impl GroupSpec {
    /// True when the group selects a pod with these labels in this namespace.
    pub fn selects(&self, namespace: Sym, labels: &Labels, interner: &Interner) -> bool {
        self.namespaces.contains(namespace)
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(labels, interner))
    }
}

/// A group with its counts.
#[derive(Debug, Clone)]
pub struct Group {
    pub spec: GroupSpec,
    /// Count per domain index of the key (missing: 0).
    counts: Vec<u32>,
    /// Domain indexes with a non-zero count, in order of first increment.
    positive: Vec<u32>,
}

impl Group {
    fn count(&self, domain: u32) -> u32 {
        self.counts.get(domain as usize).copied().unwrap_or(0)
    }

    fn increment(&mut self, domain: u32) {
        let i = domain as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        if self.counts[i] == 0 {
            self.positive.push(domain);
        }
        self.counts[i] += 1;
    }
}

/// The domains known for one topology key.
#[derive(Debug, Clone, Default)]
pub struct KeyDomains {
    pub list: Vec<Sym>,
    index: FxHashMap<Sym, u32>,
    /// Taint sets (indexes into `Topology::taint_sets`) of the pools/nodes providing each domain.
    providers: Vec<Vec<usize>>,
}

/// Identifies a group: owned groups or inverse (existing pods' anti-affinity) groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupRef {
    Owned(usize),
    Inverse(usize),
}

/// All topology state of one solve.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub keys: FxHashMap<Sym, KeyDomains>,
    pub groups: Vec<Group>,
    index: FxHashMap<GroupSpec, usize>,
    pub inverse: Vec<Group>,
    /// Owned anti-affinity groups over a key other than the hostname (zone-level groups),
    /// whose members pin the NodeClaims they land on (see [`Topology::pin_keys`]).
    zonal_anti: Vec<usize>,
    taint_sets: Vec<Vec<Taint>>,
    hostname: Sym,
}

/// Candidate domains of a node for one key.
#[derive(Debug)]
pub enum Candidates<'a> {
    Listed {
        values: std::slice::Iter<'a, Sym>,
        domains: Option<&'a KeyDomains>,
    },
    All {
        list: std::iter::Enumerate<std::slice::Iter<'a, Sym>>,
        node: &'a Requirement,
        interner: &'a Interner,
    },
}

impl Iterator for Candidates<'_> {
    type Item = (Sym, Option<u32>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Candidates::Listed { values, domains } => values
                .next()
                .map(|v| (*v, domains.and_then(|kd| kd.index.get(v).copied()))),
            Candidates::All {
                list,
                node,
                interner,
            } => list
                .find(|(_, v)| node.has(**v, interner))
                .map(|(i, v)| (*v, Some(i as u32))),
        }
    }
}

/// A pod as topology sees it.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub namespace: Sym,
    pub labels: &'a Labels,
    pub tolerations: &'a [Toleration],
}

impl Topology {
    pub fn new(hostname: Sym) -> Self {
        Topology {
            hostname,
            ..Default::default()
        }
    }

    /// Registers a taint set, returning its id.
    pub fn taint_set(&mut self, taints: &[Taint]) -> usize {
        if let Some(i) = self.taint_sets.iter().position(|t| t.as_slice() == taints) {
            return i;
        }
        self.taint_sets.push(taints.to_vec());
        self.taint_sets.len() - 1
    }

    /// Adds `value` to the universe of `key`, provided by a pool/node with `taint_set`.
    pub fn add_domain(&mut self, key: Sym, value: Sym, taint_set: usize) -> u32 {
        let kd = self.keys.entry(key).or_default();
        let i = match kd.index.get(&value) {
            Some(i) => *i,
            None => {
                let i = u32::try_from(kd.list.len()).unwrap_or(u32::MAX);
                kd.list.push(value);
                kd.index.insert(value, i);
                kd.providers.push(Vec::new());
                i
            }
        };
        if let Some(p) = kd.providers.get_mut(i as usize)
            && !p.contains(&taint_set)
        {
            p.push(taint_set);
        }
        i
    }

    /// The group for `spec`, created when new (the caller counts existing pods into it).
    pub fn group(&mut self, spec: GroupSpec) -> (usize, bool) {
        if let Some(i) = self.index.get(&spec) {
            return (*i, false);
        }
        let i = self.groups.len();
        self.index.insert(spec.clone(), i);
        if spec.kind == GroupKind::AntiAffinity && spec.key != self.hostname {
            self.zonal_anti.push(i);
        }
        self.groups.push(Group {
            spec,
            counts: Vec::new(),
            positive: Vec::new(),
        });
        (i, true)
    }

    /// The keys (other than the hostname) of owned anti-affinity groups that select the pod:
    /// where it lands is recorded on every domain its node could still be in, so a NodeClaim
    /// holding it is pinned to one domain of each key ([`crate::SolveOptions`]).
    pub fn pin_keys(&self, pod: &PodView<'_>, interner: &Interner) -> Vec<Sym> {
        let mut keys = Vec::new();
        for &i in &self.zonal_anti {
            let g = &self.groups[i];
            if !keys.contains(&g.spec.key) && g.spec.selects(pod.namespace, pod.labels, interner) {
                keys.push(g.spec.key);
            }
        }
        keys
    }

    /// Owned hostname anti-affinity groups whose count on domain `host` is zero.
    pub fn open_hostname_anti(&self, host: u32) -> Vec<usize> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.spec.kind == GroupKind::AntiAffinity
                    && g.spec.key == self.hostname
                    && g.count(host) == 0
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The count of owned group `gi` on domain `d` of its key.
    pub fn owned_count(&self, gi: usize, d: u32) -> u32 {
        self.groups.get(gi).map_or(0, |g| g.count(d))
    }

    /// True for an owned hostname anti-affinity group.
    pub fn is_hostname_anti(&self, gi: usize) -> bool {
        self.groups
            .get(gi)
            .is_some_and(|g| g.spec.kind == GroupKind::AntiAffinity && g.spec.key == self.hostname)
    }

    /// Adds an inverse anti-affinity group (from an existing pod) and returns its index.
    pub fn inverse_group(&mut self, spec: GroupSpec) -> usize {
        if let Some(i) = self.inverse.iter().position(|g| g.spec == spec) {
            return i;
        }
        self.inverse.push(Group {
            spec,
            counts: Vec::new(),
            positive: Vec::new(),
        });
        self.inverse.len() - 1
    }

    fn get(&self, r: GroupRef) -> Option<&Group> {
        match r {
            GroupRef::Owned(i) => self.groups.get(i),
            GroupRef::Inverse(i) => self.inverse.get(i),
        }
    }

    /// Records one pod in domain `value` of the group (registering the domain).
    pub fn record_in(&mut self, r: GroupRef, value: Sym, taint_set: usize) {
        let Some(key) = self.get(r).map(|g| g.spec.key) else {
            return;
        };
        let d = self.add_domain(key, value, taint_set);
        let group = match r {
            GroupRef::Owned(i) => self.groups.get_mut(i),
            GroupRef::Inverse(i) => self.inverse.get_mut(i),
        };
        if let Some(g) = group {
            g.increment(d);
        }
    }

    fn domain_eligible(&self, key: Sym, d: u32, tolerations: Option<&[Toleration]>) -> bool {
        let Some(tols) = tolerations else {
            return true;
        };
        self.keys
            .get(&key)
            .and_then(|kd| kd.providers.get(d as usize))
            .is_none_or(|providers| {
                providers.is_empty()
                    || providers.iter().any(|&t| {
                        self.taint_sets
                            .get(t)
                            .is_none_or(|taints| first_untolerated(taints, tols).is_none())
                    })
            })
    }

    fn min_count(
        &self,
        g: &Group,
        pod_domains: &Requirement,
        pod: &PodView<'_>,
        interner: &Interner,
    ) -> u32 {
        if g.spec.key == self.hostname {
            return 0;
        }
        let Some(kd) = self.keys.get(&g.spec.key) else {
            return 0;
        };
        let tols = g.spec.filter.tolerations.as_ref().map(|_| pod.tolerations);
        let mut min = u32::MAX;
        let mut eligible = 0;
        for (d, value) in kd.list.iter().enumerate() {
            let d = d as u32;
            if pod_domains.has(*value, interner) && self.domain_eligible(g.spec.key, d, tols) {
                eligible += 1;
                min = min.min(g.count(d));
            }
        }
        if g.spec.min_domains.is_some_and(|m| eligible < i64::from(m)) || min == u32::MAX {
            return 0;
        }
        min
    }

    /// Candidate domains: the node's listed values, or every known domain the node allows.
    fn candidates<'a>(
        &'a self,
        key: Sym,
        node_domains: &'a Requirement,
        interner: &'a Interner,
    ) -> Candidates<'a> {
        if !node_domains.complement {
            Candidates::Listed {
                values: node_domains.values.iter(),
                domains: self.keys.get(&key),
            }
        } else {
            let list: &[Sym] = self.keys.get(&key).map_or(&[], |kd| kd.list.as_slice());
            Candidates::All {
                list: list.iter().enumerate(),
                node: node_domains,
                interner,
            }
        }
    }

    /// A cheap necessary check for hostname-keyed groups on a node whose hostname domain is
    /// `host`: true when the group certainly rejects the pod there.
    #[inline]
    pub fn hostname_rejects(
        &self,
        r: GroupRef,
        pod: &PodView<'_>,
        host: u32,
        interner: &Interner,
    ) -> bool {
        let Some(g) = self.get(r) else {
            return false;
        };
        if g.spec.key != self.hostname {
            return false;
        }
        match g.spec.kind {
            GroupKind::AntiAffinity => g.count(host) > 0,
            GroupKind::Spread => {
                let count = i64::from(g.count(host));
                count + 1 > i64::from(g.spec.max_skew)
                    && count + i64::from(g.spec.selects(pod.namespace, pod.labels, interner))
                        > i64::from(g.spec.max_skew)
            }
            GroupKind::Affinity => false,
        }
    }

    /// The index of a hostname domain (registering it).
    pub fn hostname_domain(&mut self, value: Sym, taint_set: usize) -> u32 {
        let key = self.hostname;
        self.add_domain(key, value, taint_set)
    }

    /// The domains a pod may use under group `r`, given the pod's own (strict) domains and the
    /// node's domains for the key. Empty means the pod cannot go there.
    pub fn next_domains(
        &self,
        r: GroupRef,
        pod: &PodView<'_>,
        pod_domains: &Requirement,
        node_domains: &Requirement,
        interner: &Interner,
    ) -> Requirement {
        let Some(g) = self.get(r) else {
            return Requirement::exists();
        };
        let key = g.spec.key;
        let is_hostname = key == self.hostname;
        match g.spec.kind {
            GroupKind::Spread => {
                let min = self.min_count(g, pod_domains, pod, interner);
                let self_selecting = g.spec.selects(pod.namespace, pod.labels, interner);
                let mut best: Option<(u32, Sym)> = None;
                for (value, d) in self.candidates(key, node_domains, interner) {
                    let count = match d {
                        Some(d) => g.count(d),
                        None if is_hostname => 0,
                        None => continue,
                    } + u32::from(self_selecting);
                    if i64::from(count) - i64::from(min) <= i64::from(g.spec.max_skew)
                        && best.is_none_or(|(c, _)| count < c)
                    {
                        best = Some((count, value));
                    }
                }
                match best {
                    Some((_, v)) => Requirement::is_in([v]),
                    None => Requirement::does_not_exist(),
                }
            }
            GroupKind::Affinity => {
                let list: &[Sym] = self.keys.get(&key).map_or(&[], |kd| kd.list.as_slice());
                let mut options: Vec<Sym> = g
                    .positive
                    .iter()
                    .filter_map(|d| list.get(*d as usize).copied())
                    .filter(|v| pod_domains.has(*v, interner))
                    .collect();
                if options.is_empty() && g.spec.selects(pod.namespace, pod.labels, interner) {
                    let first = self
                        .candidates(key, node_domains, interner)
                        .map(|(v, _)| v)
                        .find(|v| pod_domains.has(*v, interner))
                        .or_else(|| list.iter().copied().find(|v| pod_domains.has(*v, interner)));
                    options.extend(first);
                }
                Requirement::is_in(options)
            }
            GroupKind::AntiAffinity => {
                let options: Vec<Sym> = self
                    .candidates(key, node_domains, interner)
                    .filter(|(v, d)| {
                        d.is_none_or(|d| g.count(d) == 0) && pod_domains.has(*v, interner)
                    })
                    .map(|(v, _)| v)
                    .collect();
                Requirement::is_in(options)
            }
        }
    }

    /// Every domain of the group's key the pod may use under group `r` with no node chosen
    /// yet (upstream's `validDomains` of `TopologyGroup.Get` with an `Exists` node domain): for
    /// a spread, each registered domain within the skew of the minimum; for pod (anti-)affinity,
    /// the domains [`Self::next_domains`] allows. Empty means none.
    pub fn valid_domains(
        &self,
        r: GroupRef,
        pod: &PodView<'_>,
        pod_domains: &Requirement,
        interner: &Interner,
    ) -> Vec<Sym> {
        let Some(g) = self.get(r) else {
            return Vec::new();
        };
        let any = Requirement::exists();
        match g.spec.kind {
            GroupKind::Spread => {
                let min = self.min_count(g, pod_domains, pod, interner);
                let self_selecting = u32::from(g.spec.selects(pod.namespace, pod.labels, interner));
                self.candidates(g.spec.key, &any, interner)
                    .filter_map(|(value, d)| {
                        let count = g.count(d?) + self_selecting;
                        (i64::from(count) - i64::from(min) <= i64::from(g.spec.max_skew))
                            .then_some(value)
                    })
                    .collect()
            }
            GroupKind::Affinity | GroupKind::AntiAffinity => {
                self.next_domains(r, pod, pod_domains, &any, interner)
                    .values
            }
        }
    }

    /// Inverse groups (existing pods' required anti-affinity) that select this pod.
    pub fn inverse_for<'a>(
        &'a self,
        pod: &'a PodView<'_>,
        interner: &'a Interner,
    ) -> impl Iterator<Item = GroupRef> + 'a {
        self.inverse
            .iter()
            .enumerate()
            .filter(move |(_, g)| g.spec.selects(pod.namespace, pod.labels, interner))
            .map(|(i, _)| GroupRef::Inverse(i))
    }

    /// Records a placement in every group that counts it.
    pub fn record(
        &mut self,
        pod: &PodView<'_>,
        taints: &[Taint],
        taint_set: usize,
        reqs: &Requirements,
        allow_undefined: &FxHashSet<Sym>,
        interner: &Interner,
    ) {
        let mut hits: Vec<(usize, Sym)> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            if !g.spec.selects(pod.namespace, pod.labels, interner)
                || !g
                    .spec
                    .filter
                    .matches(taints, reqs, allow_undefined, interner)
            {
                continue;
            }
            let Some(domains) = reqs.get(g.spec.key) else {
                continue;
            };
            if domains.complement {
                continue;
            }
            match g.spec.kind {
                GroupKind::AntiAffinity => hits.extend(domains.values.iter().map(|v| (i, *v))),
                _ => {
                    if let Some(v) = domains.single_value() {
                        hits.push((i, v));
                    }
                }
            }
        }
        for (i, v) in hits {
            self.record_in(GroupRef::Owned(i), v, taint_set);
        }
    }
}
