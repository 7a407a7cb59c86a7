//! The legacy types read the seed manifests (v1alpha5 Provisioner, v1alpha1 AWSNodeTemplate,
//! v1beta1 NodePool and EC2NodeClass) with every field the seeds use.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::PathBuf;

use karpenter_api::legacy::v1alpha1_aws::AwsNodeTemplate;
use karpenter_api::legacy::v1alpha5::Provisioner;
use karpenter_api::legacy::{LegacyKind, v1beta1, v1beta1_aws};
use karpenter_api::yaml::from_value;
use serde_json::Value;

fn docs(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/legacy")
        .join(name);
    let text = std::fs::read_to_string(path).expect("fixture readable");
    karpenter_api::yaml::parse_documents(&text).expect("fixture is YAML")
}

#[test]
fn the_seed_002_provisioner_reads_with_kubelet_limits_expiry_and_provider_ref() {
    let docs = docs("seed002-v1alpha5.yaml");
    let p: Provisioner = from_value(&docs[0]).expect("provisioner");
    assert_eq!(p.name(), "apps");
    assert_eq!(p.spec.taints[0].key, "karpenter.sh/legacy");
    assert_eq!(p.spec.requirements.len(), 2);
    assert_eq!(p.spec.ttl_seconds_until_expired, Some(5_184_000));
    assert_eq!(
        p.spec.provider_ref.as_ref().map(|r| r.name.as_str()),
        Some("apps")
    );
    let limits = p.spec.limits.and_then(|l| l.resources).expect("limits");
    assert_eq!(limits["cpu"].0, "128");
    assert_eq!(limits["memory"].0, "512Gi");
    let kubelet = p.spec.kubelet_configuration.expect("kubelet");
    assert_eq!(kubelet["maxPods"], 58);
    assert!(p.spec.unknown.is_empty());
}

#[test]
fn the_seed_002_and_004_node_templates_read_with_selectors_tags_and_block_devices() {
    let t: AwsNodeTemplate = from_value(&docs("seed002-v1alpha5.yaml")[1]).expect("template");
    assert_eq!(
        t.spec.subnet_selector.expect("subnets")["karpenter.sh/discovery"],
        "dev"
    );
    let bdm = t.spec.block_device_mappings.expect("bdms");
    assert_eq!(bdm[0].device_name.as_deref(), Some("/dev/xvda"));
    assert_eq!(t.spec.tags.expect("tags").len(), 3);
    let t: AwsNodeTemplate = from_value(&docs("seed004-v1alpha5.yaml")[1]).expect("template");
    assert_eq!(
        t.spec.security_group_selector.expect("sgs")["karpenter.sh/discovery"],
        "demo"
    );
    assert!(t.spec.unknown.is_empty());
}

#[test]
fn the_seed_002_v1beta1_nodepool_and_ec2nodeclass_read_with_every_field() {
    let docs = docs("seed002-v1beta1.yaml");
    let np: v1beta1::NodePool = from_value(&docs[0]).expect("nodepool");
    let template = &np.spec.template.spec;
    assert_eq!(
        template
            .node_class_ref
            .as_ref()
            .and_then(|r| r.api_version.as_deref()),
        Some("karpenter.k8s.aws/v1beta1")
    );
    assert_eq!(template.kubelet.as_ref().expect("kubelet")["maxPods"], 58);
    assert_eq!(
        np.spec.disruption.and_then(|d| d.expire_after).as_deref(),
        Some("1440h")
    );
    let nc: v1beta1_aws::EC2NodeClass = from_value(&docs[1]).expect("nodeclass");
    assert_eq!(nc.spec.ami_family.as_deref(), Some("AL2"));
    assert_eq!(nc.spec.role.as_deref(), Some("node-karpenter-dev"));
    assert_eq!(nc.spec.detailed_monitoring, Some(true));
    assert!(nc.spec.unknown.is_empty());
}

#[test]
fn legacy_kinds_are_recognized_by_api_version_and_kind() {
    let cases = [
        (
            "karpenter.sh/v1alpha5",
            "Provisioner",
            Some(LegacyKind::ProvisionerV1alpha5),
        ),
        (
            "karpenter.sh/v1alpha5",
            "Machine",
            Some(LegacyKind::MachineV1alpha5),
        ),
        (
            "karpenter.k8s.aws/v1alpha1",
            "AWSNodeTemplate",
            Some(LegacyKind::AwsNodeTemplateV1alpha1),
        ),
        (
            "karpenter.sh/v1beta1",
            "NodePool",
            Some(LegacyKind::NodePoolV1beta1),
        ),
        (
            "karpenter.sh/v1beta1",
            "NodeClaim",
            Some(LegacyKind::NodeClaimV1beta1),
        ),
        (
            "karpenter.k8s.aws/v1beta1",
            "EC2NodeClass",
            Some(LegacyKind::Ec2NodeClassV1beta1),
        ),
        ("karpenter.sh/v1", "NodePool", None),
    ];
    for (api_version, kind, want) in cases {
        assert_eq!(
            LegacyKind::from_type_meta(api_version, kind),
            want,
            "{api_version} {kind}"
        );
    }
}
