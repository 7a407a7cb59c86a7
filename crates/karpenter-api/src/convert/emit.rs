//! Writing converted objects: YAML with comments, or JSON.
//!
//! Every note of an object is listed in a comment block above it (field path and message,
//! warnings marked `WARNING`). Notes on scalar fields are also written as an end-of-line
//! comment on the field itself (serde-saphyr's `Commented`); serde-saphyr cannot comment a
//! mapping or a sequence, so notes on those (e.g. a moved `kubelet`) and on removed fields
//! appear in the block only.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::{Conversion, ConvertedObject, Severity};

/// The output could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing the converted objects: {0}")]
pub struct EmitError(String);

/// Keys written first, in this order; the rest follow alphabetically.
const LEADING_KEYS: &[&str] = &[
    "apiVersion",
    "group",
    "kind",
    "metadata",
    "name",
    "spec",
    "template",
];

fn ordered(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by_key(|(k, _)| {
        (
            LEADING_KEYS
                .iter()
                .position(|l| l == k)
                .unwrap_or(LEADING_KEYS.len()),
            (*k).clone(),
        )
    });
    entries
}

/// A JSON value serialized with end-of-line comments on the scalars named in `comments`.
struct Annotated<'a> {
    value: &'a Value,
    path: String,
    comments: &'a BTreeMap<String, String>,
}

impl<'a> Annotated<'a> {
    fn child<'b>(&self, value: &'b Value, path: String) -> Annotated<'b>
    where
        'a: 'b,
    {
        Annotated {
            value,
            path,
            comments: self.comments,
        }
    }
}

impl Serialize for Annotated<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Object(map) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (key, value) in ordered(map) {
                    let path = if self.path.is_empty() {
                        key.clone()
                    } else {
                        format!("{}.{key}", self.path)
                    };
                    out.serialize_entry(key, &self.child(value, path))?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = s.serialize_seq(Some(items.len()))?;
                for (i, item) in items.iter().enumerate() {
                    out.serialize_element(&self.child(item, format!("{}[{i}]", self.path)))?;
                }
                out.end()
            }
            scalar => match self.comments.get(&self.path) {
                Some(comment) => serde_saphyr::Commented(scalar, comment.clone()).serialize(s),
                None => scalar.serialize(s),
            },
        }
    }
}

/// One object as YAML: the comment block, then the object.
pub fn object_to_yaml(object: &ConvertedObject) -> Result<String, EmitError> {
    let mut comments: BTreeMap<String, String> = BTreeMap::new();
    for note in &object.notes {
        comments
            .entry(note.field.clone())
            .and_modify(|c| {
                c.push_str("; ");
                c.push_str(&note.message);
            })
            .or_insert_with(|| note.message.clone());
    }
    let mut out = String::new();
    if let Some(from) = &object.converted_from {
        out.push_str(&format!(
            "# Converted by karpenter convert from {from} ({}).\n",
            object.source
        ));
    }
    for note in &object.notes {
        let marker = match note.severity {
            Severity::Warning => "WARNING ",
            Severity::Info => "",
        };
        let field = if note.field.is_empty() {
            String::new()
        } else {
            format!("{}: ", note.field)
        };
        out.push_str(&format!(
            "# - {marker}{field}{}\n",
            note.message.replace('\n', " ")
        ));
    }
    let body = serde_saphyr::to_string(&Annotated {
        value: &object.value,
        path: String::new(),
        comments: &comments,
    })
    .map_err(|e| EmitError(e.to_string()))?;
    out.push_str(&body);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Every object as a multi-document YAML stream.
pub fn to_yaml(conversion: &Conversion) -> Result<String, EmitError> {
    let mut out = String::new();
    for (i, object) in conversion.objects.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&object_to_yaml(object)?);
    }
    Ok(out)
}

/// Every object as JSON: the object itself when there is one, else a `v1` `List`.
pub fn to_json(conversion: &Conversion) -> Result<String, EmitError> {
    let value = match conversion.objects.as_slice() {
        [one] => one.value.clone(),
        many => serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": many.iter().map(|o| o.value.clone()).collect::<Vec<_>>(),
        }),
    };
    let mut text = serde_json::to_string_pretty(&value).map_err(|e| EmitError(e.to_string()))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::Note;

    fn object(value: Value, notes: Vec<Note>) -> ConvertedObject {
        ConvertedObject {
            source: "f.yaml:1".to_owned(),
            converted_from: Some("karpenter.sh/v1beta1 NodePool".to_owned()),
            value,
            notes,
        }
    }

    fn note(severity: Severity, field: &str, message: &str) -> Note {
        Note {
            severity,
            field: field.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn notes_become_a_header_block_and_end_of_line_comments_on_scalars() {
        let value = serde_json::json!({
            "kind": "EC2NodeClass", "apiVersion": "karpenter.k8s.aws/v1",
            "spec": {"terms": [{"alias": "al2@latest"}], "kubelet": {"maxPods": 1}}
        });
        let notes = vec![
            note(Severity::Warning, "spec.terms[0].alias", "check it"),
            note(Severity::Info, "spec.kubelet", "moved here"),
        ];
        let yaml = object_to_yaml(&object(value.clone(), notes)).expect("yaml");
        assert!(yaml.starts_with("# Converted by karpenter convert from karpenter.sh/v1beta1 NodePool (f.yaml:1).\n# - WARNING spec.terms[0].alias: check it\n# - spec.kubelet: moved here\napiVersion:"), "{yaml}");
        assert!(yaml.contains("- alias: al2@latest # check it\n"), "{yaml}");
        let parsed = crate::yaml::parse_documents(&yaml).expect("parses");
        assert_eq!(parsed, vec![value]);
    }

    #[test]
    fn json_output_is_the_object_alone_or_a_list() {
        let one = Conversion {
            objects: vec![object(serde_json::json!({"kind": "A"}), vec![])],
            skipped: vec![],
        };
        let text = to_json(&one).expect("json");
        assert_eq!(
            serde_json::from_str::<Value>(&text).ok(),
            Some(serde_json::json!({"kind": "A"}))
        );
        let mut two = one.clone();
        two.objects
            .push(object(serde_json::json!({"kind": "B"}), vec![]));
        let text = to_json(&two).expect("json");
        let value: Value = serde_json::from_str(&text).expect("json parses");
        assert_eq!(value["kind"], "List");
        assert_eq!(value["items"][1]["kind"], "B");
    }
}
