//! One case per mapping rule of `karpenter convert`: small manifests in, the mapped fields out.
//! Every v1 output of every case must also pass `karpenter validate`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_api::convert::{self, Conversion, ConvertError, Input, Options, Target};
use karpenter_api::validation::{Outcome, validate_document};
use serde_json::{Value, json};

fn run(yaml: &str, options: &Options) -> Result<Conversion, Vec<ConvertError>> {
    let docs = karpenter_api::yaml::parse_documents(yaml).expect("case is YAML");
    let inputs: Vec<Input> = docs
        .into_iter()
        .enumerate()
        .map(|(i, value)| Input {
            file: "case.yaml".to_owned(),
            document: i + 1,
            position: None,
            value,
        })
        .collect();
    convert::convert(&inputs, options)
}

/// Converts to v1, checks every output validates, and returns the outputs.
fn v1(yaml: &str) -> Conversion {
    v1_with(yaml, &Options::default())
}

fn v1_with(yaml: &str, options: &Options) -> Conversion {
    let conversion = run(yaml, options).expect("converts");
    for value in conversion.values() {
        if value["apiVersion"]
            .as_str()
            .is_some_and(|v| v.ends_with("/v1"))
        {
            assert_eq!(validate_document(&value), Outcome::Valid, "{value:#}");
        }
    }
    conversion
}

fn object(conversion: &Conversion, kind: &str) -> Value {
    conversion
        .values()
        .into_iter()
        .find(|v| v["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:#?}", conversion.values()))
}

fn warned(conversion: &Conversion, field: &str) -> bool {
    conversion.warnings().iter().any(|w| w.field == field)
}

const TEMPLATE: &str = "
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
";

/// A v1alpha5 Provisioner with `extra` spec lines, referencing the AWSNodeTemplate above.
fn provisioner(extra: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: default}}\nspec:\n  providerRef: {{name: default}}\n{extra}{TEMPLATE}"
    )
}

fn nodepool(conversion: &Conversion, pointer: &str) -> Value {
    object(conversion, "NodePool")
        .pointer(pointer)
        .cloned()
        .unwrap_or(Value::Null)
}

fn nodeclass(conversion: &Conversion, pointer: &str) -> Value {
    object(conversion, "EC2NodeClass")
        .pointer(pointer)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn provisioner_fields_map_to_their_nodepool_fields() {
    // (spec lines, pointer into the v1 NodePool, expected value)
    let cases: &[(&str, &str, Value)] = &[
        (
            "  labels: {team: a}\n",
            "/spec/template/metadata/labels",
            json!({"team": "a"}),
        ),
        (
            "  annotations: {note: x}\n",
            "/spec/template/metadata/annotations",
            json!({"note": "x"}),
        ),
        (
            "  annotations: {karpenter.sh/do-not-evict: \"true\"}\n",
            "/spec/template/metadata/annotations",
            json!({"karpenter.sh/do-not-disrupt": "true"}),
        ),
        (
            "  taints: [{key: a, value: b, effect: NoSchedule}]\n",
            "/spec/template/spec/taints",
            json!([{"key": "a", "value": "b", "effect": "NoSchedule"}]),
        ),
        (
            "  startupTaints: [{key: c, effect: NoExecute}]\n",
            "/spec/template/spec/startupTaints",
            json!([{"key": "c", "effect": "NoExecute"}]),
        ),
        (
            "  requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]\n",
            "/spec/template/spec/requirements/0",
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}),
        ),
        (
            "",
            "/spec/template/spec/nodeClassRef",
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}),
        ),
        (
            "  limits: {resources: {cpu: 100, memory: 100Gi}}\n",
            "/spec/limits",
            json!({"cpu": "100", "memory": "100Gi"}),
        ),
        ("  weight: 30\n", "/spec/weight", json!(30)),
        (
            "  ttlSecondsUntilExpired: 2592000\n",
            "/spec/template/spec/expireAfter",
            json!("720h"),
        ),
        ("", "/spec/template/spec/expireAfter", json!("Never")),
        (
            "  consolidation: {enabled: true}\n",
            "/spec/disruption",
            json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]}),
        ),
        (
            "  ttlSecondsAfterEmpty: 30\n",
            "/spec/disruption",
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s", "budgets": [{"nodes": "10%"}]}),
        ),
        (
            "",
            "/spec/disruption",
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never", "budgets": [{"nodes": "10%"}]}),
        ),
    ];
    for (extra, pointer, want) in cases {
        let conversion = v1(&provisioner(extra));
        assert_eq!(
            &nodepool(&conversion, pointer),
            want,
            "{extra:?} at {pointer}"
        );
    }
}

#[test]
fn v1alpha5_defaults_are_written_as_requirements() {
    let conversion = v1(&provisioner(""));
    let keys: Vec<Value> = nodepool(&conversion, "/spec/template/spec/requirements")
        .as_array()
        .expect("requirements")
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    assert_eq!(
        keys,
        [
            "kubernetes.io/os",
            "kubernetes.io/arch",
            "karpenter.sh/capacity-type",
            "karpenter.k8s.aws/instance-category",
            "karpenter.k8s.aws/instance-generation"
        ]
    );
}

#[test]
fn the_provisioner_name_label_and_requirement_are_dropped_with_warnings() {
    let conversion = v1(&provisioner(
        "  labels: {karpenter.sh/provisioner-name: x, team: a}\n  requirements: [{key: karpenter.sh/provisioner-name, operator: In, values: [x]}]\n",
    ));
    assert_eq!(
        nodepool(&conversion, "/spec/template/metadata/labels"),
        json!({"team": "a"})
    );
    assert!(warned(
        &conversion,
        "spec.labels[karpenter.sh/provisioner-name]"
    ));
    assert!(warned(&conversion, "spec.requirements[0]"));
}

#[test]
fn kubelet_configuration_moves_to_the_referenced_ec2nodeclass() {
    let conversion = v1(&provisioner(
        "  kubeletConfiguration: {maxPods: 20, containerRuntime: containerd}\n",
    ));
    assert_eq!(
        nodeclass(&conversion, "/spec/kubelet"),
        json!({"maxPods": 20})
    );
    assert_eq!(
        nodepool(&conversion, "/spec/template/spec/kubelet"),
        Value::Null
    );
    assert!(warned(
        &conversion,
        "spec.kubeletConfiguration.containerRuntime"
    ));
}

#[test]
fn kubelet_settings_without_their_ec2nodeclass_become_a_warning_saying_where_they_go() {
    let yaml = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\nspec:\n  providerRef: {name: elsewhere}\n  kubeletConfiguration: {maxPods: 20}\n";
    let conversion = v1(yaml);
    let warning = conversion
        .warnings()
        .into_iter()
        .find(|w| w.field == "spec.template.spec.kubelet")
        .expect("kubelet warning");
    assert!(
        warning.message.contains("EC2NodeClass/elsewhere"),
        "{warning}"
    );
    assert!(warning.message.contains(r#""maxPods":20"#), "{warning}");
    let yaml_out = convert::emit::to_yaml(&conversion).expect("yaml");
    assert!(
        yaml_out.contains("# - WARNING spec.template.spec.kubelet:"),
        "{yaml_out}"
    );
}

#[test]
fn two_nodepools_with_different_kubelets_for_one_ec2nodeclass_warn_on_the_second() {
    let yaml = format!(
        "{}---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: b}}\nspec:\n  providerRef: {{name: default}}\n  kubeletConfiguration: {{maxPods: 30}}\n",
        provisioner("  kubeletConfiguration: {maxPods: 20}\n")
    );
    let conversion = v1(&yaml);
    assert_eq!(
        nodeclass(&conversion, "/spec/kubelet"),
        json!({"maxPods": 20})
    );
    let w = conversion.warnings();
    assert!(
        w.iter()
            .any(|w| w.object == "NodePool/b" && w.message.contains("different kubelet")),
        "{w:#?}"
    );
}

#[test]
fn an_inline_provider_becomes_an_ec2nodeclass_named_after_the_provisioner() {
    let yaml = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: inline}\nspec:\n  kubeletConfiguration: {maxPods: 10}\n  provider:\n    apiVersion: extensions.karpenter.sh/v1alpha1\n    kind: AWS\n    subnetSelector: {a: b}\n    securityGroupSelector: {a: b}\n    instanceProfile: MyProfile\n";
    let conversion = v1(yaml);
    assert_eq!(
        nodepool(&conversion, "/spec/template/spec/nodeClassRef/name"),
        json!("inline")
    );
    assert_eq!(nodeclass(&conversion, "/metadata/name"), json!("inline"));
    assert_eq!(
        nodeclass(&conversion, "/spec/instanceProfile"),
        json!("MyProfile")
    );
    assert_eq!(
        nodeclass(&conversion, "/spec/kubelet"),
        json!({"maxPods": 10})
    );
    assert!(!warned(&conversion, "spec.provider.apiVersion"));
    assert!(!warned(&conversion, "spec.provider.kind"));
}

#[test]
fn provisioners_without_a_node_class_or_with_two_are_errors_naming_the_field() {
    for (spec, field) in [
        ("spec: {}\n", "spec.providerRef"),
        (
            "spec:\n  providerRef: {name: a}\n  provider: {subnetSelector: {a: b}}\n",
            "spec.provider",
        ),
    ] {
        let yaml = format!(
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: p}}\n{spec}"
        );
        let errors = run(&yaml, &Options::default()).expect_err("error");
        assert_eq!(errors[0].field, field);
        assert_eq!(errors[0].object, "Provisioner/p");
    }
}

#[test]
fn node_template_fields_map_to_their_ec2nodeclass_fields() {
    let base = "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec:\n  subnetSelector: {aws-ids: \"subnet-1, subnet-2\"}\n  securityGroupSelector: {aws::ids: sg-1}\n";
    let cases: &[(&str, &str, Value)] = &[
        (
            "",
            "/spec/subnetSelectorTerms",
            json!([{"id": "subnet-1"}, {"id": "subnet-2"}]),
        ),
        (
            "",
            "/spec/securityGroupSelectorTerms",
            json!([{"id": "sg-1"}]),
        ),
        (
            "",
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2@latest"}]),
        ),
        ("", "/spec/role", json!("$KARPENTER_NODE_ROLE")),
        (
            "",
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(2),
        ),
        (
            "  amiFamily: Bottlerocket\n",
            "/spec/amiSelectorTerms",
            json!([{"alias": "bottlerocket@latest"}]),
        ),
        (
            "  amiFamily: AL2023\n  amiSelector: {aws::name: my-ami, aws::owners: self}\n",
            "/spec/amiSelectorTerms",
            json!([{"name": "my-ami", "owner": "self"}]),
        ),
        (
            "  amiFamily: AL2023\n  amiSelector: {aws::name: my-ami}\n",
            "/spec/amiFamily",
            json!("AL2023"),
        ),
        (
            "  instanceProfile: Prof\n",
            "/spec/instanceProfile",
            json!("Prof"),
        ),
        ("  userData: echo hi\n", "/spec/userData", json!("echo hi")),
        (
            "  detailedMonitoring: true\n",
            "/spec/detailedMonitoring",
            json!(true),
        ),
        ("  context: ctx\n", "/spec/context", json!("ctx")),
        ("  tags: {team: a}\n", "/spec/tags", json!({"team": "a"})),
        (
            "  metadataOptions: {httpPutResponseHopLimit: 1, httpTokens: optional}\n",
            "/spec/metadataOptions",
            json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "optional"}),
        ),
        (
            "  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 50Gi, volumeType: gp3}}]\n",
            "/spec/blockDeviceMappings",
            json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi", "volumeType": "gp3"}}]),
        ),
    ];
    for (extra, pointer, want) in cases {
        let conversion = v1(&format!("{base}{extra}"));
        assert_eq!(
            &nodeclass(&conversion, pointer),
            want,
            "{extra:?} at {pointer}"
        );
    }
}

#[test]
fn the_role_placeholder_is_a_warning_and_node_role_replaces_it() {
    let conversion = v1(&provisioner(""));
    assert!(warned(&conversion, "spec.role"));
    let yaml = convert::emit::to_yaml(&conversion).expect("yaml");
    assert!(
        yaml.contains("role: $KARPENTER_NODE_ROLE # placeholder"),
        "{yaml}"
    );
    let options = Options {
        node_role: Some("KarpenterNodeRole-demo".to_owned()),
        ..Options::default()
    };
    let conversion = v1_with(&provisioner(""), &options);
    assert_eq!(
        nodeclass(&conversion, "/spec/role"),
        json!("KarpenterNodeRole-demo")
    );
    assert!(!warned(&conversion, "spec.role"));
}

#[test]
fn the_imds_hop_limit_default_is_written_with_a_comment() {
    let yaml = convert::emit::to_yaml(&v1(&provisioner(""))).expect("yaml");
    assert!(
        yaml.contains("httpPutResponseHopLimit: 2 # the default before v1"),
        "{yaml}"
    );
}

#[test]
fn launch_template_name_is_an_error_naming_file_document_object_and_field() {
    let yaml = format!("{TEMPLATE}  launchTemplateName: my-lt\n");
    let errors = run(&yaml, &Options::default()).expect_err("error");
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    assert!(text.starts_with("case.yaml: document 1: AWSNodeTemplate/default: spec.launchTemplateName: launchTemplateName is not supported"), "{text}");
}

#[test]
fn a_missing_subnet_selector_is_an_error() {
    let yaml = "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec:\n  securityGroupSelector: {a: b}\n";
    let errors = run(yaml, &Options::default()).expect_err("error");
    assert_eq!(errors[0].field, "spec.subnetSelector");
}

const BETA_POOL: &str = "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: c}\n";

#[test]
fn v1beta1_nodepool_fields_map_to_their_v1_fields() {
    let cases: &[(&str, &str, Value)] = &[
        (
            "",
            "/spec/template/spec/nodeClassRef",
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"}),
        ),
        (
            "",
            "/spec/disruption/consolidationPolicy",
            json!("WhenEmptyOrUnderutilized"),
        ),
        ("", "/spec/disruption/consolidateAfter", json!("0s")),
        ("", "/spec/template/spec/expireAfter", json!("720h")),
        (
            "  disruption: {consolidationPolicy: WhenUnderutilized}\n",
            "/spec/disruption/consolidationPolicy",
            json!("WhenEmptyOrUnderutilized"),
        ),
        (
            "  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}\n",
            "/spec/disruption/consolidateAfter",
            json!("30s"),
        ),
        (
            "  disruption: {expireAfter: Never}\n",
            "/spec/template/spec/expireAfter",
            json!("Never"),
        ),
        (
            "  disruption: {budgets: [{nodes: \"0\", schedule: \"@daily\", duration: 10m}]}\n",
            "/spec/disruption/budgets",
            json!([{"nodes": "0", "schedule": "@daily", "duration": "10m"}]),
        ),
        (
            "  limits: {cpu: 10}\n",
            "/spec/limits",
            json!({"cpu": "10"}),
        ),
        ("  weight: 5\n", "/spec/weight", json!(5)),
    ];
    for (extra, pointer, want) in cases {
        let conversion = v1(&format!("{BETA_POOL}{extra}"));
        assert_eq!(
            &nodepool(&conversion, pointer),
            want,
            "{extra:?} at {pointer}"
        );
    }
}

const BETA_CLASS: &str = "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec:\n  role: R\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n";

#[test]
fn v1beta1_ec2nodeclass_fields_map_to_their_v1_fields() {
    let cases: &[(&str, &str, Value)] = &[
        (
            "  amiFamily: AL2023\n",
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023@latest"}]),
        ),
        ("  amiFamily: AL2023\n", "/spec/amiFamily", Value::Null),
        (
            "  amiFamily: Custom\n  amiSelectorTerms: [{id: ami-1}]\n",
            "/spec/amiFamily",
            json!("Custom"),
        ),
        (
            "  amiFamily: Ubuntu\n  amiSelectorTerms: [{id: ami-1}]\n",
            "/spec/amiFamily",
            json!("AL2"),
        ),
        (
            "  amiFamily: Ubuntu\n  amiSelectorTerms: [{id: ami-1}]\n",
            "/spec/blockDeviceMappings",
            json!([{"deviceName": "/dev/sda1", "rootVolume": true, "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}]),
        ),
        (
            "  amiFamily: Ubuntu\n  amiSelectorTerms: [{id: ami-1}]\n",
            "/metadata/annotations",
            json!({"compatibility.karpenter.k8s.aws/v1beta1-ubuntu": "amiFamily,blockDeviceMappings"}),
        ),
        (
            "  amiFamily: Ubuntu\n  amiSelectorTerms: [{id: ami-1}]\n  blockDeviceMappings: [{deviceName: /dev/sda1, ebs: {volumeSize: 40Gi}}]\n",
            "/metadata/annotations",
            json!({"compatibility.karpenter.k8s.aws/v1beta1-ubuntu": "amiFamily"}),
        ),
        (
            "  amiFamily: AL2\n  metadataOptions: {httpPutResponseHopLimit: 3}\n",
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(3),
        ),
        (
            "  amiFamily: AL2\n",
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(2),
        ),
        (
            "  amiFamily: AL2\n  associatePublicIPAddress: false\n",
            "/spec/associatePublicIPAddress",
            json!(false),
        ),
        (
            "  amiFamily: AL2\n  instanceStorePolicy: RAID0\n",
            "/spec/instanceStorePolicy",
            json!("RAID0"),
        ),
        (
            "  amiFamily: AL2\n  tags: {kubernetes.io/cluster/demo: owned, team: a}\n",
            "/spec/tags",
            json!({"team": "a"}),
        ),
    ];
    for (extra, pointer, want) in cases {
        let conversion = v1(&format!("{BETA_CLASS}{extra}"));
        assert_eq!(
            &nodeclass(&conversion, pointer),
            want,
            "{extra:?} at {pointer}"
        );
    }
}

#[test]
fn ubuntu_without_ami_selector_terms_and_custom_without_them_are_errors() {
    for family in ["Ubuntu", "Custom"] {
        let errors = run(
            &format!("{BETA_CLASS}  amiFamily: {family}\n"),
            &Options::default(),
        )
        .expect_err(family);
        assert!(
            errors[0].message.contains("amiSelectorTerms")
                || errors[0].field.contains("amiSelectorTerms"),
            "{}",
            errors[0]
        );
    }
}

#[test]
fn v1beta1_kubelet_moves_from_the_nodepool_to_its_ec2nodeclass() {
    let yaml =
        format!("{BETA_POOL}      kubelet: {{maxPods: 42}}\n---\n{BETA_CLASS}  amiFamily: AL2\n");
    let conversion = v1(&yaml);
    assert_eq!(
        nodeclass(&conversion, "/spec/kubelet"),
        json!({"maxPods": 42})
    );
}

#[test]
fn v1beta1_nodeclaims_convert_with_a_warning_and_without_kubelet() {
    let yaml = "apiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata: {name: claim, uid: x}\nspec:\n  kubelet: {maxPods: 3}\n  requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]\n  nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: c}\nstatus: {providerID: aws:///a/i-1}\n";
    let conversion = v1(yaml);
    let claim = object(&conversion, "NodeClaim");
    assert_eq!(claim["apiVersion"], "karpenter.sh/v1");
    assert_eq!(claim["spec"]["nodeClassRef"]["group"], "karpenter.k8s.aws");
    assert_eq!(claim["metadata"], json!({"name": "claim"}));
    assert!(claim.get("status").is_none());
    assert!(warned(&conversion, "spec.kubelet"));
}

#[test]
fn machines_are_skipped_with_a_warning() {
    let yaml = "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\nspec: {}\n";
    let conversion = v1(yaml);
    assert!(conversion.objects.is_empty());
    assert!(
        conversion.warnings()[0]
            .message
            .contains("managed by the Karpenter controller")
    );
}

#[test]
fn v1_objects_pass_through_with_server_fields_removed() {
    let yaml = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p, uid: u, resourceVersion: \"3\"}\nspec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: c}\nstatus: {nodes: 1}\n";
    let conversion = v1(yaml);
    let pool = object(&conversion, "NodePool");
    assert_eq!(pool["metadata"], json!({"name": "p"}));
    assert!(pool.get("status").is_none());
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        "c"
    );
}

#[test]
fn v1_objects_cannot_be_converted_down_to_v1beta1() {
    let yaml =
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec: {}\n";
    let options = Options {
        target: Target::V1beta1,
        ..Options::default()
    };
    let errors = run(yaml, &options).expect_err("error");
    assert_eq!(errors[0].field, "apiVersion");
}

#[test]
fn metadata_keeps_only_name_labels_annotations_and_finalizers() {
    let yaml = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\n  uid: u\n  resourceVersion: \"1\"\n  creationTimestamp: \"2023-01-01T00:00:00Z\"\n  generation: 4\n  managedFields: []\n  labels: {a: b}\n  annotations: {c: d}\n  finalizers: [x]\nspec:\n  providerRef: {name: default}\nstatus: {resources: {cpu: \"1\"}}\n";
    let conversion = v1(yaml);
    assert_eq!(
        object(&conversion, "NodePool")["metadata"],
        json!({"name": "p", "labels": {"a": "b"}, "annotations": {"c": "d"}, "finalizers": ["x"]})
    );
}

#[test]
fn unknown_spec_fields_are_dropped_with_a_warning() {
    let conversion = v1(&provisioner("  somethingNew: 1\n"));
    assert!(warned(&conversion, "spec.somethingNew"));
}

#[test]
fn alpha_inputs_convert_to_v1beta1_on_request() {
    let options = Options {
        target: Target::V1beta1,
        ..Options::default()
    };
    let conversion = run(
        &provisioner("  consolidation: {enabled: true}\n  ttlSecondsUntilExpired: 60\n"),
        &options,
    )
    .expect("converts");
    let pool = object(&conversion, "NodePool");
    assert_eq!(pool["apiVersion"], "karpenter.sh/v1beta1");
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenUnderutilized", "expireAfter": "1m"})
    );
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["apiVersion"],
        "karpenter.k8s.aws/v1beta1"
    );
    let class = object(&conversion, "EC2NodeClass");
    assert_eq!(class["apiVersion"], "karpenter.k8s.aws/v1beta1");
    assert_eq!(class["spec"]["amiFamily"], "AL2");
    assert!(warned(&conversion, "spec.role"));
}

#[test]
fn an_inline_provider_launch_template_is_an_error_naming_the_field() {
    let yaml = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec:\n  provider:\n    launchTemplate: my-lt\n    subnetSelector: {a: b}\n    securityGroupSelector: {a: b}\n";
    let errors = run(yaml, &Options::default()).expect_err("error");
    assert_eq!(errors[0].field, "spec.provider.launchTemplate");
}

#[test]
fn a_kubectl_list_is_converted_item_by_item() {
    let yaml = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: karpenter.sh/v1alpha5\n  kind: Provisioner\n  metadata: {name: default}\n  spec:\n    providerRef: {name: default}\n- apiVersion: karpenter.k8s.aws/v1alpha1\n  kind: AWSNodeTemplate\n  metadata: {name: default}\n  spec:\n    subnetSelector: {a: b}\n    securityGroupSelector: {a: b}\n";
    let conversion = v1(yaml);
    let kinds: Vec<Value> = conversion
        .values()
        .iter()
        .map(|v| v["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("NodePool"), json!("EC2NodeClass")]);
}
