//! Interning of label keys and values (and other short strings) to dense integer symbols.
//!
//! One [`Interner`] lives for one solve. Symbols compare and hash as integers; each symbol also
//! remembers whether its text is an integer, for the `Gt`/`Lt`/`Gte`/`Lte` operators.

use std::collections::HashMap;

use crate::hash::FxBuild;

/// An interned string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Sym(pub u32);

impl Sym {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The table of interned strings.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    map: HashMap<Box<str>, Sym, FxBuild>,
    strings: Vec<Box<str>>,
    ints: Vec<Option<i64>>,
}

impl Interner {
    pub fn new() -> Self {
        Self::default()
    }

    /// The symbol for `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(sym) = self.map.get(s) {
            return *sym;
        }
        let sym = Sym(u32::try_from(self.strings.len()).unwrap_or(u32::MAX));
        self.strings.push(s.into());
        self.ints.push(parse_int(s));
        self.map.insert(s.into(), sym);
        sym
    }

    /// The symbol for `s` if it was interned.
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.map.get(s).copied()
    }

    pub fn resolve(&self, sym: Sym) -> &str {
        self.strings.get(sym.index()).map_or("", |s| s)
    }

    /// The integer value of the symbol's text, if it is one.
    pub fn int(&self, sym: Sym) -> Option<i64> {
        self.ints.get(sym.index()).copied().flatten()
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

/// Go's `strconv.Atoi` accepts an optional sign and decimal digits.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_the_same_text_twice_gives_the_same_symbol() {
        let mut i = Interner::new();
        let a = i.intern("zone-a");
        let b = i.intern("zone-b");
        assert_ne!(a, b);
        assert_eq!(i.intern("zone-a"), a);
        assert_eq!(i.resolve(b), "zone-b");
    }

    #[test]
    fn integer_texts_remember_their_value() {
        let mut i = Interner::new();
        let n = i.intern("-42");
        let s = i.intern("4x");
        assert_eq!(i.int(n), Some(-42));
        assert_eq!(i.int(s), None);
    }
}
