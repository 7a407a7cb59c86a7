//! Workload expansion: manifests in, the pods their controllers would create out.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_sim::workload::expand_all;
use karpenter_sim::{Manifests, Workload};

fn load(text: &str) -> Manifests {
    match Manifests::load_text("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("loads: {e}"),
    }
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: web
          resources: {requests: {cpu: 500m, memory: 1Gi}}
"#;

#[test]
fn a_deployment_expands_to_one_pod_per_replica_from_its_template() {
    let expanded = expand_all(&load(DEPLOYMENT).workloads);
    let names: Vec<_> = expanded
        .pending
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["web-0", "web-1", "web-2"]);
    for pod in &expanded.pending {
        assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(
            pod.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str),
            Some("web")
        );
        let requests = karpenter_sim::resources::pod_requests(pod.spec.as_ref());
        assert_eq!(karpenter_sim::resources::cpu_millis(&requests), 500);
    }
}

#[test]
fn replicas_default_to_one_and_can_be_changed() {
    let manifests = load(&DEPLOYMENT.replace("replicas: 3", ""));
    let Some(workload) = manifests.workloads.first() else {
        panic!("one workload")
    };
    assert_eq!(workload.replicas(), 1);
    assert_eq!(workload.with_replicas(7).expand().pods.len(), 7);
}

#[test]
fn a_statefulset_gets_one_claim_per_replica_and_template_mounted_as_a_volume() {
    let manifests = load(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: db}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        storageClassName: gp3
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Gi}}
"#,
    );
    let expanded = expand_all(&manifests.workloads);
    let claims: Vec<_> = expanded
        .persistent_volume_claims
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(claims, ["data-db-0", "data-db-1"]);
    let volume = expanded.pending[1]
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v.first())
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone());
    assert_eq!(volume.as_deref(), Some("data-db-1"));
}

#[test]
fn a_job_runs_min_of_parallelism_and_completions_and_a_cronjob_runs_its_job_once() {
    let manifests = load(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: wide}
spec:
  parallelism: 5
  completions: 3
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: parallel}
spec:
  parallelism: 4
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}
"#,
    );
    let counts: Vec<(String, usize)> = manifests
        .workloads
        .iter()
        .map(|w| (w.reference(), w.expand().pods.len()))
        .collect();
    assert_eq!(
        counts,
        [
            ("Job/wide".to_string(), 3),
            ("Job/parallel".to_string(), 4),
            ("CronJob/nightly".to_string(), 1)
        ]
    );
}

#[test]
fn bare_pods_are_pending_unless_bound_to_a_node() {
    let manifests = load(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: lonely}
spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bound}
spec: {nodeName: node-1, containers: [{name: c, image: i}]}
"#,
    );
    let expanded = expand_all(&manifests.workloads);
    assert_eq!(expanded.pending.len(), 1);
    assert_eq!(expanded.bound.get("node-1").map(Vec::len), Some(1));
    assert!(matches!(manifests.workloads[0], Workload::Pod(_)));
}

#[test]
fn daemonsets_are_kept_as_daemonsets_not_expanded_into_pending_pods() {
    let manifests = load(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: c, image: i}]}
"#,
    );
    assert_eq!(manifests.daemonsets.len(), 1);
    assert!(expand_all(&manifests.workloads).pending.is_empty());
}
