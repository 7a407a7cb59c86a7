//! Launch template contents and names: defaults per AMI family, the name's stability and its
//! sensitivity to every field.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::launch_template::{
    LaunchTemplate, LaunchTemplateError, LaunchTemplateRequest, ReservationLaunch, build,
    default_block_device_mappings,
};
use karpenter_aws::placement_group::Placement;
use karpenter_aws::userdata::ClusterFacts;
use karpenter_cloud::offering::{Reservation, ReservationKind};
use karpenter_cloud::{Catalog, CatalogOptions, InstanceTypeInfo};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn cluster() -> ClusterFacts {
    ClusterFacts {
        name: "test-cluster".into(),
        endpoint: "https://test-cluster".into(),
        ca_bundle: Some("Y2EtYnVuZGxlCg==".into()),
        service_cidr: Some("10.100.0.0/16".into()),
        dns_ip: Some("10.0.100.10".into()),
    }
}

fn node_class_json() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
            "role": "KarpenterNodeRole-test-cluster",
            "tags": {"team": "platform"},
        },
        "status": {
            "securityGroups": [{"id": "sg-0b"}, {"id": "sg-0a"}],
            "instanceProfile": "test-cluster_123",
        }
    })
}

fn node_class_from(value: Value) -> EC2NodeClass {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("test EC2NodeClass: {e}"))
}

fn node_claim_from(value: Value) -> NodeClaim {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("test NodeClaim: {e}"))
}

fn node_claim_json() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        }
    })
}

fn instance_types(names: &[&str]) -> Vec<InstanceTypeInfo> {
    let catalog = Catalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    let all = catalog
        .instance_types(&CatalogOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|it| it.name == *name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} not in the embedded catalog"))
        })
        .collect()
}

struct Inputs {
    class: Value,
    claim: Value,
    cluster: ClusterFacts,
    image: &'static str,
    types: Vec<&'static str>,
    capacity_type: &'static str,
    region: &'static str,
    tenancy: &'static str,
    placement: Option<Placement>,
    /// `None`: the gate `ReservedCapacity` off; `Some(r)`: targeted, into `r` if given.
    reservation: Option<Option<Reservation>>,
}

impl Inputs {
    fn new() -> Self {
        Self {
            class: node_class_json(),
            claim: node_claim_json(),
            cluster: cluster(),
            image: "ami-0123456789abcdef0",
            types: vec!["m5.large"],
            capacity_type: "on-demand",
            region: "us-west-2",
            tenancy: "default",
            placement: None,
            reservation: None,
        }
    }

    fn build(&self) -> Result<LaunchTemplate, LaunchTemplateError> {
        let class = node_class_from(self.class.clone());
        let claim = node_claim_from(self.claim.clone());
        let types = instance_types(&self.types);
        build(&LaunchTemplateRequest {
            node_class: &class,
            node_claim: &claim,
            cluster: &self.cluster,
            region: self.region,
            image_id: self.image,
            instance_types: &types,
            capacity_type: self.capacity_type,
            tenancy: self.tenancy,
            placement: self.placement.as_ref(),
            capacity_reservation: match &self.reservation {
                None => ReservationLaunch::Open,
                Some(r) => ReservationLaunch::Targeted(r.as_ref()),
            },
        })
    }

    fn built(&self) -> LaunchTemplate {
        self.build().unwrap_or_else(|e| panic!("{e}"))
    }
}

#[test]
fn the_same_inputs_give_the_same_name() {
    let first = Inputs::new().built();
    let second = Inputs::new().built();
    assert_eq!(first.name, second.name);
    let digits = first
        .name
        .strip_prefix("karpenter.k8s.aws/")
        .unwrap_or_default();
    assert!(
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
        "{}",
        first.name
    );
}

#[test]
fn security_group_order_does_not_change_the_name() {
    let mut reordered = Inputs::new();
    reordered.class["status"]["securityGroups"] = json!([{"id": "sg-0a"}, {"id": "sg-0b"}]);
    assert_eq!(reordered.built().name, Inputs::new().built().name);
}

#[test]
fn instance_types_with_the_same_max_pods_share_a_template() {
    // m5.large and m5a.large both have 3 ENIs x 10 IPs: 29 pods.
    let mut both = Inputs::new();
    both.types = vec!["m5.large", "m5a.large"];
    let template = both.built();
    assert_eq!(template.name, Inputs::new().built().name);
    assert_eq!(template.instance_types, ["m5.large", "m5a.large"]);
}

#[test]
fn any_field_change_changes_the_name() {
    type Edit = fn(&mut Inputs);
    let edits: Vec<(&str, Edit)> = vec![
        ("image", |i| i.image = "ami-0fedcba9876543210"),
        ("max pods", |i| i.types = vec!["m5.xlarge"]),
        ("capacity type", |i| i.capacity_type = "spot"),
        ("cluster endpoint", |i| {
            i.cluster.endpoint = "https://other".into()
        }),
        ("CA bundle", |i| {
            i.cluster.ca_bundle = Some("b3RoZXIK".into())
        }),
        ("NodeClaim label", |i| {
            i.claim["metadata"]["labels"]["team"] = json!("a")
        }),
        ("NodeClaim taint", |i| {
            i.claim["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}])
        }),
        ("security group", |i| {
            i.class["status"]["securityGroups"] = json!([{"id": "sg-0c"}])
        }),
        ("instance profile", |i| {
            i.class["status"]["instanceProfile"] = json!("other")
        }),
        ("tags", |i| i.class["spec"]["tags"]["team"] = json!("other")),
        ("user data", |i| {
            i.class["spec"]["userData"] = json!("#!/bin/bash\necho")
        }),
        ("kubelet", |i| {
            i.class["spec"]["kubelet"] = json!({"imageGCHighThresholdPercent": 90})
        }),
        ("monitoring", |i| {
            i.class["spec"]["detailedMonitoring"] = json!(true)
        }),
        ("public IP", |i| {
            i.class["spec"]["associatePublicIPAddress"] = json!(false)
        }),
        ("metadata options", |i| {
            i.class["spec"]["metadataOptions"] = json!({"httpPutResponseHopLimit": 2})
        }),
        (
            "block devices",
            |i| {
                i.class["spec"]["blockDeviceMappings"] =
                    json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}}])
            },
        ),
        ("RAID0", |i| {
            i.class["spec"]["instanceStorePolicy"] = json!("RAID0")
        }),
        ("region without IMDS IPv6", |i| i.region = "us-iso-east-1"),
        ("nested virtualization", |i| {
            i.class["spec"]["cpuOptions"] = json!({"nestedVirtualization": "enabled"})
        }),
        ("Nitro Enclaves", |i| {
            i.class["spec"]["enclaveOptions"] = json!({"enabled": true})
        }),
        ("tenancy", |i| i.tenancy = "dedicated"),
        ("placement group", |i| {
            i.placement = Some(Placement {
                group_id: "pg-0123".into(),
                partition_number: None,
            })
        }),
    ];
    let base = Inputs::new().built().name;
    for (what, edit) in edits {
        let mut changed = Inputs::new();
        edit(&mut changed);
        assert_ne!(changed.built().name, base, "changing the {what}");
    }
}

#[test]
fn nitro_enclaves_are_enabled_by_the_node_class_enclave_options_only() {
    assert!(!Inputs::new().built().data.enclave_enabled);
    let mut enabled = Inputs::new();
    enabled.class["spec"]["enclaveOptions"] = json!({"enabled": true});
    assert!(enabled.built().data.enclave_enabled);
    let mut disabled = Inputs::new();
    disabled.class["spec"]["enclaveOptions"] = json!({"enabled": false});
    assert!(!disabled.built().data.enclave_enabled);
    // Before v1.15 a NodeClaim resource request turned them on; no request does now.
    let mut requested = Inputs::new();
    requested.claim["spec"]["resources"] = json!({"requests": {"eks.amazonaws.com/nitro-sandbox": "1", "eks.amazonaws.com/nip-slots": "1"}});
    assert!(!requested.built().data.enclave_enabled);
}

#[test]
fn al2023_defaults_to_one_encrypted_20gi_gp3_root_volume_and_imdsv2_hop_limit_1() {
    let data = Inputs::new().built().data;
    let block_devices = serde_json::to_value(&data.block_device_mappings).unwrap_or_default();
    assert_eq!(
        block_devices,
        json!([{"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": true, "VolumeSizeGib": 20, "VolumeType": "gp3"}}])
    );
    let metadata = serde_json::to_value(&data.metadata_options).unwrap_or_default();
    assert_eq!(
        metadata,
        json!({
            "HttpEndpoint": "enabled",
            "HttpProtocolIpv6": "disabled",
            "HttpPutResponseHopLimit": 1,
            "HttpTokens": "required",
            "InstanceMetadataTags": "disabled"
        })
    );
    assert_eq!(data.iam_instance_profile_name, "test-cluster_123");
    assert!(!data.monitoring_enabled);
    assert!(
        data.user_data.contains("maxPods: 29"),
        "ENI-limited m5.large"
    );
}

#[test]
fn the_family_defaults_differ_per_family() {
    let summary = |family| {
        default_block_device_mappings(family)
            .into_iter()
            .map(|m| (m.device_name.unwrap_or_default(), m.ebs.volume_size_gib))
            .collect::<Vec<_>>()
    };
    use karpenter_api::v1::AmiFamily::*;
    assert_eq!(summary(AL2), [("/dev/xvda".to_string(), Some(20))]);
    assert_eq!(
        summary(Bottlerocket),
        [
            ("/dev/xvda".to_string(), Some(4)),
            ("/dev/xvdb".to_string(), Some(20))
        ]
    );
    assert_eq!(summary(Windows2022), [("/dev/sda1".to_string(), Some(50))]);
    assert_eq!(summary(Custom), []);
}

#[test]
fn bottlerocket_gets_two_volumes_and_toml_user_data() {
    let mut inputs = Inputs::new();
    inputs.class["spec"]["amiSelectorTerms"] = json!([{"alias": "bottlerocket@latest"}]);
    let data = inputs.built().data;
    assert_eq!(data.block_device_mappings.len(), 2);
    assert!(data.user_data.starts_with("[settings.kubernetes]"));
}

#[test]
fn user_block_devices_are_converted_to_whole_gib_rounding_up() {
    let mut inputs = Inputs::new();
    inputs.class["spec"]["blockDeviceMappings"] = json!([{
        "deviceName": "/dev/xvda",
        "rootVolume": true,
        "ebs": {"volumeSize": "100G", "volumeType": "io2", "iops": 3000, "throughput": 0, "encrypted": true}
    }]);
    let mappings = inputs.built().data.block_device_mappings;
    let ebs = serde_json::to_value(&mappings).unwrap_or_default();
    // 100 GB = 93.13 GiB -> 94.
    assert_eq!(
        ebs,
        json!([{"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": true, "Iops": 3000, "VolumeSizeGib": 94, "VolumeType": "io2"}}])
    );
}

#[test]
fn the_primary_interface_carries_groups_and_the_public_ip_choice() {
    let mut inputs = Inputs::new();
    inputs.class["spec"]["associatePublicIPAddress"] = json!(false);
    inputs.class["spec"]["ipPrefixCount"] = json!(2);
    let data = inputs.built().data;
    assert!(data.security_group_ids.is_empty());
    let interfaces = serde_json::to_value(&data.network_interfaces).unwrap_or_default();
    assert_eq!(
        interfaces,
        json!([{"DeviceIndex": 0, "Groups": ["sg-0a", "sg-0b"], "AssociatePublicIpAddress": false, "Ipv4PrefixCount": 2}])
    );
}

#[test]
fn an_ipv6_cluster_gets_a_primary_ipv6_address() {
    let mut inputs = Inputs::new();
    inputs.cluster.dns_ip = Some("fd00:10:96::a".into());
    let interfaces = inputs.built().data.network_interfaces;
    let first = interfaces.first().cloned().unwrap_or_default();
    assert_eq!(
        (first.primary_ipv6, first.ipv6_address_count),
        (Some(true), Some(1))
    );
}

#[test]
fn an_ipv6_cluster_takes_ipv6_prefixes_and_no_ipv4_prefixes() {
    let mut inputs = Inputs::new();
    inputs.cluster.dns_ip = Some("fd00:10:96::a".into());
    inputs.class["spec"]["ipPrefixCount"] = json!(2);
    let interfaces = serde_json::to_value(&inputs.built().data.network_interfaces).unwrap();
    assert_eq!(
        interfaces,
        json!([{"DeviceIndex": 0, "Groups": ["sg-0a", "sg-0b"], "Ipv6PrefixCount": 2,
                "Ipv6AddressCount": 1, "PrimaryIpv6": true}])
    );
    let mut ipv4 = Inputs::new();
    ipv4.class["spec"]["ipPrefixCount"] = json!(2);
    let first = ipv4.built().data.network_interfaces[0].clone();
    assert_eq!(
        (
            first.ipv4_prefix_count,
            first.primary_ipv6,
            first.ipv6_address_count
        ),
        (Some(2), None, None),
        "an IPv4 cluster's interface has no IPv6 address"
    );
}

#[test]
fn the_placement_carries_the_tenancy_the_group_and_the_targeted_partition() {
    let mut inputs = Inputs::new();
    inputs.tenancy = "dedicated";
    inputs.placement = Some(Placement {
        group_id: "pg-0123".into(),
        partition_number: Some(2),
    });
    let data = inputs.built().data;
    assert_eq!(data.placement_tenancy, "dedicated");
    assert_eq!(data.placement_group_id.as_deref(), Some("pg-0123"));
    assert_eq!(data.placement_partition_number, Some(2));
    let plain = Inputs::new().built().data;
    assert_eq!(
        (plain.placement_group_id, plain.placement_partition_number),
        (None, None)
    );
}

#[test]
fn efa_requests_get_one_efa_interface_per_card() {
    let mut inputs = Inputs::new();
    inputs.claim["spec"]["resources"] = json!({"requests": {"vpc.amazonaws.com/efa": "2"}});
    let interfaces = inputs.built().data.network_interfaces;
    let layout: Vec<(Option<i32>, i32, Option<String>)> = interfaces
        .into_iter()
        .map(|ni| (ni.network_card_index, ni.device_index, ni.interface_type))
        .collect();
    assert_eq!(
        layout,
        [
            (Some(0), 0, Some("efa".to_string())),
            (Some(1), 1, Some("efa".to_string()))
        ]
    );
}

#[test]
fn spot_templates_also_tag_the_spot_request() {
    let mut inputs = Inputs::new();
    inputs.capacity_type = "spot";
    assert_eq!(
        inputs.built().data.tag_resource_types,
        ["network-interface", "spot-instances-request"]
    );
}

#[test]
fn karpenter_tags_win_over_the_node_class_tags() {
    let mut inputs = Inputs::new();
    inputs.class["spec"]["tags"] = json!({"team": "platform"});
    let tags = inputs.built().tags;
    let expected: Vec<(&str, &str)> = vec![
        ("eks:eks-cluster-name", "test-cluster"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("karpenter.sh/nodepool", "default"),
        ("kubernetes.io/cluster/test-cluster", "owned"),
        ("team", "platform"),
    ];
    let actual: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(actual, expected);
}

#[test]
fn missing_status_and_mixed_max_pods_are_typed_errors() {
    let mut no_groups = Inputs::new();
    no_groups.class["status"]["securityGroups"] = json!([]);
    assert_eq!(
        no_groups.build().err(),
        Some(LaunchTemplateError::NoSecurityGroups)
    );

    let mut no_profile = Inputs::new();
    no_profile.class["status"] = json!({"securityGroups": [{"id": "sg-0a"}]});
    assert_eq!(
        no_profile.build().err(),
        Some(LaunchTemplateError::NoInstanceProfile)
    );

    let mut mixed = Inputs::new();
    mixed.types = vec!["m5.large", "m5.xlarge"];
    assert!(matches!(
        mixed.build(),
        Err(LaunchTemplateError::MixedMaxPods { .. })
    ));

    let mut none = Inputs::new();
    none.types = vec![];
    assert_eq!(
        none.build().err(),
        Some(LaunchTemplateError::NoInstanceTypes)
    );

    let mut bad_user_data = Inputs::new();
    bad_user_data.class["spec"]["userData"] = json!("MIME-Version: 1.0\nbroken header\n\n");
    let message = bad_user_data.build().err().map(|e| e.to_string());
    assert!(message.is_some_and(|m| m.starts_with("spec.userData: ")));
}

fn reservation(kind: ReservationKind, interruptible: bool) -> Reservation {
    Reservation {
        id: "cr-0123456789abcdef0".into(),
        kind,
        interruptible,
        available_instances: 2,
    }
}

#[test]
fn a_reserved_template_targets_its_reservation_and_others_opt_out_with_the_gate_on() {
    let open = Inputs::new().built();
    assert_eq!(
        open.data.capacity_reservation_preference, None,
        "gate off: open ODCRs may catch it"
    );
    let mut none = Inputs::new();
    none.reservation = Some(None);
    let none = none.built();
    assert_eq!(
        none.data.capacity_reservation_preference.as_deref(),
        Some("none")
    );
    assert_eq!(none.data.capacity_reservation_id, None);
    assert_ne!(none.name, open.name);

    let mut odcr = Inputs::new();
    odcr.capacity_type = "reserved";
    odcr.reservation = Some(Some(reservation(ReservationKind::Default, false)));
    let odcr = odcr.built();
    assert_eq!(
        odcr.data.capacity_reservation_preference.as_deref(),
        Some("capacity-reservations-only")
    );
    assert_eq!(
        odcr.data.capacity_reservation_id.as_deref(),
        Some("cr-0123456789abcdef0")
    );
    assert_eq!(odcr.data.market_type, None);

    let mut block = Inputs::new();
    block.capacity_type = "reserved";
    block.reservation = Some(Some(reservation(ReservationKind::CapacityBlock, false)));
    assert_eq!(
        block.built().data.market_type.as_deref(),
        Some("capacity-block")
    );
    let mut interruptible = Inputs::new();
    interruptible.capacity_type = "reserved";
    interruptible.reservation = Some(Some(reservation(ReservationKind::Default, true)));
    let interruptible = interruptible.built();
    assert_eq!(
        interruptible.data.market_type.as_deref(),
        Some("interruptible-capacity-reservation")
    );
    assert_ne!(
        interruptible.name, odcr.name,
        "a template per reservation kind and id"
    );
}
