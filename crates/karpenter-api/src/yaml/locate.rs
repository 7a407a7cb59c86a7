//! Where a value is in its file: a field path (`spec.template.spec.requirements[2]`) of the
//! n-th document turned into `line:column`, for messages people can jump to.
//!
//! Parsing keeps no positions (a large export would pay for them on every value); a
//! [`SourceMap`] parses the text a second time, only when there is something to report.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A 1-based line and column (`u32`, so that errors carrying one stay small; a larger line
/// number saturates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

impl Position {
    /// From the parser's 64-bit line and column.
    pub fn new(line: u64, column: u64) -> Self {
        Self {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The positions of every value of every non-empty document of one file.
#[derive(Debug, Default)]
pub struct SourceMap {
    documents: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    at: Position,
    children: Children,
}

#[derive(Debug)]
enum Children {
    Null,
    Scalar,
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
}

impl SourceMap {
    /// Reads the positions of `text`; an empty map when it does not parse (the parse error
    /// carries its own position).
    pub fn new(text: &str) -> Self {
        let documents: Vec<Node> =
            serde_saphyr::from_multiple_with_options(text, super::budgeted_options(text))
                .unwrap_or_default();
        Self {
            documents: documents
                .into_iter()
                .filter(|d| !matches!(d.children, Children::Null))
                .collect(),
        }
    }

    /// The position of the value at `path` in the document `document` (0-based, counting the
    /// non-empty documents as [`super::parse_documents`] does). A path that does not exist
    /// (a missing required field) gives its deepest existing parent; an empty path the
    /// document itself.
    pub fn locate(&self, document: usize, path: &str) -> Option<Position> {
        let mut node = self.documents.get(document)?;
        let segments = split_path(path);
        let mut i = 0;
        'segments: while i < segments.len() {
            match &node.children {
                Children::Map(entries) => {
                    // A key may itself contain dots (`kubernetes.io/hostname`): try the
                    // longest run of segments that names a key.
                    for end in (i + 1..=segments.len()).rev() {
                        let key = segments[i..end].join(".");
                        if let Some((_, child)) = entries.iter().find(|(k, _)| *k == key) {
                            node = child;
                            i = end;
                            continue 'segments;
                        }
                    }
                    break;
                }
                Children::Seq(items) => {
                    match segments[i].parse::<usize>().ok().and_then(|n| items.get(n)) {
                        Some(child) => {
                            node = child;
                            i += 1;
                        }
                        None => break,
                    }
                }
                Children::Null | Children::Scalar => break,
            }
        }
        Some(node.at)
    }
}

/// `spec.a[2].b[kubernetes.io/x]` -> `spec`, `a`, `2`, `b`, `kubernetes.io/x`.
fn split_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut bracket = false;
    for c in path.chars() {
        match c {
            '[' if !bracket => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                bracket = true;
            }
            ']' if bracket => {
                out.push(std::mem::take(&mut current));
                bracket = false;
            }
            '.' if !bracket => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Children>::deserialize(deserializer)?;
        Ok(Node {
            at: Position::new(spanned.referenced.line(), spanned.referenced.column()),
            children: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Children {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ChildrenVisitor)
    }
}

struct ChildrenVisitor;

impl<'de> Visitor<'de> for ChildrenVisitor {
    type Value = Children;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Children, E> {
        Ok(Children::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Children, E> {
        Ok(Children::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Children, D::Error> {
        Children::deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Children, E> {
        Ok(Children::Scalar)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Children, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Children::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Children, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<serde_json::Value>()? {
            let key = match key {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            entries.push((key, map.next_value::<Node>()?));
        }
        Ok(Children::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# a comment
apiVersion: v1
kind: ConfigMap
---
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: x
  labels:
    example.com/team: a
spec:
  template:
    spec:
      requirements:
        - key: a
          operator: In
        - key: b
          operator: Exists
";

    #[test]
    fn paths_become_the_line_and_column_of_their_value() {
        let map = SourceMap::new(TEXT);
        for (document, path, line, column) in [
            (0, "", 2, 1),
            (1, "", 6, 1),
            (1, "kind", 7, 7),
            (1, "spec.template.spec.requirements[1].operator", 19, 21),
            (1, "spec.template.spec.requirements[1]", 18, 11),
            (1, "metadata.labels[example.com/team]", 11, 23),
            (1, "metadata.labels.example.com/team", 11, 23),
            // Missing fields point at their deepest existing parent.
            (1, "spec.template.spec.nodeClassRef", 15, 7),
            (1, "spec.template.spec.requirements[7].key", 16, 9),
        ] {
            assert_eq!(
                map.locate(document, path),
                Some(Position { line, column }),
                "{path}"
            );
        }
        assert_eq!(map.locate(2, ""), None);
    }
}
