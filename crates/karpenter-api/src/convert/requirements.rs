//! v1alpha5 -> v1beta1 renames of labels, annotations and requirement keys, and the AWS
//! requirement defaults the v1alpha5 webhook injected.

use std::collections::BTreeMap;

use crate::labels::{
    ARCH, CAPACITY_TYPE, DO_NOT_CONSOLIDATE_V1ALPHA5, DO_NOT_DISRUPT, DO_NOT_EVICT_V1ALPHA5,
    INSTANCE_CATEGORY, INSTANCE_FAMILY, INSTANCE_GENERATION, INSTANCE_TYPE, OS,
    PROVISIONER_NAME_V1ALPHA5,
};
use crate::legacy::v1alpha5::NodeSelectorRequirement;
use crate::v1::{NodeSelectorRequirementWithMinValues, Operator};

use super::Notes;

/// The v1alpha5 label for the number of pods an instance type supports (dropped in v1beta1).
const INSTANCE_PODS_V1ALPHA5: &str = "karpenter.k8s.aws/instance-pods";

/// Why a v1alpha5 label key has no v1beta1 counterpart, if it has none.
fn dropped_label(key: &str) -> Option<&'static str> {
    match key {
        PROVISIONER_NAME_V1ALPHA5 => Some(
            "dropped: karpenter.sh/provisioner-name became karpenter.sh/nodepool, which Karpenter sets on every node itself and which may not be set or required in a NodePool",
        ),
        INSTANCE_PODS_V1ALPHA5 => {
            Some("dropped: the karpenter.k8s.aws/instance-pods label no longer exists")
        }
        _ => None,
    }
}

/// `spec.labels` -> `template.metadata.labels`.
pub(crate) fn labels(
    labels: Option<&BTreeMap<String, String>>,
    notes: &mut Notes,
) -> Option<BTreeMap<String, String>> {
    let labels = labels?;
    let out: BTreeMap<String, String> = labels
        .iter()
        .filter(|(k, _)| match dropped_label(k) {
            Some(why) => {
                notes.warn(format!("spec.labels[{k}]"), why);
                false
            }
            None => true,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!out.is_empty()).then_some(out)
}

/// `spec.annotations` -> `template.metadata.annotations`, with do-not-evict and
/// do-not-consolidate renamed to do-not-disrupt.
pub(crate) fn annotations(
    annotations: Option<&BTreeMap<String, String>>,
    notes: &mut Notes,
) -> Option<BTreeMap<String, String>> {
    let annotations = annotations?;
    let mut out = BTreeMap::new();
    for (key, value) in annotations {
        if key == DO_NOT_EVICT_V1ALPHA5 || key == DO_NOT_CONSOLIDATE_V1ALPHA5 {
            notes.warn(
                format!("spec.template.metadata.annotations[{DO_NOT_DISRUPT}]"),
                format!("renamed from {key}: do-not-disrupt blocks every voluntary disruption (consolidation, drift and expiry), not only {}", if key == DO_NOT_EVICT_V1ALPHA5 { "eviction" } else { "consolidation" }),
            );
            out.insert(DO_NOT_DISRUPT.to_owned(), value.clone());
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Plain requirements -> requirements with (unset) minValues, dropping keys that no longer exist.
pub(crate) fn requirements(
    requirements: &[NodeSelectorRequirement],
    notes: &mut Notes,
) -> Vec<NodeSelectorRequirementWithMinValues> {
    requirements
        .iter()
        .enumerate()
        .filter(|(i, r)| match dropped_label(&r.key) {
            Some(why) => {
                notes.warn(
                    format!("spec.requirements[{i}]"),
                    format!("{}: {why}", r.key),
                );
                false
            }
            None => true,
        })
        .map(|(_, r)| NodeSelectorRequirementWithMinValues {
            key: r.key.clone(),
            operator: r.operator,
            values: r.values.clone(),
            min_values: None,
        })
        .collect()
}

/// Adds the requirements the v1alpha5 AWS defaulting webhook injected when absent (linux,
/// amd64, on-demand, and categories c/m/r of generation > 2 unless the instance type is
/// constrained), so the converted NodePool launches the same instances. v1beta1 and v1 do not
/// default them.
pub(crate) fn add_v1alpha5_defaults(
    requirements: &mut Vec<NodeSelectorRequirementWithMinValues>,
    notes: &mut Notes,
) {
    let has = |reqs: &[NodeSelectorRequirementWithMinValues], key: &str| {
        reqs.iter().any(|r| r.key == key)
    };
    let mut defaults = vec![
        NodeSelectorRequirementWithMinValues::new(OS, Operator::In, &["linux"]),
        NodeSelectorRequirementWithMinValues::new(ARCH, Operator::In, &["amd64"]),
        NodeSelectorRequirementWithMinValues::new(CAPACITY_TYPE, Operator::In, &["on-demand"]),
    ];
    let constrained = [
        INSTANCE_TYPE,
        INSTANCE_FAMILY,
        INSTANCE_CATEGORY,
        INSTANCE_GENERATION,
    ]
    .iter()
    .any(|k| has(requirements, k));
    if !constrained {
        defaults.push(NodeSelectorRequirementWithMinValues::new(
            INSTANCE_CATEGORY,
            Operator::In,
            &["c", "m", "r"],
        ));
        defaults.push(NodeSelectorRequirementWithMinValues::new(
            INSTANCE_GENERATION,
            Operator::Gt,
            &["2"],
        ));
    }
    let mut added = Vec::new();
    for default in defaults {
        if !has(requirements, &default.key) {
            added.push(format!(
                "{} {} {}",
                default.key,
                default.operator,
                default.values.join(",")
            ));
            requirements.push(default);
        }
    }
    if !added.is_empty() {
        notes.info(
            "spec.template.spec.requirements",
            format!(
                "added the v1alpha5 defaults ({}): Provisioners got them from a webhook, NodePools have no such default",
                added.join("; ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator: Operator::In,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn provisioner_name_and_instance_pods_requirements_are_dropped_with_a_warning() {
        let mut notes = Notes::default();
        let out = requirements(
            &[
                req(PROVISIONER_NAME_V1ALPHA5, &["a"]),
                req(INSTANCE_PODS_V1ALPHA5, &["8"]),
                req(ARCH, &["arm64"]),
            ],
            &mut notes,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].key, ARCH);
        assert_eq!(notes.0.len(), 2);
    }

    #[test]
    fn do_not_evict_and_do_not_consolidate_annotations_become_do_not_disrupt() {
        for old in [DO_NOT_EVICT_V1ALPHA5, DO_NOT_CONSOLIDATE_V1ALPHA5] {
            let mut notes = Notes::default();
            let input = BTreeMap::from([(old.to_owned(), "true".to_owned())]);
            let out = annotations(Some(&input), &mut notes);
            assert_eq!(
                out,
                Some(BTreeMap::from([(
                    DO_NOT_DISRUPT.to_owned(),
                    "true".to_owned()
                )]))
            );
            assert_eq!(notes.0.len(), 1);
        }
    }

    #[test]
    fn v1alpha5_defaults_fill_only_missing_keys_and_skip_category_when_the_type_is_constrained() {
        let mut notes = Notes::default();
        let mut reqs = vec![
            NodeSelectorRequirementWithMinValues::new(CAPACITY_TYPE, Operator::In, &["spot"]),
            NodeSelectorRequirementWithMinValues::new(INSTANCE_TYPE, Operator::In, &["m5.large"]),
        ];
        add_v1alpha5_defaults(&mut reqs, &mut notes);
        let keys: Vec<_> = reqs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, [CAPACITY_TYPE, INSTANCE_TYPE, OS, ARCH]);
    }

    #[test]
    fn v1alpha5_defaults_add_category_and_generation_when_nothing_constrains_the_type() {
        let mut notes = Notes::default();
        let mut reqs = Vec::new();
        add_v1alpha5_defaults(&mut reqs, &mut notes);
        let keys: Vec<_> = reqs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                OS,
                ARCH,
                CAPACITY_TYPE,
                INSTANCE_CATEGORY,
                INSTANCE_GENERATION
            ]
        );
        assert_eq!(notes.0.len(), 1);
    }
}
