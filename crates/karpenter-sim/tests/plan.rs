//! Plans: the default NodePool, the cheapest offering per node, spot estimates, the lower bound
//! and the output formats.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_cloud::Catalog;
use karpenter_sim::{Manifests, Plan, PricingOptions, Scenario};

fn plan_for(text: &str) -> Plan {
    plan_with(text, &PricingOptions::default())
}

fn plan_with(text: &str, pricing: &PricingOptions) -> Plan {
    let manifests = match Manifests::load_text("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("loads: {e}"),
    };
    let catalog = match Catalog::embedded() {
        Ok(c) => c,
        Err(e) => panic!("catalog: {e}"),
    };
    match Scenario::prepare(&manifests, &catalog, pricing) {
        Ok(mut scenario) => karpenter_sim::plan(&mut scenario),
        Err(e) => panic!("prepares: {e}"),
    }
}

fn deployment(replicas: u32, cpu: &str, memory: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: web
          resources: {{requests: {{cpu: "{cpu}", memory: "{memory}"}}}}
"#
    )
}

const ON_DEMAND_M5: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: od}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}
"#;

#[test]
fn without_nodepools_the_default_nodepool_places_every_pod_on_spot_marked_as_an_estimate() {
    let plan = plan_for(&deployment(4, "1", "2Gi"));
    assert!(plan.default_nodepool);
    assert_eq!(plan.nodepools, ["default"]);
    assert_eq!(plan.pods_on_new_nodes, 4);
    assert!(plan.unschedulable.is_empty());
    assert!(
        plan.nodes
            .iter()
            .all(|n| n.capacity_type == "spot" && n.price_is_estimate)
    );
    assert!(plan.total_includes_estimates);
    for node in &plan.nodes {
        assert!(
            ["c", "m", "r"]
                .iter()
                .any(|c| node.instance_type.starts_with(c))
        );
    }
}

#[test]
fn each_node_is_launched_with_its_cheapest_allowed_offering() {
    let plan = plan_for(&format!("{ON_DEMAND_M5}---{}", deployment(1, "1", "1Gi")));
    assert_eq!(plan.nodes.len(), 1);
    let node = &plan.nodes[0];
    assert_eq!(
        (
            node.instance_type.as_str(),
            node.capacity_type.as_str(),
            node.zone.as_str()
        ),
        ("m5.large", "on-demand", "us-east-1b")
    );
    assert_eq!(node.price_per_hour, 0.096);
    assert!(!node.price_is_estimate);
    assert!(!plan.total_includes_estimates);
    assert_eq!(plan.total_per_month, 0.096 * 730.0);
}

#[test]
fn the_spot_discount_sets_the_estimated_spot_price() {
    let pricing = PricingOptions {
        spot_discount: 0.5,
        ..PricingOptions::default()
    };
    let pool = ON_DEMAND_M5.replace("values: [on-demand]", "values: [spot]");
    let plan = plan_with(&format!("{pool}---{}", deployment(1, "1", "1Gi")), &pricing);
    assert_eq!(plan.nodes[0].price_per_hour, 0.048);
    assert!(plan.nodes[0].price_is_estimate);
}

#[test]
fn utilisation_counts_requests_over_allocatable() {
    // m5.large allocatable: 1930m CPU; a 1-CPU pod uses 52%.
    let plan = plan_for(&format!("{ON_DEMAND_M5}---{}", deployment(1, "1", "1Gi")));
    assert_eq!(plan.nodes[0].cpu_utilisation, 0.518);
}

#[test]
fn the_lower_bound_never_exceeds_the_plan_and_the_ratio_is_their_quotient() {
    let plan = plan_for(&deployment(10, "1500m", "3Gi"));
    assert!(plan.lower_bound_per_hour > 0.0);
    assert!(plan.total_per_hour >= plan.lower_bound_per_hour);
    let Some(ratio) = plan.ratio_to_lower_bound else {
        panic!("a ratio")
    };
    assert!((ratio - plan.total_per_hour / plan.lower_bound_per_hour).abs() < 0.001);
    assert_eq!(plan.lower_bound.cpu_requests, 15.0);
}

#[test]
fn pods_no_nodepool_can_run_are_unschedulable_with_a_reason_per_nodepool() {
    let plan = plan_for(&format!("{ON_DEMAND_M5}---{}", deployment(1, "64", "1Gi")));
    assert!(plan.nodes.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);
    assert_eq!(plan.unschedulable[0].pod, "default/web-0");
    assert!(
        plan.unschedulable[0]
            .reasons
            .iter()
            .any(|r| r.contains("od: no instance type")),
        "{:?}",
        plan.unschedulable
    );
    // Nothing to launch costs zero, not "-0" (an empty float sum is -0.0).
    assert!(
        plan.total_per_hour.is_sign_positive(),
        "{}",
        plan.total_per_hour
    );
    let table = karpenter_sim::render::plan_table(&plan);
    assert!(table.contains("$0.0000/hour, $0.00/month"), "{table}");
    assert!(!table.contains("$-"), "{table}");
}

#[test]
fn json_and_yaml_carry_the_same_data_with_the_documented_keys() {
    let plan = plan_for(&deployment(3, "1", "2Gi"));
    let json: serde_json::Value =
        match serde_json::to_string(&plan).map(|s| serde_json::from_str(&s)) {
            Ok(Ok(v)) => v,
            other => panic!("json: {other:?}"),
        };
    let yaml = match karpenter_api::yaml::to_yaml(&plan) {
        Ok(y) => y,
        Err(e) => panic!("yaml: {e}"),
    };
    let from_yaml = match karpenter_api::yaml::parse_documents(&yaml) {
        Ok(docs) => docs.into_iter().next().unwrap_or_default(),
        Err(e) => panic!("yaml parses: {e:?}"),
    };
    for key in [
        "nodes",
        "unschedulable",
        "total_per_hour",
        "lower_bound_per_hour",
    ] {
        assert!(json.get(key).is_some(), "json has {key}");
        assert!(from_yaml.get(key).is_some(), "yaml has {key}");
    }
    for key in [
        "nodepool",
        "instance_type",
        "capacity_type",
        "zone",
        "pods",
        "price_per_hour",
    ] {
        assert!(json["nodes"][0].get(key).is_some(), "json node has {key}");
    }
    assert_eq!(json["nodes"], from_yaml["nodes"]);
    assert_eq!(
        json["total_per_hour"].as_f64(),
        from_yaml["total_per_hour"].as_f64()
    );
}

#[test]
fn pending_pods_go_to_existing_nodes_with_room_before_new_nodes_are_launched() {
    let node = r#"
apiVersion: v1
kind: Node
metadata:
  name: old-node
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    topology.kubernetes.io/zone: us-east-1a
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: 3900m, memory: 15Gi, pods: "110"}
"#;
    let plan = plan_for(&format!("{node}---{}", deployment(2, "1", "1Gi")));
    assert_eq!(plan.pods_on_existing_nodes, 2);
    assert!(plan.nodes.is_empty());
    assert_eq!(plan.total_per_hour, 0.0);
}
