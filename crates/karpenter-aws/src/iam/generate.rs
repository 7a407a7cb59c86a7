//! The controller policy, generated from the contract.
//!
//! Every statement is built from the calls that name its Sid: Action = the calls' actions,
//! Resource = their resource patterns, Condition = the statement's guards
//! ([`contract::grants`]) rendered for the scope. The same function renders the policy with
//! concrete values (`karpenter iam policy`) and with CloudFormation references (the template).

use super::contract::grants::{Guard, guards};
use super::contract::{self, Call, PolicyGroup, Sid};
use super::policy::{Condition, ConditionScalar, OneOrMany, PolicyDocument, Statement};
use super::scope::Scope;

/// IAM's size limit for a customer managed policy, in characters without whitespace.
pub const MANAGED_POLICY_LIMIT: usize = 6144;

/// The whole controller policy in one document.
pub fn controller_policy(scope: &Scope) -> PolicyDocument {
    let calls = contract::calls();
    PolicyDocument::new(
        Sid::ALL
            .iter()
            .map(|sid| statement(*sid, &calls, scope))
            .collect(),
    )
}

/// The controller policy split like upstream's template: one document per [`PolicyGroup`].
pub fn controller_policies(scope: &Scope) -> Vec<(PolicyGroup, PolicyDocument)> {
    let calls = contract::calls();
    PolicyGroup::ALL
        .iter()
        .map(|group| {
            let statements = Sid::ALL
                .iter()
                .filter(|sid| sid.group() == *group)
                .map(|sid| statement(*sid, &calls, scope))
                .collect();
            (*group, PolicyDocument::new(statements))
        })
        .collect()
}

/// The size IAM counts against [`MANAGED_POLICY_LIMIT`]: the JSON without whitespace.
pub fn policy_size(doc: &PolicyDocument) -> usize {
    serde_json::to_string(doc).map(|s| s.len()).unwrap_or(0)
}

/// Pushes `item` unless already present (keeps first-appearance order).
fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Sort key of a resource pattern: EC2 resource types in a fixed order, others after.
fn resource_rank(pattern: &str) -> usize {
    contract::ec2_resource_order()
        .iter()
        .position(|kind| pattern.contains(&format!(":{kind}/")))
        .unwrap_or(usize::MAX)
}

/// One statement of the generated policy.
pub fn statement(sid: Sid, calls: &[Call], scope: &Scope) -> Statement {
    let mine: Vec<&Call> = calls.iter().filter(|c| c.sid == sid).collect();
    let mut actions = Vec::new();
    let mut resources = Vec::new();
    for c in &mine {
        push_unique(&mut actions, c.action.to_string());
        push_unique(&mut resources, scope.render(c.resource_pattern));
    }
    resources.sort_by_key(|r| resource_rank(r));
    let mut condition = Condition::new();
    let mut put = |op: &str, key: String, values: Vec<String>| {
        let values = OneOrMany::from_vec(values.into_iter().map(ConditionScalar::from).collect());
        condition
            .entry(op.to_string())
            .or_default()
            .insert(key, values);
    };
    for guard in guards(sid) {
        match *guard {
            Guard::Equals(k, v) => {
                let value = scope.render(v);
                let op = if value.contains(['*', '?']) {
                    "StringLike"
                } else {
                    "StringEquals"
                };
                put(op, scope.render(k), vec![value]);
            }
            Guard::Like(k, v) => put("StringLike", scope.render(k), vec![scope.render(v)]),
            Guard::EqualsIfExists(k, v) => put(
                "StringEqualsIfExists",
                scope.render(k),
                vec![scope.render(v)],
            ),
            Guard::AnyOf(k, vs) => put(
                "StringEquals",
                scope.render(k),
                vs.iter().map(|v| scope.render(v)).collect(),
            ),
            Guard::CreateActions => {
                let mut values = Vec::new();
                for c in &mine {
                    for (k, v) in c.context {
                        if *k == "ec2:CreateAction" {
                            push_unique(&mut values, scope.render(v));
                        }
                    }
                }
                put("StringEquals", "ec2:CreateAction".into(), values);
            }
            Guard::TagKeys => {
                let mut values = Vec::new();
                for c in &mine {
                    for (k, _) in c.request_tags {
                        push_unique(&mut values, scope.render(k));
                    }
                }
                put("ForAllValues:StringEquals", "aws:TagKeys".into(), values);
            }
        }
    }
    let mut st = Statement::allow(sid.name());
    st.action = Some(OneOrMany::from_vec(actions));
    st.resource = Some(OneOrMany::from_vec(resources));
    st.condition = (!condition.is_empty()).then_some(condition);
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope::new("demo", "us-west-2", None).unwrap()
    }

    #[test]
    fn statements_come_out_in_template_order_with_their_sids() {
        let doc = controller_policy(&scope());
        let sids: Vec<&str> = doc
            .statements()
            .iter()
            .filter_map(|s| s.sid.as_deref())
            .collect();
        let want: Vec<&str> = Sid::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(sids, want);
    }

    #[test]
    fn creation_tagging_allows_exactly_the_create_actions_the_contract_uses() {
        let st = statement(
            Sid::AllowScopedResourceCreationTagging,
            &contract::calls(),
            &scope(),
        );
        let cond = st.condition.unwrap();
        let values: Vec<String> = cond["StringEquals"]["ec2:CreateAction"]
            .iter()
            .map(ConditionScalar::as_text)
            .collect();
        assert_eq!(
            values,
            ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]
        );
    }

    #[test]
    fn a_wildcard_account_turns_an_exact_arn_condition_into_string_like() {
        let st = statement(
            Sid::AllowZonalShiftStatusReadOnly,
            &contract::calls(),
            &scope(),
        );
        assert!(st.condition.as_ref().unwrap().contains_key("StringLike"));
        let pinned = scope().with_account("111122223333").unwrap();
        let st = statement(
            Sid::AllowZonalShiftStatusReadOnly,
            &contract::calls(),
            &pinned,
        );
        assert!(st.condition.as_ref().unwrap().contains_key("StringEquals"));
    }

    #[test]
    fn the_split_policies_hold_every_statement_once() {
        let split = controller_policies(&scope());
        let n: usize = split.iter().map(|(_, d)| d.statements().len()).sum();
        assert_eq!(n, Sid::ALL.len());
        for (group, doc) in &split {
            assert!(
                policy_size(doc) <= MANAGED_POLICY_LIMIT,
                "{} is {} characters",
                group.policy_name(),
                policy_size(doc)
            );
        }
    }
}
