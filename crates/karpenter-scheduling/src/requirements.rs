//! A set of requirements keyed by label key: adding intersects, a missing key means `Exists`,
//! and compatibility follows upstream's rules for undefined custom vs well-known keys.
//!
//! It is also the one compiler of node-selector expressions ([`Requirements::add_expression`],
//! [`Requirements::add_node_selector`]): NodePool and NodeClaim requirements, a pod's node
//! affinity, a volume's node affinity and a storage class's allowed topologies all become
//! requirements the same way.

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use crate::hash::FxHashSet;
use crate::input::{Operator, RequirementSpec};
use crate::intern::{Interner, Sym};
use crate::requirement::Requirement;

/// Requirements keyed by interned label key, kept sorted by key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Requirements {
    entries: Vec<(Sym, Requirement)>,
}

/// A node-selector expression whose operator Kubernetes does not define.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported operator {0:?}")]
pub struct UnknownOperator(pub String);

/// Why two requirement sets are incompatible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incompatibility {
    /// A custom key the incoming side needs is not defined on this side.
    Undefined { key: Sym },
    /// Both sides define the key but their values do not overlap.
    Disjoint {
        key: Sym,
        existing: Box<Requirement>,
        incoming: Box<Requirement>,
    },
}

impl Incompatibility {
    pub fn describe(&self, interner: &Interner) -> String {
        match self {
            Incompatibility::Undefined { key } => {
                format!(
                    "label {:?} does not have known values",
                    interner.resolve(*key)
                )
            }
            Incompatibility::Disjoint {
                key,
                existing,
                incoming,
            } => format!(
                "key {}, {} not in {}",
                interner.resolve(*key),
                incoming.describe(interner),
                existing.describe(interner)
            ),
        }
    }

    pub fn key(&self) -> Sym {
        match self {
            Incompatibility::Undefined { key } | Incompatibility::Disjoint { key, .. } => *key,
        }
    }
}

impl Requirements {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds requirements from specs (keys normalized, values interned).
    pub fn from_specs<'a>(
        specs: impl IntoIterator<Item = &'a RequirementSpec>,
        interner: &mut Interner,
    ) -> Self {
        let mut reqs = Requirements::new();
        for spec in specs {
            reqs.add_expression(
                &spec.key,
                spec.operator,
                spec.values.iter().map(String::as_str),
                spec.min_values,
                interner,
            );
        }
        reqs
    }

    /// Adds the expression `key operator values` (intersecting what `key` already requires):
    /// the key normalized (`failure-domain.beta.kubernetes.io/zone` is
    /// `topology.kubernetes.io/zone`), then the values interned.
    pub fn add_expression<'v>(
        &mut self,
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = &'v str>,
        min_values: Option<u32>,
        interner: &mut Interner,
    ) {
        let key = interner.intern(karpenter_api::labels::normalize_label_key(key));
        let values: Vec<Sym> = values.into_iter().map(|v| interner.intern(v)).collect();
        let req = Requirement::new(operator, &values, interner).with_min_values(min_values);
        self.add(key, req, interner);
    }

    /// Adds a Kubernetes `NodeSelectorRequirement` ([`Self::add_expression`]); an operator
    /// Kubernetes does not define adds nothing and is the error.
    pub fn add_node_selector(
        &mut self,
        expression: &NodeSelectorRequirement,
        interner: &mut Interner,
    ) -> Result<(), UnknownOperator> {
        let operator = Operator::parse(&expression.operator)
            .ok_or_else(|| UnknownOperator(expression.operator.clone()))?;
        self.add_expression(
            &expression.key,
            operator,
            expression.values.iter().flatten().map(String::as_str),
            None,
            interner,
        );
        Ok(())
    }

    /// `key In [value]` for every label.
    pub fn from_labels<'a>(
        labels: impl IntoIterator<Item = (&'a String, &'a String)>,
        interner: &mut Interner,
    ) -> Self {
        let mut reqs = Requirements::new();
        for (k, v) in labels {
            reqs.add_expression(k, Operator::In, [v.as_str()], None, interner);
        }
        reqs
    }

    fn position(&self, key: Sym) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&key, |(k, _)| *k)
    }

    /// The requirement on `key`, if defined.
    pub fn get(&self, key: Sym) -> Option<&Requirement> {
        self.position(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn has(&self, key: Sym) -> bool {
        self.position(key).is_ok()
    }

    /// Intersects `req` into the requirement on `key`.
    pub fn add(&mut self, key: Sym, req: Requirement, interner: &Interner) {
        match self.position(key) {
            Ok(i) => {
                let merged = self.entries[i].1.intersection(&req, interner);
                self.entries[i].1 = merged;
            }
            Err(i) => self.entries.insert(i, (key, req)),
        }
    }

    /// Replaces the requirement on `key`.
    pub fn set(&mut self, key: Sym, req: Requirement) {
        match self.position(key) {
            Ok(i) => self.entries[i].1 = req,
            Err(i) => self.entries.insert(i, (key, req)),
        }
    }

    pub fn remove(&mut self, key: Sym) {
        if let Ok(i) = self.position(key) {
            self.entries.remove(i);
        }
    }

    /// Intersects every requirement of `other` into this set.
    pub fn add_all(&mut self, other: &Requirements, interner: &Interner) {
        for (k, r) in &other.entries {
            self.add(*k, r.clone(), interner);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (Sym, &Requirement)> {
        self.entries.iter().map(|(k, r)| (*k, r))
    }

    pub fn keys(&self) -> impl Iterator<Item = Sym> + '_ {
        self.entries.iter().map(|(k, _)| *k)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn has_min_values(&self) -> bool {
        self.entries.iter().any(|(_, r)| r.min_values.is_some())
    }

    /// Upstream `Intersects`: for every shared key the sets overlap, unless both sides are
    /// `NotIn`/`DoesNotExist`. Keys defined on only one side are fine.
    pub fn intersects(
        &self,
        incoming: &Requirements,
        interner: &Interner,
    ) -> Result<(), Incompatibility> {
        match self.first_disjoint(incoming, interner) {
            None => Ok(()),
            Some((i, j)) => {
                let (key, existing) = &self.entries[i];
                Err(Incompatibility::Disjoint {
                    key: *key,
                    existing: Box::new(existing.clone()),
                    incoming: Box::new(incoming.entries[j].1.clone()),
                })
            }
        }
    }

    /// [`Self::intersects`] as a yes/no, without building the error (the hot loops that only
    /// filter: offerings, signatures, reservations).
    pub fn overlaps(&self, incoming: &Requirements, interner: &Interner) -> bool {
        self.first_disjoint(incoming, interner).is_none()
    }

    /// The entry indices (here, in `incoming`) of the first shared key whose sets do not meet.
    fn first_disjoint(
        &self,
        incoming: &Requirements,
        interner: &Interner,
    ) -> Option<(usize, usize)> {
        let (mut i, mut j) = (0, 0);
        while i < self.entries.len() && j < incoming.entries.len() {
            let (ka, ra) = &self.entries[i];
            let (kb, rb) = &incoming.entries[j];
            match ka.cmp(kb) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if !ra.compatible_with(rb, interner) {
                        return Some((i, j));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        None
    }

    /// Upstream `Compatible`: keys of `incoming` that are not in `allow_undefined` must be
    /// defined here unless `incoming` uses `NotIn`/`DoesNotExist` on them; then [`Self::intersects`].
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined: &FxHashSet<Sym>,
        interner: &Interner,
    ) -> Result<(), Incompatibility> {
        for (key, req) in &incoming.entries {
            if allow_undefined.contains(key) || req.allows_absence() || self.has(*key) {
                continue;
            }
            return Err(Incompatibility::Undefined { key: *key });
        }
        self.intersects(incoming, interner)
    }

    /// Converts back to specs (for output), in key order.
    pub fn to_specs(&self, interner: &Interner) -> Vec<RequirementSpec> {
        use crate::input::Operator;
        self.entries
            .iter()
            .map(|(k, r)| {
                let (operator, values) = match (r.operator(), r.gte, r.lte) {
                    (Operator::Exists, Some(g), None) => (Operator::Gte, vec![g.to_string()]),
                    (Operator::Exists, None, Some(l)) => (Operator::Lte, vec![l.to_string()]),
                    (op, _, _) => (
                        op,
                        r.values
                            .iter()
                            .map(|v| interner.resolve(*v).to_string())
                            .collect(),
                    ),
                };
                RequirementSpec {
                    key: interner.resolve(*k).to_string(),
                    operator,
                    values,
                    min_values: r.min_values,
                }
            })
            .collect()
    }

    /// Renders `key In [a b], key2 Exists`.
    pub fn describe(&self, interner: &Interner) -> String {
        self.entries
            .iter()
            .map(|(k, r)| format!("{} {}", interner.resolve(*k), r.describe(interner)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expression(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn a_node_selector_expression_compiles_with_its_key_normalized() {
        let mut interner = Interner::new();
        let mut reqs = Requirements::new();
        let beta_zone = expression("failure-domain.beta.kubernetes.io/zone", "In", &["a", "b"]);
        assert_eq!(reqs.add_node_selector(&beta_zone, &mut interner), Ok(()));
        let zone = interner.intern(karpenter_api::labels::ZONE);
        let a = interner.intern("a");
        let c = interner.intern("c");
        let Some(requirement) = reqs.get(zone) else {
            panic!("the zone requirement is under the normalized key: {reqs:?}");
        };
        assert!(requirement.has(a, &interner));
        assert!(!requirement.has(c, &interner));
    }

    #[test]
    fn expressions_on_one_key_intersect() {
        let mut interner = Interner::new();
        let mut reqs = Requirements::new();
        reqs.add_expression("team", Operator::In, ["a", "b"], None, &mut interner);
        reqs.add_expression("team", Operator::NotIn, ["a"], None, &mut interner);
        let team = interner.intern("team");
        let (a, b) = (interner.intern("a"), interner.intern("b"));
        let Some(requirement) = reqs.get(team) else {
            panic!("team is required: {reqs:?}");
        };
        assert!(!requirement.has(a, &interner));
        assert!(requirement.has(b, &interner));
    }

    #[test]
    fn an_operator_kubernetes_does_not_define_is_an_error_that_adds_nothing() {
        let mut interner = Interner::new();
        let mut reqs = Requirements::new();
        let odd = expression("team", "Near", &["a"]);
        assert_eq!(
            reqs.add_node_selector(&odd, &mut interner),
            Err(UnknownOperator("Near".into()))
        );
        assert_eq!(reqs.len(), 0);
    }
}
