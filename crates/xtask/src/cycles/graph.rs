//! One crate target's files as a graph: each file is the module its path makes it (from the
//! target's root through its `mod` declarations), each path a file uses is resolved to the
//! file that defines the name, and the strongly connected components of more than one file
//! are the import cycles.
//!
//! Resolution follows re-exports (`pub use`) to the file that defines the name, so importing
//! `crate::Snapshot` depends on `snapshot.rs`, not on `lib.rs`. A module root's own re-exports
//! (`pub use` in `lib.rs`, `main.rs`, `mod.rs`) are its table of contents, not a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::parse::{FileFacts, UsedPath, facts};

/// A module path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One file of the target.
#[derive(Debug)]
struct File {
    /// Relative to the crate directory.
    path: PathBuf,
    facts: FileFacts,
    /// `lib.rs`, `main.rs` or `mod.rs`.
    root: bool,
    /// File modules declared here, by name, with the inline modules they sit in.
    children: BTreeMap<(Vec<String>, String), ModPath>,
}

/// An import cycle: the files (relative to the crate directory) and, for each edge between
/// two of them, the names that tie them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    pub files: Vec<PathBuf>,
    pub edges: Vec<(PathBuf, PathBuf, Vec<String>)>,
}

/// The files of one target (a crate's library or a binary), by module path.
#[derive(Debug, Default)]
pub struct Target {
    files: BTreeMap<ModPath, File>,
}

impl Target {
    /// Reads the target whose root file is `root` (relative to the crate directory) with
    /// `read`, following its `mod` declarations; a declared file that cannot be read is left
    /// out (the compiler reports it).
    pub fn load(root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Target {
        let mut target = Target::default();
        let mut queue = vec![(Vec::new(), root.to_path_buf(), true)];
        while let Some((module, path, is_root)) = queue.pop() {
            let Some(text) = read(&path) else {
                continue;
            };
            let facts = facts(&text);
            let mut children = BTreeMap::new();
            for declared in &facts.mods {
                let Some(child_path) = child_file(&path, is_root, declared, read) else {
                    continue;
                };
                let mut child = module.clone();
                child.extend(declared.scope.iter().cloned());
                child.push(declared.name.clone());
                let child_root = child_path.file_name().is_some_and(|n| n == "mod.rs");
                children.insert(
                    (declared.scope.clone(), declared.name.clone()),
                    child.clone(),
                );
                queue.push((child, child_path, child_root));
            }
            target.files.insert(
                module,
                File {
                    path,
                    facts,
                    root: is_root,
                    children,
                },
            );
        }
        target
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The file module `segment` below `module`, declared at its top level.
    fn child(&self, module: &ModPath, segment: &str) -> Option<&ModPath> {
        self.files
            .get(module)?
            .children
            .get(&(Vec::new(), segment.to_owned()))
    }

    /// `path` as used in `module` (inside its inline modules `scope`) made absolute; `None`
    /// for another crate's path.
    fn absolute(module: &ModPath, used: &UsedPath) -> Option<Vec<String>> {
        let mut base: Vec<String> = module.clone();
        base.extend(used.scope.iter().cloned());
        let mut segments = used.segments.iter().peekable();
        match segments.peek().map(|s| s.as_str()) {
            Some("crate") => {
                segments.next();
                base.clear();
            }
            Some("self") => {
                segments.next();
            }
            Some("super") => {
                while segments.next_if(|s| *s == "super").is_some() {
                    base.pop();
                }
            }
            _ => return None,
        }
        base.extend(segments.cloned());
        Some(base)
    }

    /// The file (module path) that defines what `path` names, and the name; `None` when it
    /// is another crate's. `hops` bounds re-export chains.
    fn resolve(&self, path: &[String], hops: usize) -> Option<(ModPath, String)> {
        let mut module: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            if let Some(child) = self.child(&module, segment) {
                module = child.clone();
                continue;
            }
            let file = self.files.get(&module)?;
            if hops < 16 {
                if let Some(target) = self.reexport(&module, file, segment) {
                    let mut next = target?;
                    next.extend(path[i + 1..].iter().cloned());
                    return self.resolve(&next, hops + 1);
                }
                for glob in self.globs(&module, file) {
                    let mut next = glob;
                    next.extend(path[i..].iter().cloned());
                    if self.knows(&next) {
                        return self.resolve(&next, hops + 1);
                    }
                }
            }
            return Some((module, segment.clone()));
        }
        let name = path.last().cloned().unwrap_or_else(|| "*".to_owned());
        Some((module, name))
    }

    /// What `file` re-exports as `name`: `Some(None)` for another crate's item.
    fn reexport(&self, module: &ModPath, file: &File, name: &str) -> Option<Option<Vec<String>>> {
        file.facts
            .paths
            .iter()
            .filter(|p| p.public && !p.glob && p.scope.is_empty())
            .find(|p| p.alias.as_deref().or(p.segments.last().map(String::as_str)) == Some(name))
            .map(|p| Self::absolute(module, p))
    }

    /// The modules `file` re-exports every name of (`pub use a::*`).
    fn globs(&self, module: &ModPath, file: &File) -> Vec<Vec<String>> {
        file.facts
            .paths
            .iter()
            .filter(|p| p.public && p.glob && p.scope.is_empty())
            .filter_map(|p| Self::absolute(module, p))
            .collect()
    }

    /// Whether `path` names something: a file module, or a name its module re-exports or
    /// defines.
    fn knows(&self, path: &[String]) -> bool {
        let mut module: ModPath = Vec::new();
        for segment in path {
            if let Some(child) = self.child(&module, segment) {
                module = child.clone();
                continue;
            }
            let Some(file) = self.files.get(&module) else {
                return false;
            };
            return file.facts.defs.contains(segment)
                || self.reexport(&module, file, segment).is_some();
        }
        true
    }

    /// Every edge between two files: (from, to) -> the names.
    fn edges(&self) -> BTreeMap<(ModPath, ModPath), BTreeSet<String>> {
        let mut edges: BTreeMap<(ModPath, ModPath), BTreeSet<String>> = BTreeMap::new();
        for (module, file) in &self.files {
            for used in &file.facts.paths {
                if file.root && used.public {
                    continue;
                }
                let Some(absolute) = Self::absolute(module, used) else {
                    continue;
                };
                let Some((target, name)) = self.resolve(&absolute, 0) else {
                    continue;
                };
                if target == *module || !self.files.contains_key(&target) {
                    continue;
                }
                let name = if used.glob { "*".to_owned() } else { name };
                edges
                    .entry((module.clone(), target))
                    .or_default()
                    .insert(name);
            }
        }
        edges
    }

    /// The import cycles, each with its files in path order.
    pub fn cycles(&self) -> Vec<Cycle> {
        let edges = self.edges();
        let nodes: Vec<&ModPath> = self.files.keys().collect();
        let index: BTreeMap<&ModPath, usize> =
            nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (from, to) in edges.keys() {
            if let (Some(&a), Some(&b)) = (index.get(from), index.get(to)) {
                next[a].push(b);
            }
        }
        let mut cycles = Vec::new();
        for component in strongly_connected(&next) {
            if component.len() < 2 {
                continue;
            }
            let members: BTreeSet<&ModPath> = component.iter().map(|&i| nodes[i]).collect();
            let path_of = |m: &ModPath| {
                self.files
                    .get(m)
                    .map(|f| f.path.clone())
                    .unwrap_or_default()
            };
            let mut files: Vec<PathBuf> = members.iter().map(|m| path_of(m)).collect();
            files.sort();
            let mut tied: Vec<(PathBuf, PathBuf, Vec<String>)> = edges
                .iter()
                .filter(|((from, to), _)| members.contains(from) && members.contains(to))
                .map(|((from, to), names)| {
                    (path_of(from), path_of(to), names.iter().cloned().collect())
                })
                .collect();
            tied.sort();
            cycles.push(Cycle { files, edges: tied });
        }
        cycles.sort_by(|a, b| a.files.cmp(&b.files));
        cycles
    }
}

/// The file a `mod` declaration in `parent` names: its `#[path]` (relative to the parent's
/// directory), else `name.rs` or `name/mod.rs` in the parent's module directory (a root
/// file's own directory, `a/` for `a.rs`), below the inline modules it sits in.
fn child_file(
    parent: &Path,
    parent_is_root: bool,
    declared: &super::parse::ModDecl,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Option<PathBuf> {
    let directory = parent.parent().unwrap_or(Path::new(""));
    if let Some(path) = &declared.path {
        return Some(directory.join(path));
    }
    let mut directory = if parent_is_root {
        directory.to_path_buf()
    } else {
        directory.join(parent.file_stem()?)
    };
    for inline in &declared.scope {
        directory.push(inline);
    }
    let flat = directory.join(format!("{}.rs", declared.name));
    if read(&flat).is_some() {
        return Some(flat);
    }
    let nested = directory.join(&declared.name).join("mod.rs");
    read(&nested).is_some().then_some(nested)
}

/// Tarjan's strongly connected components of the graph `next` (successors per node).
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'g> {
        next: &'g [Vec<usize>],
        counter: usize,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(index) if s.on_stack[w] => s.low[v] = s.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = next.len();
    let mut state = State {
        next,
        counter: 0,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        out: Vec::new(),
    };
    for v in 0..n {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.out
}
