//! The Kubernetes events interruption handling records, with upstream's reasons, types and
//! messages (`pkg/controllers/interruption/events/events.go`).
//!
//! Owns: which event goes with which message kind, on the NodeClaim and (when known) its Node.
//! Must not: publish anything; the async shell turns these values into `Event` objects and
//! de-duplicates them by the involved object's UID as upstream does.

use super::kind::MessageKind;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// The object an event is about, by name (both kinds are cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Involved {
    NodeClaim(String),
    Node(String),
}

/// One event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptionEvent {
    pub involved: Involved,
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: &'static str,
}

/// The reason recorded after a NodeClaim deletion this controller started has gone through.
pub const TERMINATING_ON_INTERRUPTION: &str = "TerminatingOnInterruption";

/// The event of a message kind (none for no-ops): `(type, reason, message)`.
fn notice(kind: MessageKind) -> Option<(EventType, &'static str, &'static str)> {
    use EventType::{Normal, Warning};
    match kind {
        MessageKind::SpotInterrupted => Some((
            Warning,
            "SpotInterrupted",
            "Spot interruption warning was triggered",
        )),
        MessageKind::CapacityReservationInterrupted => Some((
            Warning,
            "CapacityReservationInstanceInterrupted",
            "Capacity Reservation interruption warning was triggered",
        )),
        MessageKind::RebalanceRecommendation => Some((
            Normal,
            "SpotRebalanceRecommendation",
            "Spot rebalance recommendation was triggered",
        )),
        MessageKind::ScheduledChange
        | MessageKind::InstanceStatus
        | MessageKind::SystemStatus
        | MessageKind::EventStatus => Some((
            Warning,
            "InstanceUnhealthy",
            "An unhealthy warning was triggered for the instance",
        )),
        MessageKind::InstanceStopped => Some((Warning, "InstanceStopping", "Instance is stopping")),
        MessageKind::InstanceTerminated => {
            Some((Warning, "InstanceTerminating", "Instance is terminating"))
        }
        MessageKind::NoOp => None,
    }
}

/// The events for a message of `kind` about `nodeclaim` (and its `node`, when there is one).
pub fn for_message(
    kind: MessageKind,
    nodeclaim: &str,
    node: Option<&str>,
) -> Vec<InterruptionEvent> {
    let Some((event_type, reason, message)) = notice(kind) else {
        return Vec::new();
    };
    let mut involved = vec![Involved::NodeClaim(nodeclaim.to_owned())];
    involved.extend(node.map(|n| Involved::Node(n.to_owned())));
    involved
        .into_iter()
        .map(|involved| InterruptionEvent {
            involved,
            event_type,
            reason,
            message,
        })
        .collect()
}

/// The events the shell records once a deletion started here has been accepted (not when the
/// NodeClaim was already gone).
pub fn terminating_on_interruption(nodeclaim: &str, node: Option<&str>) -> Vec<InterruptionEvent> {
    let mut events = vec![InterruptionEvent {
        involved: Involved::NodeClaim(nodeclaim.to_owned()),
        event_type: EventType::Warning,
        reason: TERMINATING_ON_INTERRUPTION,
        message: "Interruption triggered termination for the NodeClaim",
    }];
    events.extend(node.map(|n| InterruptionEvent {
        involved: Involved::Node(n.to_owned()),
        event_type: EventType::Warning,
        reason: TERMINATING_ON_INTERRUPTION,
        message: "Interruption triggered termination for the Node",
    }));
    events
}
