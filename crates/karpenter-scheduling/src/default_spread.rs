//! Cluster-level default topology spread constraints: kube-scheduler's PodTopologySpread
//! `defaultConstraints`, which upstream Karpenter mirrors from `--scheduler-config` /
//! `SCHEDULER_CONFIG` so its simulation spreads pods as the kube-scheduler will.
//!
//! A pod that declares no `topologySpreadConstraints` of its own gets every default constraint,
//! each with the selector the kube-scheduler deduces for it (`helper.DefaultSelector`): the
//! selectors of the Services of its namespace that select it, merged as equality matches, then
//! its controller's selector (a ReplicationController's labels overwrite; a ReplicaSet's or
//! StatefulSet's requirements are added). A pod for which nothing can be deduced is left alone
//! (an empty selector would count every pod of the namespace).
//!
//! The caller looks the Services and the controller up; this module only decides.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::PodRecord;

/// What a pod's controller adds to its deduced selector.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerContribution {
    /// A ReplicationController's selector: equality labels that overwrite the Services'.
    Labels(BTreeMap<String, String>),
    /// A ReplicaSet's or StatefulSet's selector as requirements, ANDed on.
    Requirements(Vec<LabelSelectorRequirement>),
}

impl OwnerContribution {
    /// A ReplicaSet's or StatefulSet's `spec.selector`, flattened (each `matchLabels` entry an
    /// `In` requirement of one value).
    pub fn from_selector(selector: &LabelSelector) -> OwnerContribution {
        let mut requirements: Vec<LabelSelectorRequirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| LabelSelectorRequirement {
                key: key.clone(),
                operator: "In".to_owned(),
                values: Some(vec![value.clone()]),
            })
            .collect();
        requirements.extend(selector.match_expressions.iter().flatten().cloned());
        OwnerContribution::Requirements(requirements)
    }
}

/// Whether a Service's `spec.selector` selects a pod with `labels` (a Service without a
/// selector selects nothing; an empty one, everything).
pub fn service_selects(
    selector: Option<&BTreeMap<String, String>>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.is_some_and(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// The selector the kube-scheduler deduces for a pod with `labels`, from the selectors of the
/// Services of its namespace (`services`, in order) and its controller's contribution; `None`
/// when nothing is deduced.
pub fn default_selector(
    labels: &BTreeMap<String, String>,
    services: &[Option<&BTreeMap<String, String>>],
    owner: Option<&OwnerContribution>,
) -> Option<LabelSelector> {
    let mut match_labels = BTreeMap::new();
    for selector in services.iter().copied() {
        if service_selects(selector, labels) {
            match_labels.extend(
                selector
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
    }
    let mut match_expressions = Vec::new();
    match owner {
        Some(OwnerContribution::Labels(owner_labels)) => {
            match_labels.extend(owner_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Some(OwnerContribution::Requirements(requirements)) => {
            match_expressions.extend(requirements.iter().cloned());
        }
        None => {}
    }
    if match_labels.is_empty() && match_expressions.is_empty() {
        return None;
    }
    Some(LabelSelector {
        match_labels: (!match_labels.is_empty()).then_some(match_labels),
        match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
    })
}

/// Whether the defaults apply to `pod`: it declares no spread constraints of its own.
pub fn applies_to(pod: &PodRecord) -> bool {
    pod.spec.as_ref().is_none_or(|s| {
        s.topology_spread_constraints
            .as_ref()
            .is_none_or(Vec::is_empty)
    })
}

/// `pod` with the `defaults`, each carrying `selector` (for the simulation only: never
/// written back). A pod with constraints of its own is returned unchanged.
pub fn with_defaults(
    pod: &PodRecord,
    defaults: &[TopologySpreadConstraint],
    selector: &LabelSelector,
) -> PodRecord {
    let mut out = pod.clone();
    if !applies_to(pod) || defaults.is_empty() {
        return out;
    }
    let mut spec = out.spec.as_deref().cloned().unwrap_or_default();
    spec.topology_spread_constraints = Some(
        defaults
            .iter()
            .map(|c| TopologySpreadConstraint {
                label_selector: Some(selector.clone()),
                ..c.clone()
            })
            .collect(),
    );
    out.spec = Some(Arc::new(spec));
    out
}

/// Upstream's rules for `podTopologySpread.defaultConstraints`: `maxSkew` > 0, a qualified
/// `topologyKey`, `whenUnsatisfiable` `DoNotSchedule` or `ScheduleAnyway`, no `labelSelector`
/// (deduced per pod) and no `matchLabelKeys` (inert upstream), no two with the same key and
/// `whenUnsatisfiable`. The first problem, naming the constraint's index.
pub fn validate(defaults: &[TopologySpreadConstraint]) -> Result<(), String> {
    for (i, c) in defaults.iter().enumerate() {
        let at = format!("podTopologySpread.defaultConstraints[{i}]");
        if c.max_skew <= 0 {
            return Err(format!("{at}.maxSkew must be greater than 0"));
        }
        if c.topology_key.is_empty() {
            return Err(format!("{at}.topologyKey must be set"));
        }
        if !karpenter_api::validation::is_qualified_name(&c.topology_key) {
            return Err(format!(
                "{at}.topologyKey {:?} is not a valid label name",
                c.topology_key
            ));
        }
        if c.when_unsatisfiable != "DoNotSchedule" && c.when_unsatisfiable != "ScheduleAnyway" {
            return Err(format!(
                "{at}.whenUnsatisfiable {:?} must be one of \"DoNotSchedule\" or \"ScheduleAnyway\"",
                c.when_unsatisfiable
            ));
        }
        if c.label_selector.is_some() {
            return Err(format!(
                "{at}.labelSelector must not be set, as selectors are deduced for each pod"
            ));
        }
        if c.match_label_keys.as_ref().is_some_and(|k| !k.is_empty()) {
            return Err(format!(
                "{at}.matchLabelKeys must not be set, as it has no effect on default constraints"
            ));
        }
        if let Some(j) = defaults[..i].iter().position(|d| {
            d.topology_key == c.topology_key && d.when_unsatisfiable == c.when_unsatisfiable
        }) {
            return Err(format!(
                "{at} is a duplicate of [{j}], {{{}, {}}}",
                c.topology_key, c.when_unsatisfiable
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodSpec};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn zone_spread() -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".to_owned(),
            when_unsatisfiable: "ScheduleAnyway".to_owned(),
            ..TopologySpreadConstraint::default()
        }
    }

    #[test]
    fn the_selector_merges_selecting_services_then_the_controller() {
        let labels = map(&[("app", "web"), ("tier", "front")]);
        let web = map(&[("app", "web")]);
        let other = map(&[("app", "db")]);
        let owner = OwnerContribution::from_selector(&LabelSelector {
            match_labels: Some(map(&[("app", "web")])),
            match_expressions: None,
        });
        let selector =
            default_selector(&labels, &[Some(&web), Some(&other), None], Some(&owner)).unwrap();
        assert_eq!(selector.match_labels, Some(map(&[("app", "web")])));
        assert_eq!(
            selector.match_expressions,
            Some(vec![LabelSelectorRequirement {
                key: "app".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec!["web".to_owned()]),
            }])
        );
        // A ReplicationController's labels overwrite the Services'.
        let rc = OwnerContribution::Labels(map(&[("app", "web-v2")]));
        let selector = default_selector(&labels, &[Some(&web)], Some(&rc)).unwrap();
        assert_eq!(selector.match_labels, Some(map(&[("app", "web-v2")])));
        assert_eq!(selector.match_expressions, None);
    }

    #[test]
    fn nothing_is_deduced_without_a_selecting_service_or_a_known_controller() {
        let labels = map(&[("app", "web")]);
        assert_eq!(default_selector(&labels, &[], None), None);
        assert_eq!(
            default_selector(&labels, &[None], None),
            None,
            "a Service without a selector selects nothing"
        );
        let empty = BTreeMap::new();
        assert_eq!(
            default_selector(&labels, &[Some(&empty)], None),
            None,
            "an empty selector selects the pod but contributes no label"
        );
    }

    #[test]
    fn only_pods_without_their_own_constraints_get_the_defaults() {
        let selector = LabelSelector {
            match_labels: Some(map(&[("app", "web")])),
            match_expressions: None,
        };
        let plain = PodRecord::from(Pod {
            spec: Some(PodSpec::default()),
            ..Pod::default()
        });
        let defaulted = with_defaults(&plain, &[zone_spread()], &selector);
        let constraints = defaulted
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.clone())
            .unwrap();
        assert_eq!(constraints.len(), 1);
        assert_eq!(constraints[0].label_selector, Some(selector.clone()));
        assert!(
            plain
                .spec
                .as_ref()
                .unwrap()
                .topology_spread_constraints
                .is_none(),
            "the original is untouched"
        );

        let own = TopologySpreadConstraint {
            topology_key: "kubernetes.io/hostname".to_owned(),
            ..zone_spread()
        };
        let spread = PodRecord::from(Pod {
            spec: Some(PodSpec {
                topology_spread_constraints: Some(vec![own.clone()]),
                ..PodSpec::default()
            }),
            ..Pod::default()
        });
        let kept = with_defaults(&spread, &[zone_spread()], &selector);
        assert_eq!(
            kept.spec.as_ref().unwrap().topology_spread_constraints,
            Some(vec![own])
        );
    }

    #[test]
    fn default_constraints_are_validated_as_upstream() {
        assert_eq!(validate(&[zone_spread()]), Ok(()));
        let cases = [
            (
                TopologySpreadConstraint {
                    max_skew: 0,
                    ..zone_spread()
                },
                "maxSkew must be greater than 0",
            ),
            (
                TopologySpreadConstraint {
                    topology_key: String::new(),
                    ..zone_spread()
                },
                "topologyKey must be set",
            ),
            (
                TopologySpreadConstraint {
                    when_unsatisfiable: "Maybe".to_owned(),
                    ..zone_spread()
                },
                "whenUnsatisfiable",
            ),
            (
                TopologySpreadConstraint {
                    label_selector: Some(LabelSelector::default()),
                    ..zone_spread()
                },
                "labelSelector must not be set",
            ),
            (
                TopologySpreadConstraint {
                    match_label_keys: Some(vec!["app".to_owned()]),
                    ..zone_spread()
                },
                "matchLabelKeys must not be set",
            ),
        ];
        for (constraint, expected) in cases {
            let error = validate(&[constraint]).unwrap_err();
            assert!(
                error.starts_with("podTopologySpread.defaultConstraints[0]"),
                "{error}"
            );
            assert!(error.contains(expected), "{error}");
        }
        let duplicate = validate(&[zone_spread(), zone_spread()]).unwrap_err();
        assert!(
            duplicate.contains("[1] is a duplicate of [0]"),
            "{duplicate}"
        );
    }
}
