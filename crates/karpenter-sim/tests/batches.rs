//! Provisioning in batches, as the controller does: pods a batch cannot place are solved again
//! in the next one, over the NodeClaims launched so far (in their one zone, counting their real
//! size against limits), in plan mode and in timeline mode; zone pinning places a zone-level
//! anti-affinity group in one batch.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeSet;

use karpenter_cloud::Catalog;
use karpenter_sim::timeline::{TimelineReport, parse, run};
use karpenter_sim::{Manifests, Plan, PricingOptions, Scenario};

fn scenario(text: &str) -> (Manifests, Catalog, Scenario) {
    let manifests = match Manifests::load_text("test.yaml", text) {
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
    (manifests, catalog, scenario)
}

fn plan_for(text: &str, pinning: bool) -> Plan {
    let (_, _, mut scenario) = scenario(text);
    scenario.solve_options.pin_anti_affinity_domains = pinning;
    karpenter_sim::plan(&mut scenario)
}

fn timeline_for(text: &str, timeline: &str) -> TimelineReport {
    let (manifests, catalog, scenario) = scenario(text);
    let timeline = match parse("timeline.yaml", timeline) {
        Ok(t) => t,
        Err(e) => panic!("timeline: {e}"),
    };
    match run(&manifests, &catalog, scenario, &timeline, |_, _| {}) {
        Ok(report) => report,
        Err(e) => panic!("runs: {e}"),
    }
}

const SPREAD_HOSTNAME_ZONE: &str = include_str!("fixtures/spread-hostname-zone.yaml");

/// A Deployment of `replicas` pods, each `cpu`, with required anti-affinity to each other over
/// `key`.
fn anti_affinity(replicas: u32, cpu: &str, key: &str) -> String {
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
          resources: {{requests: {{cpu: "{cpu}", memory: 512Mi}}}}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {{matchLabels: {{app: web}}}}
              topologyKey: {key}
"#
    )
}

/// An on-demand m5 NodePool in us-east-1a with these limits and instance types.
fn m5_pool(limits: &str, types: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: m5}}
spec:
  limits: {limits}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [{types}]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}}
---
"#
    )
}

fn cpus(instance_type: &str) -> u32 {
    match instance_type {
        "m5.large" => 2,
        "m5.xlarge" => 4,
        "m5.2xlarge" => 8,
        other => panic!("unexpected instance type {other}"),
    }
}

fn provisioning_lines(report: &TimelineReport) -> usize {
    report
        .log
        .iter()
        .filter(|l| l.contains("provisioning:"))
        .count()
}

#[test]
fn upstreams_spread_hostname_zone_example_places_all_50_pods_over_several_batches() {
    let plan = plan_for(SPREAD_HOSTNAME_ZONE, true);
    assert_eq!(plan.pods_on_new_nodes, 50);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    // One batch places 14 pods (each NodeClaim counts its largest possible type against
    // limits.cpu 1000); the next batches count the launched nodes by their real size.
    assert_eq!(plan.batches, 4);
    let first: Vec<&karpenter_sim::PlannedNode> =
        plan.nodes.iter().filter(|n| n.batch == 1).collect();
    assert_eq!(first.iter().map(|n| n.pods).sum::<usize>(), 14);
    assert!(plan.nodes.iter().all(|n| (1..=4).contains(&n.batch)));
    // Launch order is batch order.
    assert!(plan.nodes.windows(2).all(|w| w[0].batch <= w[1].batch));
    // Hostname spread (maxSkew 2) holds across batches: at most 2 pods per node.
    assert!(plan.nodes.iter().all(|n| n.pods <= 2));
    let table = karpenter_sim::render::plan_table(&plan);
    assert!(table.contains("BATCH"), "{table}");
    assert!(table.contains("in 4 batches"), "{table}");
    assert!(!table.contains("exceed limits"), "{table}");
}

#[test]
fn a_zone_anti_affinity_group_is_placed_in_one_batch_when_pinned_and_in_one_batch_per_pod_without()
{
    let text = anti_affinity(3, "500m", "topology.kubernetes.io/zone");
    let pinned = plan_for(&text, true);
    assert_eq!(pinned.pods_on_new_nodes, 3);
    assert!(pinned.unschedulable.is_empty());
    assert_eq!(pinned.batches, 1);
    let zones: BTreeSet<&str> = pinned.nodes.iter().map(|n| n.zone.as_str()).collect();
    assert_eq!(zones.len(), 3, "{zones:?}");
    assert!(pinned.zone_pinning);

    let unpinned = plan_for(&text, false);
    assert_eq!(unpinned.pods_on_new_nodes, 3);
    assert!(unpinned.unschedulable.is_empty());
    assert_eq!(unpinned.batches, 3);
    let batches: Vec<usize> = unpinned.nodes.iter().map(|n| n.batch).collect();
    assert_eq!(batches, [1, 2, 3]);
    let zones: BTreeSet<&str> = unpinned.nodes.iter().map(|n| n.zone.as_str()).collect();
    assert_eq!(zones.len(), 3, "{zones:?}");
    let table = karpenter_sim::render::plan_table(&unpinned);
    assert!(table.contains("Zone pinning off"), "{table}");
}

#[test]
fn pods_beyond_the_zones_of_a_zone_anti_affinity_group_are_unschedulable_after_the_last_batch() {
    for pinning in [true, false] {
        let plan = plan_for(
            &anti_affinity(5, "500m", "topology.kubernetes.io/zone"),
            pinning,
        );
        assert_eq!(plan.pods_on_new_nodes, 3, "pinning {pinning}");
        assert_eq!(plan.unschedulable.len(), 2, "pinning {pinning}");
        for pod in &plan.unschedulable {
            assert!(
                pod.reasons.iter().any(|r| r.contains("pod anti-affinity")),
                "{pod:?}"
            );
        }
    }
}

#[test]
fn a_nodes_limit_of_n_launches_exactly_n_nodes_and_reports_the_rest_with_the_limit_reason() {
    let text = format!(
        "{}{}",
        m5_pool("{nodes: \"3\"}", "m5.large"),
        anti_affinity(5, "1", "kubernetes.io/hostname")
    );
    let plan = plan_for(&text, true);
    assert_eq!(plan.nodes.len(), 3);
    assert_eq!(plan.unschedulable.len(), 2);
    for pod in &plan.unschedulable {
        assert!(
            pod.reasons.iter().any(|r| r.contains("nodes limit")),
            "{pod:?}"
        );
    }
}

#[test]
fn a_cpu_limit_counts_launched_nodes_by_their_real_size_so_a_later_batch_fills_it_exactly() {
    // limits.cpu 6; m5.large (2 CPU) is what launches, m5.xlarge (4) is the worst case a
    // NodeClaim could become. Batch 1 counts 4 + 2 and places two pods; batch 2 counts the two
    // m5.large as 4 and places a third; then the limit is reached.
    let text = format!(
        "{}{}",
        m5_pool("{cpu: \"6\"}", "m5.large, m5.xlarge"),
        anti_affinity(5, "1", "kubernetes.io/hostname")
    );
    let plan = plan_for(&text, true);
    let batches: Vec<usize> = plan.nodes.iter().map(|n| n.batch).collect();
    assert_eq!(batches, [1, 1, 2]);
    assert_eq!(plan.batches, 2);
    let launched: u32 = plan.nodes.iter().map(|n| cpus(&n.instance_type)).sum();
    assert_eq!(launched, 6);
    assert_eq!(plan.unschedulable.len(), 2);
    for pod in &plan.unschedulable {
        assert!(
            pod.reasons.iter().any(|r| r.contains("exceed limits")),
            "{pod:?}"
        );
    }
}

#[test]
fn the_timeline_retries_pending_pods_in_new_batches_until_every_pod_of_the_spread_example_runs() {
    let report = timeline_for(SPREAD_HOSTNAME_ZONE, "duration: 10m\nevents: []\n");
    assert_eq!(report.pods_still_pending, 0);
    assert_eq!(report.pods_started, 50);
    assert_eq!(report.launches, 25);
    // One batch a second after the previous one while pods are left: 1 s, 2 s, 3 s, 4 s.
    assert_eq!(provisioning_lines(&report), 4);
    assert!(
        report.log[3].starts_with("00:00:04 provisioning"),
        "{:?}",
        report.log
    );
    assert_eq!(report.pending_seconds.max, 64.0);
}

#[test]
fn the_timeline_stops_retrying_when_a_batch_places_nothing_and_retries_once_the_cluster_changes() {
    let pool = m5_pool("{nodes: \"2\"}", "m5.large");
    let raised = pool
        .replace("{nodes: \"2\"}", "{nodes: \"4\"}")
        .replace("---", "");
    let timeline = format!(
        "duration: 10m\nevents:\n  - at: 5m\n    nodePool:\n{}\n",
        raised
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("      {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let report = timeline_for(
        &format!("{pool}{}", anti_affinity(4, "1", "kubernetes.io/hostname")),
        &timeline,
    );
    // 1 s: two nodes; 2 s: the retry places nothing (nodes limit); no retry until the
    // NodePool changes at 5 min, whose batch places the last two pods.
    assert_eq!(provisioning_lines(&report), 3, "{:?}", report.log);
    assert_eq!(report.launches, 4);
    assert_eq!(report.pods_still_pending, 0);
    assert!(
        report
            .log
            .iter()
            .any(|l| l.starts_with("00:05:01 provisioning")),
        "{:?}",
        report.log
    );
}

#[test]
fn scale_events_that_together_pass_the_pod_ceiling_are_refused_before_the_run_naming_the_event() {
    let deployment = |name: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]}}\n"
        )
    };
    let (manifests, catalog, scenario) =
        scenario(&format!("{}---\n{}", deployment("a"), deployment("b")));
    let timeline = match parse(
        "timeline.yaml",
        "duration: 1h\nevents:\n  - at: 1m\n    scale: {workload: Deployment/a, replicas: 150000}\n  - at: 2m\n    scale: {workload: Deployment/a, replicas: 10}\n  - at: 3m\n    scale: {workload: Deployment/b, replicas: 150000}\n  - at: 4m\n    scale: {workload: Deployment/a, replicas: 150000}\n",
    ) {
        Ok(t) => t,
        Err(e) => panic!("timeline: {e}"),
    };
    // Each event alone is under the ceiling; together, the fourth passes it.
    let error = match run(&manifests, &catalog, scenario, &timeline, |_, _| {}) {
        Ok(_) => panic!("a timeline running 300,000 pods at once is refused"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("events[3]"), "{error}");
    assert!(error.contains("Deployment/a"), "{error}");
    assert!(error.contains("300000 pods together"), "{error}");
}
