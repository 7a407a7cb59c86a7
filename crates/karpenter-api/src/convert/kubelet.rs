//! Kubelet settings move from the NodePool (v1beta1 `template.spec.kubelet`, v1alpha5
//! `kubeletConfiguration`) to the referenced EC2NodeClass (`spec.kubelet`) in v1.
//!
//! When the EC2NodeClass is part of the same conversion it receives the settings. When it is
//! not, or when another NodePool already gave it different settings, the NodePool gets a
//! warning that says where the settings must go and what they are.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::v1::NodeClassReference;

use super::{ConvertedObject, Note, Severity};

/// Kubelet settings of one NodePool, bound for its node class.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KubeletMove {
    pub node_class: NodeClassReference,
    pub kubelet: BTreeMap<String, Value>,
}

fn is_v1_nodeclass(value: &Value, name: &str) -> bool {
    value.get("apiVersion").and_then(Value::as_str) == Some("karpenter.k8s.aws/v1")
        && value.get("kind").and_then(Value::as_str) == Some("EC2NodeClass")
        && value.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
}

fn note(severity: Severity, field: &str, message: String) -> Note {
    Note {
        severity,
        field: field.to_owned(),
        message,
    }
}

/// Applies every move; `moves` pairs the index of the NodePool in `objects` with its settings.
pub(crate) fn attach(objects: &mut [ConvertedObject], moves: Vec<(usize, KubeletMove)>) {
    const FROM: &str = "spec.template.spec.kubelet";
    for (pool_index, m) in moves {
        let pool = objects
            .get(pool_index)
            .map(ConvertedObject::object)
            .unwrap_or_default();
        let settings = Value::Object(m.kubelet.clone().into_iter().collect());
        let target = (m.node_class.group == crate::labels::AWS_GROUP
            && m.node_class.kind == "EC2NodeClass")
            .then(|| {
                objects
                    .iter()
                    .position(|o| is_v1_nodeclass(&o.value, &m.node_class.name))
            })
            .flatten();
        let pool_note = match target {
            None => note(
                Severity::Warning,
                FROM,
                format!(
                    "v1 NodePools have no kubelet: set spec.kubelet of EC2NodeClass/{} to {settings} (it was not part of this conversion)",
                    m.node_class.name
                ),
            ),
            Some(i) => {
                let nodeclass = &mut objects[i];
                let existing = nodeclass.value.pointer("/spec/kubelet").cloned();
                match existing {
                    None => {
                        if let Some(spec) = nodeclass
                            .value
                            .get_mut("spec")
                            .and_then(Value::as_object_mut)
                        {
                            spec.insert("kubelet".to_owned(), settings.clone());
                        }
                        nodeclass.notes.push(note(
                            Severity::Info,
                            "spec.kubelet",
                            format!("moved from {FROM} of {pool}: v1 keeps kubelet settings on the EC2NodeClass"),
                        ));
                        note(
                            Severity::Info,
                            FROM,
                            format!(
                                "moved to spec.kubelet of EC2NodeClass/{}",
                                m.node_class.name
                            ),
                        )
                    }
                    Some(same) if same == settings => note(
                        Severity::Info,
                        FROM,
                        format!(
                            "already on spec.kubelet of EC2NodeClass/{}",
                            m.node_class.name
                        ),
                    ),
                    Some(other) => note(
                        Severity::Warning,
                        FROM,
                        format!(
                            "EC2NodeClass/{} already has different kubelet settings ({other}); give this NodePool its own EC2NodeClass with spec.kubelet {settings}",
                            m.node_class.name
                        ),
                    ),
                }
            }
        };
        if let Some(pool) = objects.get_mut(pool_index) {
            pool.notes.push(pool_note);
        }
    }
}
