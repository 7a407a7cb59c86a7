use karpenter_scheduling::builders::InstanceTypeBuilder;

use super::*;
use crate::testing::pool_with;

fn reserved_only() -> NodePool {
    let mut pool = pool_with("static", serde_json::json!({}));
    pool.spec.template.spec.requirements = serde_json::from_value(serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
    ]))
    .expect("requirements");
    pool
}

fn it(name: &str, slots: u32) -> InstanceType {
    InstanceTypeBuilder::new(name)
        .resource("cpu", "2")
        .offering("zone-a", "on-demand", 0.1, true)
        .reserved_offering("zone-a", 0.0, &format!("cr-{name}"), slots)
        .build()
}

#[test]
fn reservations_are_full_when_every_offering_the_template_allows_is_a_full_reservation() {
    let catalog = [it("a", 0), it("b", 0)];
    let offered = full_reservations(&catalog, &reserved_only());
    assert_eq!(
        offered,
        Some(BTreeSet::from(["cr-a".to_owned(), "cr-b".to_owned()]))
    );
}

#[test]
fn one_free_slot_or_an_allowed_on_demand_offering_is_room_to_replace_first() {
    assert_eq!(
        full_reservations(&[it("a", 0), it("b", 1)], &reserved_only()),
        None
    );
    let any_capacity = pool_with("static", serde_json::json!({}));
    assert_eq!(full_reservations(&[it("a", 0)], &any_capacity), None);
}

#[test]
fn a_type_the_template_rules_out_does_not_count() {
    let mut pool = reserved_only();
    pool.spec.template.spec.requirements = serde_json::from_value(serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a"]}
    ]))
    .expect("requirements");
    let b = InstanceTypeBuilder::new("b")
        .requirement(
            karpenter_api::labels::INSTANCE_TYPE,
            karpenter_scheduling::Operator::In,
            &["b"],
        )
        .reserved_offering("zone-a", 0.0, "cr-b", 3)
        .build();
    let a = InstanceTypeBuilder::new("a")
        .requirement(
            karpenter_api::labels::INSTANCE_TYPE,
            karpenter_scheduling::Operator::In,
            &["a"],
        )
        .reserved_offering("zone-a", 0.0, "cr-a", 0)
        .build();
    assert_eq!(
        full_reservations(&[a, b], &pool),
        Some(BTreeSet::from(["cr-a".to_owned()])),
        "b's free slots are not the pool's"
    );
}

#[test]
fn a_pool_that_is_not_ready_or_is_deleted_is_not_refilled() {
    let mut pool = reserved_only();
    assert!(refillable(&pool), "no conditions yet counts as Ready");
    pool.status = serde_json::from_value(serde_json::json!({
        "conditions": [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady",
            "message": "", "lastTransitionTime": "2026-11-23T10:00:00Z"}]
    }))
    .expect("status");
    assert!(!refillable(&pool));
    let mut pool = reserved_only();
    pool.metadata = serde_json::from_value(serde_json::json!({
        "name": "static", "deletionTimestamp": "2026-11-23T10:00:00Z"
    }))
    .expect("metadata");
    assert!(!refillable(&pool));
}
