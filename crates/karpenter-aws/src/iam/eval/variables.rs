//! Policy variables: `${aws:username}`, `${aws:PrincipalTag/team}`, `${aws:RequestTag/x, 'default'}`
//! and the escapes `${*}`, `${?}`, `${$}` for literal `*`, `?`, `$`.
//!
//! Variables are replaced in Resource/NotResource and in the values of string and ARN condition
//! operators, and only in version 2012-10-17 documents. The replacement is literal text: a `*` in a
//! tag value does not become a wildcard. A variable whose key is absent from the request (or is
//! multivalued) and has no default makes the element unmatchable, as in IAM.

use super::request::Context;
use super::wildcard::{Pattern, Token};

/// Turns a policy string into a pattern, substituting variables when `variables` is on.
/// `None` when a variable has no value and no default.
pub fn expand(text: &str, context: &Context, variables: bool) -> Option<Pattern> {
    if !variables || !text.contains("${") {
        return Some(Pattern::glob(text));
    }
    let mut out = Pattern::default();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_glob(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // No closing brace: not a variable, the text is literal.
            out.push_glob(&rest[start..]);
            return Some(out);
        };
        let body = after[..end].trim();
        match body {
            "*" => out.push(Token::Lit('*')),
            "?" => out.push(Token::Lit('?')),
            "$" => out.push(Token::Lit('$')),
            _ => {
                let (key, default) = split_default(body);
                match context.get(key).and_then(|v| v.single()) {
                    Some(value) => out.push_literal(value),
                    None => out.push_literal(default?),
                }
            }
        }
        rest = &after[end + 1..];
    }
    out.push_glob(rest);
    Some(out)
}

/// `key, 'default value'` -> (`key`, Some(`default value`)).
fn split_default(body: &str) -> (&str, Option<&str>) {
    if let Some((key, default)) = body.split_once(',') {
        let default = default.trim();
        if let Some(inner) = default
            .strip_prefix('\'')
            .and_then(|d| d.strip_suffix('\''))
        {
            return (key.trim(), Some(inner));
        }
    }
    (body, None)
}

#[cfg(test)]
mod tests {
    use super::super::request::ContextValue;
    use super::*;

    fn ctx() -> Context {
        let mut c = Context::default();
        c.insert("aws:PrincipalTag/team", ContextValue::Single("a*b".into()));
        c.insert("aws:TagKeys", ContextValue::Multi(vec!["x".into()]));
        c
    }

    #[test]
    fn variables_are_replaced_by_literal_text() {
        let p = expand(
            "arn:aws:s3:::bucket/${aws:PrincipalTag/team}/*",
            &ctx(),
            true,
        )
        .unwrap();
        assert!(p.matches("arn:aws:s3:::bucket/a*b/file", false));
        assert!(!p.matches("arn:aws:s3:::bucket/aXb/file", false));
    }

    #[test]
    fn key_names_in_variables_are_case_insensitive() {
        let p = expand("${AWS:principaltag/TEAM}", &ctx(), true).unwrap();
        assert_eq!(p.text(), "a*b");
    }

    #[test]
    fn escapes_give_literal_characters() {
        let p = expand("a${*}b${?}c${$}", &ctx(), true).unwrap();
        assert!(p.matches("a*b?c$", false));
        assert!(!p.matches("aXbYc$", false));
        assert!(!p.has_wildcard());
    }

    #[test]
    fn a_missing_variable_uses_its_default_or_matches_nothing() {
        assert_eq!(
            expand("${aws:PrincipalTag/dept, 'none'}", &ctx(), true).map(|p| p.text()),
            Some("none".to_string())
        );
        assert_eq!(expand("${aws:PrincipalTag/dept}", &ctx(), true), None);
        assert_eq!(expand("${aws:TagKeys}", &ctx(), true), None, "multivalued");
    }

    #[test]
    fn without_variables_the_text_is_a_plain_glob() {
        let p = expand("${aws:PrincipalTag/team}*", &ctx(), false).unwrap();
        assert!(p.matches("${aws:PrincipalTag/team}xyz", false));
    }
}
