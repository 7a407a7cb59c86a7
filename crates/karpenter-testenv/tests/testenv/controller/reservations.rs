//! Capacity reservations on the real control plane + KWOK (`KWOK_CAPACITY_RESERVATIONS`): a
//! NodePool allowing `reserved` fills a reservation's slots first, then goes on-demand; the
//! reserved Nodes carry the reservation's labels; deleting one gives its slot back for the next
//! pod, and the reservation never holds more NodeClaims than its slots.

use std::time::Duration;

use karpenter_api::v1::NodeClaim;
use karpenter_kwok_provider::KwokOptions;
use karpenter_kwok_provider::reservations::KwokReservation;
use karpenter_testenv::wait_for;
use kube::api::{Api, DeleteParams};

use super::{claim_label, start};

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn a_reservation_takes_the_first_nodes_until_full_then_on_demand_and_a_freed_slot_is_reused()
{
    let kwok = KwokOptions {
        reservations: vec![
            KwokReservation::parse("cr-0123456789abcdef0=c5.large:us-east-1a:2")
                .expect("a reservation entry"),
        ],
        ..KwokOptions::default()
    };
    let h = start("reservations", &[], kwok).await;
    h.node_pool(
        None,
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
        ]),
    )
    .await;
    // Three pods, one c5.large each (1.93 CPUs allocatable).
    h.create_deployment("big", 3, "1500m").await;
    h.wait_running(3, Duration::from_secs(120)).await;
    let by_type = |claims: &[NodeClaim]| {
        let mut reserved = Vec::new();
        let mut on_demand = 0;
        for c in claims {
            match claim_label(c, "karpenter.sh/capacity-type").as_str() {
                "reserved" => {
                    reserved.push(claim_label(c, "karpenter.k8s.aws/capacity-reservation-id"))
                }
                "on-demand" => on_demand += 1,
                other => panic!("a NodeClaim of capacity type {other:?}"),
            }
        }
        (reserved, on_demand)
    };
    let claims = h.node_claims().await;
    assert_eq!(claims.len(), 3, "one NodeClaim per pod");
    let (reserved, on_demand) = by_type(&claims);
    assert_eq!(
        reserved,
        ["cr-0123456789abcdef0", "cr-0123456789abcdef0"],
        "the reservation's two slots first"
    );
    assert_eq!(on_demand, 1, "then on-demand");
    for c in claims
        .iter()
        .filter(|c| claim_label(c, "karpenter.sh/capacity-type") == "reserved")
    {
        assert_eq!(
            claim_label(c, "karpenter.k8s.aws/capacity-reservation-type"),
            "default"
        );
        assert_eq!(
            claim_label(c, "karpenter.k8s.aws/capacity-reservation-interruptible"),
            "false"
        );
    }
    // A reserved NodeClaim deleted: its slot is given back when its instance is gone (its
    // pod's replacement may go on-demand meanwhile, the reservation being full until then).
    let freed = claims
        .iter()
        .find(|c| claim_label(c, "karpenter.sh/capacity-type") == "reserved")
        .and_then(|c| c.metadata.name.clone())
        .expect("a reserved NodeClaim");
    Api::<NodeClaim>::all(h.client.clone())
        .delete(&freed, &DeleteParams::default())
        .await
        .expect("deleting a reserved NodeClaim");
    wait_for(
        &format!("NodeClaim {freed} gone and its pod on a new NodeClaim"),
        Duration::from_secs(120),
        || async {
            let claims = h.node_claims().await;
            let gone = claims
                .iter()
                .all(|c| c.metadata.name.as_deref() != Some(freed.as_str()));
            Ok((gone && claims.len() == 3).then_some(()))
        },
    )
    .await
    .expect("the evicted pod gets a node");
    h.wait_running(3, Duration::from_secs(120)).await;
    // One more pod: the reservation has its second slot again, and is never over-filled.
    h.scale("big", 4).await;
    h.wait_running(4, Duration::from_secs(120)).await;
    let (reserved, on_demand) = by_type(&h.node_claims().await);
    assert_eq!(
        (reserved.len(), on_demand),
        (2, 2),
        "the freed slot is used again, and no NodeClaim beyond the reservation's two: {reserved:?}"
    );
    h.finish().await;
}
