//! `karpenter validate` and `karpenter crds` as a user runs them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use common::{api_fixture, karpenter, stdout};

#[test]
fn valid_manifests_exit_zero_and_say_so() {
    let out = karpenter(
        &[
            "validate",
            "-f",
            &api_fixture("valid/seed003-nodepool.yaml"),
            "-f",
            &api_fixture("valid/full-ec2nodeclass.yaml"),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 valid, 0 invalid, 0 skipped"));
}

#[test]
fn the_seed_ec2nodeclass_with_role_and_instance_profile_is_rejected_naming_both_fields() {
    let file = api_fixture("invalid/seed003-ec2nodeclass-role-and-instance-profile.yaml");
    let out = karpenter(&["validate", "-f", &file], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "{file}:21:9: EC2NodeClass/mynodeclass: spec.role: must specify exactly one of"
        )),
        "{text}"
    );
    assert!(
        text.contains("spec.instanceProfile: must specify exactly one of"),
        "{text}"
    );
}

#[test]
fn stdin_documents_are_numbered_and_unknown_kinds_are_skipped() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: bad\nspec:\n  weight: 0\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n";
    let out = karpenter(&["validate", "-f", "-"], Some(input));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("<stdin>:1:1: skipped: v1 ConfigMap is not validated"),
        "{text}"
    );
    assert!(
        text.contains(
            "<stdin>:11:11: NodePool/bad: spec.weight: must be between 1 and 100, found 0"
        ),
        "{text}"
    );
}

#[test]
fn malformed_yaml_is_reported_with_line_and_column() {
    let out = karpenter(
        &["validate", "-f", "-"],
        Some("apiVersion: karpenter.sh/v1\nkind: [NodePool\n"),
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(text.starts_with("<stdin>:2:"), "{text}");
    assert!(text.contains(": invalid YAML: "), "{text}");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let out = karpenter(&["validate", "-f", "/nonexistent/nodepool.yaml"], None);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/nodepool.yaml"));
}

#[test]
fn committed_crds_match_the_generator() {
    let dir = common::repo_root().join("charts/karpenter/crds");
    let out = karpenter(&["crds", "--check", &dir.display().to_string()], None);
    assert!(
        out.status.success(),
        "CRDs drifted; run `karpenter crds --write charts/karpenter/crds`: {out:?}"
    );
}

#[test]
fn crds_print_five_documents() {
    let out = karpenter(&["crds"], None);
    assert!(out.status.success());
    let docs = karpenter_api::yaml::parse_documents(&stdout(&out)).expect("yaml");
    let names: Vec<_> = docs
        .iter()
        .map(|d| {
            d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeoverlays.karpenter.sh",
            "capacitybuffers.autoscaling.x-k8s.io"
        ]
    );
}
