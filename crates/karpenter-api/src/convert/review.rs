//! Objects already at `v1` pass through `convert`, with two fixes and warnings:
//!
//! - an AMI alias family in upper case (`AL2023@latest`, which the API server refuses: it
//!   accepts only `al2`, `al2023`, `bottlerocket`, `windows2019`, `windows2022`,
//!   `windows2025`) is lower-cased, with a warning;
//! - unknown fields (`requirments`, a leftover v1beta1 `spec.template.spec.kubelet`) are
//!   warned about as the API server's strict field validation reports them, with a "did you
//!   mean" when a known field is close. They are kept: the user decides.

use serde_json::Value;

use super::Notes;
use crate::validation::{Outcome, validate_document};

/// Fixes and warns about one current (`v1`) object.
pub(super) fn current(value: &mut Value, notes: &mut Notes) {
    lower_case_alias_families(value, notes);
    if let Outcome::Invalid(errors) = validate_document(value) {
        for error in errors
            .into_iter()
            .filter(|e| e.message.starts_with("unknown field"))
        {
            notes.warn(
                error.path,
                format!(
                    "{}: the API server refuses it (strict field validation); rename or remove it",
                    error.message
                ),
            );
        }
    }
}

fn lower_case_alias_families(value: &mut Value, notes: &mut Notes) {
    if value.get("kind").and_then(Value::as_str) != Some("EC2NodeClass") {
        return;
    }
    let Some(terms) = value
        .pointer_mut("/spec/amiSelectorTerms")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for (i, term) in terms.iter_mut().enumerate() {
        let Some(alias) = term.get_mut("alias") else {
            continue;
        };
        let Some(text) = alias.as_str() else { continue };
        let (family, version) = text.split_once('@').unwrap_or((text, ""));
        let lower = family.to_ascii_lowercase();
        if lower == family {
            continue;
        }
        let fixed = if text.contains('@') {
            format!("{lower}@{version}")
        } else {
            lower
        };
        notes.warn(
            format!("spec.amiSelectorTerms[{i}].alias"),
            format!(
                "{text:?} lower-cased to {fixed:?}: the API server accepts only lower-case alias families"
            ),
        );
        *alias = Value::String(fixed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_objects_get_alias_families_lower_cased_and_unknown_fields_warned() {
        for (object, field, message_start, fixed) in [
            (
                serde_json::json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": "x"},
                    "spec": {"role": "r", "amiSelectorTerms": [{"alias": "AL2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}),
                "spec.amiSelectorTerms[0].alias",
                "\"AL2023@latest\" lower-cased to \"al2023@latest\"",
                Some(("/spec/amiSelectorTerms/0/alias", "al2023@latest")),
            ),
            (
                serde_json::json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": "x"},
                    "spec": {"instanceProfil": "p", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}),
                "spec.instanceProfil",
                "unknown field \"instanceProfil\" (did you mean \"instanceProfile\"?)",
                None,
            ),
            (
                serde_json::json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": "x"},
                    "spec": {"template": {"spec": {"requirments": [],
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}}}}),
                "spec.template.spec.requirments",
                "unknown field \"requirments\" (did you mean \"requirements\"?)",
                None,
            ),
        ] {
            let mut value = object;
            let mut notes = Notes::default();
            current(&mut value, &mut notes);
            let note = notes
                .0
                .iter()
                .find(|n| n.field == field)
                .unwrap_or_else(|| panic!("a note on {field}: {:?}", notes.0));
            assert!(note.message.starts_with(message_start), "{}", note.message);
            if let Some((pointer, want)) = fixed {
                assert_eq!(value.pointer(pointer).and_then(Value::as_str), Some(want));
            }
        }
    }
}
