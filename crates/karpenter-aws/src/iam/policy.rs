//! IAM policy documents: the JSON grammar as Rust types.
//!
//! Serialization is plain serde. Parsing goes through [`PolicyDocument::parse`], a hand-written
//! walk over `serde_json::Value` so that a bad policy gets an error naming the statement (index and
//! Sid) and the field, e.g. `Statement[2] (Sid "AllowScopedDeletion"): Action: expected a string or
//! a list of strings, found a number`. The types keep the user's shape (a single string stays a
//! string, a list stays a list) so a parsed policy serializes back the way it was written.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The current policy language version. Policy variables are only substituted under it.
pub const VERSION_2012: &str = "2012-10-17";
/// The legacy policy language version (no policy variables).
pub const VERSION_2008: &str = "2008-10-17";

/// One value or a list of values, as IAM accepts for most elements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// A single value stays a scalar; anything else becomes a list.
    pub fn from_vec(mut values: Vec<T>) -> Self {
        if values.len() == 1
            && let Some(v) = values.pop()
        {
            return OneOrMany::One(v);
        }
        OneOrMany::Many(values)
    }

    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(v) => std::slice::from_ref(v),
            OneOrMany::Many(v) => v,
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }
}

/// `Allow` or `Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Effect {
    Allow,
    Deny,
}

/// A scalar in a Condition: IAM accepts strings, booleans and numbers and compares their text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ConditionScalar {
    String(String),
    Bool(bool),
    Number(serde_json::Number),
}

impl ConditionScalar {
    /// The value as IAM compares it: its text.
    pub fn as_text(&self) -> String {
        match self {
            ConditionScalar::String(s) => s.clone(),
            ConditionScalar::Bool(b) => b.to_string(),
            ConditionScalar::Number(n) => n.to_string(),
        }
    }
}

impl From<&str> for ConditionScalar {
    fn from(s: &str) -> Self {
        ConditionScalar::String(s.to_string())
    }
}

impl From<String> for ConditionScalar {
    fn from(s: String) -> Self {
        ConditionScalar::String(s)
    }
}

/// `Condition`: operator (e.g. `ForAllValues:StringEquals`) -> context key -> value(s).
pub type Condition = BTreeMap<String, BTreeMap<String, OneOrMany<ConditionScalar>>>;

/// `Principal` / `NotPrincipal` (resource-based policies only; the evaluator ignores it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Principal {
    /// `"*"`.
    Any(String),
    /// `{"Service": [...], "AWS": ...}`.
    Map(BTreeMap<String, OneOrMany<String>>),
}

/// One statement.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Statement {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    pub effect: Effect,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_principal: Option<Principal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<OneOrMany<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_action: Option<OneOrMany<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<OneOrMany<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_resource: Option<OneOrMany<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
}

impl Statement {
    /// An empty Allow statement with the given Sid; fill in the rest.
    pub fn allow(sid: impl Into<String>) -> Self {
        Statement {
            sid: Some(sid.into()),
            effect: Effect::Allow,
            principal: None,
            not_principal: None,
            action: None,
            not_action: None,
            resource: None,
            not_resource: None,
            condition: None,
        }
    }

    /// `Statement[3] (Sid "X")` for messages.
    pub fn label(&self, index: usize) -> String {
        match &self.sid {
            Some(sid) => format!("Statement[{index}] (Sid {sid:?})"),
            None => format!("Statement[{index}]"),
        }
    }
}

/// A whole policy document.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PolicyDocument {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub statement: OneOrMany<Statement>,
}

/// A policy document that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyParseError {
    #[error("the policy is not valid JSON")]
    Json(#[source] serde_json::Error),
    #[error("{location}: {message}")]
    Invalid { location: String, message: String },
}

fn invalid(location: impl Into<String>, message: impl Into<String>) -> PolicyParseError {
    PolicyParseError::Invalid {
        location: location.into(),
        message: message.into(),
    }
}

/// What a JSON value is, for messages ("found a number").
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl PolicyDocument {
    /// A 2012-10-17 document with these statements.
    pub fn new(statements: Vec<Statement>) -> Self {
        PolicyDocument {
            version: Some(VERSION_2012.to_string()),
            id: None,
            statement: OneOrMany::Many(statements),
        }
    }

    pub fn statements(&self) -> &[Statement] {
        self.statement.as_slice()
    }

    /// Whether policy variables (`${...}`) are substituted: only under version 2012-10-17.
    pub fn supports_variables(&self) -> bool {
        self.version.as_deref() == Some(VERSION_2012)
    }

    /// Parses a policy document from JSON text, checking the grammar element by element.
    pub fn parse(text: &str) -> Result<Self, PolicyParseError> {
        let value: Value = serde_json::from_str(text).map_err(PolicyParseError::Json)?;
        Self::from_value(&value)
    }

    /// Reads a policy document from an already-parsed JSON value.
    pub fn from_value(value: &Value) -> Result<Self, PolicyParseError> {
        let Value::Object(obj) = value else {
            return Err(invalid(
                "policy",
                format!("expected a JSON object, found {}", kind(value)),
            ));
        };
        let mut version = None;
        let mut id = None;
        let mut statement = None;
        for (key, v) in obj {
            match key.as_str() {
                "Version" => {
                    let s = string(v, "Version")?;
                    if s != VERSION_2012 && s != VERSION_2008 {
                        return Err(invalid(
                            "Version",
                            format!(
                                "expected \"{VERSION_2012}\" or \"{VERSION_2008}\", found {s:?}"
                            ),
                        ));
                    }
                    version = Some(s);
                }
                "Id" => id = Some(string(v, "Id")?),
                "Statement" => statement = Some(statements(v)?),
                other => {
                    return Err(invalid(
                        "policy",
                        format!("unknown element {other:?} (expected Version, Id, Statement)"),
                    ));
                }
            }
        }
        let statement = statement.ok_or_else(|| invalid("policy", "missing Statement"))?;
        Ok(PolicyDocument {
            version,
            id,
            statement,
        })
    }
}

impl<'de> Deserialize<'de> for PolicyDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        PolicyDocument::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for PolicyDocument {
    /// Pretty JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string_pretty(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

fn string(v: &Value, location: &str) -> Result<String, PolicyParseError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(invalid(
            location,
            format!("expected a string, found {}", kind(other)),
        )),
    }
}

fn strings(v: &Value, location: &str) -> Result<OneOrMany<String>, PolicyParseError> {
    match v {
        Value::String(s) => Ok(OneOrMany::One(s.clone())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(invalid(
                    format!("{location}[{i}]"),
                    format!("expected a string, found {}", kind(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(OneOrMany::Many),
        other => Err(invalid(
            location,
            format!(
                "expected a string or a list of strings, found {}",
                kind(other)
            ),
        )),
    }
}

fn statements(v: &Value) -> Result<OneOrMany<Statement>, PolicyParseError> {
    match v {
        Value::Object(obj) => Ok(OneOrMany::One(statement(obj, 0)?)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Object(obj) => statement(obj, i),
                other => Err(invalid(
                    format!("Statement[{i}]"),
                    format!("expected an object, found {}", kind(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(OneOrMany::Many),
        other => Err(invalid(
            "Statement",
            format!(
                "expected an object or a list of objects, found {}",
                kind(other)
            ),
        )),
    }
}

fn statement(obj: &Map<String, Value>, index: usize) -> Result<Statement, PolicyParseError> {
    let sid = match obj.get("Sid") {
        Some(v) => Some(string(v, &format!("Statement[{index}].Sid"))?),
        None => None,
    };
    let label = match &sid {
        Some(s) => format!("Statement[{index}] (Sid {s:?})"),
        None => format!("Statement[{index}]"),
    };
    let at = |field: &str| format!("{label}: {field}");
    let mut st = Statement::allow(String::new());
    st.sid = sid.clone();
    let mut effect = None;
    for (key, v) in obj {
        match key.as_str() {
            "Sid" => {}
            "Effect" => {
                effect = Some(match string(v, &at("Effect"))?.as_str() {
                    "Allow" => Effect::Allow,
                    "Deny" => Effect::Deny,
                    other => {
                        return Err(invalid(
                            at("Effect"),
                            format!("expected \"Allow\" or \"Deny\", found {other:?}"),
                        ));
                    }
                })
            }
            "Action" => st.action = Some(strings(v, &at("Action"))?),
            "NotAction" => st.not_action = Some(strings(v, &at("NotAction"))?),
            "Resource" => st.resource = Some(strings(v, &at("Resource"))?),
            "NotResource" => st.not_resource = Some(strings(v, &at("NotResource"))?),
            "Principal" => st.principal = Some(principal(v, &at("Principal"))?),
            "NotPrincipal" => st.not_principal = Some(principal(v, &at("NotPrincipal"))?),
            "Condition" => st.condition = Some(condition(v, &at("Condition"))?),
            other => {
                return Err(invalid(
                    label.clone(),
                    format!(
                        "unknown element {other:?} (expected Sid, Effect, Principal, NotPrincipal, \
                         Action, NotAction, Resource, NotResource, Condition)"
                    ),
                ));
            }
        }
    }
    st.effect = effect.ok_or_else(|| invalid(label.clone(), "missing Effect"))?;
    match (&st.action, &st.not_action) {
        (Some(_), Some(_)) => {
            return Err(invalid(label, "has both Action and NotAction; use one"));
        }
        (None, None) => return Err(invalid(label, "missing Action (or NotAction)")),
        _ => {}
    }
    match (&st.resource, &st.not_resource) {
        (Some(_), Some(_)) => {
            return Err(invalid(label, "has both Resource and NotResource; use one"));
        }
        (None, None) => return Err(invalid(label, "missing Resource (or NotResource)")),
        _ => {}
    }
    Ok(st)
}

fn principal(v: &Value, location: &str) -> Result<Principal, PolicyParseError> {
    match v {
        Value::String(s) => Ok(Principal::Any(s.clone())),
        Value::Object(obj) => obj
            .iter()
            .map(|(k, v)| Ok((k.clone(), strings(v, &format!("{location}.{k}"))?)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Principal::Map),
        other => Err(invalid(
            location,
            format!("expected \"*\" or an object, found {}", kind(other)),
        )),
    }
}

fn scalar(v: &Value, location: &str) -> Result<ConditionScalar, PolicyParseError> {
    match v {
        Value::String(s) => Ok(ConditionScalar::String(s.clone())),
        Value::Bool(b) => Ok(ConditionScalar::Bool(*b)),
        Value::Number(n) => Ok(ConditionScalar::Number(n.clone())),
        other => Err(invalid(
            location,
            format!(
                "expected a string, boolean or number, found {}",
                kind(other)
            ),
        )),
    }
}

fn condition(v: &Value, location: &str) -> Result<Condition, PolicyParseError> {
    let Value::Object(ops) = v else {
        return Err(invalid(
            location,
            format!("expected an object, found {}", kind(v)),
        ));
    };
    let mut out = Condition::new();
    for (op, keys) in ops {
        let op_at = format!("{location}.{op}");
        let Value::Object(keys) = keys else {
            return Err(invalid(
                op_at,
                format!("expected an object of context keys, found {}", kind(keys)),
            ));
        };
        let mut entries = BTreeMap::new();
        for (key, values) in keys {
            let key_at = format!("{op_at}.{key:?}");
            let values = match values {
                Value::Array(items) => OneOrMany::Many(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| scalar(item, &format!("{key_at}[{i}]")))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                other => OneOrMany::One(scalar(other, &key_at)?),
            };
            entries.insert(key.clone(), values);
        }
        out.insert(op.clone(), entries);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_statement_object_and_string_elements_parse_and_round_trip() {
        let text = r#"{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":true}}}}"#;
        let doc = PolicyDocument::parse(text).unwrap();
        assert_eq!(doc.statements().len(), 1);
        let back: Value = serde_json::to_value(&doc).unwrap();
        let orig: Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, orig);
    }

    #[test]
    fn errors_name_the_statement_and_the_field() {
        let cases = [
            (
                r#"{"Statement":[{"Sid":"A","Effect":"Allow","Action":"x:y","Resource":"*"},{"Sid":"B","Effect":"Allow","Action":5,"Resource":"*"}]}"#,
                "Statement[1] (Sid \"B\"): Action: expected a string or a list of strings, found a number",
            ),
            (
                r#"{"Statement":[{"Effect":"Alow","Action":"x:y","Resource":"*"}]}"#,
                "Statement[0]: Effect: expected \"Allow\" or \"Deny\", found \"Alow\"",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Actions":"x:y","Resource":"*"}]}"#,
                "Statement[0]: unknown element \"Actions\"",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Action":"x:y"}]}"#,
                "Statement[0]: missing Resource (or NotResource)",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Action":"x:y","NotAction":"x:z","Resource":"*"}]}"#,
                "has both Action and NotAction",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Action":"x:y","Resource":"*","Condition":{"StringEquals":{"k":{"a":1}}}}]}"#,
                "Statement[0]: Condition.StringEquals.\"k\": expected a string, boolean or number, found an object",
            ),
            (
                r#"{"Version":"2019-01-01","Statement":[]}"#,
                "Version: expected",
            ),
            (r#"[1]"#, "policy: expected a JSON object, found a list"),
        ];
        for (text, want) in cases {
            let err = PolicyDocument::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}\n  got: {err}\n want: {want}");
        }
    }
}
