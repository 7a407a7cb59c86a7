//! PodDisruptionBudgets as disruption needs them, and upstream's `CanEvictPods` rule: a pod
//! under more than one PDB cannot be evicted; a pod under a PDB that allows no disruptions
//! cannot be evicted unless it is not ready and the PDB's `unhealthyPodEvictionPolicy` is
//! `AlwaysAllow`. A "fully blocking" PDB (maxUnavailable 0 / "0%", minAvailable "100%") keeps
//! its pods out of rescheduling simulations altogether.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_scheduling::PodRecord;

/// A PodDisruptionBudget.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `spec.unhealthyPodEvictionPolicy` (`IfHealthyBudget` or `AlwaysAllow`).
    pub unhealthy_pod_eviction_policy: Option<String>,
    /// `spec.maxUnavailable` as written.
    pub max_unavailable: Option<String>,
    /// `spec.minAvailable` as written.
    pub min_available: Option<String>,
}

impl Pdb {
    /// The budget as the API server stores it; `None` without a name. A PDB without status
    /// yet allows no disruptions (upstream reads `status.disruptionsAllowed` as is).
    pub fn from_k8s(pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget) -> Option<Pdb> {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let text = |v: &IntOrString| match v {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        let spec = pdb.spec.as_ref();
        Some(Pdb {
            namespace: pdb
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            name: pdb.metadata.name.clone()?,
            selector: spec.and_then(|s| s.selector.clone()).unwrap_or_default(),
            disruptions_allowed: pdb
                .status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
                .unwrap_or(0),
            unhealthy_pod_eviction_policy: spec
                .and_then(|s| s.unhealthy_pod_eviction_policy.clone()),
            max_unavailable: spec.and_then(|s| s.max_unavailable.as_ref()).map(text),
            min_available: spec.and_then(|s| s.min_available.as_ref()).map(text),
        })
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The selector matches the pod's labels (an empty selector matches every pod).
    pub fn matches(&self, pod: &PodRecord) -> bool {
        if pod.metadata.namespace.as_deref().unwrap_or("default") != self.namespace {
            return false;
        }
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        selector_matches(&self.selector, labels)
    }

    /// maxUnavailable 0 / "0%" or minAvailable "100%".
    pub fn fully_blocking(&self) -> bool {
        matches!(self.max_unavailable.as_deref(), Some("0" | "0%"))
            || self.min_available.as_deref() == Some("100%")
    }
}

/// Kubernetes label-selector semantics (matchLabels and matchExpressions).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_exprs = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or(&[]);
        let got = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => got.is_some_and(|v| values.contains(v)),
            "NotIn" => got.is_none_or(|v| !values.contains(v)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        }
    });
    by_labels && by_exprs
}

/// Why a pod cannot be evicted now, if it cannot.
pub fn eviction_block(pdbs: &[Pdb], pod: &PodRecord) -> Option<String> {
    let matching: Vec<&Pdb> = pdbs.iter().filter(|p| p.matches(pod)).collect();
    match matching.as_slice() {
        [] => None,
        [pdb] => {
            let unhealthy_ok = !pod.is_ready()
                && pdb.unhealthy_pod_eviction_policy.as_deref() == Some("AlwaysAllow");
            (pdb.disruptions_allowed <= 0 && !unhealthy_ok).then(|| {
                format!(
                    "blocked: PDB {} allows 0 disruptions (pod {})",
                    pdb.key(),
                    pod.key()
                )
            })
        }
        several => Some(format!(
            "blocked: pod {} is matched by {} PDBs ({})",
            pod.key(),
            several.len(),
            several
                .iter()
                .map(|p| p.key())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// True when a fully blocking PDB covers the pod (it is left out of simulations).
pub fn fully_blocked(pdbs: &[Pdb], pod: &PodRecord) -> bool {
    pdbs.iter().any(|p| p.fully_blocking() && p.matches(pod))
}
