//! Preference relaxation, one step at a time in upstream order, and what a pod looks like at a
//! given relaxation step (its requirements, tolerations and topology group specs).
//!
//! Steps: (1) drop the first required node-affinity term while more than one remains (OR
//! terms); (2) drop the heaviest preferred pod-affinity term; (3) the heaviest preferred
//! pod-anti-affinity term; (4) the heaviest preferred node-affinity term; (5) one
//! `ScheduleAnyway` spread constraint; (6) when some NodePool has a `PreferNoSchedule` taint,
//! tolerate every `PreferNoSchedule` taint.

use k8s_openapi::api::core::v1::Toleration;

use crate::intern::Interner;
use crate::requirements::Requirements;
use crate::solver::pod::PodInfo;
use crate::solver::topology::{GroupKind, GroupSpec, NodeFilter, TolerationKey};
use crate::taints::prefer_no_schedule_toleration;

/// How far a pod's preferences have been relaxed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relaxation {
    pub required_terms_removed: usize,
    pub affinity_removed: Vec<bool>,
    pub preferred_node_removed: usize,
    pub spreads_removed: Vec<bool>,
    pub tolerate_prefer_no_schedule: bool,
}

impl Relaxation {
    pub fn new(pod: &PodInfo) -> Self {
        Relaxation {
            affinity_removed: vec![false; pod.affinity_terms.len()],
            spreads_removed: vec![false; pod.spreads.len()],
            ..Default::default()
        }
    }

    /// Applies the next relaxation step; returns a description, or `None` when nothing is left.
    pub fn relax(&mut self, pod: &PodInfo, tolerate_prefer_no_schedule: bool) -> Option<String> {
        if pod.required_terms.len() > self.required_terms_removed + 1 {
            self.required_terms_removed += 1;
            return Some("removed a required node affinity term".into());
        }
        for anti in [false, true] {
            if let Some(i) = pod
                .affinity_terms
                .iter()
                .enumerate()
                .position(|(i, t)| !t.required && t.anti == anti && !self.affinity_removed[i])
            {
                self.affinity_removed[i] = true;
                return Some(format!(
                    "removed preferred pod {}affinity term (weight {})",
                    if anti { "anti-" } else { "" },
                    pod.affinity_terms[i].weight
                ));
            }
        }
        if self.preferred_node_removed < pod.preferred_terms.len() {
            self.preferred_node_removed += 1;
            return Some("removed preferred node affinity term".into());
        }
        if let Some(i) = pod
            .spreads
            .iter()
            .enumerate()
            .position(|(i, s)| s.schedule_anyway && !self.spreads_removed[i])
        {
            self.spreads_removed[i] = true;
            return Some("removed a ScheduleAnyway topology spread constraint".into());
        }
        if tolerate_prefer_no_schedule && !self.tolerate_prefer_no_schedule {
            self.tolerate_prefer_no_schedule = true;
            return Some("tolerated PreferNoSchedule taints".into());
        }
        None
    }
}

/// The pod's requirements at a relaxation step: `(requirements, strict requirements)`.
/// Requirements include the heaviest remaining preferred node-affinity term.
pub fn requirements(
    pod: &PodInfo,
    r: &Relaxation,
    interner: &Interner,
) -> (Requirements, Requirements) {
    let mut strict = pod.node_selector.clone();
    if let Some(term) = pod.required_terms.get(r.required_terms_removed) {
        strict.add_all(term, interner);
    }
    let mut reqs = pod.node_selector.clone();
    if let Some((_, term)) = pod.preferred_terms.get(r.preferred_node_removed) {
        reqs.add_all(term, interner);
    }
    if let Some(term) = pod.required_terms.get(r.required_terms_removed) {
        reqs.add_all(term, interner);
    }
    (reqs, strict)
}

/// The pod's tolerations at a relaxation step.
pub fn tolerations(pod: &PodInfo, r: &Relaxation) -> Vec<Toleration> {
    let mut t = pod.tolerations.clone();
    if r.tolerate_prefer_no_schedule {
        t.push(prefer_no_schedule_toleration());
    }
    t
}

/// The topology groups a pod owns at a relaxation step.
pub fn group_specs(
    pod: &PodInfo,
    r: &Relaxation,
    tolerations: &[Toleration],
    interner: &Interner,
) -> Vec<GroupSpec> {
    let mut specs = Vec::new();
    for (i, s) in pod.spreads.iter().enumerate() {
        if r.spreads_removed.get(i).copied().unwrap_or(false) {
            continue;
        }
        let terms = if !s.honor_affinity {
            Vec::new()
        } else if pod.required_terms.len() > r.required_terms_removed {
            pod.required_terms[r.required_terms_removed..]
                .iter()
                .map(|t| {
                    let mut reqs = pod.node_selector.clone();
                    reqs.add_all(t, interner);
                    reqs
                })
                .collect()
        } else if pod.node_selector.is_empty() {
            Vec::new()
        } else {
            vec![pod.node_selector.clone()]
        };
        specs.push(GroupSpec {
            kind: GroupKind::Spread,
            key: s.key,
            namespaces: crate::solver::selector::NamespaceSet::Some(vec![pod.namespace]),
            selector: s.selector.clone(),
            max_skew: s.max_skew,
            min_domains: s.min_domains,
            filter: NodeFilter {
                terms,
                tolerations: s
                    .honor_taints
                    .then(|| tolerations.iter().map(TolerationKey::of).collect()),
            },
        });
    }
    for (i, t) in pod.affinity_terms.iter().enumerate() {
        if r.affinity_removed.get(i).copied().unwrap_or(false) {
            continue;
        }
        specs.push(GroupSpec {
            kind: if t.anti {
                GroupKind::AntiAffinity
            } else {
                GroupKind::Affinity
            },
            key: t.key,
            namespaces: t.namespaces.clone(),
            selector: t.selector.clone(),
            max_skew: i32::MAX,
            min_domains: None,
            filter: NodeFilter::default(),
        });
    }
    specs
}
