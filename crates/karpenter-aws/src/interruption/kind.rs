//! The kind of a parsed message, and the metric names and labels the async shell records it
//! under (upstream's names, from `pkg/controllers/interruption/metrics.go`).
//!
//! Owns: [`MessageKind`] (the `message_type` label and the `reason` a deletion is counted
//! under), the metric names, and the queue duration as a value computed from a `now` the caller
//! passes in. Must not: register or export metrics, or read the clock.

use chrono::{DateTime, Utc};

use super::message::{Detail, InstanceState, Message};

/// `karpenter_interruption_received_messages_total{message_type}`: one per parsed message, with
/// [`MessageKind::as_str`] as the label (no-ops included; bodies that fail to parse are not
/// counted, as upstream).
pub const RECEIVED_MESSAGES_TOTAL: &str = "karpenter_interruption_received_messages_total";
/// `karpenter_interruption_deleted_messages_total`: one per message deleted from the queue
/// (handled, no-op or malformed).
pub const DELETED_MESSAGES_TOTAL: &str = "karpenter_interruption_deleted_messages_total";
/// `karpenter_interruption_message_queue_duration_seconds`: histogram of `now - envelope time`,
/// observed for every message that is not a no-op ([`Message::queue_seconds`]).
pub const MESSAGE_QUEUE_DURATION_SECONDS: &str =
    "karpenter_interruption_message_queue_duration_seconds";
/// The label of [`RECEIVED_MESSAGES_TOTAL`].
pub const MESSAGE_TYPE_LABEL: &str = "message_type";

/// What a message is, as upstream's `messages.Kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageKind {
    SpotInterrupted,
    /// EC2 reclaims an instance of an interruptible capacity reservation.
    CapacityReservationInterrupted,
    RebalanceRecommendation,
    ScheduledChange,
    InstanceStopped,
    InstanceTerminated,
    /// An EC2 instance status check failed (`DescribeInstanceStatus`, not the queue).
    InstanceStatus,
    /// An EC2 system status check failed (the host).
    SystemStatus,
    /// EC2 scheduled an event (reboot, maintenance, retirement, stop) for the instance.
    EventStatus,
    NoOp,
}

impl MessageKind {
    pub const ALL: [Self; 10] = [
        Self::SpotInterrupted,
        Self::CapacityReservationInterrupted,
        Self::RebalanceRecommendation,
        Self::ScheduledChange,
        Self::InstanceStopped,
        Self::InstanceTerminated,
        Self::InstanceStatus,
        Self::SystemStatus,
        Self::EventStatus,
        Self::NoOp,
    ];

    /// The `message_type` label value (and the `reason` of
    /// `karpenter_nodeclaims_disrupted_total` for a deletion). The status kinds never come
    /// from the queue, so they are reasons only.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SpotInterrupted => "spot_interrupted",
            Self::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            Self::RebalanceRecommendation => "rebalance_recommendation",
            Self::ScheduledChange => "scheduled_change",
            Self::InstanceStopped => "instance_stopped",
            Self::InstanceTerminated => "instance_terminated",
            Self::InstanceStatus => "instance_status",
            Self::SystemStatus => "system_status",
            Self::EventStatus => "event_status",
            Self::NoOp => "no_op",
        }
    }
}

impl std::fmt::Display for MessageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Message {
    /// The kind: state changes to states that need no action are no-ops, as upstream.
    pub fn kind(&self) -> MessageKind {
        match &self.detail {
            Detail::SpotInterruption { .. } => MessageKind::SpotInterrupted,
            Detail::CapacityReservationInterruption { .. } => {
                MessageKind::CapacityReservationInterrupted
            }
            Detail::Rebalance { .. } => MessageKind::RebalanceRecommendation,
            Detail::ScheduledChange(_) => MessageKind::ScheduledChange,
            Detail::StateChange { state, .. } => match state {
                InstanceState::Stopping | InstanceState::Stopped => MessageKind::InstanceStopped,
                InstanceState::ShuttingDown | InstanceState::Terminated => {
                    MessageKind::InstanceTerminated
                }
                InstanceState::Other(_) => MessageKind::NoOp,
            },
            Detail::NoOp(_) => MessageKind::NoOp,
        }
    }

    /// The EC2 instance ids the message is about (none for a no-op).
    pub fn instance_ids(&self) -> &[String] {
        match &self.detail {
            Detail::SpotInterruption { instance_id, .. }
            | Detail::CapacityReservationInterruption { instance_id, .. }
            | Detail::Rebalance { instance_id }
            | Detail::StateChange { instance_id, .. } => std::slice::from_ref(instance_id),
            Detail::ScheduledChange(c) => &c.instance_ids,
            Detail::NoOp(_) => &[],
        }
    }

    /// Seconds between the envelope's `time` and `now`, for
    /// [`MESSAGE_QUEUE_DURATION_SECONDS`]; `None` for no-ops (upstream observes only messages it
    /// handles) and messages without a time. A time in the future (clock skew) gives 0.
    pub fn queue_seconds(&self, now: DateTime<Utc>) -> Option<f64> {
        if self.kind() == MessageKind::NoOp {
            return None;
        }
        let sent = self.envelope.time?;
        let millis = (now - sent).num_milliseconds().max(0);
        Some(millis as f64 / 1000.0)
    }
}
