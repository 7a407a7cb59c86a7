//! The requirements algebra: truth tables for each operator (upstream `requirement_test.go`
//! semantics) and property tests for the laws intersection must obey.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_scheduling::intern::{Interner, Sym};
use karpenter_scheduling::requirement::Requirement;
use karpenter_scheduling::{Operator, RequirementSpec};
use proptest::prelude::*;

fn interner() -> (Interner, Vec<Sym>) {
    let mut i = Interner::new();
    let syms = ["a", "b", "c", "d", "1", "5", "9", "10"]
        .iter()
        .map(|s| i.intern(s))
        .collect();
    (i, syms)
}

fn req(i: &mut Interner, op: Operator, values: &[&str]) -> Requirement {
    let syms: Vec<Sym> = values.iter().map(|v| i.intern(v)).collect();
    Requirement::new(op, &syms, i)
}

/// An operator, its values, and which values it admits.
type Case = (Operator, Vec<&'static str>, Vec<(&'static str, bool)>);

#[test]
fn each_operator_admits_exactly_its_values() {
    let (mut i, _) = interner();
    let cases: Vec<Case> = vec![
        (
            Operator::In,
            vec!["a", "b"],
            vec![("a", true), ("c", false)],
        ),
        (Operator::NotIn, vec!["a"], vec![("a", false), ("b", true)]),
        (Operator::Exists, vec![], vec![("a", true), ("1", true)]),
        (Operator::DoesNotExist, vec![], vec![("a", false)]),
        (
            Operator::Gt,
            vec!["5"],
            vec![("5", false), ("9", true), ("a", false)],
        ),
        (
            Operator::Lt,
            vec!["5"],
            vec![("1", true), ("5", false), ("9", false)],
        ),
        (Operator::Gte, vec!["5"], vec![("5", true), ("1", false)]),
        (Operator::Lte, vec!["5"], vec![("5", true), ("9", false)]),
    ];
    for (op, values, checks) in cases {
        let r = req(&mut i, op, &values);
        for (v, want) in checks {
            let s = i.intern(v);
            assert_eq!(r.has(s, &i), want, "{op} {values:?} has {v}");
        }
    }
}

#[test]
fn operators_are_canonicalized_like_upstream() {
    let (mut i, _) = interner();
    assert_eq!(req(&mut i, Operator::In, &["a"]).operator(), Operator::In);
    assert_eq!(
        req(&mut i, Operator::NotIn, &["a"]).operator(),
        Operator::NotIn
    );
    assert_eq!(
        req(&mut i, Operator::Gt, &["5"]).operator(),
        Operator::Exists
    );
    assert_eq!(
        req(&mut i, Operator::In, &[]).operator(),
        Operator::DoesNotExist
    );
    assert_eq!(
        req(&mut i, Operator::Gt, &[&i64::MAX.to_string()]).operator(),
        Operator::DoesNotExist
    );
}

#[test]
fn crossing_bounds_intersect_to_does_not_exist() {
    let (mut i, _) = interner();
    let gt = req(&mut i, Operator::Gt, &["9"]);
    let lt = req(&mut i, Operator::Lt, &["5"]);
    assert!(gt.intersection(&lt, &i).is_empty());
    assert!(!gt.intersects(&lt, &i));
}

#[test]
fn bounds_filter_concrete_values_and_are_then_dropped() {
    let (mut i, _) = interner();
    let values = req(&mut i, Operator::In, &["1", "5", "9", "a"]);
    let gt = req(&mut i, Operator::Gt, &["4"]);
    let r = values.intersection(&gt, &i);
    let five = i.intern("5");
    let nine = i.intern("9");
    assert_eq!(r.values, vec![five, nine]);
    assert_eq!((r.gte, r.lte), (None, None));
}

#[test]
fn not_in_and_does_not_exist_are_compatible_without_overlap() {
    let (mut i, _) = interner();
    let not_in = req(&mut i, Operator::NotIn, &["a"]);
    let dne = req(&mut i, Operator::DoesNotExist, &[]);
    let exists = req(&mut i, Operator::Exists, &[]);
    assert!(not_in.compatible_with(&dne, &i));
    assert!(dne.compatible_with(&dne, &i));
    assert!(!exists.compatible_with(&dne, &i));
    assert!(!dne.compatible_with(&exists, &i));
}

#[test]
fn min_values_take_the_maximum_on_intersection() {
    let (mut i, _) = interner();
    let a = req(&mut i, Operator::Exists, &[]).with_min_values(Some(2));
    let b = req(&mut i, Operator::In, &["a", "b", "c"]).with_min_values(Some(3));
    assert_eq!(a.intersection(&b, &i).min_values, Some(3));
}

#[test]
fn requirement_specs_round_trip_through_serde_names() {
    let spec = RequirementSpec::new("k", Operator::Gte, &["3"]).with_min_values(1);
    let json = serde_json::to_string(&spec).unwrap_or_default();
    assert!(
        json.contains("\"operator\":\"Gte\"") && json.contains("\"minValues\":1"),
        "{json}"
    );
}

// ------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------

fn arb_requirement() -> impl Strategy<Value = (Operator, Vec<usize>)> {
    let op = prop_oneof![
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
        Just(Operator::Gt),
        Just(Operator::Lt),
        Just(Operator::Gte),
        Just(Operator::Lte),
    ];
    (op, proptest::collection::vec(0usize..8, 0..4))
}

fn build(i: &Interner, syms: &[Sym], (op, idx): &(Operator, Vec<usize>)) -> Requirement {
    let values: Vec<Sym> = match op {
        // Integer operators take one integer value.
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            vec![syms[4 + idx.first().copied().unwrap_or(0) % 4]]
        }
        _ => idx.iter().map(|j| syms[*j]).collect(),
    };
    Requirement::new(*op, &values, i)
}

proptest! {
    #[test]
    fn intersection_is_set_intersection(a in arb_requirement(), b in arb_requirement()) {
        let (i, syms) = interner();
        let (ra, rb) = (build(&i, &syms, &a), build(&i, &syms, &b));
        let both = ra.intersection(&rb, &i);
        for s in &syms {
            prop_assert_eq!(both.has(*s, &i), ra.has(*s, &i) && rb.has(*s, &i));
        }
    }

    #[test]
    fn intersection_is_commutative(a in arb_requirement(), b in arb_requirement()) {
        let (i, syms) = interner();
        let (ra, rb) = (build(&i, &syms, &a), build(&i, &syms, &b));
        prop_assert_eq!(ra.intersection(&rb, &i), rb.intersection(&ra, &i));
    }

    #[test]
    fn intersection_is_associative(a in arb_requirement(), b in arb_requirement(), c in arb_requirement()) {
        let (i, syms) = interner();
        let (ra, rb, rc) = (build(&i, &syms, &a), build(&i, &syms, &b), build(&i, &syms, &c));
        let left = ra.intersection(&rb, &i).intersection(&rc, &i);
        let right = ra.intersection(&rb.intersection(&rc, &i), &i);
        for s in &syms {
            prop_assert_eq!(left.has(*s, &i), right.has(*s, &i));
        }
    }

    #[test]
    fn intersection_is_idempotent(a in arb_requirement()) {
        let (i, syms) = interner();
        let ra = build(&i, &syms, &a);
        let twice = ra.intersection(&ra, &i);
        for s in &syms {
            prop_assert_eq!(twice.has(*s, &i), ra.has(*s, &i));
        }
    }

    #[test]
    fn exists_is_the_identity_and_does_not_exist_absorbs(a in arb_requirement()) {
        let (i, syms) = interner();
        let ra = build(&i, &syms, &a);
        let with_exists = ra.intersection(&Requirement::exists(), &i);
        for s in &syms {
            prop_assert_eq!(with_exists.has(*s, &i), ra.has(*s, &i));
        }
        prop_assert!(ra.intersection(&Requirement::does_not_exist(), &i).is_empty());
    }

    #[test]
    fn intersects_agrees_with_the_intersection_for_concrete_sets(a in arb_requirement(), b in arb_requirement()) {
        let (i, syms) = interner();
        let (ra, rb) = (build(&i, &syms, &a), build(&i, &syms, &b));
        let both = ra.intersection(&rb, &i);
        let non_empty = both.complement || !both.values.is_empty();
        prop_assert_eq!(ra.intersects(&rb, &i), non_empty);
    }

    #[test]
    fn compatibility_is_symmetric(a in arb_requirement(), b in arb_requirement()) {
        let (i, syms) = interner();
        let (ra, rb) = (build(&i, &syms, &a), build(&i, &syms, &b));
        prop_assert_eq!(ra.compatible_with(&rb, &i), rb.compatible_with(&ra, &i));
    }
}
