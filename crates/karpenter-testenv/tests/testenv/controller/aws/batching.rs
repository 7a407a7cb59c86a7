//! Request batching on EC2: a burst of NodeClaims is launched with fewer `CreateFleet` calls
//! than NodeClaims and terminated with fewer `TerminateInstances` calls than instances, every
//! call inside the IAM policy (docs/aws.md#batching-of-ec2-calls).

use std::time::Duration;

use karpenter_api::v1::NodeClaim;
use karpenter_aws::iam::recorded::RecordedCall;
use karpenter_testenv::{AwsEnv, wait_for};
use kube::api::{Api, DeleteParams};

use super::{
    assert_inside_the_contract, create_node_class, finish_on_aws, live_instances, provider_id,
    spawn_kubelets, start_on_aws, wait_class_ready,
};

/// How many of `calls` were `ec2:<operation>`, and how many of those succeeded.
fn ec2_calls(calls: &[RecordedCall], operation: &str) -> (usize, usize) {
    let of: Vec<&RecordedCall> = calls
        .iter()
        .filter(|c| c.service == "ec2" && c.operation == operation)
        .collect();
    (of.len(), of.iter().filter(|c| c.succeeded).count())
}

/// NodeClaims in the burst (c5.large holds one 1500m pod: one NodeClaim per pod).
const BURST: usize = 8;

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn a_burst_of_nodeclaims_is_launched_and_terminated_with_fewer_ec2_calls_than_nodeclaims() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws("aws-batching", &aws, &[]).await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(None, crate::controller::only(&["c5.large"]))
        .await;
    let kubelets = spawn_kubelets(&h);
    let before_launches = recorder.calls().len();
    h.create_deployment("web", BURST as i32, "1500m").await;
    h.wait_running(BURST, Duration::from_secs(180)).await;
    let claims = h.node_claims().await;
    let launched: Vec<String> = claims
        .iter()
        .filter_map(provider_id)
        .filter_map(|p| p.rsplit('/').next().map(str::to_owned))
        .collect();
    assert_eq!(launched.len(), BURST, "one instance per NodeClaim");
    let calls = recorder.calls().split_off(before_launches);
    let (fleets, fleets_ok) = ec2_calls(&calls, "CreateFleet");
    tracing::info!(
        nodeclaims = BURST,
        create_fleet = fleets,
        describe_instances = ec2_calls(&calls, "DescribeInstances").0,
        "batching: EC2 calls of the burst's launches"
    );
    assert!(
        fleets_ok >= 1 && fleets < BURST,
        "{BURST} NodeClaims launched with {fleets} CreateFleet calls ({fleets_ok} succeeded): the launches of one batch share calls"
    );

    // Their termination, all at once: the pods go first so nothing asks for new nodes.
    h.scale("web", 0).await;
    let before_terminations = recorder.calls().len();
    Api::<NodeClaim>::all(h.client.clone())
        .delete_collection(&DeleteParams::default(), &h.pool_selector())
        .await
        .expect("deleting the NodeClaims");
    wait_for(
        "the burst's instances terminated",
        Duration::from_secs(120),
        || async {
            let live = live_instances(&aws, &cloud.cluster).await;
            Ok(launched
                .iter()
                .all(|id| !live.contains_key(id))
                .then_some(()))
        },
    )
    .await
    .expect("the deleted NodeClaims' instances are terminated");
    kubelets.abort();
    let calls = recorder.calls().split_off(before_terminations);
    let (terminations, _) = ec2_calls(&calls, "TerminateInstances");
    tracing::info!(
        instances = BURST,
        terminate_instances = terminations,
        describe_instances = ec2_calls(&calls, "DescribeInstances").0,
        "batching: EC2 calls of the burst's terminations"
    );
    assert!(
        (1..BURST).contains(&terminations),
        "{BURST} instances terminated with {terminations} TerminateInstances calls: the terminations share calls"
    );
    // Every call of the test, launches and terminations included.
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}
