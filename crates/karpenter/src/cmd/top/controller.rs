//! What `top` asks the running controller (the same `/explain/...` answers `karpenter explain`
//! reads, through `karpenter_controller::explain::client`): the last disruption pass, for a
//! verdict word per node and the next consolidation's saving, and one node's answer on
//! selection. The answers become `karpenter_top::Explained` values; when the controller cannot
//! be asked, the reason goes to the footer and `top` goes on.

use std::collections::BTreeMap;

use karpenter_controller::explain::client::{AskError, Target, ask, paths};
use karpenter_controller::explain::model::{DisruptionAnswer, NodeAnswer, NodePoolAnswer};
use karpenter_top::Explained;

/// The verdicts and saving from the last disruption pass's answer, and the NodePools' budgets
/// allowed now.
#[derive(Clone)]
pub(super) struct Pass {
    pub verdicts: BTreeMap<String, String>,
    pub saving_per_hour: Option<f64>,
    /// Per NodePool, `(reason, allowed now)`.
    pub budgets: BTreeMap<String, Vec<(String, u32)>>,
}

impl Pass {
    /// Into what `top` shows (the selected node's answer and any problem left as they were).
    pub fn into_explained(self, explained: &mut Explained) {
        explained.verdicts = self.verdicts;
        explained.saving_per_hour = self.saving_per_hour;
        explained.budgets = self.budgets;
        explained.problem = None;
    }
}

/// Per NodePool, how many more nodes may be disrupted now per reason.
pub(super) fn budgets(pools: &[NodePoolAnswer]) -> BTreeMap<String, Vec<(String, u32)>> {
    pools
        .iter()
        .map(|p| {
            (
                p.node_pool.clone(),
                p.budgets
                    .iter()
                    .map(|b| (b.reason.clone(), b.allowed))
                    .collect(),
            )
        })
        .collect()
}

/// Why the controller could not be asked, as one line (the error and its causes).
fn problem(error: AskError) -> String {
    format!("{:#}", anyhow::Error::from(error))
}

/// Each node's verdict in a word: the method of the command that disrupts it (`Drift`,
/// `Emptiness`, ...), or the code of the first reason it stays (`pod-do-not-disrupt`, ...).
pub(super) fn pass(answer: &DisruptionAnswer) -> Pass {
    let mut verdicts = BTreeMap::new();
    for command in &answer.commands {
        for node in &command.nodes {
            verdicts.insert(node.clone(), command.method.clone());
        }
    }
    for kept in &answer.kept {
        let word = kept
            .reasons
            .first()
            .map_or_else(|| "kept".to_owned(), |r| r.code.clone());
        verdicts.entry(kept.node.clone()).or_insert(word);
    }
    Pass {
        verdicts,
        // A fold from 0.0: an empty f64 `sum` is -0.0, shown as `$-0.000`.
        saving_per_hour: Some(
            answer
                .commands
                .iter()
                .fold(0.0, |total, c| total + c.savings_per_hour),
        ),
        budgets: BTreeMap::new(),
    }
}

/// The last disruption pass, or why there is none (`Err`: the controller cannot be asked;
/// `Ok(None)`: it answered that it has no pass yet).
/// With it, the NodePools' budgets allowed now (none when the controller does not say).
pub(super) async fn ask_pass(target: &Target) -> Result<Option<Pass>, String> {
    let mut pass = match ask::<DisruptionAnswer>(target, paths::DISRUPTION).await {
        Ok(Ok(answer)) => pass(&answer),
        Ok(Err(_none)) => return Ok(None),
        Err(e) => return Err(problem(e)),
    };
    if let Ok(Ok(pools)) = ask::<Vec<NodePoolAnswer>>(target, paths::NODE_POOLS).await {
        pass.budgets = budgets(&pools);
    }
    Ok(Some(pass))
}

/// `karpenter explain node`'s text for `node`, a line each.
pub(super) async fn ask_node(target: &Target, node: &str) -> Vec<String> {
    let text = match ask::<NodeAnswer>(target, &paths::node(node)).await {
        Ok(Ok(answer)) => crate::cmd::explain::text::node_text(&answer),
        Ok(Err(none)) => format!("no answer: {}", none.message),
        Err(e) => format!("the controller cannot be asked: {}", problem(e)),
    };
    text.lines().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use karpenter_controller::explain::model::{CommandAnswer, KeptNode, ReasonAnswer};

    use super::*;

    #[test]
    fn a_disrupted_node_reads_its_method_and_a_kept_node_its_first_reason() {
        let answer = DisruptionAnswer {
            decided_at: "2026-11-27T10:00:00Z".into(),
            commands: vec![CommandAnswer {
                method: "Drift".into(),
                reason: "Drifted".into(),
                nodes: vec!["a".into()],
                replacements: Vec::new(),
                savings_per_hour: 0.04,
                explanation: "drifted".into(),
                repair: None,
            }],
            kept: vec![
                KeptNode {
                    node: "b".into(),
                    reasons: vec![ReasonAnswer {
                        code: "pod-do-not-disrupt".into(),
                        event: "DisruptionBlocked".into(),
                        text: "a pod says do-not-disrupt".into(),
                        lifts: None,
                    }],
                },
                KeptNode {
                    node: "c".into(),
                    reasons: Vec::new(),
                },
            ],
        };
        let pass = pass(&answer);
        let words: Vec<(&str, &str)> = pass
            .verdicts
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            words,
            [("a", "Drift"), ("b", "pod-do-not-disrupt"), ("c", "kept")]
        );
        assert_eq!(pass.saving_per_hour, Some(0.04));
        let none = super::pass(&DisruptionAnswer {
            commands: Vec::new(),
            kept: Vec::new(),
            ..answer
        });
        assert!(
            none.saving_per_hour
                .is_some_and(|s| s == 0.0 && s.is_sign_positive()),
            "no command saves $0.000, not $-0.000"
        );
    }
}
