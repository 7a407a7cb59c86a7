//! Dense resource vectors: each resource name used in a solve gets an index, and amounts are
//! `i64` thousandths (millicores, millibytes, millipods) in a `Vec` indexed by it.

use crate::quantity::format_millis;
use crate::resources::ResourceList;

/// Dense resource amounts, indexed by [`Dims`]. Shorter vectors mean zero for the rest.
pub type Res = Vec<i64>;

/// The resource names of one solve. `cpu`, `memory`, `pods`, `ephemeral-storage` come first.
#[derive(Debug, Clone)]
pub struct Dims {
    names: Vec<String>,
}

pub const CPU: usize = 0;
pub const MEMORY: usize = 1;
pub const PODS: usize = 2;

impl Default for Dims {
    fn default() -> Self {
        Dims {
            names: ["cpu", "memory", "pods", "ephemeral-storage"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl Dims {
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map_or("", String::as_str)
    }

    /// The index of `name`, registering it when new.
    pub fn index(&mut self, name: &str) -> usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        }
    }

    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Converts a list, registering new names.
    pub fn res(&mut self, list: &ResourceList) -> Res {
        let mut out = vec![0; self.len()];
        for (name, q) in list.iter() {
            let i = self.index(name);
            if out.len() <= i {
                out.resize(i + 1, 0);
            }
            out[i] = q.millis_i64();
        }
        out
    }

    /// Converts a list, ignoring names not registered (capacities of unrequested resources).
    pub fn res_known(&self, list: &ResourceList) -> Res {
        let mut out = vec![0; self.len()];
        for (name, q) in list.iter() {
            if let Some(i) = self.lookup(name) {
                out[i] = q.millis_i64();
            }
        }
        out
    }

    /// Renders the non-zero entries as `cpu=2, memory=4Gi`.
    pub fn describe(&self, res: &Res) -> String {
        res.iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| format!("{}={}", self.name(i), format_millis(i128::from(*v))))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn to_list(&self, res: &Res) -> ResourceList {
        let mut list = ResourceList::new();
        for (i, v) in res.iter().enumerate() {
            if *v != 0 {
                list.set(self.name(i), crate::Quantity::from_millis(i128::from(*v)));
            }
        }
        list
    }
}

#[inline]
pub fn get(res: &Res, i: usize) -> i64 {
    res.get(i).copied().unwrap_or(0)
}

pub fn add(a: &mut Res, b: &Res) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

pub fn sub(a: &mut Res, b: &Res) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_sub(*y);
    }
}

pub fn max_with(a: &mut Res, b: &Res) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

pub fn sum(a: &Res, b: &Res) -> Res {
    let mut out = a.clone();
    add(&mut out, b);
    out
}

/// True when every amount in `need` is at most the one in `avail`.
#[inline]
pub fn fits(need: &Res, avail: &Res) -> bool {
    need.iter().enumerate().all(|(i, n)| *n <= get(avail, i))
}

/// True when `a + b` fits in `avail`, without allocating.
#[inline]
pub fn fits_sum(a: &Res, b: &Res, avail: &Res) -> bool {
    let n = a.len().max(b.len());
    (0..n).all(|i| get(a, i).saturating_add(get(b, i)) <= get(avail, i))
}
