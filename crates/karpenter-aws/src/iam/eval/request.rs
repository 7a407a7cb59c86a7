//! The request context an authorization decision is made on: action, resource and context keys.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// A context key's value(s). Single-valued keys (`aws:RequestTag/k`) hold one value; multivalued
/// keys (`aws:TagKeys`) hold a set, possibly empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ContextValue {
    Single(String),
    Multi(Vec<String>),
}

impl ContextValue {
    pub fn values(&self) -> &[String] {
        match self {
            ContextValue::Single(v) => std::slice::from_ref(v),
            ContextValue::Multi(v) => v,
        }
    }

    /// A single-valued key's value (what a policy variable may be replaced with).
    pub fn single(&self) -> Option<&str> {
        match self {
            ContextValue::Single(v) => Some(v),
            ContextValue::Multi(_) => None,
        }
    }
}

/// Context keys by name. IAM compares key names case-insensitively, so lookups fold case; the
/// original spelling is kept for display.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    keys: BTreeMap<String, (String, ContextValue)>,
}

impl Context {
    pub fn insert(&mut self, key: impl Into<String>, value: ContextValue) {
        let key = key.into();
        self.keys.insert(key.to_lowercase(), (key, value));
    }

    pub fn remove(&mut self, key: &str) {
        self.keys.remove(&key.to_lowercase());
    }

    pub fn get(&self, key: &str) -> Option<&ContextValue> {
        self.keys.get(&key.to_lowercase()).map(|(_, v)| v)
    }

    /// `(key as written, value)` in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ContextValue)> {
        self.keys.values().map(|(k, v)| (k.as_str(), v))
    }
}

impl Serialize for Context {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// One authorization request: "may the principal perform `action` on `resource` given `context`?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Request {
    /// `service:Action`, e.g. `ec2:RunInstances`.
    pub action: String,
    /// The resource ARN (or `*` for actions without resource-level permissions).
    pub resource: String,
    pub context: Context,
}

impl Request {
    pub fn new(action: impl Into<String>, resource: impl Into<String>) -> Self {
        Request {
            action: action.into(),
            resource: resource.into(),
            context: Context::default(),
        }
    }

    /// Adds a single-valued context key.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.context.insert(key, ContextValue::Single(value.into()));
        self
    }

    /// Adds a multivalued context key.
    pub fn with_multi<I, S>(mut self, key: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let values = values.into_iter().map(Into::into).collect();
        self.context.insert(key, ContextValue::Multi(values));
        self
    }

    /// Adds a request tag: `aws:RequestTag/<key>` and the key in `aws:TagKeys`.
    pub fn with_request_tag(mut self, key: &str, value: &str) -> Self {
        self.context.insert(
            format!("aws:RequestTag/{key}"),
            ContextValue::Single(value.to_string()),
        );
        let mut keys = match self.context.get("aws:TagKeys") {
            Some(v) => v.values().to_vec(),
            None => Vec::new(),
        };
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
        self.context
            .insert("aws:TagKeys", ContextValue::Multi(keys));
        self
    }

    /// Adds a tag the target resource already carries: `aws:ResourceTag/<key>`.
    pub fn with_resource_tag(self, key: &str, value: &str) -> Self {
        self.with(format!("aws:ResourceTag/{key}"), value)
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.action, self.resource)
    }
}
