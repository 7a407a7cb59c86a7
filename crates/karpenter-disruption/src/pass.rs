//! The state of one disruption pass: the snapshot, `now`, the candidates of both classes, the
//! reusable simulator and the reasons collected for nodes that were left alone.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use karpenter_api::v1::DisruptionReason;

use crate::candidate::{self, Candidate, Class, Excluded};
use crate::reason::{Code, Reason};
use crate::simulate::Simulator;
use crate::snapshot::Snapshot;

/// One pass over a snapshot.
#[derive(Debug)]
pub struct Pass<'a> {
    pub snapshot: &'a Snapshot,
    pub now: DateTime<Utc>,
    pub graceful: Vec<Candidate>,
    pub graceful_excluded: Vec<Excluded>,
    pub eventual: Vec<Candidate>,
    pub eventual_excluded: Vec<Excluded>,
    pub sim: Simulator,
    /// Node index -> reasons it was not disrupted (in method order).
    pub notes: BTreeMap<usize, Vec<Reason>>,
    /// Per method run, in order: its reason and how many candidates it could disrupt
    /// (upstream sets `karpenter_voluntary_disruption_eligible_nodes` from these).
    pub eligible: Vec<(DisruptionReason, usize)>,
    /// The consolidation moves decided or Balanced-rejected, for upstream's move metrics.
    pub moves: Vec<crate::scores::ConsolidationMove>,
    /// Candidates of the commands decided so far this pass (node indexes).
    pub committed: BTreeSet<usize>,
    /// Nodes that receive pods of a command decided this pass -> that command's candidates.
    pub receiving: BTreeMap<usize, String>,
    /// Simulations run when the pass's first command was taken in ([`Pass::commit`]).
    first_command_at: Option<usize>,
}

/// How much more a pass simulates once it has its first command, looking for more
/// ([`Pass::may_look_further`]), in node-simulations (a simulation costs about one unit per
/// node of the cluster): ~130 more simulations over 150 nodes, 20 over 1,000, 4 over 5,000.
/// Small clusters settle a scale-down's tail of small moves in one pass; a large one's pass
/// stays within a few simulations of upstream's single command.
pub const FURTHER_WORK: usize = 20_000;

impl<'a> Pass<'a> {
    pub fn new(snapshot: &'a Snapshot, now: DateTime<Utc>) -> Self {
        let (graceful, graceful_excluded) = candidate::candidates(snapshot, Class::Graceful, now);
        let (eventual, eventual_excluded) = candidate::candidates(snapshot, Class::Eventual, now);
        let mut pass = Pass {
            snapshot,
            now,
            graceful,
            graceful_excluded,
            eventual,
            eventual_excluded,
            sim: Simulator::new(snapshot, now),
            notes: BTreeMap::new(),
            eligible: Vec::new(),
            moves: Vec::new(),
            committed: BTreeSet::new(),
            receiving: BTreeMap::new(),
            first_command_at: None,
        };
        let unconverted = pass.sim.unconverted.clone();
        for (pool, error) in unconverted {
            for (index, node) in snapshot.nodes.iter().enumerate() {
                if node.node_pool() == Some(pool.as_str()) {
                    pass.note(
                        index,
                        Reason::new(
                            Code::NodePoolInvalid,
                            format!("{error}; the NodePool takes no part in simulations"),
                        ),
                    );
                }
            }
        }
        pass
    }

    /// Takes a decided command into the rest of the pass ([`Simulator::commit`]): later
    /// simulations see its candidates gone and its pods where it moves them, and neither its
    /// candidates nor the nodes receiving its pods can be part of another command.
    ///
    /// [`Simulator::commit`]: crate::simulate::Simulator::commit
    pub fn commit(&mut self, candidates: &[&Candidate]) {
        let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
        let names = names.join(", ");
        for i in self.sim.commit(self.snapshot, candidates) {
            self.receiving.entry(i).or_insert_with(|| names.clone());
        }
        self.committed.extend(candidates.iter().map(|c| c.index));
        self.first_command_at.get_or_insert(self.sim.runs);
    }

    /// Whether the pass may simulate more to find further commands: always before its first
    /// command, then within [`FURTHER_WORK`].
    pub fn may_look_further(&self) -> bool {
        self.first_command_at.is_none_or(|at| {
            let spent = self.sim.runs.saturating_sub(at);
            spent.saturating_mul(self.snapshot.nodes.len().max(1)) < FURTHER_WORK
        })
    }

    /// Why the node cannot join a command now: it is part of one already, or receives the
    /// pods of one.
    pub fn taken(&self, index: usize) -> Option<Reason> {
        if self.committed.contains(&index) {
            return Some(Reason::new(
                Code::ReceivesMovedPods,
                "already a candidate of a command this pass",
            ));
        }
        self.receiving.get(&index).map(|from| {
            Reason::new(
                Code::ReceivesMovedPods,
                format!("receives the pods of {from}, consolidated this pass"),
            )
        })
    }

    /// Records why a method did not disrupt the node (a sentence already noted is dropped).
    pub fn note(&mut self, index: usize, reason: Reason) {
        let notes = self.notes.entry(index).or_default();
        if !notes.iter().any(|n| n.text == reason.text) {
            notes.push(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{managed, now};

    fn pass_over(snapshot: &Snapshot) -> Pass<'_> {
        Pass::new(snapshot, now())
    }

    #[test]
    fn a_commit_reuses_its_commands_simulation_and_solves_only_for_one_not_simulated_since() {
        let snapshot = Snapshot {
            nodes: vec![
                managed("a", "general"),
                managed("b", "general"),
                managed("c", "general"),
            ],
            ..Default::default()
        };
        let candidate = |i| crate::candidate::build(&snapshot, i, now()).expect("a candidate");
        let (a, b, c) = (candidate(0), candidate(1), candidate(2));
        let mut pass = pass_over(&snapshot);
        pass.sim.simulate(&snapshot, &[&b, &a], true);
        pass.sim.simulate(&snapshot, &[&c], true);
        assert_eq!(pass.sim.runs, 2);
        pass.commit(&[&a, &b]);
        assert_eq!(
            pass.sim.runs, 2,
            "the command's simulation, in any order, is reused"
        );
        pass.commit(&[&c]);
        assert_eq!(
            pass.sim.runs, 3,
            "c's simulation predates the first commit: it is simulated again"
        );
    }

    #[test]
    fn a_pass_looks_further_after_its_first_command_only_within_the_work_allowed_for_its_size() {
        let nodes = |n: usize| Snapshot {
            nodes: (0..n)
                .map(|i| managed(&format!("n{i}"), "general"))
                .collect(),
            ..Default::default()
        };
        let (small, large) = (nodes(100), nodes(5_000));
        for (snapshot, allowed) in [(&small, FURTHER_WORK / 100), (&large, FURTHER_WORK / 5_000)] {
            let mut pass = pass_over(snapshot);
            pass.sim.runs = 1_000;
            assert!(pass.may_look_further(), "no command yet: no limit");
            pass.first_command_at = Some(pass.sim.runs);
            pass.sim.runs += allowed - 1;
            assert!(pass.may_look_further(), "within the work allowed");
            pass.sim.runs += 1;
            assert!(
                !pass.may_look_further(),
                "{allowed} simulations over {} nodes are all it may add",
                snapshot.nodes.len()
            );
        }
    }
}
