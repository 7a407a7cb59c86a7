//! Timeline mode: provisioning over virtual time, interruptions, cost and pending times.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_cloud::Catalog;
use karpenter_sim::timeline::{TimelineReport, parse, run};
use karpenter_sim::{Manifests, PricingOptions, Scenario};

const M5_LARGE_IN_1A: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: m5}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
"#;

fn deployment(replicas: u32) -> String {
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
          resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"#
    )
}

fn simulate(manifests: &str, timeline: &str) -> TimelineReport {
    let manifests = match Manifests::load_text("test.yaml", manifests) {
        Ok(m) => m,
        Err(e) => panic!("loads: {e}"),
    };
    let catalog = match Catalog::embedded() {
        Ok(c) => c,
        Err(e) => panic!("catalog: {e}"),
    };
    let scenario = match Scenario::prepare(&manifests, &catalog, &PricingOptions::default()) {
        Ok(s) => s,
        Err(e) => panic!("prepares: {e}"),
    };
    let timeline = match parse("timeline.yaml", timeline) {
        Ok(t) => t,
        Err(e) => panic!("timeline: {e}"),
    };
    match run(&manifests, &catalog, scenario, &timeline, |_, _| {}) {
        Ok(report) => report,
        Err(e) => panic!("runs: {e}"),
    }
}

#[test]
fn pods_created_at_the_start_wait_for_the_batch_window_and_node_startup() {
    let report = simulate(
        &format!("{M5_LARGE_IN_1A}---{}", deployment(2)),
        "duration: 1h\nevents: []\n",
    );
    // One pod per m5.large (1 CPU each, 1930m allocatable): two nodes at t=1s.
    assert_eq!(report.launches, 2);
    assert_eq!(report.pods_started, 2);
    assert_eq!(report.pending_seconds.max, 61.0);
    // Two m5.large from 1s to 1h, on spot (cheapest; estimated at 0.096 x 0.4).
    let expected = 2.0 * 0.0384 * 3599.0 / 3600.0;
    assert!(
        (report.total_cost - expected).abs() < 1e-6,
        "{}",
        report.total_cost
    );
}

#[test]
fn scaling_up_launches_nodes_and_scaling_down_removes_pods() {
    let report = simulate(
        &format!("{M5_LARGE_IN_1A}---{}", deployment(1)),
        "duration: 2h\nevents:\n  - at: 10m\n    scale: {workload: Deployment/web, replicas: 3}\n  - at: 1h\n    scale: {workload: Deployment/web, replicas: 1}\n",
    );
    assert_eq!(report.launches, 3);
    assert_eq!(report.peak_nodes, 3);
    let last = report.samples.last().map(|s| s.pods_running);
    assert_eq!(last, Some(1));
    assert!(
        report
            .log
            .iter()
            .any(|l| l.starts_with("00:10:00 scale default/Deployment/web: 1 -> 3")),
        "{:?}",
        report.log
    );
}

#[test]
fn a_spot_interruption_makes_the_pods_pending_again_and_counts_evictions() {
    let spot = M5_LARGE_IN_1A.replace("metadata: {name: m5}", "metadata: {name: spot}");
    let report = simulate(
        &format!("{spot}---{}", deployment(1)),
        "duration: 1h\nevents:\n  - at: 30m\n    interruptSpot: {}\n",
    );
    assert_eq!(report.interruptions, 1);
    assert_eq!(report.evictions, 1);
    assert_eq!(report.launches, 2);
    assert_eq!(report.pods_still_pending, 0);
    assert_eq!(report.pods_started, 2);
}

#[test]
fn a_nodepool_change_applies_to_later_launches() {
    let report = simulate(
        &format!("{M5_LARGE_IN_1A}---{}", deployment(1)),
        &format!(
            "duration: 1h\nevents:\n  - at: 5m\n    nodePool: {}\n  - at: 10m\n    scale: {{workload: Deployment/web, replicas: 2}}\n",
            serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "m5"},
                "spec": {"template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}]
                }}}
            })
        ),
    );
    assert!(
        report.log.iter().any(|l| l.contains("NodePool m5 applied")),
        "{:?}",
        report.log
    );
    assert!(
        report.log.iter().any(|l| l.contains("c5.large")),
        "{:?}",
        report.log
    );
}

#[test]
fn after_a_scale_down_disruption_removes_the_nodes_left_empty() {
    let report = simulate(
        &format!("{M5_LARGE_IN_1A}---{}", deployment(3)),
        "duration: 2h\nevents:\n  - at: 1h\n    scale: {workload: Deployment/web, replicas: 1}\n",
    );
    assert_eq!(report.launches, 3);
    assert_eq!(report.disruptions, 2, "{:?}", report.log);
    let last = report.samples.last().map(|s| (s.nodes, s.pods_running));
    assert_eq!(last, Some((1, 1)));
    assert!(
        report
            .log
            .iter()
            .any(|l| l.contains("disruption: Emptiness")),
        "{:?}",
        report.log
    );
}

const M5_LARGE_OR_XLARGE_IN_1A: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: m5}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

/// The seconds of a `HH:MM:SS ...` log line.
fn at_seconds(line: &str) -> u64 {
    let parts: Vec<u64> = line
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .split(':')
        .filter_map(|p| p.parse().ok())
        .collect();
    match parts.as_slice() {
        [h, m, s] => h * 3600 + m * 60 + s,
        _ => panic!("no time in log line {line:?}"),
    }
}

#[test]
fn a_replaced_node_is_deleted_only_once_its_replacement_is_ready() {
    let report = simulate(
        &format!("{M5_LARGE_OR_XLARGE_IN_1A}---{}", deployment(3)),
        "duration: 2h\nevents:\n  - at: 1h\n    scale: {workload: Deployment/web, replicas: 1}\n",
    );
    let line = |needle: &str| -> String {
        match report.log.iter().find(|l| l.contains(needle)) {
            Some(l) => l.clone(),
            None => panic!("no log line with {needle:?}: {:#?}", report.log),
        }
    };
    let started = line("disruption: SingleNodeConsolidation started on");
    assert!(started.contains("launched m5.large"), "{started}");
    let removed = line("disruption: SingleNodeConsolidation removed");
    assert_eq!(
        at_seconds(&removed) - at_seconds(&started),
        karpenter_sim::timeline::NODE_STARTUP.as_secs(),
        "{:#?}",
        report.log
    );
    // While the replacement starts, the candidate and the replacement both run.
    let both = report.samples.iter().any(|s| {
        s.at_seconds >= at_seconds(&started) && s.at_seconds < at_seconds(&removed) && s.nodes == 2
    });
    assert!(both, "{:#?}", report.samples);
    assert_eq!(report.disruptions, 1, "{:#?}", report.log);
    assert_eq!(report.evictions, 1, "{:#?}", report.log);
    let last = report.samples.last().map(|s| (s.nodes, s.pods_running));
    assert_eq!(last, Some((1, 1)));
}
