//! The seed examples convert to the expected v1 (and v1beta1) manifests, and every converted
//! object passes `karpenter validate`.
//!
//! Inputs live in `tests/fixtures/legacy/`, expected outputs in `tests/fixtures/convert/`
//! (compared as YAML values, so comments and key order do not matter). The expected files were
//! written from the mapping rules and reviewed by hand; `UPDATE_EXPECTED=1` rewrites them from
//! the current output for review with `git diff`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::PathBuf;

use karpenter_api::convert::{self, Conversion, Input, Options, Target};
use karpenter_api::validation::{Outcome, validate_document};
use pretty_assertions::assert_eq;

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name)
}

fn convert_fixture(name: &str, options: &Options) -> Conversion {
    let text = std::fs::read_to_string(fixture("legacy", name)).expect("fixture readable");
    let docs = karpenter_api::yaml::parse_documents(&text).expect("fixture is YAML");
    let inputs: Vec<Input> = docs
        .into_iter()
        .enumerate()
        .map(|(i, value)| Input {
            file: name.to_owned(),
            document: i + 1,
            position: None,
            value,
        })
        .collect();
    convert::convert(&inputs, options).expect("converts")
}

fn assert_converts_to(input: &str, expected: &str, options: &Options) {
    let conversion = convert_fixture(input, options);
    let yaml = convert::emit::to_yaml(&conversion).expect("writes YAML");
    let path = fixture("convert", expected);
    if std::env::var_os("UPDATE_EXPECTED").is_some() {
        std::fs::write(&path, &yaml).expect("write expected");
    }
    let want = karpenter_api::yaml::parse_documents(
        &std::fs::read_to_string(&path).expect("expected fixture readable"),
    )
    .expect("expected fixture is YAML");
    let got = karpenter_api::yaml::parse_documents(&yaml).expect("output is YAML");
    assert_eq!(got, want, "{input} -> {expected}");
    if options.target == Target::V1 {
        for doc in &got {
            assert_eq!(validate_document(doc), Outcome::Valid, "{doc:#}");
        }
    }
}

fn v1() -> Options {
    Options::default()
}

#[test]
fn the_seed_002_provisioner_and_node_template_convert_to_the_expected_v1() {
    assert_converts_to(
        "seed002-v1alpha5.yaml",
        "seed002-v1alpha5-to-v1.yaml",
        &v1(),
    );
}

#[test]
fn the_seed_002_v1beta1_nodepool_and_nodeclass_convert_to_the_expected_v1() {
    assert_converts_to("seed002-v1beta1.yaml", "seed002-v1beta1-to-v1.yaml", &v1());
}

#[test]
fn the_seed_004_provisioner_and_node_template_convert_to_the_expected_v1() {
    assert_converts_to(
        "seed004-v1alpha5.yaml",
        "seed004-v1alpha5-to-v1.yaml",
        &v1(),
    );
}

#[test]
fn the_seed_002_provisioner_converts_to_the_expected_v1beta1() {
    let options = Options {
        target: Target::V1beta1,
        node_role: Some("node-karpenter-dev".to_owned()),
    };
    assert_converts_to(
        "seed002-v1alpha5.yaml",
        "seed002-v1alpha5-to-v1beta1.yaml",
        &options,
    );
}

#[test]
fn the_seed_002_kubelet_settings_move_to_the_ec2nodeclass_in_both_migrations() {
    for input in ["seed002-v1alpha5.yaml", "seed002-v1beta1.yaml"] {
        let conversion = convert_fixture(input, &v1());
        let nodeclass = conversion
            .values()
            .into_iter()
            .find(|v| v["kind"] == "EC2NodeClass")
            .expect("an EC2NodeClass");
        assert_eq!(
            nodeclass["spec"]["kubelet"],
            serde_json::json!({"clusterDNS": ["10.150.0.10"], "maxPods": 58}),
            "{input}"
        );
    }
}

#[test]
fn converting_through_v1beta1_gives_the_same_v1_as_converting_directly() {
    for input in ["seed002-v1alpha5.yaml", "seed004-v1alpha5.yaml"] {
        let direct = convert_fixture(input, &v1()).values();
        let beta = convert_fixture(
            input,
            &Options {
                target: Target::V1beta1,
                node_role: None,
            },
        );
        let beta_yaml = convert::emit::to_yaml(&beta).expect("writes YAML");
        let inputs: Vec<Input> = karpenter_api::yaml::parse_documents(&beta_yaml)
            .expect("v1beta1 output is YAML")
            .into_iter()
            .enumerate()
            .map(|(i, value)| Input {
                file: "beta.yaml".to_owned(),
                document: i + 1,
                position: None,
                value,
            })
            .collect();
        let via_beta = convert::convert(&inputs, &v1()).expect("converts").values();
        assert_eq!(via_beta, direct, "{input}");
    }
}
