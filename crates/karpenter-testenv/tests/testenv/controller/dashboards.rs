//! Upstream's Grafana dashboards (Capacity, Performance) work against karpenter-rs: every metric
//! their queries read is exported by a running controller, carrying every label they use.
//!
//! The queries are data, `charts/karpenter/dashboards/upstream-queries.json` (written down from
//! upstream's published dashboards, with the metrics and labels each one uses). The test drives a
//! scale-out and a consolidation so that every metric has samples, scrapes the controller's
//! `/metrics` and checks, per metric, that it is exported (counters as `_total`, a histogram read
//! as `_bucket` with `le`, a summary with `quantile`), that some sample carries each label with a
//! value, and that metrics a query combines with `+`/`/` (one-to-one matching) carry the same
//! label names. What the file marks as not Karpenter's (labels Prometheus adds, node-exporter's
//! metrics) or as not exported by upstream either is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::Value;

use super::{only, start};

/// The data file, relative to the repository.
const QUERIES: &str = "charts/karpenter/dashboards/upstream-queries.json";

fn queries() -> Value {
    let path = karpenter_testenv::paths::repo_root().join(QUERIES);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// What the dashboards need from the exporter.
#[derive(Debug, Default)]
struct Required {
    /// Metric (as exposed: `_total`, `_bucket`, ...) -> labels some sample must carry.
    labels: BTreeMap<String, BTreeSet<String>>,
    /// Metrics combined one-to-one by a query: their label names must be equal.
    same_label_names: BTreeSet<Vec<String>>,
}

/// Every metric and label the data file's queries use, less what it marks as not Karpenter's,
/// not exported by upstream either, or needing the AWS provider.
fn required(data: &Value) -> Required {
    let not_ours: BTreeSet<&String> = data["labels_not_from_karpenter"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    let mut foreign: BTreeSet<String> = data["metrics_not_from_karpenter"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    foreign.extend(
        array(&data["needs_the_aws_provider"])
            .iter()
            .filter_map(|e| e["metric"].as_str().map(str::to_owned)),
    );
    let upstream_lacks: BTreeSet<(String, String)> =
        array(&data["labels_upstream_does_not_export"])
            .iter()
            .filter_map(|e| {
                Some((
                    e["metric"].as_str()?.to_owned(),
                    e["label"].as_str()?.to_owned(),
                ))
            })
            .collect();
    let mut out = Required::default();
    let mut add = |uses: &Value| {
        for (metric, labels) in uses.as_object().into_iter().flatten() {
            if foreign.contains(metric) {
                continue;
            }
            let wanted = out.labels.entry(metric.clone()).or_default();
            for label in strings(labels) {
                if !not_ours.contains(&label)
                    && !upstream_lacks.contains(&(metric.clone(), label.clone()))
                {
                    wanted.insert(label);
                }
            }
        }
    };
    for dashboard in array(&data["dashboards"]) {
        for variable in array(&dashboard["variables"]) {
            add(&variable["uses"]);
        }
        for panel in array(&dashboard["panels"]) {
            for query in array(&panel["queries"]) {
                add(&query["uses"]);
            }
        }
    }
    for extra in array(&data["also_required"]) {
        if let Some(metric) = extra["metric"].as_str() {
            add(&serde_json::json!({ metric: extra["labels"] }));
        }
    }
    for dashboard in array(&data["dashboards"]) {
        for panel in array(&dashboard["panels"]) {
            for query in array(&panel["queries"]) {
                for group in array(&query["same_label_names"]) {
                    out.same_label_names.insert(strings(group));
                }
            }
        }
    }
    out
}

/// One sample of an OpenMetrics/Prometheus text exposition.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
}

/// The samples of `text` (comments skipped). Label values may hold escaped `\"`, `\\`, `\n`.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = line[..name_end].to_owned();
        let mut labels = BTreeMap::new();
        if line[name_end..].starts_with('{') {
            let mut chars = line[name_end + 1..].chars().peekable();
            loop {
                let key: String = chars
                    .by_ref()
                    .take_while(|c| *c != '=')
                    .collect::<String>()
                    .trim_start_matches(',')
                    .trim()
                    .to_owned();
                if key.is_empty() || key.starts_with('}') {
                    break;
                }
                if chars.next() != Some('"') {
                    break;
                }
                let mut value = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        '"' => break,
                        other => value.push(other),
                    }
                }
                labels.insert(key, value);
                if chars.peek() == Some(&'}') {
                    break;
                }
            }
        }
        out.push(Sample { name, labels });
    }
    out
}

/// What the exposition lacks, one sentence per metric or label (empty: nothing).
fn missing(required: &Required, samples: &[Sample]) -> Vec<String> {
    let mut by_name: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        by_name.entry(&sample.name).or_default().push(sample);
    }
    let mut out = Vec::new();
    for (metric, labels) in &required.labels {
        let Some(found) = by_name.get(metric.as_str()) else {
            out.push(format!("metric {metric} is not exported"));
            continue;
        };
        for label in labels {
            let carried = found
                .iter()
                .any(|s| s.labels.get(label).is_some_and(|v| !v.is_empty()));
            if !carried {
                let seen: BTreeSet<&String> = found.iter().flat_map(|s| s.labels.keys()).collect();
                out.push(format!(
                    "metric {metric} has no sample with label {label} (its labels: {seen:?})"
                ));
            }
        }
    }
    for group in &required.same_label_names {
        let names: Vec<(&String, BTreeSet<&String>)> = group
            .iter()
            .filter_map(|m| {
                let found = by_name.get(m.as_str())?;
                Some((m, found.iter().flat_map(|s| s.labels.keys()).collect()))
            })
            .collect();
        if let Some((first, first_names)) = names.first() {
            for (other, other_names) in &names[1..] {
                if other_names != first_names {
                    out.push(format!(
                        "metrics {first} and {other} are combined one-to-one but their label names differ: {:?}",
                        first_names.symmetric_difference(other_names).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_data_file_names_only_metrics_its_queries_read_and_labels_they_use() {
    let data = queries();
    let mut checked = 0;
    for dashboard in array(&data["dashboards"]) {
        let variables: BTreeMap<String, Vec<String>> = array(&dashboard["variables"])
            .iter()
            .filter_map(|v| Some((v["name"].as_str()?.to_owned(), strings(&v["values"]))))
            .collect();
        let mut entries: Vec<(String, &Value, Option<&str>)> = Vec::new();
        for variable in array(&dashboard["variables"]) {
            if let Some(query) = variable["query"].as_str() {
                entries.push((query.to_owned(), &variable["uses"], None));
            }
        }
        for panel in array(&dashboard["panels"]) {
            for query in array(&panel["queries"]) {
                let expr = query["expr"].as_str().unwrap_or_default().to_owned();
                entries.push((expr, &query["uses"], panel["joined_by"].as_str()));
            }
        }
        for (expr, uses, joined_by) in entries {
            let uses = uses.as_object().expect("uses is an object");
            assert!(!uses.is_empty(), "{expr}: uses names no metric");
            for (metric, labels) in uses {
                assert!(expr.contains(metric.as_str()), "{metric} is not in {expr}");
                for label in strings(labels) {
                    let from_variable = variables.iter().any(|(name, values)| {
                        expr.contains(&format!("${name}")) && values.contains(&label)
                    });
                    let implied = (label == "le" && metric.ends_with("_bucket"))
                        || joined_by == Some(label.as_str())
                        || from_variable;
                    assert!(
                        implied || expr.contains(label.as_str()),
                        "label {label} of {metric} is not used by {expr}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(
        checked > 50,
        "the file holds the dashboards' queries ({checked} labels)"
    );
    assert_eq!(
        data["source"]["commit"].as_str().map(str::len),
        Some(40),
        "the source commit is recorded"
    );
}

#[test]
fn a_missing_metric_or_label_fails_naming_the_metric_and_the_label() {
    let required = required(&queries());
    let text = "# TYPE karpenter_pods_state gauge\n\
                karpenter_pods_state{name=\"web\",namespace=\"shop\",phase=\"Running\"} 1\n\
                # EOF\n";
    let problems = missing(&required, &parse_exposition(text));
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("metric karpenter_pods_state has no sample with label nodepool")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p == "metric karpenter_nodes_allocatable is not exported"),
        "{problems:#?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("label namespace")),
        "namespace is there: {problems:#?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("node_time_seconds")
            || p.contains("label job")
            || p.contains("label cluster")),
        "node-exporter's metrics and Prometheus's labels are not asked for: {problems:#?}"
    );
}

#[test]
fn metrics_combined_one_to_one_must_carry_the_same_label_names() {
    let required = Required {
        labels: BTreeMap::new(),
        same_label_names: BTreeSet::from([vec!["a".to_owned(), "b".to_owned()]]),
    };
    let text = "a{x=\"1\",y=\"2\"} 1\nb{x=\"1\"} 2\n";
    assert_eq!(
        missing(&required, &parse_exposition(text)),
        ["metrics a and b are combined one-to-one but their label names differ: [\"y\"]"]
    );
}

#[test]
fn the_exposition_parser_reads_escaped_label_values_and_bare_samples() {
    let samples = parse_exposition(
        "# HELP x help\nx_total{a=\"q\\\"uote\",b=\"back\\\\slash\"} 3\nx_count 5\ny{} 1\n",
    );
    assert_eq!(
        samples,
        [
            Sample {
                name: "x_total".into(),
                labels: BTreeMap::from([
                    ("a".to_owned(), "q\"uote".to_owned()),
                    ("b".to_owned(), "back\\slash".to_owned())
                ]),
            },
            Sample {
                name: "x_count".into(),
                labels: BTreeMap::new()
            },
            Sample {
                name: "y".into(),
                labels: BTreeMap::new()
            },
        ]
    );
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn every_metric_and_label_upstreams_dashboards_query_is_exported_by_a_running_controller() {
    let required = required(&queries());
    let h = start("dashboards", &[], KwokOptions::default()).await;
    // Limits, so karpenter_nodepools_limit has samples; consolidation after 5 s of quiet.
    h.create_node_pool(
        &h.pool,
        None,
        Some(serde_json::json!({"cpu": "100", "memory": "400Gi"})),
        only(&["c5.large"]),
        Some(serde_json::json!({"consolidateAfter": "5s", "consolidationPolicy": "WhenEmptyOrUnderutilized"})),
    )
    .await;
    // A DaemonSet, so every node has daemon requests (karpenter_nodes_total_daemon_requests).
    let (selector, template) = h.workload("agent", "100m");
    let agent = DaemonSet {
        metadata: h.scope.namespaced_meta("agent"),
        spec: DaemonSetSpec {
            selector,
            template,
            ..DaemonSetSpec::default()
        },
        status: None,
    };
    Api::<DaemonSet>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &agent)
        .await
        .expect("creating the DaemonSet");
    // Scale-out: one 1500m pod per c5.large (1930m allocatable, beside the 100m agent).
    h.create_deployment("web", 3, "1500m").await;
    h.wait_running(6, Duration::from_secs(180)).await;
    assert_eq!(h.node_claims().await.len(), 3);
    // Consolidation: two nodes left with only the agent are removed.
    h.scale("web", 1).await;
    wait_for(
        "the two emptied nodes consolidated away",
        Duration::from_secs(180),
        || async { Ok((h.node_claims().await.len() == 1).then_some(())) },
    )
    .await
    .expect("consolidation removes the emptied nodes");
    // The gauges are rebuilt every 5 s: wait until the scrape has everything (or say what not).
    let last = std::cell::RefCell::new(Vec::new());
    let complete = wait_for(
        "every dashboard metric exported with its labels",
        Duration::from_secs(60),
        || async {
            let scraped =
                crate::leader_election::http_get(h.controllers[0].metrics, "/metrics").await;
            let problems = missing(&required, &parse_exposition(&scraped));
            let done = problems.is_empty();
            *last.borrow_mut() = problems;
            Ok(done.then_some(()))
        },
    )
    .await;
    let problems = last.borrow().clone();
    assert!(
        complete.is_ok() && problems.is_empty(),
        "upstream's dashboards query what the controller does not export:\n  {}",
        problems.join("\n  ")
    );
    let _ = Api::<DaemonSet>::namespaced(h.client.clone(), h.scope.namespace())
        .delete("agent", &DeleteParams::default())
        .await;
    h.finish().await;
}
