//! The existing nodes ranked as kube-scheduler's `LeastAllocated` scoring ranks them
//! ([`crate::SolveOptions::spread_over_existing`]): scores in, an order out, kept as pods land.

/// Existing nodes ranked by free share, highest first, ties in node order; a node's key moves
/// when a pod lands on it, so a spread solve ranks each pod's nodes without sorting them all.
#[derive(Debug, Clone)]
pub(crate) struct SpreadRank {
    scores: Vec<f64>,
    rank: std::collections::BTreeSet<(std::cmp::Reverse<u64>, usize)>,
}

impl SpreadRank {
    /// A score in [0, 1] as a key ordered like the score (non-negative floats' bits are).
    fn key(score: f64) -> std::cmp::Reverse<u64> {
        std::cmp::Reverse(score.max(0.0).to_bits())
    }

    pub(crate) fn new(scores: Vec<f64>) -> Self {
        let rank = scores
            .iter()
            .enumerate()
            .map(|(ni, &s)| (Self::key(s), ni))
            .collect();
        SpreadRank { scores, rank }
    }

    pub(crate) fn order(&self) -> Vec<usize> {
        self.rank.iter().map(|&(_, ni)| ni).collect()
    }

    pub(crate) fn update(&mut self, ni: usize, score: f64) {
        if let Some(old) = self.scores.get_mut(ni) {
            self.rank.remove(&(Self::key(*old), ni));
            *old = score;
            self.rank.insert((Self::key(score), ni));
        }
    }
}
