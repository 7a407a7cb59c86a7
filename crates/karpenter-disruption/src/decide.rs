//! The entry point: one disruption pass over a snapshot. Methods run in upstream order
//! (Emptiness, StaticDrift, Drift, MultiNodeConsolidation, SingleNodeConsolidation); the first that produces
//! a command wins. Every other node gets the reasons collected on the way.

use chrono::{DateTime, Utc};

use crate::command::{Considered, Decision};
use crate::pass::Pass;
use crate::snapshot::Snapshot;
use crate::{drift, emptiness, multi_node, single_node, static_drift};

/// Decides what to disrupt at `now`, and why everything else stays.
pub fn decide(snapshot: &Snapshot, now: DateTime<Utc>) -> Decision {
    let mut pass = Pass::new(snapshot, now);
    let methods: [fn(&mut Pass<'_>) -> Vec<crate::command::Command>; 5] = [
        emptiness::compute,
        static_drift::compute,
        drift::compute,
        multi_node::compute,
        single_node::compute,
    ];
    let mut commands = Vec::new();
    for method in methods {
        commands = method(&mut pass);
        if !commands.is_empty() {
            break;
        }
    }
    let chosen: std::collections::BTreeSet<&str> = commands
        .iter()
        .flat_map(|c| c.candidates.iter().map(|c| c.node.as_str()))
        .collect();
    let winner = commands.first().map(|c| c.method.as_str());
    let mut considered = Vec::new();
    for (i, node) in snapshot.nodes.iter().enumerate() {
        if chosen.contains(node.name.as_str()) {
            continue;
        }
        let mut reasons: Vec<String> = Vec::new();
        if let Some(e) = pass.graceful_excluded.iter().find(|e| e.index == i) {
            reasons.push(e.reason.clone());
            if !pass.eventual_excluded.iter().any(|e| e.index == i) {
                reasons
                    .push("(drift may still replace it: terminationGracePeriod is set)".to_owned());
            }
        }
        if let Some(notes) = pass.notes.get(&i) {
            reasons.extend(notes.iter().cloned());
        }
        match winner {
            Some(m) => reasons.push(format!("{m} chose other nodes this pass")),
            None if reasons.is_empty() => {
                reasons.push("no method found a reason to disrupt it".to_owned());
            }
            None => {}
        }
        considered.push(Considered {
            node: node.name.clone(),
            reason: reasons.join("; "),
        });
    }
    Decision {
        commands,
        considered,
    }
}
