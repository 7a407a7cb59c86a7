//! User data per AMI family: golden outputs (`tests/fixtures/userdata/*.txt`, written after
//! upstream's `pkg/providers/launchtemplate/testdata/*_merged.golden` layouts), merges with
//! hostile user input, and a property test that no input panics.
//!
//! Set `KARPENTER_BLESS=1` to rewrite the golden files from the current output (then review
//! the diff: the files are the specification).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeMap;

use karpenter_api::v1::{AmiFamily, EC2NodeClass, NodeClaim};
use karpenter_aws::userdata::{
    BootstrapInput, ClusterFacts, KubeletConfig, USER_DATA_FIELD, UserDataError, render,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/userdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_golden(name: &str, actual: &str) {
    let path = format!(
        "{}/tests/fixtures/userdata/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var_os("KARPENTER_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(expected, actual, "golden file {path}");
}

fn cluster() -> ClusterFacts {
    ClusterFacts {
        name: "test-cluster".into(),
        endpoint: "https://test-cluster".into(),
        ca_bundle: Some("Y2EtYnVuZGxlCg==".into()),
        service_cidr: Some("10.100.0.0/16".into()),
        dns_ip: Some("10.0.100.10".into()),
    }
}

fn node_class(alias: &str, user_data: Option<&str>, kubelet: Option<Value>) -> EC2NodeClass {
    let mut spec = json!({
        "amiSelectorTerms": [{"alias": alias}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "role": "KarpenterNodeRole-test-cluster",
    });
    if let Some(user_data) = user_data {
        spec["userData"] = json!(user_data);
    }
    if let Some(kubelet) = kubelet {
        spec["kubelet"] = kubelet;
    }
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("test EC2NodeClass: {e}"))
}

fn node_claim(taints: Value) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-abcde",
            "labels": {
                "karpenter.k8s.aws/ec2nodeclass": "default",
                "karpenter.sh/nodepool": "default",
                "testing/cluster": "unspecified",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-west-2a",
            }
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
            "taints": taints,
        }
    }))
    .unwrap_or_else(|e| panic!("test NodeClaim: {e}"))
}

fn input(alias: &str, user_data: Option<&str>, kubelet: Option<Value>) -> BootstrapInput {
    input_with(alias, user_data, kubelet, json!([]), "on-demand")
}

fn input_with(
    alias: &str,
    user_data: Option<&str>,
    kubelet: Option<Value>,
    taints: Value,
    capacity_type: &str,
) -> BootstrapInput {
    BootstrapInput::for_node_claim(
        cluster(),
        &node_class(alias, user_data, kubelet),
        &node_claim(taints),
        capacity_type,
        Some(110),
    )
    .unwrap_or_else(|e| panic!("bootstrap input: {e}"))
}

fn rendered(input: &BootstrapInput) -> String {
    render(input).unwrap_or_else(|e| panic!("render: {e}"))
}

fn full_kubelet() -> Value {
    json!({
        "podsPerCore": 4,
        "systemReserved": {"cpu": "100m", "memory": "100Mi"},
        "kubeReserved": {"cpu": "200m", "ephemeral-storage": "1Gi"},
        "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
        "evictionSoft": {"memory.available": "10%"},
        "evictionSoftGracePeriod": {"memory.available": "90s"},
        "evictionMaxPodGracePeriod": 60,
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "cpuCFSQuota": true
    })
}

#[test]
fn al2_puts_the_users_mime_parts_first_and_the_bootstrap_script_last() {
    let user = fixture("al2_mime.input");
    assert_golden(
        "al2_mime_merged",
        &rendered(&input("al2@latest", Some(&user), None)),
    );
}

#[test]
fn al2_wraps_a_plain_script_as_a_shell_part() {
    let user = fixture("shell.input");
    assert_golden(
        "al2_shell_merged",
        &rendered(&input("al2@latest", Some(&user), None)),
    );
}

#[test]
fn al2_maps_every_managed_kubelet_setting_and_raid0_to_bootstrap_flags() {
    let mut input = input_with(
        "al2@latest",
        None,
        Some(full_kubelet()),
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        "spot",
    );
    input.instance_store_policy = Some(karpenter_api::v1::ec2nodeclass::InstanceStorePolicy::RAID0);
    assert_golden("al2_kubelet_raid0", &rendered(&input));
}

#[test]
fn al2_passes_ip_family_ipv6_when_the_cluster_dns_is_ipv6() {
    let mut facts = cluster();
    facts.dns_ip = Some("fd00:10:96::a".into());
    let input = BootstrapInput::for_node_claim(
        facts,
        &node_class("al2@latest", None, None),
        &node_claim(json!([])),
        "on-demand",
        None,
    );
    let text = input.and_then(|i| render(&i)).unwrap_or_default();
    assert!(text.contains(" \\\n--ip-family ipv6 \\\n--dns-cluster-ip 'fd00:10:96::a'"));
    assert!(!text.contains("--use-max-pods"), "no maxPods, no flag");
}

#[test]
fn every_family_gets_the_kube_dns_address_of_an_ipv6_cluster_as_its_cluster_dns() {
    let ipv6 = |alias: &str| {
        let mut facts = cluster();
        facts.dns_ip = Some("fd00:10:96::a".into());
        facts.service_cidr = Some("fd00:10:96::/108".into());
        let input = BootstrapInput::for_node_claim(
            facts,
            &node_class(alias, None, None),
            &node_claim(json!([])),
            "on-demand",
            None,
        )
        .unwrap();
        render(&input).unwrap()
    };
    // AL2023: nodeadm's kubelet config, and the service CIDR nodeadm derives the family from.
    let al2023 = ipv6("al2023@latest");
    let dns = al2023
        .split_once("clusterDNS:\n")
        .and_then(|(_, rest)| rest.lines().next())
        .unwrap_or_default();
    assert!(
        dns.trim_start().starts_with("- ") && dns.contains("fd00:10:96::a"),
        "{al2023}"
    );
    assert!(al2023.contains("cidr: fd00:10:96::/108"), "{al2023}");
    // Bottlerocket: settings.kubernetes.cluster-dns-ip.
    let bottlerocket = ipv6("bottlerocket@latest");
    assert!(
        bottlerocket.contains("cluster-dns-ip = \"fd00:10:96::a\""),
        "{bottlerocket}"
    );
    // Windows: -DNSClusterIP.
    let windows = ipv6("windows2022@latest");
    assert!(
        windows.contains("-DNSClusterIP 'fd00:10:96::a'"),
        "{windows}"
    );
    // Without a kube-dns address nothing is said: each bootstrap derives its default.
    let mut facts = cluster();
    facts.dns_ip = None;
    let input = BootstrapInput::for_node_claim(
        facts,
        &node_class("al2@latest", None, None),
        &node_claim(json!([])),
        "on-demand",
        None,
    )
    .unwrap();
    let al2 = render(&input).unwrap();
    assert!(!al2.contains("--dns-cluster-ip") && !al2.contains("--ip-family"));
}

#[test]
fn al2023_keeps_the_users_mime_parts_and_appends_its_node_config() {
    let user = fixture("al2023_mime.input");
    assert_golden(
        "al2023_mime_merged",
        &rendered(&input("al2023@latest", Some(&user), None)),
    );
}

#[test]
fn al2023_sends_yaml_user_data_as_a_node_config_part() {
    let user = fixture("al2023_yaml.input");
    assert_golden(
        "al2023_yaml_merged",
        &rendered(&input("al2023@latest", Some(&user), None)),
    );
}

#[test]
fn al2023_sends_a_script_as_a_shell_part() {
    let user = fixture("shell.input");
    assert_golden(
        "al2023_shell_merged",
        &rendered(&input("al2023@latest", Some(&user), None)),
    );
}

#[test]
fn al2023_passes_the_raw_kubelet_map_through_with_raid0_storage() {
    let mut kubelet = full_kubelet();
    kubelet["shutdownGracePeriod"] = json!("30s");
    kubelet["clusterDNS"] = json!(["169.254.20.10", "10.0.100.10"]);
    let mut input = input("al2023@latest", None, Some(kubelet));
    input.instance_store_policy = Some(karpenter_api::v1::ec2nodeclass::InstanceStorePolicy::RAID0);
    assert_golden("al2023_kubelet_raid0", &rendered(&input));
}

/// Any field of the kubelet's KubeletConfiguration reaches nodeadm's
/// `NodeConfig.spec.kubelet.config` unchanged, nested objects and lists included (upstream v1.15
/// renders the raw map for AL2023).
#[test]
fn al2023_passes_any_kubelet_configuration_field_to_nodeadm_unchanged() {
    let passed = json!({
        "containerLogMaxSize": "50Mi",
        "shutdownGracePeriod": "30s",
        "featureGates": {"InPlacePodVerticalScaling": true},
        "logging": {"format": "json", "vmodule": [{"filePattern": "pod*", "verbosity": 4}]},
        "shutdownGracePeriodByPodPriority": [{"priority": 1000, "shutdownGracePeriodSeconds": 20}],
        "memoryThrottlingFactor": 0.9
    });
    let input = input("al2023@latest", None, Some(passed.clone()));
    let node_config = karpenter_aws::userdata::al2023::node_config(&input)
        .unwrap_or_else(|e| panic!("node config: {e}"));
    let documents = karpenter_api::yaml::parse_documents(&node_config)
        .unwrap_or_else(|e| panic!("node config is YAML: {e}\n{node_config}"));
    let config = &documents[0]["spec"]["kubelet"]["config"];
    for (key, value) in passed.as_object().into_iter().flatten() {
        assert_eq!(&config[key], value, "{key} in\n{node_config}");
    }
    assert_eq!(
        config["maxPods"],
        json!(110),
        "Karpenter's own fields are kept"
    );
}

#[test]
fn al2023_without_a_service_cidr_is_not_ready() {
    let mut input = input("al2023@latest", None, None);
    input.cluster.service_cidr = None;
    assert!(matches!(
        render(&input),
        Err(UserDataError::InvalidClusterFact {
            fact: "service CIDR",
            ..
        })
    ));
}

#[test]
fn al2023_refuses_a_ca_bundle_that_is_not_base64() {
    let mut input = input("al2023@latest", None, None);
    input.cluster.ca_bundle = Some("not base64!".into());
    assert!(matches!(
        render(&input),
        Err(UserDataError::InvalidClusterFact {
            fact: "CA bundle",
            ..
        })
    ));
}

#[test]
fn bottlerocket_keeps_user_settings_but_writes_the_keys_karpenter_owns() {
    let user = fixture("bottlerocket.input");
    let input = input_with(
        "bottlerocket@latest",
        Some(&user),
        None,
        json!([
            {"key": "foo", "value": "bar", "effect": "NoExecute"},
            {"key": "baz", "value": "bin", "effect": "NoExecute"}
        ]),
        "on-demand",
    );
    assert_golden("bottlerocket_merged", &rendered(&input));
}

#[test]
fn bottlerocket_maps_kubelet_settings_and_raid0_bootstrap_command() {
    let mut kubelet = full_kubelet();
    if let Some(map) = kubelet.as_object_mut() {
        map.remove("podsPerCore");
    }
    let mut input = input("bottlerocket@v1.45.0", None, Some(kubelet));
    input.instance_store_policy = Some(karpenter_api::v1::ec2nodeclass::InstanceStorePolicy::RAID0);
    assert!(!input.bottlerocket_default_mount_paths, "1.45 binds dirs");
    assert_golden("bottlerocket_kubelet_raid0", &rendered(&input));
}

#[test]
fn windows_runs_the_users_script_then_the_eks_bootstrap() {
    let user = fixture("windows.input");
    let input = input_with("windows2022@latest", Some(&user), None, json!([]), "spot");
    assert_golden("windows_merged", &rendered(&input));
}

#[test]
fn custom_user_data_is_passed_as_is_without_karpenter_labels() {
    let user = "#!/bin/bash\n/opt/my-bootstrap --taint karpenter.sh/unregistered:NoExecute\n";
    let mut class = node_class("al2023@latest", Some(user), None);
    class.spec.ami_family = Some(AmiFamily::Custom);
    class.spec.ami_selector_terms = vec![karpenter_api::v1::AmiSelectorTerm {
        id: Some("ami-0123456789abcdef0".into()),
        ..Default::default()
    }];
    let input =
        BootstrapInput::for_node_claim(cluster(), &class, &node_claim(json!([])), "spot", None);
    let input = input.unwrap_or_else(|e| panic!("{e}"));
    assert!(!input.labels.contains_key("karpenter.sh/do-not-sync-taints"));
    assert_eq!(render(&input), Ok(user.to_string()));
}

#[test]
fn restricted_label_domains_never_reach_the_kubelet() {
    let input = input("al2@latest", None, None);
    let keys: Vec<&str> = input.labels.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.sh/capacity-type",
            "karpenter.sh/do-not-sync-taints",
            "karpenter.sh/nodepool",
            "testing/cluster",
        ]
    );
}

#[test]
fn the_unregistered_taint_is_added_once() {
    let input = input_with(
        "al2023@latest",
        None,
        None,
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]),
        "spot",
    );
    let keys: Vec<&str> = input.taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["karpenter.sh/unregistered"]);
}

fn user_data_error(family_alias: &str, user_data: &str) -> Option<String> {
    render(&input(family_alias, Some(user_data), None))
        .err()
        .map(|e| e.to_string())
}

#[test]
fn malformed_mime_is_an_error_naming_spec_user_data() {
    let hostile = [
        "MIME-Version: 1.0\nthis is not a header\n\n--x\n",
        "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello",
        "Content-Type: multipart/mixed; boundary=\"b\"\n\nno delimiter at all",
        "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: a/b\n\nnever closed",
        "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: a/b\n\nsmuggled\n--//--\n--b--\n",
    ];
    for alias in ["al2@latest", "al2023@latest"] {
        for text in hostile {
            let message = user_data_error(alias, text).unwrap_or_default();
            assert!(
                message.starts_with(&format!("{USER_DATA_FIELD}: ")),
                "{alias} {text:?}: {message:?}"
            );
        }
    }
}

#[test]
fn invalid_toml_is_an_error_naming_spec_user_data() {
    for text in [
        "[settings.kubernetes\n",
        "settings = 3",
        "[settings]\nkubernetes = \"x\"",
        "[settings.kubernetes]\nmax-pods = \"many\"",
        "[settings.kubernetes.node-labels]\na = 1",
        "[settings.kubernetes]\nnode-taints = { a = \"b:NoSchedule\" }",
        "[settings]\nbootstrap-commands = []",
    ] {
        let message = user_data_error("bottlerocket@latest", text).unwrap_or_default();
        assert!(
            message.starts_with("spec.userData: Bottlerocket user data: "),
            "{text:?}: {message:?}"
        );
    }
}

#[test]
fn a_single_quote_cannot_break_out_of_the_al2_script() {
    let mut input = input("al2@latest", None, None);
    input.cluster.name = "x'; rm -rf / #".into();
    assert!(matches!(
        render(&input),
        Err(UserDataError::Unquotable { .. })
    ));
}

#[test]
fn the_kubelet_config_defaults_cluster_dns_only_when_unset() {
    let spec: BTreeMap<String, Value> = BTreeMap::new();
    let config = KubeletConfig::resolve(Some(&spec), Some("10.0.100.10"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.cluster_dns, ["10.0.100.10"]);
    assert_eq!(config.max_pods, None);
}

proptest! {
    #[test]
    fn no_user_data_makes_any_family_panic(user_data in ".{0,400}", mime_ish in proptest::bool::ANY) {
        let text = if mime_ish {
            format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n{user_data}")
        } else {
            user_data
        };
        for alias in ["al2@latest", "al2023@latest", "bottlerocket@latest", "windows2022@latest"] {
            let _ = render(&input(alias, Some(&text), None));
        }
    }
}
