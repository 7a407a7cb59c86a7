//! Structural checks against the generated CRD schema, as the API server does them before any
//! rule runs: unknown fields (its strict field validation, with a "did you mean" when a known
//! field is close), value types, enums and required fields.
//!
//! Every problem of the document is reported, not only the first: the walk never stops, and it
//! returns the locations of the values it refused so that [`super::validate_document`] can drop
//! them and still run the typed rules on the rest of the object.

use std::sync::LazyLock;

use serde_json::Value;

use super::{FieldError, KnownKind, Path};

/// One step of a location inside a document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// What the walk found.
#[derive(Debug, Default)]
pub(crate) struct SchemaReport {
    pub errors: Vec<FieldError>,
    /// Values to drop before typing the document (unknown, mistyped or null fields).
    pub refused: Vec<Vec<Step>>,
}

/// The `openAPIV3Schema` of each kind, from the same generator as `karpenter crds`.
static SCHEMAS: LazyLock<Vec<(KnownKind, Value)>> = LazyLock::new(|| {
    crate::crds::all()
        .into_iter()
        .filter_map(|generated| {
            let kind = match generated.crd.spec.names.kind.as_str() {
                "NodePool" => KnownKind::NodePool,
                "NodeClaim" => KnownKind::NodeClaim,
                "EC2NodeClass" => KnownKind::EC2NodeClass,
                "NodeOverlay" => KnownKind::NodeOverlay,
                _ => return None,
            };
            let schema = generated
                .crd
                .spec
                .versions
                .first()
                .and_then(|v| v.schema.as_ref())
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())?;
            Some((kind, schema))
        })
        .collect()
});

/// The fields of `metadata` (ObjectMeta) a manifest may carry.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Checks a document of a known kind against its CRD schema.
pub(crate) fn check(kind: KnownKind, doc: &Value) -> SchemaReport {
    let mut report = SchemaReport::default();
    let Some((_, schema)) = SCHEMAS.iter().find(|(k, _)| *k == kind) else {
        return report;
    };
    let Value::Object(root) = doc else {
        report.errors.push(FieldError {
            path: String::new(),
            message: format!("must be an object, found {}", describe(doc)),
        });
        return report;
    };
    for (key, value) in root {
        let path = Path::root().field(key);
        let mut at = vec![Step::Key(key.clone())];
        if key == "apiVersion" || key == "kind" {
            if !value.is_string() {
                mistyped("string", value, &path, at, &mut report);
            }
        } else if key == "metadata" {
            check_metadata(value, &path, &mut at, &mut report);
        } else if let Some(child) = schema.pointer(&format!("/properties/{key}")) {
            walk(child, value, &path, &mut at, &mut report);
        } else {
            unknown_field(schema, key, &path, at, &mut report);
        }
    }
    report
}

fn check_metadata(value: &Value, path: &Path, at: &mut Vec<Step>, report: &mut SchemaReport) {
    let Value::Object(meta) = value else {
        mistyped("object", value, path, at.clone(), report);
        return;
    };
    for (key, field) in meta {
        let field_path = path.field(key);
        at.push(Step::Key(key.clone()));
        if !OBJECT_META_FIELDS.contains(&key.as_str()) {
            let known = Value::Object(
                OBJECT_META_FIELDS
                    .iter()
                    .map(|f| ((*f).to_owned(), Value::Null))
                    .collect(),
            );
            unknown_field(
                &serde_json::json!({ "properties": known }),
                key,
                &field_path,
                at.clone(),
                report,
            );
        } else if key == "labels" || key == "annotations" {
            walk(
                &serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}}),
                field,
                &field_path,
                at,
                report,
            );
        }
        at.pop();
    }
}

fn walk(schema: &Value, value: &Value, path: &Path, at: &mut Vec<Step>, report: &mut SchemaReport) {
    if value.is_null() {
        // The API server prunes nulls of non-nullable fields; so do we, silently.
        if !schema
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            report.refused.push(at.clone());
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if int_or_string {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            mistyped("integer or string", value, path, at.clone(), report);
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, expected)
    {
        mistyped(expected, value, path, at.clone(), report);
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list = allowed
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        report.errors.push(FieldError {
            path: path.to_string(),
            message: format!("unsupported value {value}: supported values: {list}"),
        });
        report.refused.push(at.clone());
        return;
    }
    match value {
        Value::Object(map) => walk_object(schema, map, path, at, report),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    at.push(Step::Index(i));
                    walk(item_schema, item, &path.index(i), at, report);
                    at.pop();
                }
            }
        }
        _ => {}
    }
}

fn walk_object(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &Path,
    at: &mut Vec<Step>,
    report: &mut SchemaReport,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let open = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (key, child) in map {
        at.push(Step::Key(key.clone()));
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            walk(child_schema, child, &path.field(key), at, report);
        } else if let Some(child_schema) = additional {
            walk(child_schema, child, &path.key(key), at, report);
        } else if properties.is_some() && !open {
            unknown_field(schema, key, &path.field(key), at.clone(), report);
        }
        at.pop();
    }
    let required = schema.get("required").and_then(Value::as_array);
    let mut incomplete = false;
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let present = map.get(name).is_some_and(|v| !v.is_null());
        let defaulted = properties
            .and_then(|p| p.get(name))
            .is_some_and(|p| p.get("default").is_some());
        if !present && !defaulted {
            report.errors.push(FieldError {
                path: path.field(name).to_string(),
                message: "required value".to_owned(),
            });
            incomplete = true;
        }
    }
    // An object without a required field cannot be typed: drop it (when it is optional) so
    // that the typed rules still check the rest of the document.
    if incomplete && !at.is_empty() {
        report.refused.push(at.clone());
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({s:?})"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn mistyped(expected: &str, value: &Value, path: &Path, at: Vec<Step>, report: &mut SchemaReport) {
    let article = if expected.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    report.errors.push(FieldError {
        path: path.to_string(),
        message: format!("must be {article} {expected}, found {}", describe(value)),
    });
    report.refused.push(at);
}

fn unknown_field(schema: &Value, key: &str, path: &Path, at: Vec<Step>, report: &mut SchemaReport) {
    let known: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let hint = if key == "kubelet" && path.to_string() == "spec.template.spec.kubelet" {
        " (v1 moved the kubelet settings to the EC2NodeClass's spec.kubelet; `karpenter convert` moves them)".to_owned()
    } else {
        did_you_mean(key, &known)
            .map(|k| format!(" (did you mean {k:?}?)"))
            .unwrap_or_default()
    };
    report.errors.push(FieldError {
        path: path.to_string(),
        message: format!("unknown field {key:?}{hint}"),
    });
    report.refused.push(at);
}

/// The known name closest to `key`, when it is close enough to be a typo.
pub fn did_you_mean<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= (k.len() / 4).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = current;
        }
    }
    row[b.len()]
}

fn navigate<'a>(node: &'a mut Value, steps: &[Step]) -> Option<&'a mut Value> {
    steps.iter().try_fold(node, |node, step| match step {
        Step::Key(k) => node.get_mut(k.as_str()),
        Step::Index(i) => node.get_mut(*i),
    })
}

/// Removes the refused values from a copy of the document. A refused list item removes its
/// whole list, so that the indexes in the remaining problems stay true.
pub(crate) fn without_refused(doc: &Value, refused: &[Vec<Step>]) -> Value {
    let mut cleaned = doc.clone();
    for location in refused {
        let mut location = location.clone();
        while matches!(location.last(), Some(Step::Index(_))) {
            location.pop();
            // The list itself is now what is removed (its parent key).
        }
        let Some((Step::Key(last), parents)) = location.split_last() else {
            continue;
        };
        if let Some(map) = navigate(&mut cleaned, parents).and_then(Value::as_object_mut) {
            map.remove(last);
        }
    }
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_closest_known_field() {
        for (key, known, expected) in [
            (
                "requirments",
                &["requirements", "taints"][..],
                Some("requirements"),
            ),
            (
                "instanceProfil",
                &["instanceProfile", "role"][..],
                Some("instanceProfile"),
            ),
            ("Taints", &["taints"][..], Some("taints")),
            (
                "kubelet",
                &["taints", "requirements", "nodeClassRef"][..],
                None,
            ),
            ("zzz", &["role"][..], None),
        ] {
            assert_eq!(did_you_mean(key, known), expected, "{key}");
        }
    }

    #[test]
    fn refused_list_items_remove_their_whole_list() {
        let doc = serde_json::json!({"spec": {"a": [1, "x"], "b": true, "c": 1}});
        let cleaned = without_refused(
            &doc,
            &[
                vec![
                    Step::Key("spec".into()),
                    Step::Key("a".into()),
                    Step::Index(1),
                ],
                vec![Step::Key("spec".into()), Step::Key("b".into())],
            ],
        );
        assert_eq!(cleaned, serde_json::json!({"spec": {"c": 1}}));
    }
}
