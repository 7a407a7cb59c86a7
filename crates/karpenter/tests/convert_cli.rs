//! `karpenter convert` as a user runs it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use common::{api_fixture, karpenter, stderr, stdout};

#[test]
fn the_seed_provisioner_converts_to_v1_that_karpenter_validate_accepts() {
    let out = karpenter(
        &[
            "convert",
            "-f",
            &api_fixture("legacy/seed002-v1alpha5.yaml"),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let yaml = stdout(&out);
    assert!(yaml.contains("apiVersion: karpenter.sh/v1\n"), "{yaml}");
    assert!(
        yaml.contains("role: $KARPENTER_NODE_ROLE # placeholder"),
        "{yaml}"
    );
    let check = karpenter(&["validate", "-f", "-"], Some(&yaml));
    assert!(check.status.success(), "{check:?}");
    assert!(stderr(&check).contains("2 valid, 0 invalid"), "{check:?}");
}

#[test]
fn stdin_is_read_with_dash_f_dash() {
    let input =
        std::fs::read_to_string(api_fixture("legacy/seed004-v1alpha5.yaml")).expect("fixture");
    let out = karpenter(
        &["convert", "-f", "-", "--node-role", "NodeRole"],
        Some(&input),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("role: NodeRole"), "{}", stdout(&out));
}

#[test]
fn json_output_is_a_list_of_v1_objects() {
    let out = karpenter(
        &[
            "convert",
            "-o",
            "json",
            "-f",
            &api_fixture("legacy/seed002-v1beta1.yaml"),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(value["kind"], "List");
    assert_eq!(value["items"][0]["apiVersion"], "karpenter.sh/v1");
    assert_eq!(value["items"][1]["spec"]["kubelet"]["maxPods"], 58);
}

#[test]
fn to_v1beta1_writes_v1beta1_objects() {
    let out = karpenter(
        &[
            "convert",
            "--to",
            "v1beta1",
            "-f",
            &api_fixture("legacy/seed004-v1alpha5.yaml"),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("apiVersion: karpenter.sh/v1beta1"));
}

#[test]
fn warnings_go_to_stderr_naming_file_object_and_field() {
    let out = karpenter(
        &[
            "convert",
            "-f",
            &api_fixture("legacy/seed002-v1alpha5.yaml"),
        ],
        None,
    );
    let err = stderr(&out);
    assert!(
        err.contains("seed002-v1alpha5.yaml:31:1: EC2NodeClass/apps: spec.role: placeholder"),
        "{err}"
    );
    assert!(!stdout(&out).contains("warning:"));
}

#[test]
fn launch_template_name_exits_1_with_a_clear_error_and_no_output() {
    let input = "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: lt\nspec:\n  launchTemplateName: my-template\n  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n";
    let out = karpenter(&["convert", "-f", "-"], Some(input));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("<stdin>:1:1: AWSNodeTemplate/lt: spec.launchTemplateName: launchTemplateName is not supported"),
        "{err}"
    );
}

#[test]
fn malformed_yaml_exits_1_with_line_and_column() {
    let out = karpenter(&["convert", "-f", "-"], Some("a: [unclosed\n"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("<stdin>:1:"), "{}", stderr(&out));
}

#[test]
fn machines_are_reported_as_skipped_on_stderr() {
    let input =
        "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata:\n  name: m\nspec: {}\n";
    let out = karpenter(&["convert", "-f", "-"], Some(input));
    assert!(out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("Machine/m: Machines are managed by the Karpenter controller"));
}

#[test]
fn kubelet_settings_move_to_a_node_class_given_in_another_file() {
    let dir = std::env::temp_dir().join(format!("karpenter-convert-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let provisioner = dir.join("provisioner.yaml");
    let template = dir.join("nodetemplate.yaml");
    std::fs::write(
        &provisioner,
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  providerRef:\n    name: t\n  kubeletConfiguration:\n    maxPods: 42\n",
    )
    .expect("write provisioner");
    std::fs::write(
        &template,
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: t\nspec:\n  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n",
    )
    .expect("write template");
    let out = karpenter(
        &[
            "convert",
            "-o",
            "json",
            "-f",
            &provisioner.display().to_string(),
            "-f",
            &template.display().to_string(),
        ],
        None,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(value["items"][1]["kind"], "EC2NodeClass");
    assert_eq!(value["items"][1]["spec"]["kubelet"]["maxPods"], 42);
}

#[test]
fn current_objects_pass_through_with_unknown_fields_warned_and_alias_families_lower_cased() {
    let input = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: d}\nspec:\n  instanceProfil: p\n  amiSelectorTerms: [{alias: AL2023@latest}]\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n";
    let out = karpenter(&["convert", "-f", "-"], Some(input));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = stderr(&out);
    for expected in [
        "<stdin>:1:1: EC2NodeClass/d: spec.instanceProfil: unknown field \"instanceProfil\" (did you mean \"instanceProfile\"?)",
        "<stdin>:1:1: EC2NodeClass/d: spec.amiSelectorTerms[0].alias: \"AL2023@latest\" lower-cased to \"al2023@latest\"",
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }
    assert!(stdout(&out).contains("al2023@latest"), "{}", stdout(&out));
}
