//! Reading and writing Kubernetes manifests as YAML.
//!
//! The YAML crate is `serde-saphyr`: `serde_yaml` is deprecated and unmaintained, and its forks
//! (`serde_yml`, `serde_yaml_ng`) either were withdrawn or keep the old `unsafe-libyaml` core.
//! serde-saphyr is a maintained pure-Rust parser that never panics on input, enforces budgets
//! against alias bombs and deep nesting, and reports line and column for every error, which is
//! what manifests from users need.
//!
//! Documents are first read into `serde_json::Value` (Kubernetes objects are JSON underneath),
//! then typed with `serde_path_to_error`, so a type error names the field path
//! (`spec.template.spec.requirements[2].operator`) and not just a position.

mod locate;

pub use locate::{Position, SourceMap};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A manifest could not be read as YAML.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    /// 1-based line, when known.
    pub line: Option<u64>,
    /// 1-based column, when known.
    pub column: Option<u64>,
    pub message: String,
}

impl YamlError {
    /// `file:3:7` (or less, when the position is not known), to start a message with.
    pub fn position_in(&self, file: &str) -> String {
        match (self.line, self.column) {
            (Some(line), Some(column)) => format!("{file}:{line}:{column}"),
            (Some(line), None) => format!("{file}:{line}"),
            _ => file.to_owned(),
        }
    }

    /// `line 3, column 7: message` (or just the message without a location).
    pub fn describe(&self) -> String {
        match (self.line, self.column) {
            (Some(line), Some(column)) => format!("line {line}, column {column}: {}", self.message),
            (Some(line), None) => format!("line {line}: {}", self.message),
            _ => self.message.clone(),
        }
    }
}

/// The most documents one file may hold. Real exports are large (a `kubectl get pods -o yaml`
/// of a big cluster is one document per object when split, 100,000 objects and more); the cap
/// only stops a file of nothing but `---` separators.
pub const MAX_DOCUMENTS: usize = 1_000_000;

/// The deepest nesting of lists and mappings (Kubernetes objects nest a few dozen levels).
pub const MAX_DEPTH: usize = 256;

/// Parser budgets sized to the input: YAML aliases (`*name`) may not make a file expand to more
/// values than it has bytes, which stops alias bombs ("billion laughs") whatever the file's
/// size, while a large export that is written out in full always fits.
fn budgeted_options(input: &str) -> serde_saphyr::Options {
    let size = input.len();
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_anchors: 10_000,
            max_depth: MAX_DEPTH,
            max_documents: MAX_DOCUMENTS,
            // Every value written out takes at least one byte; only aliases can exceed that.
            max_nodes: size.max(250_000),
            max_events: size.saturating_mul(3).max(1_000_000),
            max_total_scalar_bytes: size.max(64 * 1024 * 1024),
        },
    }
}

/// Parses every non-empty document of a multi-document YAML stream.
pub fn parse_documents(input: &str) -> Result<Vec<serde_json::Value>, YamlError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple_with_options(input, budgeted_options(input))
            .map_err(|err| yaml_error(&err))?;
    Ok(docs.into_iter().filter(|doc| !doc.is_null()).collect())
}

fn yaml_error(err: &serde_saphyr::Error) -> YamlError {
    let location = err.location();
    YamlError {
        line: location.map(|l| l.line()).filter(|l| *l > 0),
        column: location.map(|l| l.column()).filter(|c| *c > 0),
        message: human_message(err),
    }
}

const ALIAS_BOMB: &str = "YAML aliases (`*name`) expand to more than the file itself holds; \
     refusing it as an alias bomb (write the repeated values out, or use fewer aliases)";

/// The parser's message, in words for people who write manifests (no parser internals).
fn human_message(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::budget::BudgetBreach;
    let mut inner = err;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    match inner {
        serde_saphyr::Error::Budget { breach, .. } => match breach {
            BudgetBreach::Documents { .. } => format!(
                "more than {MAX_DOCUMENTS} YAML documents in one file; split it into several files"
            ),
            BudgetBreach::Depth { .. } => {
                format!("lists and mappings are nested more than {MAX_DEPTH} levels deep")
            }
            BudgetBreach::Nodes { .. }
            | BudgetBreach::Events { .. }
            | BudgetBreach::ScalarBytes { .. }
            | BudgetBreach::Aliases { .. }
            | BudgetBreach::Anchors { .. }
            | BudgetBreach::AliasAnchorRatio { .. }
            | BudgetBreach::RecordedAnchorEvents { .. }
            | BudgetBreach::RecordedAnchorBytes { .. } => ALIAS_BOMB.to_owned(),
            other => format!("the file exceeds a parser limit ({other:?})"),
        },
        serde_saphyr::Error::DuplicateMappingKey { key, .. } => match key {
            Some(key) => format!("duplicate key {key:?}: a key may appear once in a mapping"),
            None => "duplicate key: a key may appear once in a mapping".to_owned(),
        },
        serde_saphyr::Error::AliasReplayLimitExceeded { .. }
        | serde_saphyr::Error::AliasExpansionLimitExceeded { .. }
        | serde_saphyr::Error::AliasReplayStackDepthExceeded { .. }
        | serde_saphyr::Error::AliasReplayCounterOverflow { .. } => ALIAS_BOMB.to_owned(),
        _ => {
            let message = first_line(&err.to_string());
            if message.contains("recursion limit exceeded") {
                format!("lists and mappings are nested more than {MAX_DEPTH} levels deep")
            } else {
                without_location(&message).to_owned()
            }
        }
    }
}

/// The parser's own `error: line 3 column 18: ` prefix repeats the position the message is
/// printed with: drop it.
fn without_location(message: &str) -> &str {
    let rest = message.strip_prefix("error: ").unwrap_or(message);
    match rest.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((position, text)) if position.contains("column") => text,
        _ => rest,
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}

/// A document could not be typed; `path` is the field path (`spec.template.spec.weight`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

/// Types a JSON value, reporting the path of the first field that does not fit.
pub fn from_value<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, TypeError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        TypeError {
            path: if path == "." { String::new() } else { path },
            message: err.into_inner().to_string(),
        }
    })
}

/// A value could not be written as YAML.
#[derive(Debug, thiserror::Error)]
#[error("cannot write YAML: {0}")]
pub struct WriteError(String);

/// Serializes one document.
pub fn to_yaml<T: Serialize>(value: &T) -> Result<String, WriteError> {
    serde_saphyr::to_string(value).map_err(|e| WriteError(e.to_string()))
}

/// Serializes documents separated by `---`.
pub fn to_yaml_documents<T: Serialize>(values: &[T]) -> Result<String, WriteError> {
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let doc = to_yaml(value)?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_streams_skip_empty_documents() {
        let docs = parse_documents("---\na: 1\n---\n---\nb: [p, q]\n").expect("valid yaml");
        assert_eq!(
            docs,
            vec![
                serde_json::json!({"a": 1}),
                serde_json::json!({"b": ["p", "q"]})
            ]
        );
    }

    #[test]
    fn malformed_yaml_reports_line_and_column() {
        let err = parse_documents("a: 1\nb: [unclosed\nc: 2\n").expect_err("malformed");
        assert!(err.line.is_some(), "{err:?}");
        assert!(err.describe().starts_with("line "), "{}", err.describe());
    }

    #[test]
    fn alias_bombs_are_refused_not_expanded() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for name in 'b'..='z' {
            bomb.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = name;
        }
        assert!(parse_documents(&bomb).is_err());
    }

    fn pod_json(i: usize) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p-{i}","namespace":"default","labels":{{"app":"web","pod-template-hash":"abc"}},"managedFields":[{{"manager":"kube-controller-manager","operation":"Update","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}}}}}},"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:image":{{}},"f:resources":{{".":{{}},"f:requests":{{".":{{}},"f:cpu":{{}}}}}}}}}}}}}}}}],"uid":"u-{i}"}},"spec":{{"containers":[{{"name":"app","image":"nginx","resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}},"ports":[{{"containerPort":80,"protocol":"TCP"}}],"env":[{{"name":"A","value":"1"}},{{"name":"B","value":"2"}}]}}],"tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}]}},"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
    }

    #[test]
    fn real_cluster_sized_inputs_parse() {
        // Many documents (split exports, folders of examples).
        let many_docs: String = (0..5_000)
            .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"))
            .collect();
        assert_eq!(
            parse_documents(&many_docs).expect("5,000 documents").len(),
            5_000
        );
        // One big `kubectl get pods -o json` List (several hundred thousand values).
        let pods: Vec<String> = (0..3_000).map(pod_json).collect();
        let list = format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
            pods.join(",")
        );
        let docs = parse_documents(&list).expect("a 3,000-pod List");
        assert_eq!(docs[0]["items"].as_array().map(Vec::len), Some(3_000));
    }

    #[test]
    fn parser_errors_are_worded_for_people() {
        for (input, expected) in [
            (
                "a: 1\na: 2\n",
                "duplicate key \"a\": a key may appear once in a mapping",
            ),
            (&"[".repeat(300), "nested more than 256 levels deep"),
        ] {
            let err = parse_documents(input).expect_err(input);
            assert!(err.message.contains(expected), "{input}: {}", err.message);
            assert!(!err.message.contains("Options"), "{}", err.message);
            assert!(!err.message.contains("budget"), "{}", err.message);
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_even_inside_a_large_file() {
        let mut bomb = String::from("padding: [");
        bomb.push_str(&vec!["x"; 400_000].join(","));
        bomb.push_str("]\na: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for name in 'b'..='k' {
            bomb.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = name;
        }
        let err = parse_documents(&bomb).expect_err("alias bomb");
        assert!(err.message.contains("alias bomb"), "{}", err.message);
    }

    #[test]
    fn type_errors_name_the_field_path() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Outer {
            spec: Inner,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Inner {
            items: Vec<u32>,
        }
        let value = serde_json::json!({"spec": {"items": [1, "two"]}});
        let err = from_value::<Outer>(&value).expect_err("type error");
        assert_eq!(err.path, "spec.items[1]");
    }
}
