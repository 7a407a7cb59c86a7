//! Interruption handling end to end: a queue on the AWS emulator (moto) through the real SQS
//! client, the controller on the real control plane with KWOK. On the simulated cloud an
//! instance is named after its Node, so a spot interruption names the node as its instance id.

use std::time::Duration;

use karpenter_api::v1::NodeClaim;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::aws::AwsEnv;
use karpenter_testenv::wait_for;

use super::{claim_label, prepare, spawn_controller};

fn spot_interruption(instance_id: &str) -> String {
    serde_json::json!({
        "version": "0",
        "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-11-25T03:50:00Z",
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance_id}")],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"}
    })
    .to_string()
}

fn node_name(claim: &NodeClaim) -> Option<String> {
    claim.status.as_ref()?.node_name.clone()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_spot_interruption_replaces_the_node_and_every_message_leaves_the_queue() {
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the AWS emulator");
    let sqs = aws.sqs();
    let mut h = prepare("interruption", &[], KwokOptions::default()).await;
    let queue = format!("karpenter-{}", h.scope.id());
    let url = sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await
        .expect("creating the queue")
        .queue_url
        .expect("a queue URL");
    h.spec.args = vec!["--interruption-queue".into(), queue.clone()];
    h.spec.sqs = Some(sqs.clone());
    let controller = spawn_controller(&h.env, &h.scope, &h.spec, None).await;
    h.controllers.push(controller);
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}
        ]),
    )
    .await;
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let before = h.node_claims().await;
    assert_eq!(before.len(), 1);
    let old = before[0].metadata.name.clone().unwrap_or_default();
    let old_zone = claim_label(&before[0], "topology.kubernetes.io/zone");
    let old_node = node_name(&before[0]).expect("a registered node");

    // A hostile message first: it must be deleted and must not block the real one.
    for body in ["{not json", &spot_interruption(&old_node)] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("sending a message");
    }
    let replaced = wait_for(
        "the interrupted node replaced, the pod running on the replacement",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let fresh: Vec<&NodeClaim> = claims
                .iter()
                .filter(|c| c.metadata.name.as_deref() != Some(old.as_str()))
                .collect();
            let gone = claims.len() == 1 && fresh.len() == 1;
            let home = fresh.first().and_then(|c| node_name(c));
            let running = h.pods().await.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.clone()) == home
                    && home.is_some()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            Ok((gone && running).then(|| claim_label(fresh[0], "topology.kubernetes.io/zone")))
        },
    )
    .await
    .expect("the interruption is handled");
    assert_ne!(
        replaced, old_zone,
        "the interrupted offering (c5.large spot in {old_zone}) is avoided for a while"
    );
    wait_for("the queue drained", Duration::from_secs(60), || async {
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "reading the queue's attributes: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(&e)
                )
            });
        let count = |name: aws_sdk_sqs::types::QueueAttributeName| -> u64 {
            attributes
                .attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse().ok())
                .unwrap_or(u64::MAX)
        };
        let visible = count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages);
        let in_flight =
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible);
        Ok((visible == 0 && in_flight == 0).then_some(()))
    })
    .await
    .expect("both messages, the malformed one too, are deleted");
    let scraped = crate::leader_election::http_get(h.controllers[0].metrics, "/metrics").await;
    assert!(
        scraped.contains(
            "karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 1"
        ),
        "{scraped}"
    );
    assert!(
        scraped.contains("karpenter_interruption_deleted_messages_total 2"),
        "{scraped}"
    );
    h.finish().await;
    let _ = sqs.delete_queue().queue_url(&url).send().await;
}
