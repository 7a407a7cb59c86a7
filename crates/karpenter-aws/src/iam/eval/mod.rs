//! An IAM policy evaluator for identity-based policies.
//!
//! Decision logic (IAM user guide, "policy evaluation logic", single account, identity policies
//! only): an applicable **Deny** statement wins; otherwise an applicable **Allow** statement
//! allows; otherwise the request is implicitly denied. A statement applies when its
//! Action/NotAction, Resource/NotResource and every Condition test match:
//!
//! * actions match case-insensitively with `*`/`?` wildcards; resources case-sensitively, with
//!   wildcards and policy variables ([`variables`]) over the whole ARN string;
//! * Condition: all operators AND, all keys within an operator AND, the values of one key OR
//!   (negated operators: NOR); see [`condition`] for missing keys, `IfExists`, `Null` and the
//!   `ForAllValues:`/`ForAnyValue:` qualifiers.
//!
//! Not modelled: Principal/NotPrincipal (ignored; the caller is the principal), resource-based
//! policies, permission boundaries, SCPs/RCPs and session policies.
//!
//! Several documents can be evaluated together (a role with several attached policies); every
//! statement keeps the name of the document it came from so findings can point at it.

pub mod condition;
pub mod operator;
pub mod request;
pub mod variables;
pub mod wildcard;

use serde::Serialize;

use self::condition::ConditionTest;
use self::operator::Operator;
pub use self::request::{Context, ContextValue, Request};
use self::variables::expand;
use self::wildcard::Pattern;
use super::policy::{Effect, PolicyDocument};

/// A policy that failed validation beyond its JSON grammar (e.g. an unknown operator).
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {location}: {message}")]
pub struct CompileError {
    pub source_name: String,
    pub location: String,
    pub message: String,
}

/// Action or Resource element: patterns, and whether it is the `Not` form.
#[derive(Debug, Clone)]
struct Element {
    patterns: Vec<String>,
    negated: bool,
}

/// A statement ready to evaluate.
#[derive(Debug, Clone)]
pub struct CompiledStatement {
    /// The document's name (file name) it came from.
    pub source: String,
    pub index: usize,
    pub sid: Option<String>,
    pub effect: Effect,
    actions: Element,
    resources: Element,
    conditions: Vec<ConditionTest>,
    variables: bool,
}

impl CompiledStatement {
    /// `Statement[3] (Sid "X")`, prefixed with the document name when there are several.
    pub fn label(&self) -> String {
        match &self.sid {
            Some(sid) => format!("Statement[{}] (Sid {sid:?})", self.index),
            None => format!("Statement[{}]", self.index),
        }
    }

    /// The raw action patterns and whether they are NotAction.
    pub fn action_patterns(&self) -> (&[String], bool) {
        (&self.actions.patterns, self.actions.negated)
    }

    /// The raw resource patterns and whether they are NotResource.
    pub fn resource_patterns(&self) -> (&[String], bool) {
        (&self.resources.patterns, self.resources.negated)
    }

    pub fn conditions(&self) -> &[ConditionTest] {
        &self.conditions
    }

    /// Does the Action/NotAction element cover this action?
    pub fn covers_action(&self, action: &str) -> bool {
        let hit = self
            .actions
            .patterns
            .iter()
            .any(|p| Pattern::glob(p).matches(action, true));
        hit != self.actions.negated
    }

    /// Does the Resource/NotResource element cover this resource (with policy variables)?
    pub fn covers_resource(&self, resource: &str, context: &Context) -> bool {
        let hit = self.resources.patterns.iter().any(|p| {
            expand(p, context, self.variables).is_some_and(|pat| pat.matches(resource, false))
        });
        hit != self.resources.negated
    }

    fn outcome(&self, request: &Request) -> Outcome {
        if !self.covers_action(&request.action) {
            return Outcome::ActionNotMatched;
        }
        if !self.covers_resource(&request.resource, &request.context) {
            return Outcome::ResourceNotMatched;
        }
        for test in &self.conditions {
            if !test.evaluate(&request.context, self.variables) {
                return Outcome::ConditionNotMet {
                    operator: test.operator.to_string(),
                    key: test.key.clone(),
                };
            }
        }
        Outcome::Applies
    }
}

/// One or more documents, compiled.
#[derive(Debug, Clone, Default)]
pub struct CompiledPolicy {
    statements: Vec<CompiledStatement>,
}

impl CompiledPolicy {
    /// Compiles one document.
    pub fn compile(source_name: &str, doc: &PolicyDocument) -> Result<Self, CompileError> {
        let mut p = CompiledPolicy::default();
        p.add(source_name, doc)?;
        Ok(p)
    }

    /// Adds a document (another attached policy).
    pub fn add(&mut self, source_name: &str, doc: &PolicyDocument) -> Result<(), CompileError> {
        let variables = doc.supports_variables();
        for (index, st) in doc.statements().iter().enumerate() {
            let err = |location: String, message: String| CompileError {
                source_name: source_name.to_string(),
                location,
                message,
            };
            let (actions, negated_actions) = match (&st.action, &st.not_action) {
                (Some(a), _) => (a, false),
                (None, Some(a)) => (a, true),
                (None, None) => {
                    return Err(err(st.label(index), "missing Action (or NotAction)".into()));
                }
            };
            let (resources, negated_resources) = match (&st.resource, &st.not_resource) {
                (Some(r), _) => (r, false),
                (None, Some(r)) => (r, true),
                (None, None) => {
                    return Err(err(
                        st.label(index),
                        "missing Resource (or NotResource)".into(),
                    ));
                }
            };
            for a in actions.iter() {
                if a != "*" && !a.contains(':') {
                    return Err(err(
                        format!("{}: Action", st.label(index)),
                        format!("{a:?} is not of the form service:Action"),
                    ));
                }
            }
            let mut conditions = Vec::new();
            for (op_name, keys) in st.condition.iter().flatten() {
                let at = format!("{}: Condition.{op_name}", st.label(index));
                let operator = Operator::parse(op_name).map_err(|m| err(at.clone(), m))?;
                for (key, values) in keys {
                    let values = values.iter().map(|v| v.as_text()).collect();
                    let test = ConditionTest::new(operator, key, values)
                        .map_err(|m| err(format!("{at}.{key:?}"), m))?;
                    conditions.push(test);
                }
            }
            self.statements.push(CompiledStatement {
                source: source_name.to_string(),
                index,
                sid: st.sid.clone(),
                effect: st.effect,
                actions: Element {
                    patterns: actions.iter().cloned().collect(),
                    negated: negated_actions,
                },
                resources: Element {
                    patterns: resources.iter().cloned().collect(),
                    negated: negated_resources,
                },
                conditions,
                variables,
            });
        }
        Ok(())
    }

    pub fn statements(&self) -> &[CompiledStatement] {
        &self.statements
    }

    /// Evaluates a request, keeping a per-statement trace.
    pub fn evaluate(&self, request: &Request) -> Evaluation {
        let trace: Vec<StatementTrace> = self
            .statements
            .iter()
            .enumerate()
            .map(|(position, st)| StatementTrace {
                position,
                source: st.source.clone(),
                label: st.label(),
                effect: st.effect,
                outcome: st.outcome(request),
            })
            .collect();
        let applies = |effect| {
            trace
                .iter()
                .any(|t| t.effect == effect && t.outcome == Outcome::Applies)
        };
        let decision = if applies(Effect::Deny) {
            Decision::ExplicitDeny
        } else if applies(Effect::Allow) {
            Decision::Allow
        } else {
            Decision::ImplicitDeny
        };
        Evaluation { decision, trace }
    }

    /// Shorthand: is the request allowed?
    pub fn allows(&self, request: &Request) -> bool {
        self.evaluate(request).decision == Decision::Allow
    }
}

/// The final answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allow,
    ExplicitDeny,
    ImplicitDeny,
}

/// Why a statement did or did not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum Outcome {
    Applies,
    ActionNotMatched,
    ResourceNotMatched,
    /// Action and resource matched, this condition test failed (the first one that did).
    ConditionNotMet {
        operator: String,
        key: String,
    },
}

/// One statement's outcome for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatementTrace {
    /// Position among all compiled statements (across documents).
    #[serde(skip)]
    pub position: usize,
    pub source: String,
    pub label: String,
    #[serde(skip)]
    pub effect: Effect,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A decision with its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    pub decision: Decision,
    pub trace: Vec<StatementTrace>,
}

impl Evaluation {
    /// Statements with this effect that applied.
    pub fn applying(&self, effect: Effect) -> impl Iterator<Item = &StatementTrace> {
        self.trace
            .iter()
            .filter(move |t| t.effect == effect && t.outcome == Outcome::Applies)
    }

    /// Allow statements whose action and resource matched but a condition did not.
    pub fn near_misses(&self) -> impl Iterator<Item = &StatementTrace> {
        self.trace.iter().filter(|t| {
            t.effect == Effect::Allow && matches!(t.outcome, Outcome::ConditionNotMet { .. })
        })
    }
}
