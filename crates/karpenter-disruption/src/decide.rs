//! The entry point: one disruption pass over a snapshot. Methods run in upstream order
//! (Repair with the `NodeRepair` gate, Emptiness, StaticDrift, Drift, MultiNodeConsolidation, SingleNodeConsolidation); the first that produces
//! commands wins, except that single-node consolidation still runs over the nodes
//! multi-node consolidation left (both spend the Underutilized budget, and each command holds
//! with the others: see `Pass::commit`). Every other node gets the reasons collected
//! on the way.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::command::{Considered, Decision, Method};
use crate::methods::{drift, emptiness, multi_node, repair, single_node, static_drift};
use crate::pass::Pass;
use crate::reason::{Code, Reason, Reasons};
use crate::snapshot::Snapshot;

/// How often a disruption pass runs when nothing else asks for one (upstream polls
/// disruption every 10 s): the controller's loop and `simulate --timeline` both.
pub const PASS_INTERVAL: Duration = Duration::from_secs(10);

/// Decides what to disrupt at `now`, and why everything else stays.
pub fn decide(snapshot: &Snapshot, now: DateTime<Utc>) -> Decision {
    let mut pass = Pass::new(snapshot, now);
    type Compute = fn(&mut Pass<'_>) -> Vec<crate::command::Command>;
    let methods: [(Method, Compute); 6] = [
        (Method::Repair, repair::compute),
        (Method::Emptiness, emptiness::compute),
        (Method::StaticDrift, static_drift::compute),
        (Method::Drift, drift::compute),
        (Method::MultiNodeConsolidation, multi_node::compute),
        (Method::SingleNodeConsolidation, single_node::compute),
    ];
    let mut commands = Vec::new();
    let mut evaluated = Vec::with_capacity(methods.len());
    for (method, compute) in methods {
        // Like upstream, repair is not a method at all while its gate is off.
        if method == Method::Repair && snapshot.repair.is_none() {
            continue;
        }
        let started = Instant::now();
        commands.extend(compute(&mut pass));
        evaluated.push((method, started.elapsed()));
        if !commands.is_empty() && method != Method::MultiNodeConsolidation {
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
        let mut reasons: Vec<Reason> = Vec::new();
        if let Some(e) = pass.graceful_excluded.iter().find(|e| e.index == i) {
            let mut reason = e.reason.clone();
            if !pass.eventual_excluded.iter().any(|e| e.index == i) {
                // A qualifier of the block, not a cause of its own.
                reason
                    .text
                    .push_str("; (drift may still replace it: terminationGracePeriod is set)");
            }
            reasons.push(reason);
        }
        if let Some(notes) = pass.notes.get(&i) {
            reasons.extend(notes.iter().cloned());
        }
        match winner {
            Some(m) => reasons.push(Reason::new(
                Code::OtherMethodChosen,
                format!("{m} chose other nodes this pass"),
            )),
            None if reasons.is_empty() => reasons.push(Reason::new(
                Code::NothingFound,
                "no method found a reason to disrupt it",
            )),
            None => {}
        }
        considered.push(Considered {
            node: node.name.clone(),
            reason: Reasons::new(reasons),
        });
    }
    Decision {
        commands,
        considered,
        eligible: pass.eligible,
        evaluated,
        moves: pass.moves,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use karpenter_api::labels as l;
    use karpenter_scheduling::builders::PodBuilder;

    use super::*;
    use crate::testing::{managed, now, pool_with};

    fn busy(name: &str) -> crate::NodeState {
        let mut node = managed(name, "general");
        node.pods.push(std::sync::Arc::new(
            PodBuilder::new(&format!("{name}-pod")).build().into(),
        ));
        node
    }

    fn codes(decision: &Decision, node: &str) -> Vec<Code> {
        decision
            .reasons_for(node)
            .map(|r| r.codes())
            .unwrap_or_default()
    }

    #[test]
    fn a_node_left_alone_carries_one_code_per_method_that_passed_it_by() {
        let snapshot = Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}),
            )],
            nodes: vec![busy("busy")],
            ..Default::default()
        };
        let decision = decide(&snapshot, now());
        assert!(decision.commands.is_empty());
        assert_eq!(
            codes(&decision, "busy"),
            [Code::NotEmpty, Code::WhenEmptyPolicy]
        );
        assert_eq!(
            decision.reason_for("busy").as_deref(),
            Some(
                "not empty (1 pods to reschedule); nodepool general consolidates only empty nodes (WhenEmpty)"
            )
        );
    }

    #[test]
    fn each_method_run_reports_how_many_candidates_it_could_disrupt_until_one_acts() {
        let pool = || {
            pool_with(
                "general",
                serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}),
            )
        };
        let busy_only = Snapshot {
            node_pools: vec![pool()],
            nodes: vec![busy("busy")],
            ..Default::default()
        };
        use karpenter_api::v1::DisruptionReason as R;
        assert_eq!(
            decide(&busy_only, now()).eligible,
            [
                (R::Empty, 0),
                (R::Drifted, 0),
                (R::Drifted, 0),
                (R::Underutilized, 0),
                (R::Underutilized, 0)
            ],
            "every method ran, none could disrupt the busy node of a WhenEmpty pool"
        );
        let with_idle = Snapshot {
            node_pools: vec![pool()],
            nodes: vec![busy("busy"), managed("idle", "general")],
            ..Default::default()
        };
        assert_eq!(
            decide(&with_idle, now()).eligible,
            [(R::Empty, 1)],
            "emptiness acted, so no later method ran"
        );
    }

    #[test]
    fn nodes_beside_a_command_say_another_method_chose_other_nodes() {
        let snapshot = Snapshot {
            node_pools: vec![pool_with(
                "general",
                serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}),
            )],
            nodes: vec![busy("busy"), managed("idle", "general")],
            ..Default::default()
        };
        let decision = decide(&snapshot, now());
        assert_eq!(
            decision.commands.first().map(|c| c.candidate_names()),
            Some(vec!["idle"])
        );
        assert_eq!(
            codes(&decision, "busy"),
            [Code::NotEmpty, Code::OtherMethodChosen]
        );
        assert_eq!(
            decision.reason_for("busy").as_deref(),
            Some("not empty (1 pods to reschedule); Emptiness chose other nodes this pass")
        );
    }

    #[test]
    fn a_blocked_node_keeps_its_block_code_when_drift_may_still_replace_it() {
        let mut node = busy("guarded");
        node.termination_grace_period = Some(std::time::Duration::from_secs(60));
        if let Some(pod) = node.pods.first_mut() {
            std::sync::Arc::make_mut(pod).metadata.annotations = Some(BTreeMap::from([(
                l::DO_NOT_DISRUPT.to_owned(),
                "true".to_owned(),
            )]));
        }
        let snapshot = Snapshot {
            node_pools: vec![pool_with("general", serde_json::json!({}))],
            nodes: vec![node],
            ..Default::default()
        };
        let decision = decide(&snapshot, now());
        let reasons = decision.reasons_for("guarded").cloned().unwrap_or_default();
        assert_eq!(reasons.first().map(|r| r.code), Some(Code::PodDoNotDisrupt));
        assert_eq!(
            reasons.first().map(|r| r.text.as_str()),
            Some(
                "pod default/guarded-pod has karpenter.sh/do-not-disrupt=true; (drift may still replace it: terminationGracePeriod is set)"
            )
        );
    }

    #[test]
    fn a_node_excluded_from_every_method_carries_only_its_block_code() {
        let mut node = managed("unmanaged", "general");
        node.node_claim = None;
        let snapshot = Snapshot {
            node_pools: vec![pool_with("general", serde_json::json!({}))],
            nodes: vec![node, managed("quiet", "missing")],
            ..Default::default()
        };
        let decision = decide(&snapshot, now());
        assert_eq!(codes(&decision, "unmanaged"), [Code::Unmanaged]);
        assert_eq!(codes(&decision, "quiet"), [Code::NodePoolNotFound]);
    }
}
