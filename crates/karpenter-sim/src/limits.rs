//! What `simulate` refuses before doing any work: negative counts and requests, and more pods
//! than the simulation is built for.
//!
//! The ceiling, [`MAX_PODS`] pods in one run (and per object), sits above the largest real
//! clusters (Kubernetes supports 150,000 pods per cluster) and keeps a run within a few GB of
//! memory; a typo such as `replicas: 2000000000` is an error naming the object and field,
//! not an aborted process.

use serde_json::Value;

use crate::error::LoadError;
use crate::workload::Workload;

/// The most pods one simulation takes, in all and per object.
pub const MAX_PODS: usize = 200_000;

/// Counts and requests of one manifest document that simulate refuses: `(field, message)`.
pub fn check(doc: &Value) -> Vec<(String, String)> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let mut out = Vec::new();
    let counts: &[&str] = match kind {
        "Deployment" | "StatefulSet" | "ReplicaSet" => &["spec.replicas"],
        "Job" => &["spec.parallelism", "spec.completions"],
        "CronJob" => &[
            "spec.jobTemplate.spec.parallelism",
            "spec.jobTemplate.spec.completions",
        ],
        _ => &[],
    };
    for field in counts {
        if let Some(n) = at(doc, field).and_then(Value::as_i64) {
            if n < 0 {
                out.push((field.to_string(), format!("must be at least 0, found {n}")));
            } else if usize::try_from(n).is_ok_and(|n| n > MAX_PODS) {
                out.push((
                    field.to_string(),
                    format!("{n} pods is more than simulate's ceiling of {MAX_PODS} pods"),
                ));
            }
        }
    }
    let pod_spec = match kind {
        "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "Job" => {
            Some("spec.template.spec")
        }
        "CronJob" => Some("spec.jobTemplate.spec.template.spec"),
        "Pod" => Some("spec"),
        _ => None,
    };
    if let Some(prefix) = pod_spec.and_then(|p| at(doc, p).map(|spec| (p, spec))) {
        negative_requests(prefix.0, prefix.1, &mut out);
    }
    out
}

fn at<'a>(doc: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(doc, |v, key| v.get(key))
}

fn negative_requests(prefix: &str, spec: &Value, out: &mut Vec<(String, String)>) {
    for list in ["initContainers", "containers"] {
        let containers = spec.get(list).and_then(Value::as_array);
        for (i, container) in containers.into_iter().flatten().enumerate() {
            for section in ["requests", "limits"] {
                let values = container
                    .pointer(&format!("/resources/{section}"))
                    .and_then(Value::as_object);
                for (name, value) in values.into_iter().flatten() {
                    if is_negative(value) {
                        out.push((
                            format!("{prefix}.{list}[{i}].resources.{section}.{name}"),
                            format!("must not be negative, found {value}"),
                        ));
                    }
                }
            }
        }
    }
    for (name, value) in spec
        .get("overhead")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if is_negative(value) {
            out.push((
                format!("{prefix}.overhead.{name}"),
                format!("must not be negative, found {value}"),
            ));
        }
    }
}

fn is_negative(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|f| f < 0.0),
        Value::String(s) => s.trim_start().starts_with('-'),
        _ => false,
    }
}

/// The run's pods together, against [`MAX_PODS`].
pub fn total_pods(workloads: &[Workload]) -> Option<LoadError> {
    let pods = workloads
        .iter()
        .map(Workload::replicas)
        .fold(0usize, usize::saturating_add);
    (pods > MAX_PODS).then_some(LoadError::TooManyPods {
        pods,
        max: MAX_PODS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_and_huge_counts_and_negative_requests_are_refused_naming_the_field() {
        let deployment = |replicas: Value, cpu: &str| {
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": cpu}}}]}}}})
        };
        for (doc, expected) in [
            (deployment(3.into(), "500m"), vec![]),
            (deployment(0.into(), "0"), vec![]),
            (
                deployment((-3).into(), "500m"),
                vec![("spec.replicas", "must be at least 0, found -3")],
            ),
            (
                deployment(2_000_000_000.into(), "500m"),
                vec![(
                    "spec.replicas",
                    "2000000000 pods is more than simulate's ceiling of 200000 pods",
                )],
            ),
            (
                deployment(1.into(), "-500m"),
                vec![(
                    "spec.template.spec.containers[0].resources.requests.cpu",
                    "must not be negative, found \"-500m\"",
                )],
            ),
            (
                serde_json::json!({"kind": "Job", "spec": {"parallelism": -1, "template": {}}}),
                vec![("spec.parallelism", "must be at least 0, found -1")],
            ),
            (
                serde_json::json!({"kind": "Pod", "spec": {"overhead": {"memory": -5},
                    "initContainers": [{"resources": {"limits": {"memory": "-1Gi"}}}]}}),
                vec![
                    (
                        "spec.initContainers[0].resources.limits.memory",
                        "must not be negative, found \"-1Gi\"",
                    ),
                    ("spec.overhead.memory", "must not be negative, found -5"),
                ],
            ),
        ] {
            let got = check(&doc);
            let got: Vec<(&str, &str)> =
                got.iter().map(|(f, m)| (f.as_str(), m.as_str())).collect();
            assert_eq!(got, expected, "{doc}");
        }
    }
}
