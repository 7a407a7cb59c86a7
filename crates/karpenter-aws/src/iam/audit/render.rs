//! The text form of an audit report.

use std::fmt::Write;

use super::{Finding, Report};

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
        let _ = writeln!(out, "\nMISSING: calls the controller makes that the policy denies");
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
        let target = match (&f.action, &f.resource) {
            (Some(a), Some(r)) => format!("{a} on {r}"),
            (Some(a), None) => a.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => String::new(),
        };
        let _ = writeln!(out, "  [{}] {}", f.kind, target);
        let _ = writeln!(out, "      {}", f.why);
        if !f.statements.is_empty() {
            let verb = match f.kind {
                "unused-action" | "placeholder-arn" => "in",
                _ => "allowed by",
            };
            let _ = writeln!(out, "      {verb} {}", f.statements.join(", "));
        }
    }
}
