//! A small YAML writer for JSON values in the layout `sigs.k8s.io/yaml` (go-yaml) produces:
//! sorted keys, two-space indentation, sequences at their key's indentation, `{}` / `[]` for
//! empty collections, and strings quoted only when a plain scalar would read back differently.
//!
//! Owns only the rendering of the AL2023 `NodeConfig`; must not be used as a general YAML
//! library (no anchors, tags, multi-line block scalars).

use serde_json::Value;

/// The YAML document for `value` (a mapping at the top level), ending in a newline.
pub(crate) fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_mapping(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_sequence(&mut out, items, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn write_mapping(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for (index, key) in keys.into_iter().enumerate() {
        // The first key of a mapping inside a sequence item follows the `- `.
        if !(index == 0 && out.ends_with("- ")) {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&scalar_string(key));
        out.push(':');
        match map.get(key) {
            Some(Value::Object(child)) if !child.is_empty() => {
                out.push('\n');
                write_mapping(out, child, indent + 2);
            }
            Some(Value::Array(items)) if !items.is_empty() => {
                out.push('\n');
                write_sequence(out, items, indent);
            }
            Some(value) => {
                out.push(' ');
                out.push_str(&inline(value));
                out.push('\n');
            }
            None => out.push('\n'),
        }
    }
}

fn write_sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Object(child) if !child.is_empty() => write_mapping(out, child, indent + 2),
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_sequence(out, inner, indent + 2);
            }
            value => {
                out.push_str(&inline(value));
                out.push('\n');
            }
        }
    }
}

/// Scalars and empty collections on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar_string(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// A string as a plain scalar when that reads back as the same string, else quoted: single
/// quotes when it has no control characters, otherwise JSON-style double quotes.
fn scalar_string(s: &str) -> String {
    if is_plain_safe(s) {
        return s.to_string();
    }
    if s.chars().any(char::is_control) {
        return serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"));
    }
    format!("'{}'", s.replace('\'', "''"))
}

fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if s.chars().any(char::is_control)
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #")
    {
        return false;
    }
    if "!&*{}[]|>'\"%@`#,".contains(first) {
        return false;
    }
    if matches!(first, '-' | '?' | ':')
        && s.get(1..)
            .is_none_or(|rest| rest.is_empty() || rest.starts_with(' '))
    {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let reserved = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", "-.inf", "+.inf",
        ".nan",
    ];
    if reserved.contains(&lower.as_str()) {
        return false;
    }
    // Numbers (ints, floats, hex, octal) and timestamps would not read back as strings.
    let numeric = s.parse::<f64>().is_ok()
        || lower.starts_with("0x")
        || lower.starts_with("0o")
        || (s.len() >= 10
            && s.as_bytes().get(4) == Some(&b'-')
            && s.as_bytes().get(7) == Some(&b'-')
            && s.as_bytes().iter().take(4).all(u8::is_ascii_digit));
    !numeric
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_values_use_go_yaml_layout() {
        let value = json!({
            "b": {"list": [{"key": "k", "effect": "NoExecute"}], "empty": {}},
            "a": ["10.0.0.10", "--x=\"y\""],
            "c": 3
        });
        assert_eq!(
            to_yaml(&value),
            "a:\n- 10.0.0.10\n- --x=\"y\"\nb:\n  empty: {}\n  list:\n  - effect: NoExecute\n    key: k\nc: 3\n"
        );
    }

    #[test]
    fn strings_that_would_read_back_as_something_else_are_quoted() {
        for (input, expected) in [
            ("true", "'true'"),
            ("110", "'110'"),
            ("1.5", "'1.5'"),
            ("", "''"),
            ("a: b", "'a: b'"),
            ("it's", "it's"),
            ("'q", "'''q'"),
            ("- x", "'- x'"),
            ("line\nbreak", "\"line\\nbreak\""),
            ("10.100.0.0/16", "10.100.0.0/16"),
        ] {
            assert_eq!(scalar_string(input), expected, "{input:?}");
        }
    }
}
