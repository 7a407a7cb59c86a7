//! Placing one pod: on an existing node, on a NodeClaim created earlier in this solve, or on a
//! new NodeClaim from the first NodePool (in weight order) that can take it.

use std::borrow::Cow;

use crate::input::{MinValuesPolicy, ReservedOfferingMode};
use crate::intern::Sym;
use crate::requirement::Requirement;
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::dims::{self, Res};
use crate::solver::hostports;
use crate::solver::scheduler::Solver;
use crate::solver::spread::SpreadRank;
use crate::solver::state::{Attempt, Claim, Reasons};
use crate::solver::topology::PodView;

/// Topology answers reused during one scan: (group, node domains, allowed domains).
pub type TopologyCache = Vec<(crate::solver::topology::GroupRef, Requirement, Requirement)>;

/// A remembered prefilter answer: (group, the claim's requirement on its key, allowed).
type Verdict = (crate::solver::topology::GroupRef, Option<Requirement>, bool);

/// What adding a pod to a claim would change.
#[derive(Debug)]
pub struct ClaimUpdate {
    pub requirements: Option<Requirements>,
    pub its: Bitset,
    pub min_values_relaxed: bool,
    /// The reservations the claim holds after the update ([`Solver::reserve`]).
    pub reserved: Vec<Sym>,
}

impl Solver<'_> {
    /// The topology domain requirements for a pod on a node with `node` requirements.
    /// The node's domains for `key`: the intersection of every layer's requirement on it.
    fn node_domains<'r>(&self, layers: &[&'r Requirements], key: Sym) -> Cow<'r, Requirement> {
        let mut out: Option<Cow<'r, Requirement>> = None;
        for layer in layers {
            if let Some(r) = layer.get(key) {
                out = Some(match out {
                    None => Cow::Borrowed(r),
                    Some(prev) => Cow::Owned(prev.intersection(r, &self.interner)),
                });
            }
        }
        out.unwrap_or_else(|| Cow::Owned(Requirement::exists()))
    }

    /// The topology domain requirements for a pod on a node whose requirements are the
    /// intersection of `layers`; rejects when a group leaves no domain the node can be in.
    fn topology_requirements(
        &self,
        pi: usize,
        a: &Attempt,
        layers: &[&Requirements],
        explain: bool,
        mut cache: Option<&mut TopologyCache>,
    ) -> Result<Vec<(Sym, Requirement)>, String> {
        let mut out = Vec::new();
        if a.groups.is_empty() {
            return Ok(out);
        }
        let pod = &self.pods[pi];
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &a.tolerations,
        };
        let exists = Requirement::exists();
        for g in &a.groups {
            let spec = match g {
                crate::solver::topology::GroupRef::Owned(i) => &self.topology.groups[*i].spec,
                crate::solver::topology::GroupRef::Inverse(i) => &self.topology.inverse[*i].spec,
            };
            let key = spec.key;
            let pod_domains = a.strict.get(key).unwrap_or(&exists);
            let node_domains = self.node_domains(layers, key);
            // Counts do not change during one scan of the claims, so for keys other than the
            // hostname (few distinct node domains) the answer is reused across claims.
            let hit = match cache.as_deref() {
                Some(c) if key != self.keys.hostname => c
                    .iter()
                    .position(|(cg, nd, _)| cg == g && *nd == *node_domains),
                _ => None,
            };
            let computed;
            let domains: &Requirement = match (hit, cache.as_deref()) {
                (Some(i), Some(c)) => &c[i].2,
                _ => {
                    let d = self.topology.next_domains(
                        *g,
                        &view,
                        pod_domains,
                        &node_domains,
                        &self.interner,
                    );
                    if key != self.keys.hostname
                        && let Some(c) = cache.as_deref_mut()
                    {
                        c.push((*g, node_domains.clone().into_owned(), d.clone()));
                    }
                    computed = d;
                    &computed
                }
            };
            if domains.is_empty() || !node_domains.intersects(domains, &self.interner) {
                if !explain {
                    return Err(String::new());
                }
                return Err(format!(
                    "unsatisfiable topology constraint for {}, key={}",
                    match spec.kind {
                        crate::solver::topology::GroupKind::Spread => "topology spread",
                        crate::solver::topology::GroupKind::Affinity => "pod affinity",
                        crate::solver::topology::GroupKind::AntiAffinity => "pod anti-affinity",
                    },
                    self.interner.resolve(key)
                ));
            }
            out.push((key, domains.clone()));
        }
        Ok(out)
    }

    /// The mean free share of cpu and memory of existing node `ni` (kube-scheduler's
    /// `LeastAllocated` score over 1; a resource the node does not have counts as used).
    fn free_share(&self, ni: usize) -> f64 {
        let node = &self.existing[ni];
        let dims: Vec<usize> = ["cpu", "memory"]
            .iter()
            .filter_map(|r| self.dims.lookup(r))
            .collect();
        let share = |d: usize| {
            let allocatable = dims::get(&node.allocatable, d);
            if allocatable <= 0 {
                return 0.0;
            }
            dims::get(&node.remaining, d).max(0) as f64 / allocatable as f64
        };
        dims.iter().map(|&d| share(d)).sum::<f64>() / dims.len().max(1) as f64
    }

    /// The existing nodes as kube-scheduler's `LeastAllocated` scoring ranks them for the next
    /// pod: the highest free share first, ties in node order. The rank is built once per solve
    /// and kept as pods land ([`SpreadRank::update`]).
    fn least_allocated_order(&mut self) -> Vec<usize> {
        if self.spread_rank.is_none() {
            let scores: Vec<f64> = (0..self.existing.len())
                .map(|ni| self.free_share(ni))
                .collect();
            self.spread_rank = Some(SpreadRank::new(scores));
        }
        self.spread_rank
            .as_ref()
            .map(SpreadRank::order)
            .unwrap_or_default()
    }

    /// Tries existing nodes in order; places the pod on the first that accepts it.
    pub(crate) fn add_to_existing(&mut self, pi: usize, a: &Attempt) -> bool {
        let pod = &self.pods[pi];
        let mut chosen = None;
        // The node an earlier batch planned the pod on first, then every node in order; or,
        // spreading like kube-scheduler, the nodes with the most free share first.
        let spread = self.input.options.spread_over_existing;
        let planned = pod.planned.filter(|&ni| ni < self.existing.len());
        let spread_order = if spread {
            self.least_allocated_order()
        } else {
            Vec::new()
        };
        let pod = &self.pods[pi];
        let in_order = planned
            .into_iter()
            .chain((0..self.existing.len()).filter(|&ni| Some(ni) != planned))
            .filter(|_| !spread);
        for ni in spread_order.into_iter().chain(in_order) {
            let node = &self.existing[ni];
            if node.deleting
                || (pod.relocating && node.refuses_relocated_pods)
                || !dims::fits(&pod.requests, &node.remaining)
                || crate::taints::first_untolerated(&node.taints, &a.tolerations).is_some()
                || hostports::conflict(&node.host_ports, &pod.host_ports).is_some()
                || node
                    .requirements
                    .compatible(&a.requirements, &self.strict_keys, &self.interner)
                    .is_err()
            {
                continue;
            }
            if !pod.volume_alternatives.is_empty()
                && !pod.volume_alternatives.iter().any(|v| {
                    node.requirements
                        .compatible(v, &self.strict_keys, &self.interner)
                        .is_ok()
                })
            {
                continue;
            }
            let Ok(topo) = self.topology_requirements(
                pi,
                a,
                &[&node.requirements, &a.requirements],
                false,
                None,
            ) else {
                continue;
            };
            let mut merged = node.requirements.clone();
            merged.add_all(&a.requirements, &self.interner);
            let mut ok = true;
            for (k, d) in topo {
                merged.add(k, d, &self.interner);
                if merged.get(k).is_some_and(Requirement::is_empty) {
                    ok = false;
                }
            }
            if ok {
                chosen = Some((ni, merged));
                break;
            }
        }
        let Some((ni, merged)) = chosen else {
            return false;
        };
        let pod = &self.pods[pi];
        let node = &mut self.existing[ni];
        dims::sub(&mut node.remaining, &pod.requests);
        if self.spread_rank.is_some() {
            let score = self.free_share(ni);
            if let Some(rank) = self.spread_rank.as_mut() {
                rank.update(ni, score);
            }
        }
        let pod = &self.pods[pi];
        let node = &mut self.existing[ni];
        node.host_ports.extend(pod.host_ports.iter().cloned());
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &a.tolerations,
        };
        let (taints, ts, index) = (node.taints.clone(), node.taint_set, node.index);
        self.topology.record(
            &view,
            &taints,
            ts,
            &merged,
            &self.strict_keys,
            &self.interner,
        );
        self.placements.push((pi, index));
        true
    }

    /// Whether a pod fits on a claim, and the claim's state if it is added.
    /// `explain` builds human-readable reasons; without it rejections are empty strings.
    pub(crate) fn claim_can_add(
        &self,
        claim: &Claim,
        pi: usize,
        a: &Attempt,
        explain: bool,
        mut cache: Option<&mut TopologyCache>,
    ) -> Result<ClaimUpdate, String> {
        let pod = &self.pods[pi];
        let pool = &self.pools[claim.pool];
        if let Some(t) = &a.pool_taint[claim.pool] {
            return Err(if explain {
                format!("did not tolerate taint {t}")
            } else {
                String::new()
            });
        }
        if !dims::fits_sum(&claim.requests, &pod.requests, &claim.max_allocatable) {
            if !explain {
                return Err(String::new());
            }
            let total = dims::sum(&claim.requests, &pod.requests);
            return Err(self.no_instance_type(&total, &a.requirements, &Requirements::new()));
        }
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &a.tolerations,
        };
        if !explain
            && a.groups.iter().any(|g| {
                self.topology
                    .hostname_rejects(*g, &view, claim.host_domain, &self.interner)
            })
        {
            return Err(String::new());
        }
        if let Some(p) = hostports::conflict(&claim.host_ports, &pod.host_ports) {
            return Err(if explain {
                format!("host port {p} is already in use")
            } else {
                String::new()
            });
        }
        if let Err(e) =
            claim
                .requirements
                .compatible(&a.requirements, &self.well_known, &self.interner)
        {
            return Err(if explain {
                format!("incompatible requirements, {}", e.describe(&self.interner))
            } else {
                String::new()
            });
        }
        // Without reasons to give: the caller would refuse the pod anyway.
        if !explain && !self.may_keep_reservations(claim, pi) {
            return Err(String::new());
        }
        let mut last_err = String::new();
        let no_volumes = [Requirements::new()];
        let alternatives: &[Requirements] = if pod.volume_alternatives.is_empty() {
            &no_volumes
        } else {
            &pod.volume_alternatives
        };
        for volume in alternatives {
            let topo = match self.topology_requirements(
                pi,
                a,
                &[&claim.requirements, &a.requirements, volume],
                explain,
                cache.as_deref_mut(),
            ) {
                Ok(t) => t,
                Err(e) => {
                    last_err = e;
                    continue;
                }
            };
            let mut merged: Cow<'_, Requirements> = Cow::Borrowed(&claim.requirements);
            if !a.requirements.is_empty() {
                merged.to_mut().add_all(&a.requirements, &self.interner);
            }
            if !volume.is_empty() {
                if let Err(e) = merged.compatible(volume, &self.well_known, &self.interner) {
                    if explain {
                        last_err = format!(
                            "incompatible volume requirements, {}",
                            e.describe(&self.interner)
                        );
                    }
                    continue;
                }
                merged.to_mut().add_all(volume, &self.interner);
            }
            let mut empty_key = None;
            for (k, d) in topo {
                if merged.get(k) == Some(&d) {
                    continue;
                }
                let m = merged.to_mut();
                m.add(k, d, &self.interner);
                if m.get(k).is_some_and(Requirement::is_empty) {
                    empty_key = Some(k);
                }
            }
            if let Some(k) = empty_key {
                if explain {
                    last_err = format!(
                        "unsatisfiable topology constraint, key={}",
                        self.interner.resolve(k)
                    );
                }
                continue;
            }
            // Narrow instance types by the requirements that changed.
            let mut its = claim.its.clone();
            if let Cow::Owned(m) = &merged {
                let mut offerings_changed = false;
                for (k, r) in m.iter() {
                    if claim.requirements.get(k) != Some(r) {
                        pool.catalog
                            .narrow_by_requirement(&mut its, k, r, &self.interner);
                        offerings_changed |= pool.catalog.offering_keys.contains(&k);
                    }
                }
                if offerings_changed {
                    pool.catalog
                        .narrow_by_offerings(&mut its, m, &self.interner);
                }
            }
            if its.is_empty() {
                if explain {
                    let total = dims::sum(&claim.requests, &pod.requests);
                    last_err = self.no_instance_type(&total, &merged, &pool.template);
                }
                continue;
            }
            let mut fitting = Bitset::empty(pool.catalog.len());
            for g in &pool.overhead_groups {
                if hostports::conflict(&g.host_ports, &pod.host_ports).is_some() {
                    continue;
                }
                let mut b = its.clone();
                b.and_with(&g.its);
                if b.is_empty() {
                    continue;
                }
                pool.catalog
                    .narrow_by_fit_sum(&mut b, [&claim.requests, &pod.requests, &g.overhead]);
                fitting.or_with(&b);
            }
            if fitting.is_empty() {
                if explain {
                    let total = dims::sum(&claim.requests, &pod.requests);
                    last_err = self.no_instance_type(&total, &merged, &pool.template);
                }
                continue;
            }
            if !a.pin_keys.is_empty() {
                self.pin(claim.pool, &a.pin_keys, &mut merged, &mut fitting);
            }
            let mut relaxed = claim.min_values_relaxed;
            if merged.has_min_values() {
                match self.check_min_values(claim.pool, &fitting, &merged) {
                    Ok(()) => {}
                    Err(lowered) => {
                        if self.min_values_policy == MinValuesPolicy::Strict {
                            last_err = format!(
                                "minValues requirement is not met for {}",
                                lowered
                                    .iter()
                                    .map(|(k, n)| format!(
                                        "{} (only {n})",
                                        self.interner.resolve(*k)
                                    ))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            );
                            continue;
                        }
                        let m = merged.to_mut();
                        for (k, n) in lowered {
                            if let Some(r) = m.get(k) {
                                let r = r.clone().with_min_values(Some(n));
                                m.set(k, r);
                            }
                        }
                        relaxed = true;
                    }
                }
            }
            return Ok(ClaimUpdate {
                requirements: match merged {
                    Cow::Owned(m) => Some(m),
                    Cow::Borrowed(_) => None,
                },
                its: fitting,
                min_values_relaxed: relaxed,
                reserved: Vec::new(),
            });
        }
        Err(last_err)
    }

    /// Pins the claim to one value of each of `keys` its requirements still leave open (zone
    /// pinning, [`crate::SolveOptions::pin_anti_affinity_domains`]): the value whose instance
    /// types (among `fitting`) have the cheapest compatible offering, then the one keeping the
    /// most instance types, then the first by name; never one that breaks a minValues. An
    /// absent or complement requirement picks among the key's known domains it allows.
    fn pin(
        &self,
        pool: usize,
        keys: &[Sym],
        merged: &mut Cow<'_, Requirements>,
        fitting: &mut Bitset,
    ) {
        let catalog = &self.pools[pool].catalog;
        for &key in keys {
            let values: Vec<Sym> = match merged.get(key) {
                Some(r) if !r.complement => {
                    if r.values.len() <= 1 {
                        continue;
                    }
                    r.values.clone()
                }
                // No requirement (or a complement): the claim could be in any known domain,
                // yet records none, so a pod avoiding this one could share its node.
                open => {
                    let exists = Requirement::exists();
                    let open = open.unwrap_or(&exists);
                    self.topology
                        .keys
                        .get(&key)
                        .map(|kd| {
                            kd.list
                                .iter()
                                .copied()
                                .filter(|v| open.has(*v, &self.interner))
                                .collect()
                        })
                        .unwrap_or_default()
                }
            };
            // (price, -types, name, value, its, requirements)
            let mut best: Option<(f64, usize, &str, Requirements, Bitset)> = None;
            for value in values {
                let mut reqs = merged.as_ref().clone();
                reqs.add(key, Requirement::is_in([value]), &self.interner);
                let mut its = fitting.clone();
                catalog.narrow_by_requirement(
                    &mut its,
                    key,
                    &Requirement::is_in([value]),
                    &self.interner,
                );
                if catalog.offering_keys.contains(&key) {
                    catalog.narrow_by_offerings(&mut its, &reqs, &self.interner);
                }
                // A zone whose types would break minValues is skipped (if every zone would,
                // the claim stays unpinned, as upstream leaves it).
                if its.is_empty()
                    || (reqs.has_min_values() && self.check_min_values(pool, &its, &reqs).is_err())
                {
                    continue;
                }
                let mask = catalog.compatible_signatures(&reqs, &self.interner);
                let price = its
                    .iter()
                    .filter_map(|i| catalog.cheapest_price_in(i, &mask))
                    .min_by(f64::total_cmp)
                    .unwrap_or(f64::INFINITY);
                let count = its.count();
                let name = self.interner.resolve(value);
                let better = best.as_ref().is_none_or(|(p, n, b, _, _)| {
                    price
                        .total_cmp(p)
                        .then_with(|| n.cmp(&count))
                        .then_with(|| name.cmp(b))
                        .is_lt()
                });
                if better {
                    best = Some((price, count, name, reqs, its));
                }
            }
            if let Some((_, _, _, reqs, its)) = best {
                *merged = Cow::Owned(reqs);
                *fitting = its;
            }
        }
    }

    /// `Ok` when every minValues holds over `its`, else the achievable count per failing key.
    pub(crate) fn check_min_values(
        &self,
        pool: usize,
        its: &Bitset,
        reqs: &Requirements,
    ) -> Result<(), Vec<(Sym, u32)>> {
        let catalog = &self.pools[pool].catalog;
        let mut short = Vec::new();
        for (key, req) in reqs.iter() {
            let Some(min) = req.min_values else {
                continue;
            };
            let mut values: Vec<Sym> = Vec::new();
            for i in its.iter() {
                if let Some(r) = catalog.its[i].requirements.get(key)
                    && !r.complement
                {
                    values.extend(r.values.iter().copied());
                }
            }
            values.sort_unstable();
            values.dedup();
            let n = u32::try_from(values.len()).unwrap_or(u32::MAX);
            if n < min {
                short.push((key, n));
            }
        }
        if short.is_empty() { Ok(()) } else { Err(short) }
    }

    /// "no instance type satisfies cpu=96, zone=us-east-1d".
    fn no_instance_type(
        &self,
        total: &Res,
        reqs: &Requirements,
        baseline: &Requirements,
    ) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (i, v) in total.iter().enumerate() {
            if *v != 0 && i != dims::PODS {
                parts.push(format!(
                    "{}={}",
                    self.dims.name(i),
                    crate::quantity::format_millis(i128::from(*v))
                ));
            }
        }
        for (k, r) in reqs.iter() {
            if k == self.keys.hostname || baseline.get(k) == Some(r) {
                continue;
            }
            match r.single_value() {
                Some(v) => parts.push(format!(
                    "{}={}",
                    self.interner.resolve(k),
                    self.interner.resolve(v)
                )),
                None => parts.push(format!(
                    "{} {}",
                    self.interner.resolve(k),
                    r.describe(&self.interner)
                )),
            }
        }
        format!("no instance type satisfies {}", parts.join(", "))
    }

    /// Commits a pod to a claim.
    fn commit_claim(&mut self, ci: usize, pi: usize, a: &Attempt, update: ClaimUpdate) {
        let pool_idx = self.claims[ci].pool;
        let claim = &mut self.claims[ci];
        let pod = &self.pods[pi];
        if let Some(r) = update.requirements {
            claim.requirements = r;
        }
        if claim.reserved != update.reserved {
            self.reservations
                .exchange(&claim.reserved, &update.reserved);
            claim.reserved_types = self.pools[pool_idx]
                .catalog
                .reservation_types(&update.reserved);
            claim.reserved = update.reserved;
        }
        claim.min_values_relaxed = update.min_values_relaxed;
        dims::add(&mut claim.requests, &pod.requests);
        claim.pods.push(pi);
        claim.host_ports.extend(pod.host_ports.iter().cloned());
        if claim.its != update.its {
            claim.its = update.its;
            claim.max_allocatable = self.pools[pool_idx].catalog.max_allocatable(&claim.its);
        }
        let host = claim.host_domain;
        let open = self.topology.open_hostname_anti(host);
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &a.tolerations,
        };
        let pool = &self.pools[pool_idx];
        self.topology.record(
            &view,
            &pool.spec.taints,
            pool.taint_set,
            &self.claims[ci].requirements,
            &self.well_known,
            &self.interner,
        );
        for g in open {
            if self.topology.owned_count(g, host) > 0 {
                if self.host_blocked.len() <= g {
                    self.host_blocked.resize(g + 1, 0);
                }
                self.host_blocked[g] += 1;
            }
        }
    }

    /// A necessary condition checked before [`Self::claim_can_add`] during a scan: for each of
    /// the pod's topology groups over a key other than the hostname, the claim's requirement on
    /// that key must leave a domain the group allows. Claims share few distinct requirements
    /// per key (zones), so verdicts are remembered for the scan.
    fn zone_like_ok(
        &self,
        pi: usize,
        a: &Attempt,
        claim: &Claim,
        verdicts: &mut Vec<Verdict>,
    ) -> bool {
        for g in &a.groups {
            let spec = match g {
                crate::solver::topology::GroupRef::Owned(i) => &self.topology.groups[*i].spec,
                crate::solver::topology::GroupRef::Inverse(i) => &self.topology.inverse[*i].spec,
            };
            let key = spec.key;
            if key == self.keys.hostname {
                continue;
            }
            let on_claim = claim.requirements.get(key);
            let known = verdicts
                .iter()
                .find(|(vg, vr, _)| vg == g && vr.as_ref() == on_claim)
                .map(|(_, _, ok)| *ok);
            let ok = match known {
                Some(ok) => ok,
                None => {
                    let pod = &self.pods[pi];
                    let view = PodView {
                        namespace: pod.namespace,
                        labels: &pod.labels,
                        tolerations: &a.tolerations,
                    };
                    let exists = Requirement::exists();
                    let mut node_domains = on_claim.cloned().unwrap_or_else(Requirement::exists);
                    if let Some(p) = a.requirements.get(key) {
                        node_domains = node_domains.intersection(p, &self.interner);
                    }
                    let pod_domains = a.strict.get(key).unwrap_or(&exists);
                    let domains = self.topology.next_domains(
                        *g,
                        &view,
                        pod_domains,
                        &node_domains,
                        &self.interner,
                    );
                    let ok =
                        !domains.is_empty() && node_domains.intersects(&domains, &self.interner);
                    verdicts.push((*g, on_claim.cloned(), ok));
                    ok
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Tries NodeClaims created earlier in this solve, fewest pods first.
    pub(crate) fn add_to_inflight(&mut self, pi: usize, a: &Attempt) -> bool {
        // Every claim already holds a pod this pod's hostname anti-affinity excludes.
        let all_blocked = a.groups.iter().any(|g| match g {
            crate::solver::topology::GroupRef::Owned(gi) => {
                self.topology.is_hostname_anti(*gi)
                    && self.host_blocked.get(*gi).copied().unwrap_or(0) >= self.claims.len()
            }
            crate::solver::topology::GroupRef::Inverse(_) => false,
        });
        if all_blocked {
            return false;
        }
        let mut found = None;
        let mut cache = TopologyCache::new();
        let mut verdicts: Vec<Verdict> = Vec::new();
        let prefilter = self.pods[pi].volume_alternatives.is_empty();
        let pod = &self.pods[pi];
        let view = PodView {
            namespace: pod.namespace,
            labels: &pod.labels,
            tolerations: &a.tolerations,
        };
        // Hostname-keyed groups reject most claims for some pods (one per node): that check of
        // `claim_can_add` comes first, without the call.
        let hostname_rejects = |claim: &Claim| {
            a.groups.iter().any(|g| {
                self.topology
                    .hostname_rejects(*g, &view, claim.host_domain, &self.interner)
            })
        };
        for (_, &ci) in self.order.iter() {
            let claim = &self.claims[ci];
            if hostname_rejects(claim)
                || (prefilter && !self.zone_like_ok(pi, a, claim, &mut verdicts))
            {
                continue;
            }
            if let Ok(update) = self.claim_can_add(claim, pi, a, false, Some(&mut cache))
                && let Ok(update) = self.reserve(claim, update)
            {
                found = Some((ci, update));
                break;
            }
        }
        let Some((ci, update)) = found else {
            return false;
        };
        self.commit_claim(ci, pi, a, update);
        self.order_bump(ci);
        true
    }

    /// Tries a new NodeClaim from each NodePool in weight order.
    pub(crate) fn add_to_new(&mut self, pi: usize, a: &Attempt) -> Result<(), Reasons> {
        let mut reasons = Reasons::new();
        let mut stop = false;
        for p in 0..self.pools.len() {
            let key = format!("nodepool {}", self.pools[p].spec.name);
            let pool = &self.pools[p];
            if let Some(d) = &pool.disabled {
                reasons.insert(key, d.clone());
                continue;
            }
            if pool.nodes_remaining == Some(0) {
                reasons.insert(key, "nodepool nodes limit reached".into());
                continue;
            }
            let mut its = pool.template_its.clone();
            if pool.remaining.iter().any(Option::is_some) {
                for i in pool.template_its.iter() {
                    let cap = &pool.catalog.its[i].capacity;
                    if pool
                        .remaining
                        .iter()
                        .enumerate()
                        .any(|(d, r)| r.is_some_and(|r| i128::from(dims::get(cap, d)) > r))
                    {
                        its.remove(i);
                    }
                }
                if its.is_empty() {
                    reasons.insert(
                        key,
                        "all available instance types exceed limits for nodepool".into(),
                    );
                    continue;
                }
            }
            self.hostname_counter += 1;
            let hostname = self.interner.intern(&format!(
                "hostname-placeholder-{:04}",
                self.hostname_counter
            ));
            let pool = &self.pools[p];
            let host_domain = self.topology.hostname_domain(hostname, pool.taint_set);
            let mut requirements = pool.template.clone();
            requirements.set(self.keys.hostname, Requirement::is_in([hostname]));
            let max = pool.catalog.max_allocatable(&its);
            let claim = Claim {
                pool: p,
                host_domain,
                requirements,
                its,
                max_allocatable: max,
                requests: Res::new(),
                pods: Vec::new(),
                host_ports: Vec::new(),
                min_values_relaxed: false,
                order_key: (0, 0),
                reserved: Vec::new(),
                reserved_types: Bitset::empty(0),
            };
            let added = self
                .claim_can_add(&claim, pi, a, true, None)
                .and_then(|update| {
                    self.reserve(&claim, update).map_err(|refusal| {
                        // Strict: no lower-weight NodePool is tried either (upstream).
                        stop = refusal.strict;
                        refusal.reason.to_owned()
                    })
                });
            match added {
                Ok(update) => {
                    self.claims.push(claim);
                    let ci = self.claims.len() - 1;
                    self.commit_claim(ci, pi, a, update);
                    self.order_push_back(ci);
                    let pool = &mut self.pools[p];
                    let mut max_cap = vec![0; self.dims.len()];
                    for i in self.claims[ci].its.iter() {
                        dims::max_with(&mut max_cap, &pool.catalog.its[i].capacity);
                    }
                    for (d, r) in pool.remaining.iter_mut().enumerate() {
                        if let Some(r) = r {
                            *r = r.saturating_sub(i128::from(dims::get(&max_cap, d)));
                        }
                    }
                    if let Some(n) = pool.nodes_remaining.as_mut() {
                        *n -= 1;
                    }
                    return Ok(());
                }
                Err(e) => {
                    reasons.insert(key, e);
                    if stop {
                        self.set_deferred(pi, true);
                        break;
                    }
                }
            }
        }
        if self.pools.is_empty() {
            reasons.insert("scheduler".into(), "no nodepools are available".into());
        }
        Err(reasons)
    }
}

impl Solver<'_> {
    /// A necessary condition of [`Self::reserve`] accepting pod `pi` on `claim`: in strict
    /// mode a NodeClaim holding reservations takes a pod only if it keeps one, so one of its
    /// types that fits the pod must offer a reservation it holds or one with a free slot. Once
    /// the solve has promised every slot, this turns most NodeClaims away from a pod for a few
    /// bitset operations instead of the full [`Self::claim_can_add`] and [`Self::reserve`].
    fn may_keep_reservations(&self, claim: &Claim, pi: usize) -> bool {
        if claim.reserved.is_empty()
            || self.input.options.reserved_offering_mode != ReservedOfferingMode::Strict
        {
            return true;
        }
        let Some(free) = self.reservations.free_types(claim.pool) else {
            return true;
        };
        let pool = &self.pools[claim.pool];
        let pod = &self.pods[pi];
        // The types `claim_can_add` would keep (`fitting`) among those offering a reservation
        // the claim could hold, one at a time.
        claim
            .reserved_types
            .iter()
            .chain(free.iter())
            .filter(|&t| claim.its.contains(t))
            .any(|t| {
                pool.overhead_groups.iter().any(|g| {
                    g.its.contains(t)
                        && hostports::conflict(&g.host_ports, &pod.host_ports).is_none()
                        && pool
                            .catalog
                            .fits_sum(t, [&claim.requests, &pod.requests, &g.overhead])
                })
            })
    }

    /// `update` with the reservations `claim` holds once the pod is added, or why the pod may
    /// not be added.
    pub(crate) fn reserve(
        &self,
        claim: &Claim,
        mut update: ClaimUpdate,
    ) -> Result<ClaimUpdate, crate::solver::reservations::ReservationRefusal> {
        let requirements = update.requirements.as_ref().unwrap_or(&claim.requirements);
        update.reserved = self.reservations.to_hold(
            claim.pool,
            &self.pools[claim.pool].catalog,
            &update.its,
            requirements,
            &claim.reserved,
            &self.interner,
        )?;
        Ok(update)
    }
}
