//! DaemonSet overhead: every new node also runs the DaemonSet pods that would land on it, so
//! instance types of a NodePool are grouped by the set of compatible DaemonSets and each group
//! reserves their summed requests (and host ports).

use k8s_openapi::api::core::v1::Taint;

use crate::hash::FxHashSet;
use crate::intern::{Interner, Sym};
use crate::requirements::Requirements;
use crate::solver::bitset::Bitset;
use crate::solver::dims::{self, Res};
use crate::solver::hostports::HostPort;
use crate::solver::pod::PodInfo;
use crate::solver::type_index::TypeIndex;
use crate::taints::first_untolerated;

/// Instance types sharing the same DaemonSet overhead.
#[derive(Debug, Clone)]
pub struct OverheadGroup {
    pub its: Bitset,
    pub overhead: Res,
    pub host_ports: Vec<HostPort>,
}

/// True when a DaemonSet pod would run on a node with these taints and requirements (any of its
/// required node-affinity terms may match).
pub fn daemon_compatible(
    ds: &PodInfo,
    taints: &[Taint],
    node: &Requirements,
    allow_undefined: &FxHashSet<Sym>,
    interner: &Interner,
) -> bool {
    let hard: Vec<Taint> = taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
        .cloned()
        .collect();
    if first_untolerated(&hard, &ds.tolerations).is_some() {
        return false;
    }
    let term_ok = |term: Option<&Requirements>| {
        let mut reqs = ds.node_selector.clone();
        if let Some(t) = term {
            reqs.add_all(t, interner);
        }
        node.compatible(&reqs, allow_undefined, interner).is_ok()
    };
    if ds.required_terms.is_empty() {
        term_ok(None)
    } else {
        ds.required_terms.iter().any(|t| term_ok(Some(t)))
    }
}

/// Groups a pool's instance types (`candidates`) by compatible DaemonSets.
pub fn overhead_groups(
    daemons: &[PodInfo],
    taints: &[Taint],
    template: &Requirements,
    catalog: &TypeIndex,
    candidates: &Bitset,
    allow_undefined: &FxHashSet<Sym>,
    interner: &Interner,
) -> Vec<OverheadGroup> {
    let pool_ok: Vec<bool> = daemons
        .iter()
        .map(|d| daemon_compatible(d, taints, template, allow_undefined, interner))
        .collect();
    let mut groups: Vec<(Vec<bool>, OverheadGroup)> = Vec::new();
    for i in candidates.iter() {
        let it = &catalog.its[i];
        let mask: Vec<bool> = daemons
            .iter()
            .zip(&pool_ok)
            .map(|(d, ok)| {
                *ok && {
                    let fits_term = |term: Option<&Requirements>| {
                        let mut reqs = d.node_selector.clone();
                        if let Some(t) = term {
                            reqs.add_all(t, interner);
                        }
                        template
                            .compatible(&reqs, allow_undefined, interner)
                            .is_ok()
                            && it.requirements.overlaps(&reqs, interner)
                    };
                    if d.required_terms.is_empty() {
                        fits_term(None)
                    } else {
                        d.required_terms.iter().any(|t| fits_term(Some(t)))
                    }
                }
            })
            .collect();
        match groups.iter_mut().find(|(m, _)| *m == mask) {
            Some((_, g)) => g.its.insert(i),
            None => {
                let mut overhead = Res::new();
                let mut host_ports = Vec::new();
                for (d, on) in daemons.iter().zip(&mask) {
                    if *on {
                        dims::add(&mut overhead, &d.requests);
                        host_ports.extend(d.host_ports.iter().cloned());
                    }
                }
                let mut its = Bitset::empty(catalog.len());
                its.insert(i);
                groups.push((
                    mask,
                    OverheadGroup {
                        its,
                        overhead,
                        host_ports,
                    },
                ));
            }
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}
