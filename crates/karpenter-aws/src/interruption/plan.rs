//! One SQS message from body to plan, and what becomes of the message afterwards.
//!
//! Owns: [`plan`] (parse, then decide) and the [`Disposition`] rule, as upstream: a body that
//! does not parse is logged and deleted; a parsed message is deleted once its actions are done,
//! and left on the queue (redelivered after the visibility timeout) only when a NodeClaim
//! deletion failed. Events and the unavailable-offerings mark are best effort and never hold a
//! message back. Must not: perform any action or talk to SQS; the async shell does, then asks
//! [`Plan::disposition`] what to do with the message.

use super::decide::{Action, ClaimRef, decide};
use super::kind::MessageKind;
use super::message::{Message, ParseError, parse};

/// What happens to a message after handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// `DeleteMessage`: handled, a no-op, or malformed.
    Delete,
    /// Leave it: SQS redelivers it after the visibility timeout.
    Retry,
}

/// How one action went when the shell performed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionOutcome {
    Done,
    /// The NodeClaim was already gone: as good as done.
    NotFound,
    Failed,
}

/// A message's parse result and the actions it calls for.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub parsed: Result<Message, ParseError>,
    pub actions: Vec<Action>,
}

/// Parses `body` and decides its actions (none when it does not parse).
pub fn plan(body: &str, lookup: impl Fn(&str) -> Option<ClaimRef>) -> Plan {
    let parsed = parse(body);
    let actions = match &parsed {
        Ok(message) => decide(message, lookup),
        Err(_) => Vec::new(),
    };
    Plan { parsed, actions }
}

impl Plan {
    /// The `message_type` label; `None` when the body did not parse (not counted as received).
    pub fn kind(&self) -> Option<MessageKind> {
        self.parsed.as_ref().ok().map(Message::kind)
    }

    /// The message's fate given how its actions went: `outcomes[i]` is the outcome of
    /// `actions[i]`, and an action without an outcome was not performed. Retry only when a
    /// NodeClaim deletion failed or was not performed.
    pub fn disposition(&self, outcomes: &[ActionOutcome]) -> Disposition {
        if self.parsed.is_err() {
            return Disposition::Delete;
        }
        let deletion_unfinished = self.actions.iter().enumerate().any(|(i, action)| {
            matches!(action, Action::DeleteNodeClaim { .. })
                && !matches!(
                    outcomes.get(i),
                    Some(ActionOutcome::Done | ActionOutcome::NotFound)
                )
        });
        if deletion_unfinished {
            Disposition::Retry
        } else {
            Disposition::Delete
        }
    }
}
