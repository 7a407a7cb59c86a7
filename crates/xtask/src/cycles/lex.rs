//! Rust source as the tokens the cycle check reads: identifiers, string literals (for
//! `#[path = "..."]`), `::` and single punctuation characters. Comments, character literals,
//! lifetimes and numbers are dropped; so are the contents of strings for every other purpose,
//! which is why a path written in a comment or a string never counts as an import.

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of `text`. Never fails: an unterminated comment or literal ends the file.
pub fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = block_comment_end(&chars, i);
        } else if c == '"' {
            let (text, end) = string(&chars, i + 1);
            out.push(Token::Str(text));
            i = end;
        } else if c == '\'' {
            i = quote_end(&chars, i);
        } else if c.is_ascii_digit() {
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            i = ident_or_literal(&chars, i, &mut out);
        } else if c == ':' && next == Some(':') {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

/// After a `/* ... */` starting at `i` (they nest).
fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// An escaped string's text from `start` (after its opening quote) and the index after its
/// closing quote.
fn string(chars: &[char], start: usize) -> (String, usize) {
    let mut i = start;
    let mut text = String::new();
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                if let Some(&escaped) = chars.get(i + 1) {
                    text.push(escaped);
                }
                i += 2;
            }
            '"' => return (text, i + 1),
            _ => {
                text.push(c);
                i += 1;
            }
        }
    }
    (text, i)
}

/// A raw string whose `#`s (maybe none) start at `i`: its text (no escapes) and the index
/// after its closing quote and `#`s.
fn raw_string(chars: &[char], i: usize) -> (String, usize) {
    let mut open = i;
    while chars.get(open) == Some(&'#') {
        open += 1;
    }
    let hashes = open - i;
    let mut j = open + 1;
    let mut text = String::new();
    while let Some(&c) = chars.get(j) {
        if c == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
            return (text, j + 1 + hashes);
        }
        text.push(c);
        j += 1;
    }
    (text, j)
}

/// After a character literal or a lifetime starting at the quote at `i`.
fn quote_end(chars: &[char], i: usize) -> usize {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => {
            // An escape: the escaped character, then up to the closing quote (`'\u{..}'`).
            let mut j = i + 3;
            while chars.get(j).is_some_and(|&c| c != '\'') {
                j += 1;
            }
            j + 1
        }
        (Some(_), Some('\'')) => i + 3,
        _ => {
            // A lifetime: the quote and its name.
            let mut j = i + 1;
            while chars
                .get(j)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                j += 1;
            }
            j
        }
    }
}

/// An identifier (or raw identifier), or a prefixed literal (`r"..."`, `r#"..."#`, `b"..."`,
/// `br"..."`, `b'x'`), starting at `i`; pushes its token and returns the index after it.
fn ident_or_literal(chars: &[char], i: usize, out: &mut Vec<Token>) -> usize {
    let mut j = i;
    while chars
        .get(j)
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
    {
        j += 1;
    }
    let word: String = chars[i..j].iter().collect();
    let prefix = matches!(word.as_str(), "r" | "b" | "br" | "c" | "cr");
    match chars.get(j) {
        Some('"') if prefix => {
            let (text, end) = if word.contains('r') {
                raw_string(chars, j)
            } else {
                string(chars, j + 1)
            };
            out.push(Token::Str(text));
            end
        }
        Some('#') if prefix && word.contains('r') => {
            let mut k = j;
            while chars.get(k) == Some(&'#') {
                k += 1;
            }
            if chars.get(k) == Some(&'"') {
                let (text, end) = raw_string(chars, j);
                out.push(Token::Str(text));
                end
            } else {
                // A raw identifier: `r#type`.
                let mut end = k;
                while chars
                    .get(end)
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_')
                {
                    end += 1;
                }
                out.push(Token::Ident(chars[k..end].iter().collect()));
                end
            }
        }
        Some('\'') if word == "b" => quote_end(chars, j),
        _ => {
            out.push(Token::Ident(word));
            j
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(text: &str) -> Vec<String> {
        tokens(text)
            .into_iter()
            .filter_map(|t| match t {
                Token::Ident(name) => Some(name),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn comments_strings_lifetimes_and_characters_hide_the_paths_in_them() {
        let text = r##"
            // use crate::in_line_comment;
            /* crate::in_block /* crate::in_nested */ */
            let s = "crate::in_string \" crate::after_escape";
            let r = r#"crate::in_raw"#;
            let c = '"'; let q = '\''; let b = b'x';
            fn f<'a>(x: &'a str) {}
            use crate::kept;
        "##;
        let names = idents(text);
        assert!(names.contains(&"kept".to_owned()), "{names:?}");
        for hidden in [
            "in_line_comment",
            "in_block",
            "in_nested",
            "in_string",
            "after_escape",
            "in_raw",
        ] {
            assert!(!names.contains(&hidden.to_owned()), "{hidden} in {names:?}");
        }
    }

    #[test]
    fn path_separators_and_string_literals_are_tokens() {
        assert_eq!(
            tokens(r#"#[path = "x.rs"] super::y"#),
            vec![
                Token::Punct('#'),
                Token::Punct('['),
                Token::Ident("path".into()),
                Token::Punct('='),
                Token::Str("x.rs".into()),
                Token::Punct(']'),
                Token::Ident("super".into()),
                Token::PathSep,
                Token::Ident("y".into()),
            ]
        );
    }
}
