//! One node requirement (a set of allowed values for one label key) and its algebra.
//!
//! Semantics match upstream Karpenter's `Requirement` exactly:
//! `In` is the set of its values; `NotIn` is the complement of its values; `Exists` is the
//! complement of nothing; `DoesNotExist` is the empty set; `Gt n` is the complement with a lower
//! bound `n+1`, `Lt n` an upper bound `n-1`, `Gte`/`Lte` direct bounds. Intersections take the
//! tighter bounds (crossing bounds give `DoesNotExist`), filter concrete values by the bounds and
//! drop bounds from concrete sets. A complement set's size is "infinite minus its exclusions".

use std::fmt::Write as _;

use crate::input::{Operator, RequirementSpec};
use crate::intern::{Interner, Sym};

impl RequirementSpec {
    /// Whether a label value (`None`: the label is absent) satisfies this requirement, by the
    /// same algebra the solver uses ([`Requirement`]): the one evaluator of the workspace for
    /// callers that match single labels outside a solve (catalog narrowing, DaemonSet
    /// placement in reports).
    pub fn matches(&self, value: Option<&str>) -> bool {
        let mut interner = Interner::new();
        let values: Vec<Sym> = self.values.iter().map(|v| interner.intern(v)).collect();
        let requirement = Requirement::new(self.operator, &values, &interner);
        match value {
            None => requirement.allows_absence(),
            Some(value) => {
                let value = interner.intern(value);
                requirement.has(value, &interner)
            }
        }
    }
}

/// A set of label values for one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Requirement {
    /// When true, the set is "every value except `values`" (further limited by the bounds).
    pub complement: bool,
    /// Sorted, without duplicates.
    pub values: Vec<Sym>,
    /// Inclusive integer lower bound.
    pub gte: Option<i64>,
    /// Inclusive integer upper bound.
    pub lte: Option<i64>,
    pub min_values: Option<u32>,
}

impl Requirement {
    /// `Exists`: any value.
    pub fn exists() -> Self {
        Requirement {
            complement: true,
            ..Default::default()
        }
    }

    /// `DoesNotExist`: no value.
    pub fn does_not_exist() -> Self {
        Requirement::default()
    }

    /// `In [values]`.
    pub fn is_in(values: impl IntoIterator<Item = Sym>) -> Self {
        let mut values: Vec<Sym> = values.into_iter().collect();
        values.sort_unstable();
        values.dedup();
        Requirement {
            values,
            ..Default::default()
        }
    }

    /// `NotIn [values]`.
    pub fn not_in(values: impl IntoIterator<Item = Sym>) -> Self {
        Requirement {
            complement: true,
            ..Requirement::is_in(values)
        }
    }

    /// Builds a requirement from an operator and interned values. Integer operators read their
    /// first value; a missing or non-integer bound yields `DoesNotExist` (nothing satisfies it).
    pub fn new(op: Operator, values: &[Sym], interner: &Interner) -> Self {
        let bound = || values.first().and_then(|v| interner.int(*v));
        match op {
            Operator::In => Requirement::is_in(values.iter().copied()),
            Operator::NotIn => Requirement::not_in(values.iter().copied()),
            Operator::Exists => Requirement::exists(),
            Operator::DoesNotExist => Requirement::does_not_exist(),
            Operator::Gt => match bound().and_then(|n| n.checked_add(1)) {
                Some(n) => Requirement {
                    gte: Some(n),
                    ..Requirement::exists()
                },
                None => Requirement::does_not_exist(),
            },
            Operator::Lt => match bound().and_then(|n| n.checked_sub(1)) {
                Some(n) => Requirement {
                    lte: Some(n),
                    ..Requirement::exists()
                },
                None => Requirement::does_not_exist(),
            },
            Operator::Gte => match bound() {
                Some(n) => Requirement {
                    gte: Some(n),
                    ..Requirement::exists()
                },
                None => Requirement::does_not_exist(),
            },
            Operator::Lte => match bound() {
                Some(n) => Requirement {
                    lte: Some(n),
                    ..Requirement::exists()
                },
                None => Requirement::does_not_exist(),
            },
        }
    }

    pub fn with_min_values(mut self, min_values: Option<u32>) -> Self {
        self.min_values = min_values;
        self
    }

    fn within_bounds(gte: Option<i64>, lte: Option<i64>, v: Sym, interner: &Interner) -> bool {
        if gte.is_none() && lte.is_none() {
            return true;
        }
        match interner.int(v) {
            Some(n) => gte.is_none_or(|g| n >= g) && lte.is_none_or(|l| n <= l),
            None => false,
        }
    }

    /// True when `value` is in the set.
    pub fn has(&self, value: Sym, interner: &Interner) -> bool {
        let listed = self.values.binary_search(&value).is_ok();
        listed != self.complement && Self::within_bounds(self.gte, self.lte, value, interner)
    }

    /// Number of values; `None` means "unbounded" (a complement set).
    pub fn len(&self) -> Option<usize> {
        if self.complement {
            None
        } else {
            Some(self.values.len())
        }
    }

    /// True for the empty set (`DoesNotExist`).
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// The only value of a concrete one-element set.
    pub fn single_value(&self) -> Option<Sym> {
        if !self.complement && self.values.len() == 1 {
            self.values.first().copied()
        } else {
            None
        }
    }

    /// The operator this set would be written with (bounds show as `Exists`, like upstream).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// True for `NotIn` and `DoesNotExist`, the operators that tolerate absence.
    pub fn allows_absence(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// The intersection of two sets.
    pub fn intersection(&self, other: &Requirement, interner: &Interner) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return Requirement::does_not_exist().with_min_values(min_values);
        }
        let mut values = match (self.complement, other.complement) {
            (true, true) => union(&self.values, &other.values),
            (true, false) => difference(&other.values, &self.values),
            (false, true) => difference(&self.values, &other.values),
            (false, false) => intersect(&self.values, &other.values),
        };
        values.retain(|v| Self::within_bounds(gte, lte, *v, interner));
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// True when the intersection is non-empty (cheaper than building it).
    pub fn intersects(&self, other: &Requirement, interner: &Interner) -> bool {
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return false;
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other.values.iter().any(|v| {
                self.values.binary_search(v).is_err() && Self::within_bounds(gte, lte, *v, interner)
            }),
            (false, true) => self.values.iter().any(|v| {
                other.values.binary_search(v).is_err()
                    && Self::within_bounds(gte, lte, *v, interner)
            }),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (&self.values, &other.values)
                } else {
                    (&other.values, &self.values)
                };
                small.iter().any(|v| {
                    large.binary_search(v).is_ok() && Self::within_bounds(gte, lte, *v, interner)
                })
            }
        }
    }

    /// Upstream's `Intersects` rule for one shared key: the sets must overlap, unless both are
    /// `NotIn`/`DoesNotExist`.
    pub fn compatible_with(&self, incoming: &Requirement, interner: &Interner) -> bool {
        self.intersects(incoming, interner) || (incoming.allows_absence() && self.allows_absence())
    }

    /// Renders like `In [a b]`, `NotIn [a]`, `Exists`, `Exists >= 3`.
    pub fn describe(&self, interner: &Interner) -> String {
        let mut s = self.operator().to_string();
        if !self.values.is_empty() {
            s.push_str(" [");
            for (i, v) in self.values.iter().enumerate() {
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(interner.resolve(*v));
            }
            s.push(']');
        }
        if let Some(g) = self.gte {
            let _ = write!(s, " >={g}");
        }
        if let Some(l) = self.lte {
            let _ = write!(s, " <={l}");
        }
        if let Some(m) = self.min_values {
            let _ = write!(s, " minValues={m}");
        }
        s
    }
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn union(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn difference(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    a.iter()
        .copied()
        .filter(|v| b.binary_search(v).is_err())
        .collect()
}

fn intersect(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    a.iter()
        .copied()
        .filter(|v| b.binary_search(v).is_ok())
        .collect()
}
