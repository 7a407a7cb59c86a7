//! Multi-node consolidation (upstream `multinodeconsolidation.go`): candidates by savings ratio,
//! pre-filtered by the Underutilized budget, then a binary search for the longest prefix
//! (2..=101 nodes, at most 100 searched) that can be deleted or replaced by one cheaper node.
//! A replacement must also beat every candidate of the same instance type
//! (`filterOutSameInstanceType`), and Balanced pools must approve.
//!
//! Upstream decides one such command per pass. Here the search is repeated over the
//! candidates left (not in a command, not receiving a command's pods), each round simulated
//! with the earlier commands taken in ([`Pass::commit`]), until a round finds nothing: the
//! tail of a large scale-down, many independent 2-into-1 moves, is decided in one pass
//! instead of one pass (and one 15 s validation) per move. Rounds after the first command stop
//! when the pass has spent `pass::FURTHER_WORK`.

use karpenter_api::v1::DisruptionReason;

use crate::budgets::map::BudgetMap;
use crate::candidate::Candidate;
use crate::command::{Command, Method};
use crate::methods::balanced;
use crate::methods::consolidation;
use crate::pass::Pass;

/// Upstream `MultiNodeConsolidation` caps the search at 100 candidates.
pub const MAX_PARALLEL: usize = 100;

pub fn compute(pass: &mut Pass<'_>) -> Vec<Command> {
    let eligible = consolidation::eligible(pass);
    pass.eligible
        .push((DisruptionReason::Underutilized, eligible.len()));
    let mut budgets = BudgetMap::build(pass.snapshot, DisruptionReason::Underutilized, pass.now);
    let mut within: Vec<Candidate> = Vec::new();
    for c in eligible {
        if budgets.take(&c.node_pool) {
            within.push(c);
        } else {
            pass.note(c.index, budgets.why_not(&c.node_pool));
        }
    }
    let mut commands = Vec::new();
    while pass.may_look_further() {
        let left: Vec<&Candidate> = within
            .iter()
            .filter(|c| pass.taken(c.index).is_none())
            .collect();
        match search(pass, &left, commands.is_empty()) {
            Some((command, n)) => {
                pass.commit(&left[..n]);
                commands.push(command);
            }
            None => break,
        }
    }
    commands
}

/// One binary search for the longest prefix of `within` that consolidates into at most one
/// node: the command and how many candidates it takes. Records its moves (and, when
/// `first` finds nothing, the smallest Balanced-rejected batch's).
fn search(pass: &mut Pass<'_>, within: &[&Candidate], first: bool) -> Option<(Command, usize)> {
    if within.len() < 2 {
        return None;
    }
    let mut lo = 1usize;
    let mut hi = if within.len() <= MAX_PARALLEL {
        within.len() - 1
    } else {
        MAX_PARALLEL
    };
    let mut best: Option<(Command, usize)> = None;
    // The smallest Balanced-rejected batch, counted as a rejected move when nothing is found
    // (upstream counts once per search, not per probe).
    let mut rejected: Option<(usize, Vec<balanced::BalancedScore>)> = None;
    // Probes are not checked against kube-scheduler's spreading (a second solve each); the
    // prefix kept is, and when it fails the search goes on below it.
    loop {
        search_between(pass, within, first, lo, hi, &mut best, &mut rejected);
        let Some((command, n)) = best.take() else {
            break;
        };
        match consolidation::check_spread(pass, &within[..n], command) {
            Ok(command) => {
                best = Some((command, n));
                break;
            }
            Err(why) => {
                // A prefix of n - 1 candidates is searched next (index n - 2), if any is left.
                for c in &within[..n] {
                    pass.note(c.index, why.clone());
                }
                if n < 3 {
                    break;
                }
                lo = 1;
                hi = n - 2;
            }
        }
    }
    let moves = match (&best, &rejected) {
        (Some((cmd, n)), _) => balanced::moves(pass, &within[..*n], &cmd.balanced, true),
        (None, Some((n, scores))) if first => balanced::moves(pass, &within[..*n], scores, false),
        _ => Vec::new(),
    };
    pass.moves.extend(moves);
    best
}

/// The binary search between prefix indexes `lo` and `hi` (a prefix of index `mid` has
/// `mid + 1` candidates): the longest that consolidates goes to `best`.
fn search_between(
    pass: &mut Pass<'_>,
    within: &[&Candidate],
    first: bool,
    mut lo: usize,
    mut hi: usize,
    best: &mut Option<(Command, usize)>,
    rejected: &mut Option<(usize, Vec<balanced::BalancedScore>)>,
) {
    while lo <= hi {
        // A later round stops probing once the pass has spent its further work, keeping the
        // longest prefix found so far (every probe that succeeded is a valid command).
        if !first && !pass.may_look_further() {
            break;
        }
        let mid = (lo + hi) / 2;
        let batch = &within[..=mid];
        let ok = consolidation::compute_unchecked(pass, batch, Method::MultiNodeConsolidation)
            .and_then(|cmd| {
                let cost: f64 = cmd.replacements.iter().map(|r| r.cheapest_price()).sum();
                let scores = balanced::evaluate(pass, batch, cost);
                if !scores.iter().all(balanced::BalancedScore::approved) {
                    *rejected = Some((batch.len(), scores.clone()));
                }
                balanced::verdict(scores).map(|balanced| Command { balanced, ..cmd })
            });
        match ok {
            Ok(cmd) => {
                *best = Some((cmd, batch.len()));
                lo = mid + 1;
            }
            Err(_) => {
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
            }
        }
    }
}
