//! A policy document as Terraform writes one: a `data "aws_iam_policy_document"` block (for
//! users who keep their IAM in Terraform, as seed 004 does), statement for statement the same
//! policy `karpenter iam policy` prints as JSON.
//!
//! Strings are HCL-escaped, including `${` and `%{` (an IAM policy variable such as
//! `${aws:username}` must reach IAM as written, not be interpolated by Terraform). Must not: read
//! files or decide anything about the policy; it only renders the document it is given.

use std::fmt::Write as _;

use super::policy::{Effect, OneOrMany, PolicyDocument, Principal, Statement};

/// The document as `data "aws_iam_policy_document" "<name>" { ... }`.
pub fn policy_document(doc: &PolicyDocument, name: &str) -> String {
    let mut out = format!("data \"aws_iam_policy_document\" {} {{\n", quote(name));
    if let Some(version) = &doc.version {
        let _ = writeln!(out, "  version = {}", quote(version));
    }
    if let Some(id) = &doc.id {
        let _ = writeln!(out, "  policy_id = {}", quote(id));
    }
    for (i, statement) in doc.statement.iter().enumerate() {
        if i > 0 || doc.version.is_some() || doc.id.is_some() {
            out.push('\n');
        }
        write_statement(&mut out, statement);
    }
    out.push_str("}\n");
    out
}

fn write_statement(out: &mut String, s: &Statement) {
    out.push_str("  statement {\n");
    if let Some(sid) = &s.sid {
        let _ = writeln!(out, "    sid    = {}", quote(sid));
    }
    let effect = match s.effect {
        Effect::Allow => "Allow",
        Effect::Deny => "Deny",
    };
    let _ = writeln!(out, "    effect = {}", quote(effect));
    for (key, values) in [
        ("actions", &s.action),
        ("not_actions", &s.not_action),
        ("resources", &s.resource),
        ("not_resources", &s.not_resource),
    ] {
        if let Some(values) = values {
            let _ = writeln!(
                out,
                "    {key} = {}",
                list(values.iter().map(String::as_str))
            );
        }
    }
    for (block, principal) in [
        ("principals", &s.principal),
        ("not_principals", &s.not_principal),
    ] {
        match principal {
            None => {}
            Some(Principal::Any(any)) => {
                write_principal(out, block, "*", &OneOrMany::One(any.clone()));
            }
            Some(Principal::Map(map)) => {
                for (kind, ids) in map {
                    write_principal(out, block, kind, ids);
                }
            }
        }
    }
    for (test, keys) in s.condition.iter().flatten() {
        for (variable, values) in keys {
            let texts: Vec<String> = values.iter().map(|v| v.as_text()).collect();
            let _ = write!(
                out,
                "\n    condition {{\n      test     = {}\n      variable = {}\n      values   = {}\n    }}\n",
                quote(test),
                quote(variable),
                list(texts.iter().map(String::as_str))
            );
        }
    }
    out.push_str("  }\n");
}

fn write_principal(out: &mut String, block: &str, kind: &str, ids: &OneOrMany<String>) {
    let _ = write!(
        out,
        "\n    {block} {{\n      type        = {}\n      identifiers = {}\n    }}\n",
        quote(kind),
        list(ids.iter().map(String::as_str))
    );
}

fn list<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<String> = values.map(quote).collect();
    format!("[{}]", items.join(", "))
}

/// An HCL string literal: quotes, backslashes and control characters escaped, and template
/// sequences (`${`, `%{`) doubled so Terraform keeps them literal.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_sequences_quotes_and_backslashes_are_escaped() {
        assert_eq!(
            quote(r#"arn:aws:iam::*:user/${aws:username} "x" \ %{y}"#),
            r#""arn:aws:iam::*:user/$${aws:username} \"x\" \\ %%{y}""#
        );
        assert_eq!(quote("50%"), "\"50%\"", "a lone % or $ stays");
    }
}
