//! `karpenter iam audit`: a user's policy against the contract.
//!
//! 1. **Missing**: every contract call (for the features the user runs) is evaluated; a call the
//!    policy denies is a missing grant, reported with the statement the generated policy would
//!    use and the closest statement in the user's policy (action and resource matched, a
//!    condition failed) or the Deny that blocked it.
//! 2. **Over-broad**: every [`probe::Probe`] is evaluated; a probe the policy allows is a grant
//!    broader than the contract needs, reported with the statements that allow it and why it
//!    matters. Low-risk ones are notes.
//! 3. **Static notes**: literal actions the controller never calls, and ARNs whose region or
//!    account segment looks like a placeholder left in (`region`, `account-id`).
//!
//! The exit status (decided by the caller) is 1 when anything is missing.

mod outside;
pub mod probe;
pub mod probes;
mod render;

use std::collections::BTreeSet;

use serde::Serialize;

use self::probe::Severity;
use self::probes::probes;
use super::contract::{self, Call, Feature};
use super::eval::{CompiledPolicy, Context, Decision, Outcome};
use super::policy::Effect;
use super::scope::Scope;

/// What to audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Features the controller runs with; calls of other features are skipped.
    pub features: BTreeSet<Feature>,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            features: Feature::ALL.iter().copied().collect(),
        }
    }
}

/// A statement that almost granted a missing call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hint {
    pub statement: String,
    pub reason: String,
}

/// A contract call the policy denies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub id: String,
    pub api: &'static str,
    pub action: String,
    pub resource: String,
    pub feature: Feature,
    pub caller: &'static str,
    /// The generated policy's statement for it.
    pub granted_by: &'static str,
    pub decision: Decision,
    /// Statements that explicitly deny it.
    pub denied_by: Vec<String>,
    /// Closest Allow statements and why they did not apply.
    pub hints: Vec<Hint>,
    /// The flag that names this resource, when the audit used its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flag: Option<&'static str>,
    #[serde(skip_serializing_if = "is_empty_context")]
    pub context: Context,
}

fn is_empty_context(c: &Context) -> bool {
    c.iter().next().is_none()
}

/// One request (or policy element) a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// What this particular request would allow, when the finding's text does not say it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A grant broader than the contract (or a note). Probes of one family allowed by the same
/// statements are grouped into one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: &'static str,
    pub severity: Severity,
    /// The statements responsible, e.g. `Statement[0] (Sid "X")` (with the file name when the
    /// audit covers several documents).
    pub statements: Vec<String>,
    pub why: String,
    pub targets: Vec<Target>,
}

/// Adds a target to the finding with the same kind, reason and statements, or a new finding.
fn group(
    findings: &mut Vec<Finding>,
    kind: &'static str,
    severity: Severity,
    statements: Vec<String>,
    why: &str,
    target: Target,
) {
    match findings
        .iter_mut()
        .find(|f| f.kind == kind && f.why == why && f.statements == statements)
    {
        Some(f) => f.targets.push(target),
        None => findings.push(Finding {
            kind,
            severity,
            statements,
            why: why.to_string(),
            targets: vec![target],
        }),
    }
}

/// The audit result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub cluster: String,
    pub region: String,
    pub partition: String,
    pub account: String,
    pub sources: Vec<String>,
    pub calls_checked: usize,
    pub calls_skipped: usize,
    pub probes_checked: usize,
    pub missing: Vec<Missing>,
    pub over_broad: Vec<Finding>,
    pub notes: Vec<Finding>,
    pub summary: String,
}

impl Report {
    /// Process exit status: 1 when a call is missing (or, with `fail_on_over_broad`, when a grant
    /// is over-broad), else 0.
    pub fn exit_code(&self, fail_on_over_broad: bool) -> i32 {
        if !self.missing.is_empty() || (fail_on_over_broad && !self.over_broad.is_empty()) {
            1
        } else {
            0
        }
    }

    /// Human-readable report ending with the summary line.
    pub fn to_text(&self) -> String {
        render::text(self)
    }
}

fn statement_name(policy: &CompiledPolicy, position: usize, several: bool) -> String {
    let st = &policy.statements()[position];
    if several {
        format!("{}: {}", st.source, st.label())
    } else {
        st.label()
    }
}

/// Audits `policy` (one or more documents) for `scope`. The scope's account should be concrete
/// (12 digits) so ARNs look like real requests; see [`infer_account`].
pub fn audit(policy: &CompiledPolicy, scope: &Scope, options: &AuditOptions) -> Report {
    let sources: Vec<String> =
        policy
            .statements()
            .iter()
            .map(|s| s.source.clone())
            .fold(Vec::new(), |mut acc, s| {
                if !acc.contains(&s) {
                    acc.push(s);
                }
                acc
            });
    let several = sources.len() > 1;
    let name = |pos: usize| statement_name(policy, pos, several);
    let calls = contract::calls();
    let (active, skipped): (Vec<&Call>, Vec<&Call>) = calls
        .iter()
        .partition(|c| options.features.contains(&c.feature));

    let mut missing = Vec::new();
    for call in &active {
        let req = call.request(scope);
        let eval = policy.evaluate(&req);
        if eval.decision == Decision::Allow {
            continue;
        }
        let denied_by = eval
            .applying(Effect::Deny)
            .map(|t| name(t.position))
            .collect();
        let mut hints: Vec<Hint> = eval
            .near_misses()
            .map(|t| Hint {
                statement: name(t.position),
                reason: match &t.outcome {
                    Outcome::ConditionNotMet { operator, key } => {
                        format!("action and resource match, but {operator} {key} does not")
                    }
                    _ => String::new(),
                },
            })
            .collect();
        if hints.is_empty() {
            hints = eval
                .trace
                .iter()
                .filter(|t| t.effect == Effect::Allow && t.outcome == Outcome::ResourceNotMatched)
                .map(|t| Hint {
                    statement: name(t.position),
                    reason: "action matches, but no Resource covers it".into(),
                })
                .collect();
        }
        hints.truncate(3);
        missing.push(Missing {
            id: call.id(),
            api: call.api,
            action: req.action.clone(),
            resource: req.resource.clone(),
            feature: call.feature,
            caller: call.caller,
            granted_by: call.sid.name(),
            decision: eval.decision,
            denied_by,
            hints,
            flag: match call.resource_sample {
                "{node_role_arn}" => Some("--node-role-arn"),
                "{queue_arn}" => Some("--interruption-queue-arn"),
                _ => None,
            },
            context: req.context.clone(),
        });
    }

    let probe_list = probes(scope, &calls);
    let mut over_broad = Vec::new();
    let mut notes = Vec::new();
    for probe in &probe_list {
        let eval = policy.evaluate(&probe.request);
        if eval.decision != Decision::Allow {
            continue;
        }
        let statements = eval
            .applying(Effect::Allow)
            .map(|t| name(t.position))
            .collect();
        let target = Target {
            action: Some(probe.request.action.clone()),
            resource: Some(probe.request.resource.clone()),
            detail: probe.detail.clone(),
        };
        let list = match probe.severity {
            Severity::OverBroad => &mut over_broad,
            Severity::Note => &mut notes,
        };
        group(
            list,
            probe.kind,
            probe.severity,
            statements,
            &probe.why,
            target,
        );
    }
    notes.extend(static_notes(policy, &calls, several));

    let requests = |f: &[Finding]| f.iter().map(|f| f.targets.len()).sum::<usize>();
    let summary = format!(
        "{} missing, {} over-broad ({} probe requests allowed), {} {} ({} of {} contract calls allowed, {} probes)",
        missing.len(),
        over_broad.len(),
        requests(&over_broad),
        notes.len(),
        if notes.len() == 1 { "note" } else { "notes" },
        active.len() - missing.len(),
        active.len(),
        probe_list.len(),
    );
    Report {
        cluster: scope.cluster.clone(),
        region: scope.region.clone(),
        partition: scope.partition.clone(),
        account: scope.account.clone(),
        sources,
        calls_checked: active.len(),
        calls_skipped: skipped.len(),
        probes_checked: probe_list.len(),
        missing,
        over_broad,
        notes,
        summary,
    }
}

/// Literal actions nobody calls, and placeholder-looking ARNs.
fn static_notes(policy: &CompiledPolicy, calls: &[Call], several: bool) -> Vec<Finding> {
    let known: BTreeSet<String> = calls.iter().map(|c| c.action.to_lowercase()).collect();
    let probed: BTreeSet<String> = outside::OUTSIDE_READS
        .iter()
        .map(|(a, _)| a.to_lowercase())
        .collect();
    let mut out = Vec::new();
    for (pos, st) in policy.statements().iter().enumerate() {
        if st.effect != Effect::Allow {
            continue;
        }
        let label = statement_name(policy, pos, several);
        let (actions, negated) = st.action_patterns();
        if !negated {
            for a in actions {
                let lower = a.to_lowercase();
                if !a.contains(['*', '?']) && !known.contains(&lower) && !probed.contains(&lower) {
                    group(
                        &mut out,
                        "unused-action",
                        Severity::Note,
                        vec![label.clone()],
                        "grants actions the controller never calls",
                        Target {
                            action: Some(a.clone()),
                            resource: None,
                            detail: None,
                        },
                    );
                }
            }
        }
        for r in st.resource_patterns().0 {
            if let Some(detail) = placeholder(r) {
                group(
                    &mut out,
                    "placeholder-arn",
                    Severity::Note,
                    vec![label.clone()],
                    "resource ARNs that look like unfilled placeholders match no request",
                    Target {
                        action: None,
                        resource: Some(r.clone()),
                        detail: Some(detail),
                    },
                );
            }
        }
    }
    out
}

/// Why an ARN's region or account segment looks like an unfilled placeholder.
fn placeholder(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    if parts.len() < 6 || parts[0] != "arn" {
        return None;
    }
    let plain = |s: &str| !s.contains(['*', '?', '$']);
    let (region, account) = (parts[3], parts[4]);
    if plain(region) && !region.is_empty() && !region.ends_with(|c: char| c.is_ascii_digit()) {
        return Some(format!("region {region:?} is not a region code"));
    }
    let account_ok = account.is_empty()
        || account == "aws"
        || (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()));
    if plain(account) && !account_ok {
        return Some(format!("account {account:?} is not a 12-digit account id"));
    }
    None
}

/// The account the policy's ARNs name, when they name exactly one (for `--account-id` default).
pub fn infer_account(policy: &CompiledPolicy) -> Option<String> {
    let mut accounts = BTreeSet::new();
    for st in policy.statements() {
        for r in st.resource_patterns().0 {
            if let Some(acct) = r.split(':').nth(4)
                && acct.len() == 12
                && acct.bytes().all(|b| b.is_ascii_digit())
            {
                accounts.insert(acct.to_string());
            }
        }
    }
    if accounts.len() == 1 {
        accounts.into_iter().next()
    } else {
        None
    }
}

/// The account audits use when neither `--account-id` nor the policy names one (AWS's
/// documentation example account).
pub const EXAMPLE_ACCOUNT: &str = "111122223333";
