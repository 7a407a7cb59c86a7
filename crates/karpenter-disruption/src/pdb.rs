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

/// The cluster's PDBs, indexed by namespace and by one label each one's selector requires (a
/// `matchLabels` pair), so a pod is matched against the PDBs that could select it rather than
/// every PDB of the cluster (a pass asks for each pod of each node: 50,000 pods and 1,600 PDBs
/// were 80 million selector checks). Reads as a slice of [`Pdb`], in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pdbs {
    all: Vec<Pdb>,
    /// namespace -> label key -> label value -> PDBs (indexes into `all`) requiring it.
    by_label: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<usize>>>>,
    /// namespace -> PDBs without a `matchLabels` pair (an expression-only or empty selector).
    unkeyed: BTreeMap<String, Vec<usize>>,
}

impl Pdbs {
    /// Adds a PDB.
    pub fn push(&mut self, pdb: Pdb) {
        let index = self.all.len();
        match pdb
            .selector
            .match_labels
            .as_ref()
            .and_then(|l| l.iter().next())
        {
            Some((key, value)) => self
                .by_label
                .entry(pdb.namespace.clone())
                .or_default()
                .entry(key.clone())
                .or_default()
                .entry(value.clone())
                .or_default()
                .push(index),
            None => self
                .unkeyed
                .entry(pdb.namespace.clone())
                .or_default()
                .push(index),
        }
        self.all.push(pdb);
    }

    /// The PDBs selecting `pod`, in the order given.
    pub fn matching<'a>(&'a self, pod: &PodRecord) -> Vec<&'a Pdb> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut found: Vec<usize> = self.unkeyed.get(namespace).cloned().unwrap_or_default();
        if let (Some(keys), Some(labels)) =
            (self.by_label.get(namespace), pod.metadata.labels.as_ref())
        {
            for (key, value) in labels {
                if let Some(indexes) = keys.get(key).and_then(|values| values.get(value)) {
                    found.extend(indexes);
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
            .into_iter()
            .filter_map(|i| self.all.get(i))
            .filter(|p| p.matches(pod))
            .collect()
    }
}

impl std::ops::Deref for Pdbs {
    type Target = [Pdb];

    fn deref(&self) -> &[Pdb] {
        &self.all
    }
}

impl FromIterator<Pdb> for Pdbs {
    fn from_iter<I: IntoIterator<Item = Pdb>>(pdbs: I) -> Self {
        let mut all = Pdbs::default();
        for pdb in pdbs {
            all.push(pdb);
        }
        all
    }
}

/// Why a pod cannot be evicted now, if it cannot.
pub fn eviction_block(pdbs: &Pdbs, pod: &PodRecord) -> Option<String> {
    let matching = pdbs.matching(pod);
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
pub fn fully_blocked(pdbs: &Pdbs, pod: &PodRecord) -> bool {
    pdbs.matching(pod).iter().any(|p| p.fully_blocking())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pdb(namespace: &str, name: &str, selector: serde_json::Value) -> Pdb {
        Pdb {
            namespace: namespace.into(),
            name: name.into(),
            selector: serde_json::from_value(selector).expect("a selector"),
            disruptions_allowed: 0,
            ..Pdb::default()
        }
    }

    fn pod(namespace: &str, labels: &[(&str, &str)]) -> PodRecord {
        PodRecord {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some(namespace.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..PodRecord::default()
        }
    }

    fn names(pdbs: &Pdbs, pod: &PodRecord) -> Vec<String> {
        pdbs.matching(pod).iter().map(|p| p.key()).collect()
    }

    #[test]
    fn the_index_finds_exactly_the_pdbs_a_full_scan_finds_in_the_order_given() {
        let all = [
            pdb(
                "shop",
                "web",
                serde_json::json!({"matchLabels": {"app": "web"}}),
            ),
            pdb("shop", "everything", serde_json::json!({})),
            pdb(
                "shop",
                "tier",
                serde_json::json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
            ),
            pdb(
                "shop",
                "web-front",
                serde_json::json!({"matchLabels": {"app": "web", "tier": "front"}}),
            ),
            pdb(
                "other",
                "web",
                serde_json::json!({"matchLabels": {"app": "web"}}),
            ),
            pdb(
                "shop",
                "db",
                serde_json::json!({"matchLabels": {"app": "db"}}),
            ),
        ];
        let pdbs: Pdbs = all.iter().cloned().collect();
        let pods = [
            pod("shop", &[("app", "web"), ("tier", "front")]),
            pod("shop", &[("app", "web")]),
            pod("shop", &[("app", "db"), ("tier", "front")]),
            pod("other", &[("app", "web")]),
            pod("empty", &[]),
        ];
        for p in &pods {
            let scanned: Vec<String> = all.iter().filter(|d| d.matches(p)).map(Pdb::key).collect();
            assert_eq!(names(&pdbs, p), scanned, "{:?}", p.metadata.labels);
        }
        assert_eq!(
            names(&pdbs, &pods[0]),
            ["shop/web", "shop/everything", "shop/tier", "shop/web-front"]
        );
        assert_eq!(pdbs.len(), 6, "reads as the slice given");
    }

    #[test]
    fn a_pod_under_two_pdbs_is_blocked_naming_both_and_a_fully_blocking_one_is_found_through_the_index()
     {
        let mut pdbs = Pdbs::default();
        pdbs.push(pdb(
            "shop",
            "a",
            serde_json::json!({"matchLabels": {"app": "web"}}),
        ));
        pdbs.push(Pdb {
            max_unavailable: Some("0".into()),
            ..pdb(
                "shop",
                "b",
                serde_json::json!({"matchLabels": {"team": "x"}}),
            )
        });
        let both = pod("shop", &[("app", "web"), ("team", "x")]);
        assert_eq!(
            eviction_block(&pdbs, &both).as_deref(),
            Some("blocked: pod shop/p is matched by 2 PDBs (shop/a, shop/b)")
        );
        assert!(fully_blocked(&pdbs, &both));
        assert!(!fully_blocked(&pdbs, &pod("shop", &[("app", "web")])));
    }
}
