//! What one file says about the module graph, read from its tokens: the file modules it
//! declares, the paths it uses (`use` declarations and `crate::`/`super::`/`self::` paths in
//! code), what it re-exports and the names it defines.
//!
//! Items under `#[cfg(test)]` (a `mod tests { ... }` block, a test-only `use`, a
//! `#[cfg(test)] mod tests;` file) are skipped: test code may import what it tests.

use std::collections::BTreeSet;

use super::lex::{Token, tokens};

/// A `mod name;` declaration: a module in a file of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDecl {
    pub name: String,
    /// The inline modules it is declared in (`mod a { mod b; }`: `["a"]`).
    pub scope: Vec<String>,
    /// `#[path = "..."]`.
    pub path: Option<String>,
}

/// A path the file uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedPath {
    /// The inline modules it is written in.
    pub scope: Vec<String>,
    /// As written, from `crate`, `super`, `self` or an external crate's name.
    pub segments: Vec<String>,
    /// `use path::*`.
    pub glob: bool,
    /// Declared by a `pub use` (of any visibility): a re-export.
    pub public: bool,
    /// The name it is imported as (`use a::b as c`: `c`); `None` for globs and paths in code.
    pub alias: Option<String>,
}

/// Everything the cycle check reads of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub mods: Vec<ModDecl>,
    pub paths: Vec<UsedPath>,
    /// Names of the items the file defines at its top level (inline modules included).
    pub defs: BTreeSet<String>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// The facts of the source `text`.
pub fn facts(text: &str) -> FileFacts {
    let tokens = tokens(text);
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        facts: FileFacts::default(),
        frames: Vec::new(),
    };
    parser.run();
    parser.facts
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
    facts: FileFacts,
    /// Open braces: the name of each that opens an inline module.
    frames: Vec<Option<String>>,
}

/// What the attributes before an item say.
#[derive(Debug, Default)]
struct Attributes {
    test_only: bool,
    path: Option<String>,
}

impl<'t> Parser<'t> {
    fn peek(&self, ahead: usize) -> Option<&'t Token> {
        self.tokens.get(self.at + ahead)
    }

    fn ident(&self, ahead: usize) -> Option<&'t str> {
        match self.peek(ahead) {
            Some(Token::Ident(name)) => Some(name),
            _ => None,
        }
    }

    fn is(&self, ahead: usize, c: char) -> bool {
        self.peek(ahead) == Some(&Token::Punct(c))
    }

    fn scope(&self) -> Vec<String> {
        self.frames.iter().flatten().cloned().collect()
    }

    fn run(&mut self) {
        let mut attributes = Attributes::default();
        while self.at < self.tokens.len() {
            if self.is(0, '#') && (self.is(1, '[') || (self.is(1, '!') && self.is(2, '['))) {
                self.attribute(&mut attributes);
                continue;
            }
            if attributes.test_only {
                self.skip_item();
                attributes = Attributes::default();
                continue;
            }
            let public = self.visibility();
            match self.ident(0) {
                Some("use") => {
                    self.at += 1;
                    self.use_declaration(public);
                }
                Some("mod") if matches!(self.peek(1), Some(Token::Ident(_))) => {
                    let name = self.ident(1).unwrap_or_default().to_owned();
                    if self.is(2, ';') {
                        self.facts.mods.push(ModDecl {
                            name,
                            scope: self.scope(),
                            path: attributes.path.take(),
                        });
                        self.at += 3;
                    } else if self.is(2, '{') {
                        if self.frames.is_empty() {
                            self.facts.defs.insert(name.clone());
                        }
                        self.frames.push(Some(name));
                        self.at += 3;
                    } else {
                        self.at += 2;
                    }
                }
                Some("macro_rules") if self.is(1, '!') => {
                    if let (true, Some(name)) = (self.frames.is_empty(), self.ident(2)) {
                        self.facts.defs.insert(name.to_owned());
                    }
                    self.at += 2;
                }
                Some(keyword) if ITEM_KEYWORDS.contains(&keyword) => {
                    if let (true, Some(name)) = (self.frames.is_empty(), self.ident(1)) {
                        self.facts.defs.insert(name.to_owned());
                    }
                    self.at += 1;
                }
                Some("crate" | "super" | "self")
                    if self.peek(1) == Some(&Token::PathSep) && !self.follows_dollar_or_sep() =>
                {
                    self.code_path();
                }
                _ => self.other(),
            }
            attributes = Attributes::default();
        }
    }

    /// `$crate::` in macros and `a::self` are not paths of this file.
    fn follows_dollar_or_sep(&self) -> bool {
        self.at > 0
            && matches!(
                self.tokens.get(self.at - 1),
                Some(Token::Punct('$') | Token::PathSep)
            )
    }

    /// A token that is none of the above: braces open and close frames.
    fn other(&mut self) {
        match self.peek(0) {
            Some(Token::Punct('{')) => self.frames.push(None),
            Some(Token::Punct('}')) => {
                self.frames.pop();
            }
            _ => {}
        }
        self.at += 1;
    }

    /// `pub`, `pub(crate)`, `pub(in path)`: skipped, and whether it was there.
    fn visibility(&mut self) -> bool {
        if self.ident(0) != Some("pub") {
            return false;
        }
        self.at += 1;
        if self.is(0, '(') {
            let mut depth = 0usize;
            while let Some(token) = self.peek(0) {
                self.at += 1;
                match token {
                    Token::Punct('(') => depth += 1,
                    Token::Punct(')') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        true
    }

    /// `#[...]` or `#![...]`: what a `cfg` and a `path` attribute say.
    fn attribute(&mut self, attributes: &mut Attributes) {
        self.at += if self.is(1, '!') { 3 } else { 2 };
        let start = self.at;
        let mut depth = 1usize;
        while let Some(token) = self.peek(0) {
            self.at += 1;
            match token {
                Token::Punct('[') => depth += 1,
                Token::Punct(']') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let inside = &self.tokens[start..self.at.saturating_sub(1)];
        let ident = |i: usize| match inside.get(i) {
            Some(Token::Ident(name)) => name.as_str(),
            _ => "",
        };
        match ident(0) {
            // `cfg(test)` and `cfg(all(test, ...))`; not `cfg(any(test, feature = ...))`,
            // which ships with the feature.
            "cfg" => {
                attributes.test_only |=
                    ident(2) == "test" || (ident(2) == "all" && ident(4) == "test");
            }
            "path" => {
                if let [_, Token::Punct('='), Token::Str(path)] = inside {
                    attributes.path = Some(path.clone());
                }
            }
            _ => {}
        }
    }

    /// Skips one item: up to its `;` or through its `{ ... }` block, whichever comes first
    /// outside parentheses and brackets.
    fn skip_item(&mut self) {
        let mut nesting = 0usize;
        while let Some(token) = self.peek(0) {
            self.at += 1;
            match token {
                Token::Punct('(' | '[') => nesting += 1,
                Token::Punct(')' | ']') => nesting = nesting.saturating_sub(1),
                Token::Punct(';') if nesting == 0 => return,
                Token::Punct('{') if nesting == 0 => {
                    let mut depth = 1usize;
                    while let Some(token) = self.peek(0) {
                        self.at += 1;
                        match token {
                            Token::Punct('{') => depth += 1,
                            Token::Punct('}') => {
                                depth -= 1;
                                if depth == 0 {
                                    return;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// A path in code: `crate::a::b`, `super::super::c`.
    fn code_path(&mut self) {
        let mut segments = Vec::new();
        while let Some(name) = self.ident(0) {
            segments.push(name.to_owned());
            if self.peek(1) == Some(&Token::PathSep) && self.ident(2).is_some() {
                self.at += 2;
            } else {
                self.at += 1;
                break;
            }
        }
        self.facts.paths.push(UsedPath {
            scope: self.scope(),
            segments,
            glob: false,
            public: false,
            alias: None,
        });
    }

    /// The tree of a `use` declaration, after `use`, through its `;`.
    fn use_declaration(&mut self, public: bool) {
        if self.peek(0) == Some(&Token::PathSep) {
            self.at += 1;
        }
        let mut leaves = Vec::new();
        self.use_tree(&mut Vec::new(), &mut leaves);
        while self.peek(0).is_some() && !self.is(0, ';') {
            self.at += 1;
        }
        self.at += 1;
        let scope = self.scope();
        for (segments, glob, alias) in leaves {
            self.facts.paths.push(UsedPath {
                scope: scope.clone(),
                segments,
                glob,
                public,
                alias,
            });
        }
    }

    /// One use tree below `prefix`: `a::b`, `a::b as c`, `a::*`, `a::{tree, tree}`.
    fn use_tree(
        &mut self,
        prefix: &mut Vec<String>,
        leaves: &mut Vec<(Vec<String>, bool, Option<String>)>,
    ) {
        let depth = prefix.len();
        loop {
            if self.is(0, '*') {
                self.at += 1;
                leaves.push((prefix.clone(), true, None));
                break;
            }
            if self.is(0, '{') {
                self.at += 1;
                while !self.is(0, '}') && self.peek(0).is_some() {
                    self.use_tree(prefix, leaves);
                    if self.is(0, ',') {
                        self.at += 1;
                    }
                }
                self.at += 1;
                break;
            }
            let Some(name) = self.ident(0) else {
                break;
            };
            prefix.push(name.to_owned());
            self.at += 1;
            if self.peek(0) == Some(&Token::PathSep) {
                self.at += 1;
                continue;
            }
            let alias = if self.ident(0) == Some("as") {
                self.at += 2;
                self.tokens.get(self.at - 1).and_then(|t| match t {
                    Token::Ident(name) => Some(name.clone()),
                    _ => None,
                })
            } else {
                None
            };
            let mut segments = prefix.clone();
            if segments.last().map(String::as_str) == Some("self") && segments.len() > 1 {
                segments.pop();
            }
            leaves.push((segments, false, alias));
            break;
        }
        prefix.truncate(depth);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(facts: &FileFacts) -> Vec<String> {
        facts
            .paths
            .iter()
            .map(|p| {
                let mut s = p.segments.join("::");
                if p.glob {
                    s.push_str("::*");
                }
                if let Some(alias) = &p.alias {
                    s.push_str(" as ");
                    s.push_str(alias);
                }
                if p.public {
                    s.insert_str(0, "pub ");
                }
                s
            })
            .collect()
    }

    #[test]
    fn use_trees_become_one_path_per_leaf() {
        let facts = facts(
            "use crate::a::{b, c::{d as e, self}, f::*};\npub(crate) use super::g;\nuse std::fmt;",
        );
        assert_eq!(
            used(&facts),
            [
                "crate::a::b",
                "crate::a::c::d as e",
                "crate::a::c",
                "crate::a::f::*",
                "pub super::g",
                "std::fmt",
            ]
        );
    }

    #[test]
    fn paths_in_code_count_and_macro_paths_do_not() {
        let facts = facts(
            "fn f() { let x = crate::a::B::new(); super::super::c(); }\nmacro_rules! m { () => { $crate::d::E } }",
        );
        assert_eq!(used(&facts), ["crate::a::B::new", "super::super::c"]);
    }

    #[test]
    fn test_modules_and_test_only_items_are_skipped() {
        let facts = facts(
            "use crate::kept;\n#[cfg(test)]\nuse crate::test_only;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::other::Thing;\n    fn t() { crate::x::y(); }\n}\n#[cfg(test)]\nmod testing;\n#[cfg(not(test))]\nuse crate::not_test;\n#[cfg(any(test, feature = \"x\"))]\nuse crate::shipped;",
        );
        assert_eq!(
            used(&facts),
            ["crate::kept", "crate::not_test", "crate::shipped"]
        );
        assert!(facts.mods.is_empty(), "{:?}", facts.mods);
    }

    #[test]
    fn module_declarations_inline_modules_and_definitions_are_read() {
        let facts = facts(
            "pub mod a;\n#[path = \"other.rs\"]\nmod b;\npub mod inline {\n    use super::c;\n    mod nested;\n}\npub struct S;\npub(crate) fn f() {}\nconst C: [u8; 2] = [0; 2];",
        );
        let mods: Vec<(&str, Vec<String>, Option<&str>)> = facts
            .mods
            .iter()
            .map(|m| (m.name.as_str(), m.scope.clone(), m.path.as_deref()))
            .collect();
        assert_eq!(
            mods,
            [
                ("a", vec![], None),
                ("b", vec![], Some("other.rs")),
                ("nested", vec!["inline".to_owned()], None),
            ]
        );
        assert_eq!(facts.paths[0].scope, ["inline"]);
        let defs: Vec<&str> = facts.defs.iter().map(String::as_str).collect();
        assert_eq!(defs, ["C", "S", "f", "inline"]);
    }
}
