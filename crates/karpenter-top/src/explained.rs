//! What the running controller told `top` (its `/explain/...` answers), as plain values: this
//! crate does not link the controller; the binary asks it and fills these in.

use std::collections::BTreeMap;

/// The controller's answers, or why there are none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explained {
    /// Per node, the last disruption pass's verdict in a word (the command's method, e.g.
    /// `Drift`, or the first reason it stays, e.g. `do-not-disrupt`).
    pub verdicts: BTreeMap<String, String>,
    /// What the pass's commands save per hour (the next consolidation's saving); `None` before
    /// the first pass.
    pub saving_per_hour: Option<f64>,
    /// Per NodePool, how many more nodes may be disrupted now per disruption reason
    /// (`Empty`, `Drifted`, ...), as the last disruption pass counted them.
    pub budgets: BTreeMap<String, Vec<(String, u32)>>,
    /// The selected node's answer, one sentence a line (`karpenter explain node`'s text).
    pub node: Option<(String, Vec<String>)>,
    /// Why the controller could not be asked (shown in the footer); `top` goes on without it.
    pub problem: Option<String>,
}
