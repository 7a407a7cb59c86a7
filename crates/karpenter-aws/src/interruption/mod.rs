//! Interruption handling, the pure half: SQS message bodies (EventBridge events) in, actions and
//! a message disposition out.
//!
//! The async shell (a later issue) long-polls `INTERRUPTION_QUEUE` (`ReceiveMessage`, up to 10
//! messages, 20 s wait), builds the instance id -> NodeClaim map from providerIDs
//! ([`provider_id::instance_id`]), calls [`plan()`] per message, performs the [`Action`]s, records
//! the metrics named in [`kind`], and deletes or leaves each message as [`Plan::disposition`]
//! says. Upstream's behaviour per kind (`reference/karpenter-aws.md` section 5):
//!
//! | kind | events | actions |
//! |---|---|---|
//! | spot interruption | `SpotInterrupted` | mark (spot, type, zone) unavailable; delete NodeClaim |
//! | state change to stopping / stopped | `InstanceStopping` | delete NodeClaim |
//! | state change to shutting-down / terminated | `InstanceTerminating` | delete NodeClaim |
//! | AWS Health EC2 scheduled change | `InstanceUnhealthy` | delete NodeClaim |
//! | capacity reservation interruption | `CapacityReservationInstanceInterrupted` | mark the NodeClaim's reservation unavailable; delete NodeClaim |
//! | rebalance recommendation | `SpotRebalanceRecommendation` | none |
//! | anything else, other states, not ours | none | none |
//!
//! Without the queue, [`instance_status`] turns `DescribeInstanceStatus` answers into messages
//! of three more kinds, decided the same way:
//!
//! | kind | events | actions |
//! |---|---|---|
//! | instance status / system status failed for 2 min | `InstanceUnhealthy` | expire the termination grace; delete NodeClaim |
//! | scheduled event | `InstanceUnhealthy` | delete NodeClaim |
//!
//! Must not: do I/O, read the clock or panic on any body (see the property tests).

pub mod decide;
pub mod events;
pub mod instance_status;
pub mod kind;
pub mod message;
pub mod plan;
pub mod provider_id;

pub use decide::{Action, ClaimRef, decide, decide_for};
pub use events::{EventType, InterruptionEvent, Involved};
pub use kind::MessageKind;
pub use message::{Detail, Envelope, InstanceState, Message, ParseError, parse};
pub use plan::{ActionOutcome, Disposition, Plan, plan};
