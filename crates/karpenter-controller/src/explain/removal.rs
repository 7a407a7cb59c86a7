//! One node's removal simulation as an answer: [`karpenter_disruption::removal`] over a
//! disruption pass's snapshot, converted to [`RemovalAnswer`].

use chrono::{DateTime, Utc};
use karpenter_disruption::Snapshot;
use karpenter_disruption::removal::{Destination, RemovalVerdict, simulate_removal};

use super::convert::{command_answer, reason_answers, rfc3339};
use super::model::{DestinationAnswer, PodMoveAnswer, RemovalAnswer};

/// The removal simulation of node `name` in `snapshot` at `at` (the pass's time); `None` when
/// the snapshot has no such node.
pub fn removal(snapshot: &Snapshot, name: &str, at: DateTime<Utc>) -> Option<RemovalAnswer> {
    let removal = simulate_removal(snapshot, name, at)?;
    let (removable, command, reasons) = match &removal.verdict {
        RemovalVerdict::Removable(command) => (true, Some(command_answer(command)), Vec::new()),
        RemovalVerdict::Kept(reasons) => (false, None, reason_answers(reasons)),
    };
    Some(RemovalAnswer {
        node: removal.node.clone(),
        node_pool: removal.node_pool.clone(),
        decided_at: rfc3339(at),
        price: removal.price,
        removable,
        command,
        reasons,
        held_by: reason_answers(&removal.held_by),
        moves: removal
            .moves
            .iter()
            .map(|m| PodMoveAnswer {
                pod: m.pod.clone(),
                to: match &m.to {
                    Destination::Node(node) => DestinationAnswer::Node { node: node.clone() },
                    Destination::NewNodeClaim { node_pool } => DestinationAnswer::NewNodeClaim {
                        node_pool: node_pool.clone(),
                    },
                    Destination::Nowhere(reason) => DestinationAnswer::Nowhere {
                        reason: reason.clone(),
                    },
                },
            })
            .collect(),
    })
}
