//! Fixed-width bitsets over instance-type indexes.

/// A set of small integers (instance-type positions in a catalog).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    /// An empty set able to hold `0..len`.
    pub fn empty(len: usize) -> Self {
        Bitset {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// The set `0..len`.
    pub fn full(len: usize) -> Self {
        let mut b = Bitset::empty(len);
        for i in 0..len {
            b.insert(i);
        }
        b
    }

    #[inline]
    pub fn insert(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w |= 1u64 << (i % 64);
        }
    }

    #[inline]
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1u64 << (i % 64));
        }
    }

    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    #[inline]
    pub fn and_with(&mut self, other: &Bitset) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    #[inline]
    pub fn or_with(&mut self, other: &Bitset) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Number of members.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + bit)
            })
        })
    }

    /// Whether the two sets share a member.
    pub fn intersects(&self, other: &Bitset) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset_of(&self, other: &Bitset) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersection_and_inclusion_are_read_word_by_word() {
        let mut a = Bitset::empty(130);
        let mut b = Bitset::empty(130);
        a.insert(70);
        b.insert(129);
        assert!(!a.intersects(&b));
        assert!(!a.is_subset_of(&b));
        b.insert(70);
        assert!(a.intersects(&b));
        assert!(a.is_subset_of(&b));
        assert!(!b.is_subset_of(&a));
        assert!(Bitset::empty(130).is_subset_of(&a));
    }

    #[test]
    fn members_iterate_in_order_across_words() {
        let mut b = Bitset::empty(200);
        for i in [3, 64, 65, 199] {
            b.insert(i);
        }
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 64, 65, 199]);
        assert_eq!(b.count(), 4);
        let mut c = Bitset::full(200);
        c.remove(64);
        c.and_with(&b);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![3, 65, 199]);
    }
}
