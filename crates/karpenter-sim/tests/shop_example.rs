//! The README's main job: `karpenter simulate -f examples/shop`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::PathBuf;

use karpenter_cloud::Catalog;
use karpenter_sim::{Manifests, PricingOptions, Scenario};

fn shop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/shop")
}

#[test]
fn the_shop_example_schedules_every_expanded_pod_and_costs_more_than_the_lower_bound() {
    let manifests = match Manifests::load_paths(&[shop()]) {
        Ok(m) => m,
        Err(e) => panic!("examples/shop loads: {e}"),
    };
    let catalog = match Catalog::embedded() {
        Ok(c) => c,
        Err(e) => panic!("catalog: {e}"),
    };
    let mut scenario = match Scenario::prepare(&manifests, &catalog, &PricingOptions::default()) {
        Ok(s) => s,
        Err(e) => panic!("prepares: {e}"),
    };
    let expanded: usize = manifests
        .workloads
        .iter()
        .map(|w| w.expand().pods.len())
        .sum();
    let plan = karpenter_sim::plan(&mut scenario);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.pods_on_new_nodes, expanded);
    assert!(expanded > 50);
    assert!(plan.total_per_hour > plan.lower_bound_per_hour);
    assert!(!plan.default_nodepool);
    assert!(plan.nodes.iter().any(|n| n.nodepool == "critical"));
}
