//! What consolidation reports of its moves: a Balanced pool's score ([`BalancedScore`]) and
//! the moves upstream counts ([`ConsolidationMove`]). Their own file so a pass (`pass.rs`) can
//! collect them while the Balanced policy (`methods/balanced.rs`) computes them from the pass.

use karpenter_api::v1::ConsolidationPolicy;

/// `BalancedK`.
pub const K: f64 = 2.0;

/// A Balanced pool's verdict on an approved move (upstream's `ConsolidationApproved` event):
/// the score, and the shares of the pool's cost saved and of its disruption cost spent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BalancedScore {
    pub node_pool: String,
    pub score: f64,
    pub savings_fraction: f64,
    pub disruption_fraction: f64,
}

impl BalancedScore {
    /// The pool approves: the score reaches `1/k`.
    pub fn approved(&self) -> bool {
        self.score >= 1.0 / K
    }

    /// Upstream's message: `score 1.20 >= threshold 0.50 (k: 2, savings 12.0%, disruption 10.0%)`.
    pub fn message(&self) -> String {
        format!(
            "score {:.2} >= threshold {:.2} (k: {}, savings {:.1}%, disruption {:.1}%)",
            self.score,
            1.0 / K,
            K,
            self.savings_fraction * 100.0,
            self.disruption_fraction * 100.0
        )
    }
}

/// A consolidation move as upstream counts it (`karpenter_consolidation_moves_total`, and
/// `karpenter_consolidation_score` where the pool is Balanced): one per NodePool the move
/// takes nodes from.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsolidationMove {
    pub node_pool: String,
    pub policy: ConsolidationPolicy,
    /// The move as a whole was approved (every Balanced pool of it approved).
    pub approved: bool,
    /// The pool's own score, when it is Balanced.
    pub score: Option<BalancedScore>,
}
