//! Which DaemonSets run on a node, and what their pods request: for the per-node pod counts of
//! the plan and the fixed node group comparison. (The solver does its own, exact accounting of
//! DaemonSet overhead when it sizes NodeClaims.)
//!
//! A DaemonSet runs on a node when its `nodeSelector` matches the node's labels, one of its
//! required node-affinity terms (if any) matches, and it tolerates every `NoSchedule` and
//! `NoExecute` taint.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Taint};
use karpenter_scheduling::taints::tolerates;
use karpenter_scheduling::{Operator, RequirementSpec, ResourceList};

/// Whether the DaemonSet's pods would run on a node with these labels and taints.
pub fn runs_on(ds: &DaemonSet, labels: &BTreeMap<String, String>, taints: &[Taint]) -> bool {
    let Some(spec) = ds.spec.template.spec.as_ref() else {
        return false;
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.as_slice())
        .unwrap_or_default();
    let affinity_ok = terms.is_empty()
        || terms.iter().any(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .all(|e| expression_matches(e, labels))
        });
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints_ok = taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)));
    selector_ok && affinity_ok && taints_ok
}

fn expression_matches(e: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let Some(operator) = Operator::parse(&e.operator) else {
        return false;
    };
    let values: Vec<&str> = e.values.iter().flatten().map(String::as_str).collect();
    RequirementSpec::new(e.key.clone(), operator, &values)
        .matches(labels.get(&e.key).map(String::as_str))
}

/// The requests of one pod of the DaemonSet (zero when they do not parse).
pub fn pod_requests(ds: &DaemonSet) -> ResourceList {
    karpenter_scheduling::pod::pod_requests(ds.spec.template.spec.as_ref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Toleration};

    fn daemonset(selector: &[(&str, &str)], tolerations: Vec<Toleration>) -> DaemonSet {
        DaemonSet {
            spec: DaemonSetSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        node_selector: Some(
                            selector
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect(),
                        ),
                        tolerations: Some(tolerations),
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                },
                ..DaemonSetSpec::default()
            },
            ..DaemonSet::default()
        }
    }

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }
    }

    #[test]
    fn a_daemonset_runs_where_its_selector_matches_and_taints_are_tolerated() {
        let labels: BTreeMap<String, String> =
            [("kubernetes.io/os".to_string(), "linux".to_string())].into();
        assert!(runs_on(
            &daemonset(&[("kubernetes.io/os", "linux")], vec![]),
            &labels,
            &[]
        ));
        assert!(!runs_on(
            &daemonset(&[("kubernetes.io/os", "windows")], vec![]),
            &labels,
            &[]
        ));
        assert!(!runs_on(&daemonset(&[], vec![]), &labels, &[taint("gpu")]));
        let tolerate_all = Toleration {
            operator: Some("Exists".into()),
            ..Toleration::default()
        };
        assert!(runs_on(
            &daemonset(&[], vec![tolerate_all]),
            &labels,
            &[taint("gpu")]
        ));
    }
}
