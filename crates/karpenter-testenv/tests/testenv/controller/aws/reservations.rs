//! Capacity reservations on EC2 (gate `ReservedCapacity`, on by default), against the
//! emulator's capacity reservation extension (docs/testing.md): an EC2NodeClass selecting a
//! reservation by tag lists it in its status, and a NodePool allowing `reserved` fills the
//! reservation before it launches on-demand.

use std::time::Duration;

use aws_sdk_ec2::types::{
    CapacityReservationInstancePlatform, InstanceMatchCriteria, ResourceType, Tag, TagSpecification,
};
use karpenter_api::v1::NodeClaim;
use karpenter_testenv::{AwsEnv, wait_for};

use super::{
    assert_inside_the_contract, condition, create_node_class_with, finish_on_aws, provider_id,
    spawn_kubelets, start_on_aws, wait_class_ready,
};
use crate::controller::claim_label;

/// The reservation's free slots, as the emulator counts them.
async fn free_slots(aws: &AwsEnv, id: &str) -> Option<i32> {
    aws.ec2()
        .describe_capacity_reservations()
        .capacity_reservation_ids(id)
        .send()
        .await
        .ok()?
        .capacity_reservations()
        .first()?
        .available_instance_count()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_node_class_selecting_a_reservation_by_tag_is_ready_and_launches_into_it_then_on_demand()
{
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-reserved", &aws, &[]).await;
    // A targeted ODCR of two c5.large in us-west-2a, tagged for this test.
    let reservation = aws
        .ec2()
        .create_capacity_reservation()
        .instance_type("c5.large")
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-west-2a")
        .instance_count(2)
        .instance_match_criteria(InstanceMatchCriteria::Targeted)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::CapacityReservation)
                .tags(
                    Tag::builder()
                        .key("testenv/odcr")
                        .value(&cloud.cluster)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("creating the capacity reservation")
        .capacity_reservation
        .and_then(|r| r.capacity_reservation_id)
        .expect("a reservation id");
    create_node_class_with(
        &h,
        &cloud,
        "al2023@latest",
        serde_json::json!({"capacityReservationSelectorTerms": [{"tags": {"testenv/odcr": cloud.cluster}}]}),
    )
    .await;
    let class = wait_class_ready(&h).await;
    let status = class.status.clone().unwrap_or_default();
    let ready = condition(status.conditions.as_deref(), "CapacityReservationsReady")
        .cloned()
        .expect("a CapacityReservationsReady condition");
    assert_eq!(ready.status, "True", "{ready:?}");
    let listed = status.capacity_reservations.unwrap_or_default();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, reservation);
    assert_eq!(listed[0].instance_type, "c5.large");
    assert_eq!(listed[0].availability_zone, "us-west-2a");
    assert_eq!(listed[0].owner_id, cloud.account);
    assert_eq!(
        listed[0].instance_match_criteria.as_deref(),
        Some("targeted")
    );
    assert_eq!(listed[0].reservation_type.as_deref(), Some("default"));
    assert_eq!(listed[0].state.as_deref(), Some("active"));

    // Three pods, one c5.large each: the two slots first, the third on-demand (in the same
    // batch a third launch into the reservation fails full and falls back on the next one).
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}
        ]),
    )
    .await;
    let kubelets = spawn_kubelets(&h);
    h.create_deployment("web", 3, "1200m").await;
    h.wait_running(3, Duration::from_secs(240)).await;
    let launched: Vec<NodeClaim> = wait_for(
        "three launched NodeClaims",
        Duration::from_secs(60),
        || async {
            let claims: Vec<NodeClaim> = h
                .node_claims()
                .await
                .into_iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_some())
                .collect();
            Ok((claims.len() == 3).then_some(claims))
        },
    )
    .await
    .expect("three NodeClaims launched");
    let mut kinds: Vec<(String, String)> = launched
        .iter()
        .map(|c| {
            (
                claim_label(c, "karpenter.sh/capacity-type"),
                claim_label(c, "karpenter.k8s.aws/capacity-reservation-id"),
            )
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("on-demand".to_owned(), String::new()),
            ("reserved".to_owned(), reservation.clone()),
            ("reserved".to_owned(), reservation.clone()),
        ],
        "two NodeClaims in the reservation, the third on-demand"
    );
    for claim in launched
        .iter()
        .filter(|c| claim_label(c, "karpenter.sh/capacity-type") == "reserved")
    {
        assert_eq!(
            claim_label(claim, "karpenter.k8s.aws/capacity-reservation-type"),
            "default"
        );
        assert_eq!(
            claim_label(
                claim,
                "karpenter.k8s.aws/capacity-reservation-interruptible"
            ),
            "false"
        );
        assert_eq!(
            claim_label(claim, "topology.kubernetes.io/zone"),
            "us-west-2a"
        );
    }
    assert_eq!(
        free_slots(&aws, &reservation).await,
        Some(0),
        "both slots taken"
    );
    // The reserved instances were launched through templates targeting the reservation.
    let calls = recorder.calls();
    assert!(
        calls
            .iter()
            .any(|c| c.operation == "DescribeCapacityReservations" && c.succeeded),
        "the class's reservations were described"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    kubelets.abort();
    finish_on_aws(h, &aws, &cloud).await;
    // Terminating the instances gave the slots back.
    assert_eq!(free_slots(&aws, &reservation).await, Some(2));
    let _ = aws
        .ec2()
        .cancel_capacity_reservation()
        .capacity_reservation_id(&reservation)
        .send()
        .await;
}
