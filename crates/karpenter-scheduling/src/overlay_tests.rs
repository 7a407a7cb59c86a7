use super::*;
use crate::resources::ResourceList;

/// An instance type with on-demand and spot offerings in zones `a` and `b`.
fn it(name: &str, price: f64) -> InstanceType {
    let offering = |zone: &str, capacity_type: &str, price: f64| Offering {
        zone: zone.to_owned(),
        capacity_type: capacity_type.to_owned(),
        price,
        available: true,
        requirements: Vec::new(),
        reservation_capacity: 0,
    };
    InstanceType {
        name: name.to_owned(),
        requirements: vec![
            RequirementSpec::is_in(labels::INSTANCE_TYPE, &[name]),
            RequirementSpec::is_in(labels::ZONE, &["a", "b"]),
            RequirementSpec::is_in(labels::CAPACITY_TYPE, &["on-demand", "spot"]),
        ],
        offerings: vec![
            offering("a", "on-demand", price),
            offering("b", "on-demand", price),
            offering("a", "spot", price / 2.0),
            offering("b", "spot", price / 2.0),
        ],
        capacity: ResourceList::parse([("cpu", "2"), ("memory", "8Gi")]).unwrap_or_default(),
        overhead: Default::default(),
    }
}

fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.to_owned(),
        ..Default::default()
    }
}

fn overlay(name: &str, spec: serde_json::Value) -> NodeOverlay {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn types_of(pools: &[(&str, &[(&str, f64)])]) -> BTreeMap<String, Vec<InstanceType>> {
    pools
        .iter()
        .map(|(p, types)| {
            (
                (*p).to_owned(),
                types.iter().map(|(n, price)| it(n, *price)).collect(),
            )
        })
        .collect()
}

fn prices(types: &BTreeMap<String, Vec<InstanceType>>, pool: &str, it: &str) -> Vec<f64> {
    types[pool]
        .iter()
        .find(|t| t.name == it)
        .map(|t| t.offerings.iter().map(|o| o.price).collect())
        .unwrap_or_default()
}

fn instance_types(names: &[&str]) -> serde_json::Value {
    serde_json::json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": names})
}

fn conflict_with(outcome: &Outcome, name: &str) -> Option<String> {
    match outcome.verdicts.get(name) {
        Some(Verdict::Conflict(c)) => Some(c.with.clone()),
        _ => None,
    }
}

#[test]
fn an_overlay_changes_only_the_offerings_its_requirements_match() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 1.0)])]);
    let o = overlay(
        "cheap-spot",
        serde_json::json!({
            "requirements": [instance_types(&["m5.large"]),
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}],
            "price": "0.1"
        }),
    );
    let outcome = apply(&[o], &[pool("default")], &mut types);
    assert_eq!(prices(&types, "default", "m5.large"), [1.0, 1.0, 0.5, 0.1]);
    assert_eq!(prices(&types, "default", "c5.large"), [1.0, 1.0, 0.5, 0.5]);
    assert_eq!(
        outcome.verdicts["cheap-spot"],
        Verdict::Applied { instance_types: 1 }
    );
    let changed = &outcome.changed[&("default".to_owned(), "m5.large".to_owned())];
    assert_eq!(changed.prices.len(), 1);
    assert_eq!(
        (changed.prices[0].before, changed.prices[0].after),
        (0.5, 0.1)
    );
}

#[test]
fn adjustments_add_an_amount_or_a_percentage_of_the_clouds_price() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 2.0)])]);
    let outcome = apply(
        &[
            overlay(
                "plus",
                serde_json::json!({"requirements": [instance_types(&["m5.large"])], "priceAdjustment": "+0.25"}),
            ),
            overlay(
                "minus",
                serde_json::json!({"requirements": [instance_types(&["c5.large"])], "priceAdjustment": "-10%"}),
            ),
        ],
        &[pool("default")],
        &mut types,
    );
    assert_eq!(
        prices(&types, "default", "m5.large"),
        [1.25, 1.25, 0.75, 0.75]
    );
    let c5 = prices(&types, "default", "c5.large");
    assert!(
        (c5[0] - 1.8).abs() < 1e-9 && (c5[2] - 0.9).abs() < 1e-9,
        "{c5:?}"
    );
    assert!(outcome.verdicts.values().all(Verdict::is_applied));
}

#[test]
fn the_higher_weight_sets_a_shared_offerings_price_and_changes_do_not_stack() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 1.0)])]);
    let outcome = apply(
        &[
            overlay(
                "everything",
                serde_json::json!({"requirements": [], "priceAdjustment": "-50%"}),
            ),
            overlay(
                "m5",
                serde_json::json!({"requirements": [instance_types(&["m5.large"])], "price": "3", "weight": 10}),
            ),
        ],
        &[pool("default")],
        &mut types,
    );
    assert_eq!(prices(&types, "default", "m5.large"), [3.0, 3.0, 3.0, 3.0]);
    assert_eq!(
        prices(&types, "default", "c5.large"),
        [0.5, 0.5, 0.25, 0.25]
    );
    assert_eq!(
        outcome.verdicts["everything"],
        Verdict::Applied { instance_types: 2 }
    );
}

#[test]
fn overlays_of_one_weight_setting_one_price_conflict_even_with_equal_values_and_the_later_name_wins()
 {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 1.0)])]);
    let spec = |names: &[&str]| serde_json::json!({"requirements": [instance_types(names)], "price": "2", "weight": 10});
    let outcome = apply(
        &[
            overlay("overlay-a", spec(&["m5.large", "c5.large"])),
            overlay("overlay-b", spec(&["m5.large"])),
        ],
        &[pool("default")],
        &mut types,
    );
    assert_eq!(
        outcome.verdicts["overlay-b"],
        Verdict::Applied { instance_types: 1 }
    );
    let Some(Verdict::Conflict(conflict)) = outcome.verdicts.get("overlay-a") else {
        panic!("{:?}", outcome.verdicts);
    };
    assert_eq!(conflict.with, "overlay-b");
    assert_eq!(
        conflict.to_string(),
        "conflict with overlay \"overlay-b\" of the same weight 10: both set the price of the on-demand offering in a of instance type m5.large of NodePool default"
    );
    // Applied nowhere, not even on c5.large where nothing else sets the price.
    assert_eq!(prices(&types, "default", "c5.large"), [1.0, 1.0, 0.5, 0.5]);
}

#[test]
fn overlays_of_one_weight_on_different_offerings_or_types_do_not_conflict() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 1.0)])]);
    let outcome = apply(
        &[
            overlay(
                "spot",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}], "price": "0.01"}),
            ),
            overlay(
                "on-demand",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]}], "price": "9"}),
            ),
        ],
        &[pool("default")],
        &mut types,
    );
    assert!(
        outcome.verdicts.values().all(Verdict::is_applied),
        "{:?}",
        outcome.verdicts
    );
    assert_eq!(
        prices(&types, "default", "c5.large"),
        [9.0, 9.0, 0.01, 0.01]
    );
}

#[test]
fn capacity_from_several_overlays_is_merged_and_the_higher_weight_wins_per_resource() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0), ("c5.large", 1.0)])]);
    let outcome = apply(
        &[
            overlay(
                "base",
                serde_json::json!({"requirements": [], "capacity": {"example.com/fuse": 1, "hugepages-2Mi": "100Mi"}}),
            ),
            overlay(
                "m5",
                serde_json::json!({"requirements": [instance_types(&["m5.large"])], "capacity": {"example.com/fuse": 10}, "weight": 5}),
            ),
        ],
        &[pool("default")],
        &mut types,
    );
    assert!(outcome.verdicts.values().all(Verdict::is_applied));
    let m5 = &types["default"][0];
    assert_eq!(
        m5.capacity.get("example.com/fuse"),
        Quantity::from_units(10)
    );
    assert_eq!(m5.capacity.get("hugepages-2Mi").value(), 100 * 1024 * 1024);
    assert_eq!(m5.capacity.get("cpu"), Quantity::from_units(2), "kept");
    let c5 = &types["default"][1];
    assert_eq!(c5.capacity.get("example.com/fuse"), Quantity::from_units(1));
    assert_eq!(
        c5.allocatable().get("example.com/fuse"),
        Quantity::from_units(1)
    );
}

#[test]
fn a_capacity_conflict_is_found_against_every_overlay_of_the_lowest_weight() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0)])]);
    let o = |name: &str, resource: &str| {
        overlay(
            name,
            serde_json::json!({"requirements": [], "capacity": {resource: 1}, "weight": 3}),
        )
    };
    // Taken c, b, a: a adds the resource c added (upstream only compares with b).
    let outcome = apply(
        &[
            o("a", "example.com/fuse"),
            o("b", "hugepages-2Mi"),
            o("c", "example.com/fuse"),
        ],
        &[pool("default")],
        &mut types,
    );
    assert_eq!(conflict_with(&outcome, "a").as_deref(), Some("c"));
    assert!(outcome.verdicts["b"].is_applied());
    assert!(outcome.verdicts["c"].is_applied());
}

#[test]
fn an_invalid_overlay_is_applied_nowhere_and_says_why() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0)])]);
    let outcome = apply(
        &[overlay(
            "memory",
            serde_json::json!({"requirements": [], "capacity": {"memory": "1Gi", "example.com/fuse": 1}, "price": "1"}),
        )],
        &[pool("default")],
        &mut types,
    );
    let Some(Verdict::Invalid(errors)) = outcome.verdicts.get("memory") else {
        panic!("{:?}", outcome.verdicts);
    };
    assert!(errors[0].contains("spec.capacity[memory]"), "{errors:?}");
    assert_eq!(prices(&types, "default", "m5.large"), [1.0, 1.0, 0.5, 0.5]);
    assert!(outcome.changed.is_empty());
}

#[test]
fn an_overlay_matches_by_nodepool_name_and_template_labels() {
    let mut types = types_of(&[
        ("default", &[("m5.large", 1.0)]),
        ("gpu", &[("m5.large", 1.0)]),
    ]);
    let mut gpu = pool("gpu");
    gpu.labels.insert("team".to_owned(), "ml".to_owned());
    let outcome = apply(
        &[
            overlay(
                "by-pool",
                serde_json::json!({"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}], "price": "2"}),
            ),
            overlay(
                "by-label",
                serde_json::json!({"requirements": [{"key": "team", "operator": "In", "values": ["ml"]}], "price": "3"}),
            ),
        ],
        &[pool("default"), gpu],
        &mut types,
    );
    assert_eq!(prices(&types, "default", "m5.large"), [2.0; 4]);
    assert_eq!(prices(&types, "gpu", "m5.large"), [3.0; 4]);
    assert!(outcome.verdicts.values().all(Verdict::is_applied));
}

#[test]
fn a_key_the_instance_type_does_not_define_matches_nothing_unless_it_asks_for_absence() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0)])]);
    let outcome = apply(
        &[
            overlay(
                "needs-team",
                serde_json::json!({"requirements": [{"key": "team", "operator": "Exists"}], "price": "7"}),
            ),
            overlay(
                "no-gpu",
                serde_json::json!({"requirements": [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}], "capacity": {"example.com/fuse": 2}}),
            ),
        ],
        &[pool("default")],
        &mut types,
    );
    assert_eq!(
        outcome.verdicts["needs-team"],
        Verdict::Applied { instance_types: 0 }
    );
    assert_eq!(prices(&types, "default", "m5.large"), [1.0, 1.0, 0.5, 0.5]);
    assert_eq!(
        types["default"][0].capacity.get("example.com/fuse"),
        Quantity::from_units(2)
    );
}

#[test]
fn no_overlays_change_nothing() {
    let mut types = types_of(&[("default", &[("m5.large", 1.0)])]);
    let before = types.clone();
    let outcome = apply(&[], &[pool("default")], &mut types);
    assert_eq!(types, before);
    assert_eq!(outcome, Outcome::default());
}
