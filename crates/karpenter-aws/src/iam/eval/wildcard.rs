//! Wildcard patterns: `*` (any run of characters, including none) and `?` (exactly one).
//!
//! A pattern is a list of tokens rather than a string so that text coming from a policy variable
//! or from the `${*}` / `${?}` escapes stays literal even when it contains `*` or `?`.

/// One element of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    Lit(char),
    /// `*`
    Many,
    /// `?`
    One,
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    /// Parses `*` and `?` as wildcards; everything else is literal.
    pub fn glob(text: &str) -> Self {
        let mut p = Pattern::default();
        p.push_glob(text);
        p
    }

    /// A pattern that matches exactly `text`.
    pub fn literal(text: &str) -> Self {
        let mut p = Pattern::default();
        p.push_literal(text);
        p
    }

    pub fn push_glob(&mut self, text: &str) {
        self.tokens.extend(text.chars().map(|c| match c {
            '*' => Token::Many,
            '?' => Token::One,
            c => Token::Lit(c),
        }));
    }

    pub fn push_literal(&mut self, text: &str) {
        self.tokens.extend(text.chars().map(Token::Lit));
    }

    pub fn push(&mut self, token: Token) {
        self.tokens.push(token);
    }

    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Whether the pattern contains a wildcard.
    pub fn has_wildcard(&self) -> bool {
        self.tokens.iter().any(|t| !matches!(t, Token::Lit(_)))
    }

    /// The pattern as text, wildcards written as `*` and `?` (used by the exact-match operators,
    /// which treat them as ordinary characters).
    pub fn text(&self) -> String {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Lit(c) => *c,
                Token::Many => '*',
                Token::One => '?',
            })
            .collect()
    }

    /// Splits at literal `sep` characters, at most `max_parts - 1` times (the last part keeps the
    /// rest, separators included).
    pub fn splitn(&self, max_parts: usize, sep: char) -> Vec<Pattern> {
        let mut parts = vec![Pattern::default()];
        for t in &self.tokens {
            if *t == Token::Lit(sep) && parts.len() < max_parts {
                parts.push(Pattern::default());
            } else if let Some(last) = parts.last_mut() {
                last.tokens.push(*t);
            }
        }
        parts
    }

    /// Matches the whole of `text`; `ignore_case` folds both sides to lower case.
    pub fn matches(&self, text: &str, ignore_case: bool) -> bool {
        let fold = |c: char| {
            if ignore_case {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                c
            }
        };
        let s: Vec<char> = text.chars().map(fold).collect();
        let p = &self.tokens;
        // Iterative glob matching with single-star backtracking: O(len(p) * len(s)) worst case.
        let (mut pi, mut si) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some(Token::Lit(c)) if fold(*c) == s[si] => {
                    pi += 1;
                    si += 1;
                }
                Some(Token::One) => {
                    pi += 1;
                    si += 1;
                }
                Some(Token::Many) => {
                    star = Some((pi, si));
                    pi += 1;
                }
                _ => match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi.min(p.len())..].iter().all(|t| *t == Token::Many)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_iam_wildcards() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("ec2:*", "ec2:RunInstances", true),
            ("ec2:Describe*", "ec2:DescribeImages", true),
            ("ec2:Describe*", "ec2:CreateTags", false),
            ("ec2:??n*", "ec2:RunInstances", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("abc", "abcd", false),
            ("*/i-*", "arn:aws:ec2:r:1:instance/i-0abc", true),
        ];
        for (p, s, want) in cases {
            assert_eq!(Pattern::glob(p).matches(s, false), want, "{p} vs {s}");
        }
    }

    #[test]
    fn case_folding_is_only_applied_when_asked() {
        assert!(Pattern::glob("EC2:run*").matches("ec2:RunInstances", true));
        assert!(!Pattern::glob("EC2:run*").matches("ec2:RunInstances", false));
    }

    #[test]
    fn literal_tokens_do_not_act_as_wildcards() {
        let mut p = Pattern::literal("a*");
        p.push(Token::Many);
        assert!(p.matches("a*zzz", false));
        assert!(!p.matches("abzzz", false));
    }

    #[test]
    fn splitn_keeps_the_rest_in_the_last_part() {
        let parts = Pattern::glob("arn:aws:ssm:r::parameter/a:b").splitn(6, ':');
        let texts: Vec<String> = parts.iter().map(Pattern::text).collect();
        assert_eq!(texts, ["arn", "aws", "ssm", "r", "", "parameter/a:b"]);
    }
}
