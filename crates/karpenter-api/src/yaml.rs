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
    /// `line 3, column 7: message` (or just the message without a location).
    pub fn describe(&self) -> String {
        match (self.line, self.column) {
            (Some(line), Some(column)) => format!("line {line}, column {column}: {}", self.message),
            (Some(line), None) => format!("line {line}: {}", self.message),
            _ => self.message.clone(),
        }
    }
}

fn budgeted_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_anchors: 10_000,
            max_depth: 256,
        },
    }
}

/// Parses every non-empty document of a multi-document YAML stream.
pub fn parse_documents(input: &str) -> Result<Vec<serde_json::Value>, YamlError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple_with_options(input, budgeted_options()).map_err(|err| {
            let location = err.location();
            YamlError {
                line: location.map(|l| l.line()),
                column: location.map(|l| l.column()),
                message: first_line(&err.to_string()),
            }
        })?;
    Ok(docs.into_iter().filter(|doc| !doc.is_null()).collect())
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
