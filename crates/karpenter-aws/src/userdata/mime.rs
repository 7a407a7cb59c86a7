//! MIME multipart archives, the container AL2 and AL2023 user data use.
//!
//! Owns: reading a user's `multipart/*` document into parts (headers + body) with the rules
//! Go's `net/mail` + `mime/multipart` apply (upstream parses with them), and writing an archive
//! with boundary `//` exactly as upstream's `multipart.Writer` does once `\r` is stripped.
//!
//! Must not: interpret part contents, decode transfer encodings (Go's reader decodes
//! `quoted-printable` parts; this one keeps them as written), or panic on hostile input: every
//! malformation is a [`MimeError`].

use std::collections::BTreeMap;

/// The boundary of every archive Karpenter writes.
pub const BOUNDARY: &str = "//";
/// `text/x-shellscript; charset="us-ascii"`.
pub const CONTENT_TYPE_SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";
/// `application/node.eks.aws` (nodeadm `NodeConfig` documents).
pub const CONTENT_TYPE_NODE_CONFIG: &str = "application/node.eks.aws";

/// One part of an archive: its headers (keys in canonical MIME form) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Header values by canonical key (`Content-Type`), in the order they appeared.
    pub headers: BTreeMap<String, Vec<String>>,
    pub body: String,
}

impl Part {
    /// A part with a single `Content-Type` header.
    pub fn new(content_type: &str, body: impl Into<String>) -> Self {
        let mut headers = BTreeMap::new();
        headers.insert("Content-Type".to_string(), vec![content_type.to_string()]);
        Self {
            headers,
            body: body.into(),
        }
    }

    /// The first `Content-Type` value, or "".
    pub fn content_type(&self) -> &str {
        self.headers
            .get("Content-Type")
            .and_then(|values| values.first())
            .map_or("", String::as_str)
    }
}

/// What is wrong with a MIME document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MimeError {
    #[error("malformed MIME header line {line:?}")]
    MalformedHeader { line: String },
    #[error("no Content-Type header")]
    NoContentType,
    #[error("Content-Type {0:?} is not multipart with a boundary")]
    NotMultipart(String),
    #[error("no boundary line --{0} found")]
    NoBoundary(String),
    #[error("part {index} does not end with a boundary line")]
    UnterminatedPart { index: usize },
    #[error("part {index} contains the line --{boundary}, which would end it early")]
    BoundaryInBody { index: usize, boundary: String },
}

/// Whether user data is already MIME (upstream's test: it starts with `MIME-Version:` or
/// `Content-Type:` once leading whitespace is trimmed).
pub fn looks_like_mime(user_data: &str) -> bool {
    let trimmed = user_data.trim_start();
    trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type:")
}

/// Parses a multipart document into its parts.
pub fn parse(document: &str) -> Result<Vec<Part>, MimeError> {
    let text = document.replace("\r\n", "\n");
    let (headers, body) = read_headers(&text)?;
    let content_type = headers
        .get("Content-Type")
        .and_then(|values| values.first())
        .ok_or(MimeError::NoContentType)?;
    let (media_type, params) = parse_media_type(content_type)
        .ok_or_else(|| MimeError::NotMultipart(content_type.clone()))?;
    let boundary = params
        .get("boundary")
        .filter(|b| !b.is_empty())
        .filter(|_| media_type.starts_with("multipart/"))
        .ok_or_else(|| MimeError::NotMultipart(content_type.clone()))?;
    read_parts(body, boundary)
}

/// Writes an archive with boundary `//`, as upstream's `multipart.Writer` output with `\r`
/// removed: the `MIME-Version` and `Content-Type` headers, then each part's headers (sorted by
/// key) and body, then the closing boundary.
pub fn serialize(parts: &[Part]) -> Result<String, MimeError> {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    let delimiter = format!("--{BOUNDARY}");
    for (index, part) in parts.iter().enumerate() {
        if part
            .body
            .split('\n')
            .any(|line| line.starts_with(&delimiter))
        {
            return Err(MimeError::BoundaryInBody {
                index,
                boundary: BOUNDARY.to_string(),
            });
        }
        if index > 0 {
            out.push('\n');
        }
        out.push_str(&delimiter);
        out.push('\n');
        for (key, values) in &part.headers {
            for value in values {
                out.push_str(&format!("{key}: {value}\n"));
            }
        }
        out.push('\n');
        out.push_str(&part.body);
    }
    out.push_str(&format!("\n{delimiter}--\n"));
    Ok(out.replace('\r', ""))
}

/// Reads headers up to the first empty line; returns them and the rest.
fn read_headers(text: &str) -> Result<(BTreeMap<String, Vec<String>>, &str), MimeError> {
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut last_key: Option<String> = None;
    let mut rest = text;
    while !rest.is_empty() {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        rest = after;
        if line.is_empty() {
            return Ok((headers, rest));
        }
        if line.starts_with([' ', '\t']) {
            // A continuation of the previous header's value.
            let Some(value) = last_key
                .as_ref()
                .and_then(|key| headers.get_mut(key))
                .and_then(|values| values.last_mut())
            else {
                return Err(MimeError::MalformedHeader {
                    line: line.to_string(),
                });
            };
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(MimeError::MalformedHeader {
                line: line.to_string(),
            });
        };
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(MimeError::MalformedHeader {
                line: line.to_string(),
            });
        }
        let key = canonical_key(key);
        headers
            .entry(key.clone())
            .or_default()
            .push(value.trim().to_string());
        last_key = Some(key);
    }
    Ok((headers, rest))
}

/// `content-type` -> `Content-Type` (Go's `textproto.CanonicalMIMEHeaderKey`).
fn canonical_key(key: &str) -> String {
    let mut upper = true;
    key.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// `multipart/mixed; boundary="x"` -> (`multipart/mixed`, {boundary: x}); `None` when malformed.
fn parse_media_type(value: &str) -> Option<(String, BTreeMap<String, String>)> {
    let (media_type, mut rest) = value.split_once(';').unwrap_or((value, ""));
    let media_type = media_type.trim().to_ascii_lowercase();
    let (kind, subtype) = media_type.split_once('/')?;
    if kind.is_empty() || subtype.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ';']);
        if rest.is_empty() {
            break;
        }
        let (name, after) = rest.split_once('=')?;
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty() {
            return None;
        }
        let after = after.trim_start();
        let (value, remainder) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = Some(index + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, quoted.get(end?..)?)
        } else {
            let end = after.find(';').unwrap_or(after.len());
            let (value, remainder) = after.split_at(end);
            (value.trim().to_string(), remainder)
        };
        params.insert(name, value);
        rest = remainder;
    }
    Some((media_type, params))
}

/// Whether `line` is `--boundary` or `--boundary--`, allowing trailing spaces and tabs.
fn delimiter_kind(line: &str, boundary: &str) -> Option<bool> {
    let rest = line.strip_prefix("--")?.strip_prefix(boundary)?;
    let (is_final, rest) = match rest.strip_prefix("--") {
        Some(after) => (true, after),
        None => (false, rest),
    };
    rest.chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(is_final)
}

fn read_parts(body: &str, boundary: &str) -> Result<Vec<Part>, MimeError> {
    let lines: Vec<&str> = body.split('\n').collect();
    let mut index = 0;
    // Preamble: everything before the first delimiter.
    loop {
        let Some(line) = lines.get(index) else {
            return Err(MimeError::NoBoundary(boundary.to_string()));
        };
        index += 1;
        match delimiter_kind(line, boundary) {
            Some(true) => return Ok(Vec::new()),
            Some(false) => break,
            None => {}
        }
    }
    let mut parts = Vec::new();
    loop {
        let remaining = lines.get(index..).unwrap_or_default().join("\n");
        if remaining.is_empty() {
            // A delimiter followed by nothing ends the archive, as in Go.
            return Ok(parts);
        }
        let (headers, _) = read_headers(&remaining)?;
        // Skip the header lines and the blank line after them.
        while let Some(line) = lines.get(index) {
            index += 1;
            if line.is_empty() {
                break;
            }
        }
        let start = index;
        let end = loop {
            match lines.get(index) {
                None => {
                    return Err(MimeError::UnterminatedPart { index: parts.len() });
                }
                Some(line) => {
                    if let Some(is_final) = delimiter_kind(line, boundary) {
                        break (index, is_final);
                    }
                }
            }
            index += 1;
        };
        let body = lines.get(start..end.0).unwrap_or_default().join("\n");
        parts.push(Part { headers, body });
        index = end.0 + 1;
        if end.1 {
            return Ok(parts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\n--BOUNDARY--\n";

    #[test]
    fn a_valid_archive_yields_its_parts_without_the_newline_before_the_boundary() {
        let parts = parse(VALID);
        assert_eq!(
            parts,
            Ok(vec![Part::new(
                CONTENT_TYPE_SHELL,
                "#!/bin/bash\necho hi\n"
            )])
        );
    }

    #[test]
    fn crlf_line_endings_and_lower_case_headers_are_accepted() {
        let crlf = VALID
            .replace('\n', "\r\n")
            .replace("Content-Type: text", "content-type: text");
        assert_eq!(parse(&crlf), parse(VALID));
    }

    #[test]
    fn a_dangling_last_delimiter_ends_the_archive() {
        let text = "Content-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: a/b\n\nx\n--//\n";
        assert_eq!(parse(text), Ok(vec![Part::new("a/b", "x")]));
    }

    #[test]
    fn malformed_documents_are_errors() {
        let cases = [
            (
                "MIME-Version: 1.0\nnot a header\n\n",
                "malformed MIME header",
            ),
            ("MIME-Version: 1.0\n\nbody", "no Content-Type"),
            ("Content-Type: text/plain\n\nbody", "not multipart"),
            ("Content-Type: multipart/mixed\n\nbody", "not multipart"),
            (
                "Content-Type: multipart/mixed; boundary=\"b\n\nbody",
                "not multipart",
            ),
            (
                "Content-Type: multipart/mixed; boundary=b\n\nno delimiter",
                "no boundary line",
            ),
            (
                "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: a/b\n\ncut off",
                "does not end",
            ),
        ];
        for (text, expected) in cases {
            let message = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(expected), "{text:?}: {message}");
        }
    }

    #[test]
    fn serializing_writes_upstreams_layout() {
        let parts = [
            Part::new(CONTENT_TYPE_SHELL, "echo a\n"),
            Part::new("x/y", "b"),
        ];
        assert_eq!(
            serialize(&parts),
            Ok("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\necho a\n\n--//\nContent-Type: x/y\n\nb\n--//--\n".to_string())
        );
    }

    #[test]
    fn a_body_holding_the_output_boundary_is_refused() {
        let parts = [Part::new("x/y", "a\n--//--\nb")];
        assert!(matches!(
            serialize(&parts),
            Err(MimeError::BoundaryInBody { index: 0, .. })
        ));
    }

    #[test]
    fn only_mime_looking_user_data_is_parsed_as_mime() {
        assert!(looks_like_mime("  MIME-Version: 1.0\n"));
        assert!(looks_like_mime("Content-Type: multipart/mixed"));
        assert!(!looks_like_mime("#!/bin/bash\n"));
    }
}
