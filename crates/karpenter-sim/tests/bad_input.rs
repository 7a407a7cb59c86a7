//! Bad input fails with errors that name the file, document, object and field; unknown kinds
//! are listed as ignored.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_sim::{LoadError, Manifests};

fn problems(text: &str) -> Vec<String> {
    match Manifests::load_text("bad.yaml", text) {
        Err(LoadError::Invalid(problems)) => problems.0.iter().map(ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn an_invalid_nodepool_fails_naming_file_document_object_and_field() {
    let found = problems(
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: ok}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: []
"#,
    );
    assert!(
        found.iter().any(|p| p
            .starts_with("bad.yaml:16:19: NodePool/broken: spec.template.spec.requirements[0]")),
        "{found:?}"
    );
}

#[test]
fn malformed_yaml_reports_line_and_column() {
    let found = problems("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n");
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("bad.yaml:3:18: invalid YAML: unclosed bracket"),
        "{found:?}"
    );
}

#[test]
fn a_workload_that_does_not_fit_its_kind_names_the_field() {
    let found = problems(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: many
  selector: {}
  template: {spec: {containers: []}}
"#,
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("bad.yaml:6:13: Deployment/web: spec.replicas:")),
        "{found:?}"
    );
}

#[test]
fn unknown_kinds_are_listed_as_ignored() {
    let loaded = Manifests::load_text(
        "mixed.yaml",
        r#"
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
"#,
    );
    let Ok(manifests) = loaded else {
        panic!("loads: {loaded:?}")
    };
    let ignored: Vec<(String, usize, String)> = manifests
        .ignored
        .iter()
        .map(|i| (i.object.clone(), i.document, i.reason.clone()))
        .collect();
    assert_eq!(ignored[0].0, "Service/web");
    assert_eq!(ignored[0].1, 1);
    assert!(ignored[1].2.contains("karpenter convert"), "{ignored:?}");
}
