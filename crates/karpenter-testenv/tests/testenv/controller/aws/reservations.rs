//! Capacity reservations on EC2 (gate `ReservedCapacity`, on by default), against the
//! emulator's capacity reservation extension (docs/testing.md): an EC2NodeClass selecting a
//! reservation by tag lists it in its status, and a NodePool allowing `reserved` fills the
//! reservation before it launches on-demand; a node in a Capacity Block about to end is
//! replaced before the end.

use std::time::Duration;

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types::{
    CapacityReservationInstancePlatform, EndDateType, InstanceMatchCriteria, ResourceType, Tag,
    TagSpecification,
};
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_testenv::{AwsEnv, wait_for};
use kube::api::{Api, Patch, PatchParams};

use super::{
    assert_inside_the_contract, condition, create_node_class_with, finish_on_aws, provider_id,
    spawn_kubelets, start_on_aws, wait_class_ready,
};
use crate::controller::claim_label;

/// A targeted reservation of `count` c5.large in us-west-2a tagged `tag` = `value` (plus
/// `extra` tags: the emulator's `testenv:reservation-type`), ending at `end` if given; its id.
async fn reserve(
    aws: &AwsEnv,
    count: i32,
    (tag, value): (&str, &str),
    extra: &[(&str, &str)],
    end: Option<DateTime>,
) -> String {
    let mut tags = TagSpecification::builder()
        .resource_type(ResourceType::CapacityReservation)
        .tags(Tag::builder().key(tag).value(value).build());
    for (k, v) in extra {
        tags = tags.tags(Tag::builder().key(*k).value(*v).build());
    }
    aws.ec2()
        .create_capacity_reservation()
        .instance_type("c5.large")
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-west-2a")
        .instance_count(count)
        .instance_match_criteria(InstanceMatchCriteria::Targeted)
        .tag_specifications(tags.build())
        .set_end_date(end)
        .set_end_date_type(end.map(|_| EndDateType::Limited))
        .send()
        .await
        .expect("creating the capacity reservation")
        .capacity_reservation
        .and_then(|r| r.capacity_reservation_id)
        .expect("a reservation id")
}

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
    let reservation = reserve(&aws, 2, ("testenv/odcr", &cloud.cluster), &[], None).await;
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

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_node_in_a_capacity_block_whose_end_comes_within_forty_minutes_is_replaced_before_the_end()
 {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-block-end", &aws, &[]).await;
    let in_secs = |d: chrono::Duration| DateTime::from_secs((chrono::Utc::now() + d).timestamp());
    // A one-instance Capacity Block ending in three hours.
    let block = reserve(
        &aws,
        1,
        ("testenv/block", &cloud.cluster),
        &[("testenv:reservation-type", "capacity-block")],
        Some(in_secs(chrono::Duration::hours(3))),
    )
    .await;
    let terms = |extra: Option<&str>| {
        let mut terms = vec![serde_json::json!({"tags": {"testenv/block": cloud.cluster}})];
        terms.extend(extra.map(|id| serde_json::json!({"id": id})));
        serde_json::json!({"capacityReservationSelectorTerms": terms})
    };
    create_node_class_with(&h, &cloud, "al2023@latest", terms(None)).await;
    let class = wait_class_ready(&h).await;
    let listed = class
        .status
        .and_then(|s| s.capacity_reservations)
        .unwrap_or_default();
    assert_eq!(
        listed
            .iter()
            .map(|r| (
                r.id.as_str(),
                r.reservation_type.as_deref(),
                r.state.as_deref()
            ))
            .collect::<Vec<_>>(),
        [(block.as_str(), Some("capacity-block"), Some("active"))]
    );
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}
        ]),
    )
    .await;
    let kubelets = spawn_kubelets(&h);
    h.create_deployment("web", 1, "1200m").await;
    h.wait_running(1, Duration::from_secs(60)).await;
    let in_block = h
        .node_claims()
        .await
        .into_iter()
        .find(|c| claim_label(c, "karpenter.k8s.aws/capacity-reservation-id") == block)
        .expect("the pod's NodeClaim is in the block");
    assert_eq!(
        claim_label(&in_block, "karpenter.k8s.aws/capacity-reservation-type"),
        "capacity-block"
    );
    let old_claim = in_block.metadata.name.clone().unwrap_or_default();
    let old_node = in_block
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim registered");

    // The block now ends in 30 minutes: inside the 40 minutes before its end in which EC2
    // starts reclaiming (at 30) and Karpenter drains first. Capacity Blocks' ends are fixed
    // when they are bought; the emulator moves this one so the test need not wait. A new
    // selector term (terms are not hashed: nothing drifts) makes the class read its
    // reservations now rather than at its next minute.
    aws.ec2()
        .modify_capacity_reservation()
        .capacity_reservation_id(&block)
        .end_date(in_secs(chrono::Duration::minutes(30)))
        .end_date_type(EndDateType::Limited)
        .send()
        .await
        .expect("moving the block's end");
    Api::<EC2NodeClass>::all(h.client.clone())
        .patch(
            &h.node_class,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": terms(Some(&block))})),
        )
        .await
        .expect("adding a selector term");

    // The NodeClaim is deleted, and the pod runs again elsewhere, on-demand (the expiring
    // block is not offered any more).
    let replacement = wait_for(
        "the block's NodeClaim deleted and its pod running on an on-demand node",
        Duration::from_secs(60),
        || async {
            let claims = h.node_claims().await;
            let old_live = claims.iter().any(|c| {
                c.metadata.name.as_deref() == Some(old_claim.as_str())
                    && c.metadata.deletion_timestamp.is_none()
            });
            let moved = h.pods().await.into_iter().find(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
                node.is_some_and(|n| n != old_node)
                    && p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            let on_demand = moved.and_then(|p| {
                let node = p.spec?.node_name?;
                claims.into_iter().find(|c| {
                    c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                        && claim_label(c, "karpenter.sh/capacity-type") == "on-demand"
                })
            });
            Ok(on_demand.filter(|_| !old_live))
        },
    )
    .await
    .expect("the node in the expiring block is replaced before the block ends");
    assert_eq!(
        claim_label(&replacement, "karpenter.k8s.aws/capacity-reservation-id"),
        ""
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    kubelets.abort();
    finish_on_aws(h, &aws, &cloud).await;
    let _ = aws
        .ec2()
        .cancel_capacity_reservation()
        .capacity_reservation_id(&block)
        .send()
        .await;
}
