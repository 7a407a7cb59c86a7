//! Validation equal to upstream's CRD rules (OpenAPI + CEL) and its runtime validation
//! (`nodepool_validation.go`, `kubeletconfiguration_validation.go`, tag validation).
//!
//! Every problem is a [`FieldError`] that names the field path
//! (`spec.template.spec.requirements[2].minValues`) and says what is allowed. Validation never
//! stops at the first problem: users fix manifests faster when they see all of them.

mod ec2nodeclass;
mod kubelet;
mod nodeoverlay;
mod nodepool;
mod rules;
mod schema;
mod type_meta;

pub use schema::did_you_mean;
pub use type_meta::{GROUPS, TypeMeta, check_type_meta};

use std::fmt;

pub use ec2nodeclass::validate_ec2nodeclass;
pub use kubelet::{
    KubeletProblem, KubeletProblemKind, MANAGED_KUBELET_KEYS, kubelet_configuration_fields,
    kubelet_problems,
};
pub use nodeoverlay::validate_nodeoverlay;
pub use nodepool::{validate_nodeclaim, validate_nodepool};
pub use rules::{is_qualified_name, is_valid_label_value, validate_requirement};

use crate::yaml::from_value;

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path from the object root (`spec.role`); empty for the object itself.
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Collects problems while walking an object; `at` builds child paths.
#[derive(Debug, Default)]
pub struct Problems {
    errors: Vec<FieldError>,
}

impl Problems {
    pub fn push(&mut self, path: &Path, message: impl Into<String>) {
        self.errors.push(FieldError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    pub fn into_vec(self) -> Vec<FieldError> {
        self.errors
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

/// A field path under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn root() -> Self {
        Path(String::new())
    }

    /// `spec` + `role` -> `spec.role`.
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `requirements` + 2 -> `requirements[2]`.
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    /// `labels` + `team` -> `labels[team]`.
    pub fn key(&self, k: &str) -> Self {
        Path(format!("{}[{k}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kinds this crate validates, by `apiVersion` and `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownKind {
    NodePool,
    NodeClaim,
    EC2NodeClass,
    NodeOverlay,
}

impl KnownKind {
    pub fn from_type_meta(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("karpenter.sh/v1", "NodePool") => Some(KnownKind::NodePool),
            ("karpenter.sh/v1", "NodeClaim") => Some(KnownKind::NodeClaim),
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => Some(KnownKind::EC2NodeClass),
            ("karpenter.sh/v1alpha1", "NodeOverlay") => Some(KnownKind::NodeOverlay),
            _ => None,
        }
    }
}

/// The outcome of validating one manifest document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A v1 Karpenter object with no problems.
    Valid,
    /// A v1 Karpenter object with problems.
    Invalid(Vec<FieldError>),
    /// Not a kind this validator knows (`apiVersion/kind` given), reported as skipped.
    Skipped { reason: String },
}

/// What a document says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentIdentity {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl DocumentIdentity {
    pub fn of(doc: &serde_json::Value) -> Self {
        let text = |ptr: &str| {
            doc.pointer(ptr)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Self {
            api_version: text("/apiVersion"),
            kind: text("/kind"),
            name: text("/metadata/name"),
        }
    }
}

/// Validates one parsed manifest document.
pub fn validate_document(doc: &serde_json::Value) -> Outcome {
    let id = DocumentIdentity::of(doc);
    let Some(kind) = KnownKind::from_type_meta(&id.api_version, &id.kind) else {
        let reason = match check_type_meta(&id.api_version, &id.kind) {
            TypeMeta::Wrong { field, message } => {
                return Outcome::Invalid(vec![FieldError {
                    path: field.to_owned(),
                    message,
                }]);
            }
            TypeMeta::Legacy(reason) => reason,
            TypeMeta::Fine if id.kind.is_empty() || id.api_version.is_empty() => {
                "not a Kubernetes object (apiVersion and kind are required)".to_owned()
            }
            TypeMeta::Fine => format!("{} {} is not validated", id.api_version, id.kind),
        };
        return Outcome::Skipped { reason };
    };
    let mut problems = Problems::default();
    if id.name.is_empty() {
        problems.push(&Path::root().field("metadata").field("name"), "required");
    } else if !rules::is_dns_subdomain(&id.name) {
        problems.push(
            &Path::root().field("metadata").field("name"),
            "must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.'; at most 253 characters)",
        );
    }
    // Structure first (unknown fields, types, enums, required), as the API server does; the
    // refused values are dropped so that the typed rules still check everything else.
    let structure = schema::check(kind, doc);
    let cleaned = schema::without_refused(doc, &structure.refused);
    let typed_errors = match kind {
        KnownKind::NodePool => {
            from_value::<crate::v1::NodePool>(&cleaned).map(|np| validate_nodepool(&np))
        }
        KnownKind::NodeClaim => {
            from_value::<crate::v1::NodeClaim>(&cleaned).map(|nc| validate_nodeclaim(&nc))
        }
        KnownKind::EC2NodeClass => {
            from_value::<crate::v1::EC2NodeClass>(&cleaned).map(|nc| validate_ec2nodeclass(&nc))
        }
        KnownKind::NodeOverlay => {
            from_value::<crate::v1alpha1::NodeOverlay>(&cleaned).map(|o| validate_nodeoverlay(&o))
        }
    };
    let mut errors = problems.into_vec();
    let structural_paths: Vec<String> = structure.errors.iter().map(|e| e.path.clone()).collect();
    let had_structural = !structure.errors.is_empty();
    errors.extend(structure.errors);
    match typed_errors {
        Ok(found) => errors.extend(
            found
                .into_iter()
                .filter(|e| !structural_paths.contains(&e.path)),
        ),
        // With structural problems the typing error is one of them, seen again.
        Err(_) if had_structural => {}
        Err(type_error) => errors.push(FieldError {
            path: type_error.path,
            message: type_error.message,
        }),
    }
    if errors.is_empty() {
        Outcome::Valid
    } else {
        Outcome::Invalid(errors)
    }
}
