//! What the solver needs from a pod, compiled once: requests (the Kubernetes `PodRequests` rule),
//! node selector and node affinity terms, tolerations, pod (anti-)affinity terms, topology
//! spread constraints and host ports.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::hash::FxHashMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PodSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::input::{Operator, PreferencePolicy};
use crate::intern::{Interner, Sym};
use crate::output::PodRef;
use crate::pod_record::PodRecord;
use crate::requirements::Requirements;
use crate::resources::ResourceList;
use crate::solver::dims::{self, Dims, Res};
use crate::solver::hostports::HostPort;
use crate::solver::selector::{Labels, NamespaceSet, Selector, intern_labels, label_value};

/// A pod-affinity or anti-affinity term.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    pub anti: bool,
    pub required: bool,
    pub weight: i32,
    pub key: Sym,
    pub selector: Option<Selector>,
    pub namespaces: NamespaceSet,
}

/// A topology spread constraint.
#[derive(Debug, Clone)]
pub struct Spread {
    pub key: Sym,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub schedule_anyway: bool,
    pub selector: Option<Selector>,
    pub honor_affinity: bool,
    pub honor_taints: bool,
}

/// What a pod's spec compiles to in its namespace with its labels: requests, node selector
/// and affinity, tolerations, pod (anti-)affinity, spread constraints, host ports. The pods of
/// one controller (equal spec, namespace and labels) share one ([`ShapeCache`]): at 50,000
/// pods that is most of the solver's memory per pod, and most of its compile time.
#[derive(Debug, Clone, Default)]
pub struct PodShape {
    pub requests: Res,
    pub node_selector: Requirements,
    /// Required node-affinity terms (OR).
    pub required_terms: Vec<Requirements>,
    /// Preferred node-affinity terms, heaviest first (stable).
    pub preferred_terms: Vec<(i32, Requirements)>,
    pub tolerations: Vec<Toleration>,
    /// Required terms, then preferred terms heaviest first; affinity and anti-affinity mixed.
    pub affinity_terms: Vec<AffinityTerm>,
    pub spreads: Vec<Spread>,
    pub host_ports: Vec<HostPort>,
}

/// A compiled pod: what is its own, and its [`PodShape`] (shared), whose fields read through
/// [`Deref`](std::ops::Deref) as the pod's (`info.tolerations`).
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub index: usize,
    pub pod_ref: PodRef,
    pub namespace: Sym,
    pub labels: Labels,
    pub created: i128,
    pub shape: Arc<PodShape>,
    /// PVC names (namespace-local) the pod mounts.
    pub claims: Vec<String>,
    /// Requirement alternatives from volume topology (empty: none).
    pub volume_alternatives: Vec<Requirements>,
    pub owned_by_daemonset: bool,
    /// Moved off a consolidation candidate ([`crate::SolveInput::relocating`]).
    pub relocating: bool,
    /// The existing node an earlier batch planned it on ([`crate::SolveInput::planned`]), as
    /// an index into the solver's existing nodes.
    pub planned: Option<usize>,
    /// `status.phase` is `Pending` (counted by the effective-zone gauge).
    pub pending: bool,
}

impl std::ops::Deref for PodInfo {
    type Target = PodShape;

    fn deref(&self) -> &PodShape {
        &self.shape
    }
}

/// The shapes compiled so far, by the spec (its `Arc`'s address, the `Arc` kept so the address
/// is never reused while cached), namespace, labels and preference policy.
#[derive(Debug, Default)]
pub struct ShapeCache {
    shapes: FxHashMap<ShapeKey, (Arc<PodSpec>, Arc<PodShape>)>,
}

/// The spec's address, the namespace, the labels, and whether preferences are respected.
type ShapeKey = (usize, Sym, Labels, bool);

/// The pod cannot be scheduled as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    #[error("invalid resource request: {0}")]
    Resources(String),
    #[error("{0}")]
    Validation(String),
}

/// Any owner reference names a DaemonSet (the solver's rule for DaemonSet pods: their
/// requests count as daemon overhead).
fn owned_by_daemonset(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

/// Shared compile state.
#[derive(Debug)]
pub struct Compiler<'a> {
    pub interner: &'a mut Interner,
    pub dims: &'a mut Dims,
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    pub shapes: &'a mut ShapeCache,
}

/// Kubernetes `PodRequests`: containers summed, restartable init containers (sidecars) added,
/// the max with each regular init container (plus sidecars started before it), plus overhead.
/// Limits stand in for missing requests (API server defaulting).
pub fn pod_requests(spec: Option<&PodSpec>) -> Result<ResourceList, PodError> {
    let err = |e: crate::resources::ResourceParseError| PodError::Resources(e.to_string());
    let Some(spec) = spec else {
        return Ok(ResourceList::new());
    };
    let container_requests =
        |c: &k8s_openapi::api::core::v1::Container| -> Result<ResourceList, PodError> {
            let mut list = ResourceList::new();
            if let Some(res) = c.resources.as_ref() {
                if let Some(limits) = res.limits.as_ref() {
                    list = ResourceList::from_k8s(limits).map_err(err)?;
                }
                if let Some(requests) = res.requests.as_ref() {
                    for (k, v) in ResourceList::from_k8s(requests).map_err(err)?.iter() {
                        list.set(k, *v);
                    }
                }
            }
            Ok(list)
        };
    let mut reqs = ResourceList::new();
    for c in &spec.containers {
        reqs.add(&container_requests(c)?);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            reqs.add(&r);
            sidecars.add(&r);
            init_max.max_with(&sidecars);
        } else {
            let mut tmp = r;
            tmp.add(&sidecars);
            init_max.max_with(&tmp);
        }
    }
    reqs.max_with(&init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (k, v) in ResourceList::from_k8s(pod_level).map_err(err)?.iter() {
            reqs.set(k, *v);
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        reqs.add(&ResourceList::from_k8s(overhead).map_err(err)?);
    }
    reqs.set("pods", crate::Quantity::from_units(1));
    Ok(reqs)
}

/// Kubernetes `PodLimits` (what upstream's node gauges sum): containers' limits summed,
/// restartable init containers (sidecars) added, the max with each regular init container (plus
/// sidecars started before it), pod-level limits in place of the containers' for the resources
/// they name, overhead added to the limits that are set and not zero; plus `pods: 1`, as
/// upstream's `LimitsForPods` counts each pod.
pub fn pod_limits(spec: Option<&PodSpec>) -> Result<ResourceList, PodError> {
    let err = |e: crate::resources::ResourceParseError| PodError::Resources(e.to_string());
    let Some(spec) = spec else {
        return Ok(ResourceList::new().with("pods", crate::Quantity::from_units(1)));
    };
    let container_limits =
        |c: &k8s_openapi::api::core::v1::Container| -> Result<ResourceList, PodError> {
            match c.resources.as_ref().and_then(|r| r.limits.as_ref()) {
                Some(limits) => ResourceList::from_k8s(limits).map_err(err),
                None => Ok(ResourceList::new()),
            }
        };
    let mut limits = ResourceList::new();
    for c in &spec.containers {
        limits.add(&container_limits(c)?);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let l = container_limits(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            limits.add(&l);
            sidecars.add(&l);
            init_max.max_with(&sidecars);
        } else {
            let mut tmp = l;
            tmp.add(&sidecars);
            init_max.max_with(&tmp);
        }
    }
    limits.max_with(&init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        for (k, v) in ResourceList::from_k8s(pod_level).map_err(err)?.iter() {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                limits.set(k, *v);
            }
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        for (k, v) in ResourceList::from_k8s(overhead).map_err(err)?.iter() {
            let current = limits.get(k);
            if !current.is_zero() {
                limits.set(k, current + *v);
            }
        }
    }
    limits.set("pods", crate::Quantity::from_units(1));
    Ok(limits)
}

fn node_selector_requirements(
    exprs: &[NodeSelectorRequirement],
    interner: &mut Interner,
) -> Result<Requirements, PodError> {
    let mut reqs = Requirements::new();
    for e in exprs {
        reqs.add_node_selector(e, interner).map_err(|unknown| {
            PodError::Validation(format!(
                "unsupported node selector operator {:?}",
                unknown.0
            ))
        })?;
    }
    Ok(reqs)
}

fn validate_keys(reqs: &Requirements, interner: &Interner, what: &str) -> Result<(), PodError> {
    for (key, req) in reqs.iter() {
        let name = interner.resolve(key);
        if karpenter_api::labels::is_restricted_label(name) {
            return Err(PodError::Validation(format!(
                "{what}: label {name} is restricted; specify a well known label or a custom label that does not use a restricted domain"
            )));
        }
        if name == karpenter_api::labels::NODEPOOL && req.operator() == Operator::DoesNotExist {
            return Err(PodError::Validation(format!(
                "{what}: {name} DoesNotExist would never select a Karpenter node"
            )));
        }
    }
    Ok(())
}

fn term_requirements(
    term: &NodeSelectorTerm,
    interner: &mut Interner,
) -> Result<Requirements, PodError> {
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(PodError::Validation(
            "node affinity matchFields are not supported".to_string(),
        ));
    }
    let reqs =
        node_selector_requirements(term.match_expressions.as_deref().unwrap_or(&[]), interner)?;
    validate_keys(&reqs, interner, "node affinity")?;
    Ok(reqs)
}

impl Compiler<'_> {
    fn namespace_set(
        &mut self,
        term: &PodAffinityTerm,
        own: Sym,
    ) -> Result<NamespaceSet, PodError> {
        let mut names: Vec<Sym> = term
            .namespaces
            .iter()
            .flatten()
            .map(|n| self.interner.intern(n))
            .collect();
        if let Some(sel) = term.namespace_selector.as_ref() {
            let empty = sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
                && sel.match_expressions.as_ref().is_none_or(Vec::is_empty);
            if empty {
                return Ok(NamespaceSet::All);
            }
            let compiled = Selector::compile(sel, &[], self.interner)
                .map_err(|e| PodError::Validation(e.to_string()))?;
            for (name, labels) in self.namespaces {
                if compiled.matches_map(labels, self.interner) {
                    names.push(self.interner.intern(name));
                }
            }
        } else if names.is_empty() {
            names.push(own);
        }
        names.sort_unstable();
        names.dedup();
        Ok(NamespaceSet::Some(names))
    }

    fn affinity_term(
        &mut self,
        term: &PodAffinityTerm,
        anti: bool,
        required: bool,
        weight: i32,
        own: Sym,
    ) -> Result<AffinityTerm, PodError> {
        let selector = match term.label_selector.as_ref() {
            Some(sel) => Some(
                Selector::compile(sel, &[], self.interner)
                    .map_err(|e| PodError::Validation(e.to_string()))?,
            ),
            None => None,
        };
        Ok(AffinityTerm {
            anti,
            required,
            weight,
            key: self.interner.intern(&term.topology_key),
            selector,
            namespaces: self.namespace_set(term, own)?,
        })
    }

    /// Compiles one pod.
    pub fn compile(
        &mut self,
        index: usize,
        pod: &PodRecord,
        policy: PreferencePolicy,
    ) -> Result<PodInfo, PodError> {
        let meta = &pod.metadata;
        let pod_ref = PodRef::of(pod);
        let namespace = self.interner.intern(&pod_ref.namespace);
        let labels = intern_labels(meta.labels.as_ref(), self.interner);
        let created = meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_nanosecond());
        let owned_by_daemonset = owned_by_daemonset(meta);
        let mut claims = Vec::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            if let Some(pvc) = v.persistent_volume_claim.as_ref() {
                claims.push(pvc.claim_name.clone());
            } else if let Some(eph) = v.ephemeral.as_ref()
                && eph.volume_claim_template.is_some()
            {
                // Generic ephemeral volumes are named <pod>-<volume>.
                claims.push(format!("{}-{}", pod_ref.name, v.name));
            }
        }
        let shape = self.shape_of(pod, namespace, &labels, policy)?;
        Ok(PodInfo {
            index,
            pod_ref,
            namespace,
            labels,
            created,
            shape,
            claims,
            volume_alternatives: Vec::new(),
            owned_by_daemonset,
            relocating: false,
            planned: None,
            pending: pod.phase() == "Pending",
        })
    }

    /// What an existing node's pod contributes to the node: its namespace, labels, shape, and
    /// whether a DaemonSet owns it (no [`PodRef`] or claims: those are for pods to place).
    pub fn existing(
        &mut self,
        pod: &PodRecord,
    ) -> Result<(Sym, Labels, Arc<PodShape>, bool), PodError> {
        let meta = &pod.metadata;
        let namespace = self.interner.intern(
            meta.namespace
                .as_deref()
                .unwrap_or(crate::pod_record::DEFAULT_NAMESPACE),
        );
        let labels = intern_labels(meta.labels.as_ref(), self.interner);
        let shape = self.shape_of(pod, namespace, &labels, PreferencePolicy::Ignore)?;
        let owned_by_daemonset = owned_by_daemonset(meta);
        Ok((namespace, labels, shape, owned_by_daemonset))
    }

    /// The pod's shape: the cached one of an equal spec, namespace, labels and policy, else
    /// compiled and cached.
    fn shape_of(
        &mut self,
        pod: &PodRecord,
        namespace: Sym,
        labels: &Labels,
        policy: PreferencePolicy,
    ) -> Result<Arc<PodShape>, PodError> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(Arc::new(PodShape {
                requests: self.dims.res(&ResourceList::new()),
                ..PodShape::default()
            }));
        };
        let respect = policy == PreferencePolicy::Respect;
        let key = (
            Arc::as_ptr(spec) as usize,
            namespace,
            labels.clone(),
            respect,
        );
        if let Some((_, shape)) = self.shapes.shapes.get(&key) {
            return Ok(Arc::clone(shape));
        }
        let shape = Arc::new(self.shape(spec, namespace, labels, policy)?);
        self.shapes
            .shapes
            .insert(key, (Arc::clone(spec), Arc::clone(&shape)));
        Ok(shape)
    }

    /// Compiles `spec` for a pod in `namespace` with `labels`.
    fn shape(
        &mut self,
        spec: &PodSpec,
        namespace: Sym,
        labels: &Labels,
        policy: PreferencePolicy,
    ) -> Result<PodShape, PodError> {
        let mut info = PodShape {
            requests: self.dims.res(&pod_requests(Some(spec))?),
            ..PodShape::default()
        };
        if let Some(sel) = spec.node_selector.as_ref() {
            info.node_selector = Requirements::from_labels(sel.iter(), self.interner);
            validate_keys(&info.node_selector, self.interner, "node selector")?;
        }
        info.tolerations = spec.tolerations.clone().unwrap_or_default();
        let affinity = spec.affinity.as_ref();
        if let Some(na) = affinity.and_then(|a| a.node_affinity.as_ref()) {
            if let Some(req) = na
                .required_during_scheduling_ignored_during_execution
                .as_ref()
            {
                for term in &req.node_selector_terms {
                    info.required_terms
                        .push(term_requirements(term, self.interner)?);
                }
            }
            if policy == PreferencePolicy::Respect {
                for p in na
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                {
                    info.preferred_terms
                        .push((p.weight, term_requirements(&p.preference, self.interner)?));
                }
                info.preferred_terms.sort_by_key(|t| std::cmp::Reverse(t.0));
            }
        }
        let mut required = Vec::new();
        let mut preferred = Vec::new();
        // Pod affinity, then anti-affinity: their required terms, then (respected) preferred.
        let groups = [
            affinity.and_then(|a| a.pod_affinity.as_ref()).map(|pa| {
                (
                    false,
                    &pa.required_during_scheduling_ignored_during_execution,
                    &pa.preferred_during_scheduling_ignored_during_execution,
                )
            }),
            affinity
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .map(|pa| {
                    (
                        true,
                        &pa.required_during_scheduling_ignored_during_execution,
                        &pa.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
        ];
        for (anti, required_terms, preferred_terms) in groups.into_iter().flatten() {
            for t in required_terms.iter().flatten() {
                required.push(self.affinity_term(t, anti, true, 0, namespace)?);
            }
            if policy == PreferencePolicy::Respect {
                for w in preferred_terms.iter().flatten() {
                    preferred.push(self.affinity_term(
                        &w.pod_affinity_term,
                        anti,
                        false,
                        w.weight,
                        namespace,
                    )?);
                }
            }
        }
        preferred.sort_by_key(|t| std::cmp::Reverse(t.weight));
        info.affinity_terms = required;
        info.affinity_terms.extend(preferred);
        for tsc in spec.topology_spread_constraints.iter().flatten() {
            let schedule_anyway = tsc.when_unsatisfiable == "ScheduleAnyway";
            if schedule_anyway && policy == PreferencePolicy::Ignore {
                continue;
            }
            let extra: Vec<(Sym, Sym)> = tsc
                .match_label_keys
                .iter()
                .flatten()
                .filter_map(|k| {
                    let key = self.interner.intern(k);
                    label_value(labels, key).map(|v| (key, v))
                })
                .collect();
            let selector = match tsc.label_selector.as_ref() {
                Some(sel) => Some(
                    Selector::compile(sel, &extra, self.interner)
                        .map_err(|e| PodError::Validation(e.to_string()))?,
                ),
                None => None,
            };
            info.spreads.push(Spread {
                key: self.interner.intern(&tsc.topology_key),
                max_skew: tsc.max_skew.max(1),
                min_domains: tsc.min_domains,
                schedule_anyway,
                selector,
                honor_affinity: tsc.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: tsc.node_taints_policy.as_deref() == Some("Honor"),
            });
        }
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            for p in c.ports.iter().flatten() {
                if let Some(port) = p.host_port.filter(|p| *p > 0) {
                    info.host_ports.push(HostPort::new(
                        p.host_ip.as_deref().unwrap_or(""),
                        port,
                        p.protocol.as_deref().unwrap_or("TCP"),
                    ));
                }
            }
        }
        Ok(info)
    }
}

impl PodInfo {
    pub fn cpu(&self) -> i64 {
        dims::get(&self.requests, dims::CPU)
    }

    pub fn memory(&self) -> i64 {
        dims::get(&self.requests, dims::MEMORY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).expect("a pod spec")
    }

    fn record(name: &str, hash: &str, spec: &Arc<PodSpec>) -> PodRecord {
        PodRecord {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                labels: Some(BTreeMap::from([
                    ("app".to_owned(), "web".to_owned()),
                    ("pod-template-hash".to_owned(), hash.to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(Arc::clone(spec)),
            ..PodRecord::default()
        }
    }

    #[test]
    fn pods_of_one_spec_namespace_and_labels_share_one_shape_and_other_labels_get_their_own() {
        let spec = Arc::new(spec(serde_json::json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "topologySpreadConstraints": [{
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash"]
            }]
        })));
        let (mut interner, mut dims, mut shapes) =
            (Interner::new(), Dims::default(), ShapeCache::default());
        let namespaces = BTreeMap::new();
        let mut compiler = Compiler {
            interner: &mut interner,
            dims: &mut dims,
            namespaces: &namespaces,
            shapes: &mut shapes,
        };
        let mut compile = |name: &str, hash: &str| {
            compiler
                .compile(0, &record(name, hash, &spec), PreferencePolicy::Respect)
                .expect("compiles")
        };
        let (a, b, c) = (compile("a", "v1"), compile("b", "v1"), compile("c", "v2"));
        assert!(
            Arc::ptr_eq(&a.shape, &b.shape),
            "same spec, labels: one shape"
        );
        assert!(
            !Arc::ptr_eq(&a.shape, &c.shape),
            "matchLabelKeys reads the labels: another hash is another shape"
        );
        assert_ne!(
            format!("{:?}", a.spreads[0].selector),
            format!("{:?}", c.spreads[0].selector),
            "each spread selects its own revision's pods"
        );
        assert_eq!(
            (a.pod_ref.name.as_str(), c.pod_ref.name.as_str()),
            ("a", "c")
        );
        assert_eq!(a.cpu(), 1000);
    }

    #[test]
    fn limits_sum_containers_and_sidecars_take_the_larger_init_container_and_add_overhead() {
        let spec = spec(serde_json::json!({
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "5"}}}
            ],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"cpu": "500m"}}},
                {"name": "init", "resources": {"limits": {"memory": "3Gi"}}}
            ],
            "overhead": {"cpu": "100m", "ephemeral-storage": "1Gi"}
        }));
        let limits = pod_limits(Some(&spec)).expect("limits");
        let q = |s: &str| s.parse::<crate::Quantity>().expect("a quantity");
        assert_eq!(
            limits.get("cpu"),
            q("1600m"),
            "containers, sidecar, overhead"
        );
        assert_eq!(
            limits.get("memory"),
            q("3Gi"),
            "the init container's is larger"
        );
        assert_eq!(
            limits.get("ephemeral-storage"),
            q("0"),
            "overhead only where a limit is set"
        );
        assert_eq!(limits.get("pods"), q("1"));
        assert_eq!(pod_limits(None).expect("limits").get("pods"), q("1"));
    }
}
