//! A pending pod's effective zone: the one zone it can go to, `flexible` when several, `none`
//! when its own zone requirement, its volumes' zones and its zone-keyed topology constraints
//! leave nothing (upstream v1.15's `computeEffectiveZoneFromPod`, read by the
//! `karpenter_scheduler_pending_pods_by_effective_zone_count` gauge).
//!
//! Computed once per pod before the loop, from the pod as written (no preference relaxed), and
//! with the topology counts of the existing pods, as upstream does.

use crate::intern::Sym;
use crate::requirement::Requirement;
use crate::solver::preferences::{self, Relaxation};
use crate::solver::scheduler::Solver;
use crate::solver::topology::{GroupRef, PodView};

/// The value of a pod that can go to more than one zone.
pub const FLEXIBLE: &str = "flexible";
/// The value of a pod that can go to no zone.
pub const NONE: &str = "none";

impl Solver<'_> {
    /// The effective zone of pod `pi` ([`FLEXIBLE`], [`NONE`] or a zone name).
    pub(crate) fn effective_zone(&mut self, pi: usize) -> String {
        let zone = self.keys.zone;
        let pod = &self.pods[pi];
        let zonal_topology = pod.spreads.iter().any(|s| s.key == zone)
            || pod.affinity_terms.iter().any(|t| t.key == zone);
        let own_zone =
            pod.node_selector.has(zone) || pod.required_terms.iter().any(|t| t.has(zone));
        // Most pods say nothing of zones: no requirement or group is built for them.
        if !zonal_topology && !own_zone && pod.volume_alternatives.is_empty() {
            return FLEXIBLE.to_owned();
        }
        let relax = Relaxation::new(pod);
        let (requirements, strict) = preferences::requirements(pod, &relax, &self.interner);
        let exists = Requirement::exists();
        // The intersection of the valid domains of every zone-keyed group the pod owns; `None`
        // when it owns none.
        let mut topology: Option<Vec<Sym>> = None;
        if zonal_topology {
            let tolerations = preferences::tolerations(pod, &relax);
            let specs = preferences::group_specs(pod, &relax, &tolerations, &self.interner);
            let pod_domains = requirements.get(zone).unwrap_or(&exists);
            for spec in specs.into_iter().filter(|s| s.key == zone) {
                let group = GroupRef::Owned(self.ensure_group(spec));
                let pod = &self.pods[pi];
                let view = PodView {
                    namespace: pod.namespace,
                    labels: &pod.labels,
                    tolerations: &tolerations,
                };
                let valid = self
                    .topology
                    .valid_domains(group, &view, pod_domains, &self.interner);
                if valid.is_empty() {
                    return NONE.to_owned();
                }
                topology = Some(match topology {
                    None => valid,
                    Some(mut so_far) => {
                        so_far.retain(|z| valid.contains(z));
                        so_far
                    }
                });
            }
        }
        let own = strict.get(zone).unwrap_or(&exists);
        let volumes = volume_zones(&self.pods[pi].volume_alternatives, zone);
        let listed: Vec<Sym> = if !own.complement {
            own.values.clone()
        } else if let Some(v) = &volumes {
            v.values.clone()
        } else if let Some(t) = topology.as_ref().filter(|t| !t.is_empty()) {
            t.clone()
        } else {
            return FLEXIBLE.to_owned();
        };
        let mut matched = listed.into_iter().filter(|z| {
            own.has(*z, &self.interner)
                && volumes.as_ref().is_none_or(|v| v.has(*z, &self.interner))
                && topology
                    .as_ref()
                    .is_none_or(|t| t.is_empty() || t.contains(z))
        });
        match (matched.next(), matched.next()) {
            (Some(one), None) => self.interner.resolve(one).to_string(),
            (Some(_), Some(_)) => FLEXIBLE.to_owned(),
            (None, _) => NONE.to_owned(),
        }
    }
}

/// The union of the zones the pod's volume alternatives allow, or `None` when the volumes do
/// not pin the zone (no volumes, or one alternative without a concrete zone list).
fn volume_zones(
    alternatives: &[crate::requirements::Requirements],
    zone: Sym,
) -> Option<Requirement> {
    if alternatives.is_empty() {
        return None;
    }
    let mut values: Vec<Sym> = Vec::new();
    for alternative in alternatives {
        let r = alternative.get(zone)?;
        if r.complement {
            return None;
        }
        values.extend(r.values.iter().copied());
    }
    Some(Requirement::is_in(values))
}
