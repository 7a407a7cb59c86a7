//! The text form of an audit report.

use std::fmt::Write;

use super::{Finding, Report, Target};

pub(super) fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Auditing {} for cluster {} in {} (partition {}, account {})",
        r.sources.join(", "),
        r.cluster,
        r.region,
        r.partition,
        r.account
    );
    if r.calls_skipped > 0 {
        let _ = writeln!(
            out,
            "({} calls of features turned off were not checked)",
            r.calls_skipped
        );
    }
    if !r.missing.is_empty() {
        let _ = writeln!(
            out,
            "\nMISSING: calls the controller makes that the policy denies"
        );
        for m in &r.missing {
            let _ = writeln!(out, "  {}  ({} on {})", m.id, m.action, m.resource);
            let _ = writeln!(out, "      used by: {}", m.caller);
            if let Some(setting) = m.feature.setting() {
                let _ = writeln!(out, "      only when {setting}");
            }
            for d in &m.denied_by {
                let _ = writeln!(out, "      explicitly denied by {d}");
            }
            for h in &m.hints {
                let _ = writeln!(out, "      closest: {}: {}", h.statement, h.reason);
            }
            if let Some(flag) = m.flag {
                let _ = writeln!(out, "      (is yours named differently? pass {flag})");
            }
            let _ = writeln!(
                out,
                "      the generated policy grants it in {}",
                m.granted_by
            );
        }
    }
    section(
        &mut out,
        "OVER-BROAD: requests the contract never makes that the policy allows",
        &r.over_broad,
    );
    section(&mut out, "NOTES", &r.notes);
    let _ = writeln!(out, "\nsummary: {}", r.summary);
    out
}

fn section(out: &mut String, title: &str, findings: &[Finding]) {
    if findings.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    for f in findings {
        let _ = writeln!(out, "  [{}] {}", f.kind, f.why);
        if !f.statements.is_empty() {
            let verb = match f.kind {
                "unused-action" | "placeholder-arn" => "in",
                _ => "allowed by",
            };
            let _ = writeln!(out, "      {verb} {}", f.statements.join(", "));
        }
        for line in target_lines(&f.targets) {
            let _ = writeln!(out, "      - {line}");
        }
    }
}

/// `arn:...:instance/i-1` -> `instance`; `*` stays `*`.
fn kind(resource: &str) -> &str {
    match resource.splitn(6, ':').nth(5) {
        Some(rest) => rest.split('/').next().unwrap_or(rest),
        None => resource,
    }
}

/// Targets without a detail are merged per action (`ec2:RunInstances on instance, volume`).
fn target_lines(targets: &[Target]) -> Vec<String> {
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for t in targets {
        let action = t.action.clone().unwrap_or_default();
        let resource = t.resource.as_deref().unwrap_or_default();
        match (&t.detail, t.action.is_some()) {
            (Some(d), true) => lines.push((format!("{action} on {}: {d}", kind(resource)), vec![])),
            (Some(d), false) => lines.push((format!("{resource}: {d}"), vec![])),
            (None, _) if resource.is_empty() => lines.push((action, vec![])),
            (None, _) => {
                let k = kind(resource).to_string();
                match lines
                    .iter_mut()
                    .find(|(a, ks)| *a == action && !ks.is_empty())
                {
                    Some((_, ks)) => {
                        if !ks.contains(&k) {
                            ks.push(k);
                        }
                    }
                    None => lines.push((action, vec![k])),
                }
            }
        }
    }
    lines
        .into_iter()
        .map(|(head, kinds)| {
            if kinds.is_empty() {
                head
            } else {
                format!("{head} on {}", kinds.join(", "))
            }
        })
        .collect()
}
