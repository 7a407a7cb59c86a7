//! Instance health on EC2 without the interruption queue: instance status checks
//! (`ec2:DescribeInstanceStatus`, polled every `INSTANCE_STATUS_INTERVAL`) and ARC zonal shifts
//! (`ENABLE_ZONAL_SHIFT`), against the emulator's extensions for both (`testenv/README.md`).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use karpenter_api::v1::NodeClaim;
use karpenter_testenv::{AwsEnv, wait_for};
use kube::api::{Api, ListParams, PostParams};

use super::{
    Harness, assert_inside_the_contract, create_node_class, finish_on_aws, instance,
    instance_state, kube_error, provider_id, spawn_kubelets, start_on_aws_faulty, wait_class_ready,
    wait_launched,
};
use crate::controller::claim_label;

fn on_demand_c5() -> serde_json::Value {
    serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}
    ])
}

/// The first event with `reason` about the cluster-scoped object `name`.
async fn wait_event(h: &Harness, name: &str, reason: &str, what: &str) -> Event {
    wait_for(what, Duration::from_secs(90), || async {
        let events = Api::<Event>::namespaced(h.client.clone(), "default")
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .map_err(kube_error("listing events"))?;
        Ok(events
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason)))
    })
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn an_instance_whose_system_status_check_fails_is_replaced_and_terminated_without_a_queue() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws_faulty(
        "aws-instance-status",
        &aws,
        &[],
        false,
        None,
        &["--instance-status-interval=2s"],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(None, on_demand_c5()).await;
    let kubelets = spawn_kubelets(&h);
    h.create_deployment("web", 1, "1500m").await;
    h.wait_running(1, Duration::from_secs(120)).await;
    let claim = wait_launched(&h).await;
    let old = claim.metadata.name.clone().unwrap_or_default();
    let provider = provider_id(&claim).unwrap_or_default();
    let id = provider.rsplit('/').next().unwrap_or_default().to_owned();
    // Node repair's in-place reboot (`RebootForRepair`) signs as the controller too: the
    // emulator's IAM enforcement of the generated policy lets the provider's exact call
    // through (the call is checked against the policy with the others at the end). Through
    // repair it would take the AWS policy's 10-minute toleration, counted from the Node's
    // creation, so the provider call is made directly with the controller's clients.
    let controller = h.spec.aws.clone().expect("the controller's AWS clients");
    karpenter_aws_provider::instances::reboot(&controller, &id)
        .await
        .expect("ec2:RebootInstances of a cluster instance is allowed by the policy");
    // A failing check younger than upstream's two minutes does not count yet.
    aws.set_instance_status(&serde_json::json!({
        "region": aws.region(), "instance_id": id, "instance_status": "impaired",
        "impaired_since": chrono::Utc::now().to_rfc3339(),
    }))
    .await
    .expect("making the instance's check fail just now");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        h.node_claims()
            .await
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(old.as_str())
                && c.metadata.deletion_timestamp.is_none()),
        "a check failing for seconds leaves the NodeClaim alone"
    );
    aws.set_instance_status(&serde_json::json!({
        "region": aws.region(), "instance_id": id, "system_status": "impaired",
        "impaired_since": (chrono::Utc::now() - chrono::TimeDelta::minutes(10)).to_rfc3339(),
    }))
    .await
    .expect("making the instance's system check fail for ten minutes");
    wait_event(
        &h,
        &old,
        "InstanceUnhealthy",
        "an InstanceUnhealthy event on the NodeClaim",
    )
    .await;
    wait_for(
        "a replacement running the pod, the impaired instance terminated",
        Duration::from_secs(180),
        || async {
            let claims = h.node_claims().await;
            let fresh: Vec<&NodeClaim> = claims
                .iter()
                .filter(|c| c.metadata.name.as_deref() != Some(old.as_str()))
                .collect();
            let home = fresh
                .first()
                .and_then(|c| c.status.as_ref()?.node_name.clone());
            let running = home.is_some()
                && h.pods().await.iter().any(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.clone()) == home
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                });
            let state = instance(&aws, &id).await.map(|i| instance_state(&i));
            let terminated = matches!(
                state.as_deref(),
                Some("shutting-down" | "terminated") | None
            );
            Ok((claims.len() == 1 && fresh.len() == 1 && running && terminated).then_some(()))
        },
    )
    .await
    .expect("the impaired instance is replaced");
    kubelets.abort();
    assert!(
        recorder
            .calls()
            .iter()
            .any(|c| c.operation == "DescribeInstanceStatus" && c.succeeded),
        "the controller polled DescribeInstanceStatus"
    );
    assert!(
        recorder
            .calls()
            .iter()
            .any(|c| c.operation == "RebootInstances" && c.succeeded),
        "the reboot was made and recorded as the controller's"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK and the AWS emulator: run scripts/test-integration"]
async fn with_zonal_shift_on_a_shifted_zone_gets_no_launches_until_the_shift_is_cancelled() {
    let _classes = crate::NODE_CLASSES.write().await;
    let (aws, _shared) = AwsEnv::shared().await.expect("finding the emulator");
    let (h, cloud, recorder) = start_on_aws_faulty(
        "aws-zonal-shift",
        &aws,
        &[],
        false,
        None,
        &["--enable-zonal-shift"],
    )
    .await;
    create_node_class(&h, &cloud, "al2023@latest").await;
    wait_class_ready(&h).await;
    h.node_pool(None, on_demand_c5()).await;
    // us-west-2a is shifted away from once the NodePool exists (as upstream, a pool is told of
    // the shifts that start while it exists); the controller sees it at its next refresh.
    let (subnet, shifted_zone) = cloud.subnets[0].clone();
    let zone_id = aws
        .ec2()
        .describe_subnets()
        .subnet_ids(&subnet)
        .send()
        .await
        .expect("describing the subnet")
        .subnets()
        .first()
        .and_then(|s| s.availability_zone_id().map(str::to_owned))
        .expect("the subnet has a zone id");
    let cluster_arn = aws
        .eks()
        .describe_cluster()
        .name(&cloud.cluster)
        .send()
        .await
        .expect("describing the cluster")
        .cluster
        .and_then(|c| c.arn)
        .expect("the cluster has an ARN");
    let shift = aws
        .arc()
        .start_zonal_shift()
        .resource_identifier(&cluster_arn)
        .away_from(&zone_id)
        .expires_in("30m")
        .comment("karpenter-rs test")
        .send()
        .await
        .expect("starting a zonal shift");
    wait_event(
        &h,
        &h.pool,
        "ZonalShiftActive",
        "a ZonalShiftActive event on the NodePool",
    )
    .await;
    let kubelets = spawn_kubelets(&h);
    // One pod that can only run in the shifted zone, two that can run anywhere.
    let mut pinned = h.deployment("pinned", 1, "1500m");
    if let Some(spec) = pinned.spec.template.spec.as_mut() {
        spec.node_selector
            .get_or_insert_with(Default::default)
            .insert("topology.kubernetes.io/zone".into(), shifted_zone.clone());
    }
    Api::<Deployment>::namespaced(h.client.clone(), h.scope.namespace())
        .create(&PostParams::default(), &pinned)
        .await
        .expect("creating the pinned deployment");
    h.create_deployment("web", 2, "1500m").await;
    h.wait_running(2, Duration::from_secs(180)).await;
    let zones: Vec<String> = h
        .node_claims()
        .await
        .iter()
        .map(|c| claim_label(c, "topology.kubernetes.io/zone"))
        .collect();
    assert_eq!(
        zones.len(),
        2,
        "one NodeClaim per web pod, none for the pinned pod: {zones:?}"
    );
    assert!(
        zones.iter().all(|z| z != &shifted_zone),
        "nothing launches into the shifted zone {shifted_zone}: {zones:?}"
    );
    // The shift ends: the pinned pod gets its node in that zone at the next refresh (30 s).
    aws.arc()
        .cancel_zonal_shift()
        .zonal_shift_id(shift.zonal_shift_id())
        .send()
        .await
        .expect("cancelling the zonal shift");
    wait_event(
        &h,
        &h.pool,
        "ZonalShiftCleared",
        "a ZonalShiftCleared event on the NodePool",
    )
    .await;
    h.wait_running(3, Duration::from_secs(120)).await;
    assert!(
        h.node_claims()
            .await
            .iter()
            .any(|c| claim_label(c, "topology.kubernetes.io/zone") == shifted_zone),
        "once the shift is cancelled, the pinned pod gets a node in {shifted_zone}"
    );
    kubelets.abort();
    assert!(
        recorder
            .calls()
            .iter()
            .any(|c| c.operation == "GetManagedResource" && c.succeeded),
        "the controller asked ARC"
    );
    assert_inside_the_contract(&recorder, &cloud, aws.region());
    finish_on_aws(h, &aws, &cloud).await;
}
