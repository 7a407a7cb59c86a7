//! From a parsed message to the actions upstream takes on the NodeClaims it names.
//!
//! Owns: per instance id that maps to one of our NodeClaims, in this order, the kind's events
//! (NodeClaim and Node), marking the (spot, instance type, zone) offering unavailable for a spot
//! interruption and the NodeClaim's capacity reservation unavailable for a capacity
//! reservation interruption, expiring the termination grace of a NodeClaim whose instance or system status
//! check failed (upstream's `ForcefulTermination`), and deleting the NodeClaim for every kind
//! except a rebalance recommendation. Instance ids that are not ours produce nothing (the
//! message is still deleted).
//!
//! Must not: look anything up itself (the caller's `lookup` maps instance ids to NodeClaims),
//! call the API server or EC2, or read the clock.

use super::events::{self, InterruptionEvent};
use super::kind::MessageKind;
use super::message::Message;

/// What the caller knows of the NodeClaim that owns an instance: names, and the offering it runs
/// on as read from its labels (`node.kubernetes.io/instance-type`, `topology.kubernetes.io/zone`,
/// `karpenter.sh/capacity-type`), each absent when the label is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRef {
    pub name: String,
    pub node_name: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    /// The `karpenter.sh/capacity-type` label, for the shell's
    /// `karpenter_nodeclaims_disrupted_total{capacity_type}`.
    pub capacity_type: Option<String>,
    /// The `karpenter.k8s.aws/capacity-reservation-id` label (a reserved NodeClaim).
    pub reservation_id: Option<String>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Mark the offering unavailable in the unavailable-offerings cache (its usual 3-minute TTL).
    MarkUnavailable {
        instance_type: String,
        zone: String,
        capacity_type: &'static str,
    },
    /// Mark the capacity reservation the interrupted instance ran in unavailable (its usual
    /// 3-minute TTL), scoped to that reservation as upstream (`WithReservationID`): an
    /// interruption is a health event, not a full reservation, and other reservations of the
    /// same instance type and zone stay offered.
    MarkReservationUnavailable {
        reservation_id: String,
        instance_type: String,
        zone: String,
    },
    /// Delete the NodeClaim; the core termination flow cordons, drains and terminates. After the
    /// API server accepts it the shell records [`events::terminating_on_interruption`] and counts
    /// `karpenter_nodeclaims_disrupted_total{reason}` with `reason` as the label.
    DeleteNodeClaim {
        name: String,
        node_name: Option<String>,
        reason: MessageKind,
    },
    /// Set `karpenter.sh/nodeclaim-termination-timestamp` to now (unless it is set), so the
    /// termination that follows does not wait for the drain or volume detachment: the
    /// instance is broken. Comes right before the NodeClaim's [`Action::DeleteNodeClaim`]; when
    /// it fails, the deletion is not made (the next poll tries again), as upstream.
    ExpireTerminationGrace { name: String },
    /// Record an event.
    Event(InterruptionEvent),
}

/// The actions for `message`. `lookup` maps an EC2 instance id to our NodeClaim, if any.
pub fn decide(message: &Message, lookup: impl Fn(&str) -> Option<ClaimRef>) -> Vec<Action> {
    decide_for(message.kind(), message.instance_ids(), lookup)
}

/// The actions for a message of `kind` about `instance_ids` (from the queue, or from an
/// instance status check: [`super::instance_status`]).
pub fn decide_for(
    kind: MessageKind,
    instance_ids: &[String],
    lookup: impl Fn(&str) -> Option<ClaimRef>,
) -> Vec<Action> {
    if kind == MessageKind::NoOp {
        return Vec::new();
    }
    let mut actions = Vec::new();
    for instance_id in instance_ids {
        let Some(claim) = lookup(instance_id) else {
            continue;
        };
        actions.extend(
            events::for_message(kind, &claim.name, claim.node_name.as_deref())
                .into_iter()
                .map(Action::Event),
        );
        if kind == MessageKind::SpotInterrupted {
            // Upstream marks only when both labels are known.
            if let (Some(instance_type), Some(zone)) = (
                claim.instance_type.clone().filter(|t| !t.is_empty()),
                claim.zone.clone().filter(|z| !z.is_empty()),
            ) {
                actions.push(Action::MarkUnavailable {
                    instance_type,
                    zone,
                    capacity_type: karpenter_api::labels::CAPACITY_TYPE_SPOT,
                });
            }
        }
        if kind == MessageKind::CapacityReservationInterrupted {
            // Upstream marks only when the type, zone and reservation labels are all known.
            if let (Some(instance_type), Some(zone), Some(reservation_id)) = (
                claim.instance_type.clone().filter(|t| !t.is_empty()),
                claim.zone.clone().filter(|z| !z.is_empty()),
                claim.reservation_id.clone().filter(|r| !r.is_empty()),
            ) {
                actions.push(Action::MarkReservationUnavailable {
                    reservation_id,
                    instance_type,
                    zone,
                });
            }
        }
        if matches!(
            kind,
            MessageKind::InstanceStatus | MessageKind::SystemStatus
        ) {
            actions.push(Action::ExpireTerminationGrace {
                name: claim.name.clone(),
            });
        }
        if kind != MessageKind::RebalanceRecommendation {
            actions.push(Action::DeleteNodeClaim {
                name: claim.name,
                node_name: claim.node_name,
                reason: kind,
            });
        }
    }
    actions
}
