//! Migrating legacy manifests to the current API (`karpenter convert`).
//!
//! Inputs: `karpenter.sh/v1alpha5` Provisioners (and Machines, which are reported and skipped),
//! `karpenter.k8s.aws/v1alpha1` AWSNodeTemplates, `karpenter.sh/v1beta1` NodePools and
//! NodeClaims, `karpenter.k8s.aws/v1beta1` EC2NodeClasses, and objects already at `v1` (passed
//! through). Output: `v1` (default) or `v1beta1` (for the alpha inputs).
//!
//! Alpha objects go through `v1beta1` on their way to `v1`, the way upstream migrated them
//! (`karpenter-convert` for v1alpha5 -> v1beta1, the conversion webhooks for v1beta1 -> v1),
//! so both hops are one set of rules each. Every lossy step or human decision becomes a
//! [`Note`] on the output object: warnings are printed by the CLI, and every note becomes a
//! YAML comment (see [`emit`]). Nothing is half converted: any error fails the whole run.
//!
//! Pure: no I/O, no clock.

pub mod emit;
mod kubelet;
mod metadata;
mod node_template;
mod nodeclaim;
mod nodeclass;
mod nodepool;
mod provisioner;
mod requirements;
mod review;
mod selectors;

use std::fmt;

use serde_json::Value;

use crate::legacy::LegacyKind;
use crate::yaml::from_value;

/// The `role` written when neither `--node-role` nor an instance profile is known.
pub const NODE_ROLE_PLACEHOLDER: &str = "$KARPENTER_NODE_ROLE";

/// The API version to convert to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Target {
    #[default]
    V1,
    V1beta1,
}

/// How to convert.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub target: Target,
    /// The node IAM role name for EC2NodeClasses converted from AWSNodeTemplates.
    pub node_role: Option<String>,
}

/// One parsed manifest document and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// File name as the user gave it (`<stdin>` for standard input).
    pub file: String,
    /// 1-based document index within the file.
    pub document: usize,
    /// Where the object starts in the file, when known (messages then say `file:line:column`).
    pub position: Option<crate::yaml::Position>,
    pub value: Value,
}

impl Input {
    /// `file:line:column`, or `file: document N` when the position is not known.
    pub fn source(&self) -> String {
        match self.position {
            Some(position) => format!("{}:{position}", self.file),
            None => format!("{}: document {}", self.file, self.document),
        }
    }
}

/// How much a note matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Lossy, or a human must decide: printed on stderr and commented in the output.
    Warning,
    /// A behaviour-preserving choice worth knowing: commented in the output only.
    Info,
}

/// Something to tell the user about one field of one converted object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub severity: Severity,
    /// Field path in the output object (`spec.role`) or, for dropped fields, in the input.
    pub field: String,
    pub message: String,
}

/// One output object.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvertedObject {
    /// Where it came from, for messages: `file:document`.
    pub source: String,
    /// What it came from (`karpenter.sh/v1alpha5 Provisioner`), when it was converted.
    pub converted_from: Option<String>,
    pub value: Value,
    pub notes: Vec<Note>,
}

impl ConvertedObject {
    /// `Kind/name` of the output object.
    pub fn object(&self) -> String {
        object_name(&self.value)
    }
}

/// A warning, naming the object and field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub source: String,
    pub object: String,
    pub field: String,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.object)?;
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The result of a conversion.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversion {
    pub objects: Vec<ConvertedObject>,
    /// Inputs that were not converted (Machines): warnings, not errors.
    pub skipped: Vec<Warning>,
}

impl Conversion {
    /// Every warning: skipped inputs, then the warning notes of each object in output order.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = self.skipped.clone();
        for object in &self.objects {
            for note in object
                .notes
                .iter()
                .filter(|n| n.severity == Severity::Warning)
            {
                out.push(Warning {
                    source: object.source.clone(),
                    object: object.object(),
                    field: note.field.clone(),
                    message: note.message.clone(),
                });
            }
        }
        out
    }

    /// The output values, in order.
    pub fn values(&self) -> Vec<Value> {
        self.objects.iter().map(|o| o.value.clone()).collect()
    }
}

/// A document could not be converted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {object}: {}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct ConvertError {
    /// Where the input object is: `file:line:column` (see [`Input::source`]).
    pub at: String,
    /// `Kind/name` of the input object.
    pub object: String,
    /// Field path in the input object.
    pub field: String,
    pub message: String,
}

/// A field-level failure inside one object, before the file/object are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Collects notes for one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Notes(pub Vec<Note>);

impl Notes {
    pub(crate) fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Warning, field, message);
    }

    pub(crate) fn info(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Info, field, message);
    }

    fn push(&mut self, severity: Severity, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Note {
            severity,
            field: field.into(),
            message: message.into(),
        });
    }

    /// Warns about every field a legacy struct did not model: they are dropped.
    pub(crate) fn dropped_unknown(&mut self, prefix: &str, unknown: &crate::legacy::Unknown) {
        for key in unknown.keys() {
            self.warn(
                format!("{prefix}.{key}"),
                "unknown field, dropped (not part of the source API version)",
            );
        }
    }
}

/// `Kind/name` of a JSON object.
pub(crate) fn object_name(value: &Value) -> String {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    match value.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{kind}/{name}"),
        None => kind.to_owned(),
    }
}

/// One converted object before it is placed in the output, plus any kubelet settings that
/// must move to its EC2NodeClass.
pub(crate) struct Produced {
    pub value: Value,
    pub notes: Notes,
    pub kubelet: Option<kubelet::KubeletMove>,
}

/// Converts every input; fails with every error found, producing nothing, if any input fails.
pub fn convert(inputs: &[Input], options: &Options) -> Result<Conversion, Vec<ConvertError>> {
    let mut conversion = Conversion::default();
    let mut errors = Vec::new();
    let mut moves = Vec::new();
    for input in inputs.iter().flat_map(expand_list) {
        let input = &input;
        let source = input.source();
        let api_version = text(&input.value, "/apiVersion");
        let kind = text(&input.value, "/kind");
        let fail = |field: String, message: String| ConvertError {
            at: source.clone(),
            object: object_name(&input.value),
            field,
            message,
        };
        match convert_one(&input.value, &api_version, &kind, options) {
            Ok(Outcome::Produced(produced)) => {
                for p in produced {
                    let index = conversion.objects.len();
                    if let Some(m) = p.kubelet {
                        moves.push((index, m));
                    }
                    conversion.objects.push(ConvertedObject {
                        source: source.clone(),
                        converted_from: Some(format!("{api_version} {kind}")),
                        value: p.value,
                        notes: p.notes.0,
                    });
                }
            }
            Ok(Outcome::PassedThrough(value, notes)) => conversion.objects.push(ConvertedObject {
                source: source.clone(),
                converted_from: None,
                value,
                notes: notes.0,
            }),
            Ok(Outcome::Skipped(message)) => conversion.skipped.push(Warning {
                source: source.clone(),
                object: object_name(&input.value),
                field: String::new(),
                message,
            }),
            Err(err) => errors.push(fail(err.field, err.message)),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    kubelet::attach(&mut conversion.objects, moves);
    Ok(conversion)
}

/// A `v1` `List` (what `kubectl get -o yaml` prints) stands for its items.
fn expand_list(input: &Input) -> Vec<Input> {
    let is_list = input.value.get("kind").and_then(Value::as_str) == Some("List");
    match input.value.get("items").and_then(Value::as_array) {
        Some(items) if is_list => items
            .iter()
            .map(|item| Input {
                file: input.file.clone(),
                document: input.document,
                position: input.position,
                value: item.clone(),
            })
            .collect(),
        _ => vec![input.clone()],
    }
}

enum Outcome {
    Produced(Vec<Produced>),
    /// A current object, unchanged but for fixes the API server would otherwise refuse it for.
    PassedThrough(Value, Notes),
    Skipped(String),
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    from_value(value).map_err(|e| FieldError::new(e.path, e.message))
}

fn convert_one(
    value: &Value,
    api_version: &str,
    kind: &str,
    options: &Options,
) -> Result<Outcome, FieldError> {
    if api_version.is_empty() || kind.is_empty() {
        return Err(FieldError::new(
            "",
            "not a Kubernetes object (apiVersion and kind are required)",
        ));
    }
    let v1 = options.target == Target::V1;
    let Some(legacy) = LegacyKind::from_type_meta(api_version, kind) else {
        let current = matches!(
            (api_version, kind),
            ("karpenter.sh/v1", "NodePool" | "NodeClaim")
                | ("karpenter.k8s.aws/v1", "EC2NodeClass")
        );
        if current && !v1 {
            return Err(FieldError::new(
                "apiVersion",
                format!("{api_version} cannot be converted down to v1beta1"),
            ));
        }
        let mut value = metadata::clean_value(value);
        let mut notes = Notes::default();
        if current {
            review::current(&mut value, &mut notes);
        }
        return Ok(Outcome::PassedThrough(value, notes));
    };
    let produced = match legacy {
        LegacyKind::MachineV1alpha5 => {
            return Ok(Outcome::Skipped(
                "Machines are managed by the Karpenter controller (they become NodeClaims once their Provisioner is replaced by a NodePool): not converted".to_owned(),
            ));
        }
        LegacyKind::ProvisionerV1alpha5 => {
            let provisioner = typed(value)?;
            let beta = provisioner::to_v1beta1(&provisioner, options)?;
            if v1 {
                beta.into_iter()
                    .map(|b| match b {
                        provisioner::Beta::NodePool(np, notes) => nodepool::to_v1(&np, notes),
                        provisioner::Beta::NodeClass(nc, notes) => {
                            nodeclass::to_v1(&nc, notes, options)
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                beta.into_iter()
                    .map(provisioner::Beta::serialize)
                    .collect::<Result<_, _>>()?
            }
        }
        LegacyKind::AwsNodeTemplateV1alpha1 => {
            let template = typed(value)?;
            let (beta, notes) = node_template::to_v1beta1(&template, options)?;
            if v1 {
                vec![nodeclass::to_v1(&beta, notes, options)?]
            } else {
                vec![provisioner::Beta::NodeClass(beta, notes).serialize()?]
            }
        }
        LegacyKind::NodePoolV1beta1 if v1 => {
            vec![nodepool::to_v1(&typed(value)?, Notes::default())?]
        }
        LegacyKind::Ec2NodeClassV1beta1 if v1 => {
            vec![nodeclass::to_v1(&typed(value)?, Notes::default(), options)?]
        }
        LegacyKind::NodeClaimV1beta1 if v1 => vec![nodeclaim::to_v1(&typed(value)?)?],
        LegacyKind::NodePoolV1beta1
        | LegacyKind::Ec2NodeClassV1beta1
        | LegacyKind::NodeClaimV1beta1 => {
            return Ok(Outcome::PassedThrough(
                metadata::clean_value(value),
                Notes::default(),
            ));
        }
    };
    Ok(Outcome::Produced(produced))
}

/// Serializes a typed object, dropping an absent `status`.
pub(crate) fn to_json<T: serde::Serialize>(object: &T) -> Result<Value, FieldError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| FieldError::new("", format!("cannot serialize the result: {e}")))?;
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    Ok(value)
}
