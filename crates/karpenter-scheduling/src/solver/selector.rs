//! Label selectors (`matchLabels` + `matchExpressions`) over interned pod labels, and namespace
//! sets for pod (anti-)affinity terms.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::input::Operator;
use crate::intern::{Interner, Sym};
use crate::requirement::Requirement;
use crate::requirements::Requirements;

/// Interned labels sorted by key.
pub type Labels = Vec<(Sym, Sym)>;

/// Interns a label map into sorted pairs.
pub fn intern_labels(labels: Option<&BTreeMap<String, String>>, interner: &mut Interner) -> Labels {
    let mut out: Labels = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| (interner.intern(k), interner.intern(v)))
        .collect();
    out.sort_unstable();
    out
}

/// The value of `key` in sorted labels.
pub fn label_value(labels: &Labels, key: Sym) -> Option<Sym> {
    labels
        .binary_search_by_key(&key, |(k, _)| *k)
        .ok()
        .map(|i| labels[i].1)
}

/// A compiled label selector: every requirement must hold. `None` selects nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selector {
    reqs: Requirements,
}

/// A selector could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector operator {0:?} is not supported")]
pub struct SelectorError(pub String);

impl Selector {
    /// Compiles a Kubernetes selector; `extra` adds `key In [value]` pairs (matchLabelKeys).
    pub fn compile(
        selector: &LabelSelector,
        extra: &[(Sym, Sym)],
        interner: &mut Interner,
    ) -> Result<Selector, SelectorError> {
        let mut reqs = Requirements::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            let key = interner.intern(k);
            let value = interner.intern(v);
            reqs.add(key, Requirement::is_in([value]), interner);
        }
        for expr in selector.match_expressions.iter().flatten() {
            let op = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(SelectorError(other.to_string())),
            };
            let key = interner.intern(&expr.key);
            let values: Vec<Sym> = expr
                .values
                .iter()
                .flatten()
                .map(|v| interner.intern(v))
                .collect();
            let req = Requirement::new(op, &values, interner);
            reqs.add(key, req, interner);
        }
        for (k, v) in extra {
            reqs.add(*k, Requirement::is_in([*v]), interner);
        }
        Ok(Selector { reqs })
    }

    /// True when the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels, interner: &Interner) -> bool {
        self.reqs
            .iter()
            .all(|(key, req)| match label_value(labels, key) {
                Some(v) => req.has(v, interner),
                None => req.allows_absence(),
            })
    }

    /// A label every pod it matches carries (a requirement `key In [value]`), if it has one:
    /// a pod without it cannot match, so callers may look only at the pods that have it.
    pub fn required_label(&self) -> Option<(Sym, Sym)> {
        self.reqs
            .iter()
            .find_map(|(key, req)| Some((key, req.single_value()?)))
    }

    /// Matches a string label map (namespaces, nodes).
    pub fn matches_map(&self, labels: &BTreeMap<String, String>, interner: &Interner) -> bool {
        self.reqs.iter().all(|(key, req)| {
            match labels
                .get(interner.resolve(key))
                .and_then(|v| interner.get(v))
            {
                Some(v) => req.has(v, interner),
                None => {
                    labels.contains_key(interner.resolve(key)) && req.complement
                        || !labels.contains_key(interner.resolve(key)) && req.allows_absence()
                }
            }
        })
    }
}

/// The namespaces a pod-affinity term looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NamespaceSet {
    All,
    /// Sorted.
    Some(Vec<Sym>),
}

impl NamespaceSet {
    pub fn contains(&self, ns: Sym) -> bool {
        match self {
            NamespaceSet::All => true,
            NamespaceSet::Some(list) => list.binary_search(&ns).is_ok(),
        }
    }
}
