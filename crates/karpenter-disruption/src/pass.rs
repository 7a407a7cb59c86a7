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
}

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
