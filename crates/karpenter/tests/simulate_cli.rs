//! `karpenter simulate` through the built binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::PathBuf;

mod common;

use common::{karpenter, repo_root, stderr, stdout};

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simulate-cli-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("temp dir: {e}");
    }
    let path = dir.join(name);
    if let Err(e) = std::fs::write(&path, text) {
        panic!("writing {}: {e}", path.display());
    }
    path
}

#[test]
fn simulating_the_shop_example_prints_a_table_with_costs_and_the_lower_bound() {
    let output = karpenter(&["simulate", "-f", "examples/shop"], None);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in [
        "NODEPOOL",
        "INSTANCE TYPE",
        "$/HOUR",
        "Total:",
        "/month",
        "Lower bound:",
        "spot price is an estimate",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("Unschedulable"), "{text}");
}

#[test]
fn json_and_yaml_output_carry_the_same_plan() {
    let json = karpenter(&["simulate", "-f", "examples/shop", "-o", "json"], None);
    assert!(json.status.success(), "{}", stderr(&json));
    let json: serde_json::Value = match serde_json::from_slice(&json.stdout) {
        Ok(v) => v,
        Err(e) => panic!("json: {e}"),
    };
    let yaml = karpenter(&["simulate", "-f", "examples/shop", "-o", "yaml"], None);
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    let yaml: serde_json::Value = match serde_saphyr::from_str(&stdout(&yaml)) {
        Ok(v) => v,
        Err(e) => panic!("yaml: {e}"),
    };
    for key in [
        "nodes",
        "unschedulable",
        "total_per_hour",
        "lower_bound_per_hour",
    ] {
        assert!(json.get(key).is_some(), "json lacks {key}");
    }
    assert_eq!(json["nodes"], yaml["nodes"]);
    assert_eq!(
        json["total_per_hour"].as_f64(),
        yaml["total_per_hour"].as_f64()
    );
}

#[test]
fn compare_nodegroup_adds_the_fixed_node_group_size_and_cost() {
    let output = karpenter(
        &[
            "simulate",
            "-f",
            "examples/shop",
            "--compare-nodegroup",
            "m5.xlarge",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Fixed node group of m5.xlarge:"),
        "{}",
        stdout(&output)
    );
    let unknown = karpenter(
        &[
            "simulate",
            "-f",
            "examples/shop",
            "--compare-nodegroup",
            "m5.enormous",
        ],
        None,
    );
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("m5.enormous"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn an_invalid_nodepool_fails_with_file_object_and_field() {
    let path = temp_file(
        "bad-nodepool.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n        - {key: karpenter.sh/capacity-type, operator: In, values: []}\n",
    );
    let output = karpenter(&["simulate", "-f", &path.display().to_string()], None);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(
            "bad-nodepool.yaml:9:67: NodePool/broken: spec.template.spec.requirements[0].values"
        ),
        "{err}"
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn malformed_yaml_fails_with_line_and_column() {
    let path = temp_file("malformed.yaml", "kind: Pod\nmetadata: {name: [x\n");
    let output = karpenter(&["simulate", "-f", &path.display().to_string()], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("malformed.yaml:2:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn every_manifest_in_examples_passes_validate() {
    let mut files: Vec<String> = Vec::new();
    for dir in ["examples/shop"] {
        let entries = match std::fs::read_dir(repo_root().join(dir)) {
            Ok(entries) => entries,
            Err(e) => panic!("{dir}: {e}"),
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    let mut args = vec!["validate"];
    for file in &files {
        args.extend(["-f", file.as_str()]);
    }
    let output = karpenter(&args, None);
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stderr(&output).contains(" 0 invalid"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_timeline_reports_cost_over_time_churn_and_pending_percentiles() {
    let html = std::env::temp_dir().join(format!("simulate-report-{}.html", std::process::id()));
    let html_arg = html.display().to_string();
    let output = karpenter(
        &[
            "simulate",
            "-f",
            "examples/shop",
            "--timeline",
            "examples/shop/timeline.yaml",
            "--report",
            &html_arg,
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in [
        "Timeline of 24:00:00",
        "Cost over time:",
        "spot interruption",
        "Pending time: p50",
        "disruption: ",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    assert!(page.contains("<svg"), "report written");
}

#[test]
fn fail_on_unschedulable_exits_1_only_when_a_pod_cannot_be_placed() {
    let path = temp_file(
        "huge.yaml",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "4000"}}}]
"#,
    );
    let path = path.display().to_string();
    let plain = karpenter(&["simulate", "-f", &path], None);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    assert!(
        stdout(&plain).contains("default/huge"),
        "{}",
        stdout(&plain)
    );
    let strict = karpenter(&["simulate", "-f", &path, "--fail-on-unschedulable"], None);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    assert!(
        stderr(&strict).contains("1 pod(s) cannot be scheduled"),
        "{}",
        stderr(&strict)
    );
    let shop = karpenter(
        &["simulate", "-f", "examples/shop", "--fail-on-unschedulable"],
        None,
    );
    assert_eq!(shop.status.code(), Some(0), "{}", stderr(&shop));
}

#[test]
fn the_lower_bound_line_says_so_when_no_pod_is_placed() {
    let path = temp_file(
        "unplaceable.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: giant}\nspec:\n  containers:\n    - name: a\n      resources: {requests: {cpu: \"100000\"}}\n",
    );
    let output = karpenter(&["simulate", "-f", &path.display().to_string()], None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.contains("Lower bound: $0.0000/hour (no pod is placed on a new node)"),
        "{text}"
    );
    assert!(!text.contains("x ,"), "{text}");
}

#[test]
fn the_spread_hostname_zone_example_prints_the_batch_of_each_node_and_the_batch_count() {
    let output = karpenter(
        &[
            "simulate",
            "-f",
            "crates/karpenter-sim/tests/fixtures/spread-hostname-zone.yaml",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("BATCH  NODEPOOL"), "{text}");
    assert!(
        text.contains("Total: 25 node(s) in 4 batches, 50 pod(s) on new nodes"),
        "{text}"
    );
    assert!(!text.contains("exceed limits"), "{text}");
    assert!(!text.contains("Unschedulable"), "{text}");
}

#[test]
fn no_zone_pinning_places_a_zone_anti_affinity_group_one_pod_per_batch() {
    let path = temp_file(
        "zonal.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: zonal}
spec:
  replicas: 3
  selector: {matchLabels: {app: zonal}}
  template:
    metadata: {labels: {app: zonal}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: zonal}}
              topologyKey: topology.kubernetes.io/zone
"#,
    );
    let path = path.display().to_string();
    let pinned = stdout(&karpenter(&["simulate", "-f", &path], None));
    assert!(pinned.contains("3 node(s) in 1 batch,"), "{pinned}");
    let unpinned = karpenter(&["simulate", "-f", &path, "--no-zone-pinning"], None);
    assert!(unpinned.status.success(), "{}", stderr(&unpinned));
    let unpinned = stdout(&unpinned);
    assert!(unpinned.contains("3 node(s) in 3 batches,"), "{unpinned}");
    assert!(unpinned.contains("Zone pinning off"), "{unpinned}");
}
