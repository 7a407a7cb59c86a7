//! `cargo xtask cycles`: fails when files of one crate import each other, directly or around
//! a loop ("no file imports another that imports it back", `docs/architecture.md`).
//!
//! For every crate under `crates/` and each of its targets (`src/lib.rs`, `src/main.rs`,
//! `src/bin/*.rs`), each `.rs` file reached through `mod` declarations is the module its path
//! makes it; the paths it uses (`use crate::...`, `use super::...`, `crate::a::b` and
//! `super::x` in code) are resolved to the files that define the names ([`graph`]), read with
//! a careful textual parse rather than the compiler ([`parse`], [`lex`]). Test code is left
//! out: `#[cfg(test)]` items (`mod tests { ... }`, test-only files and imports) and `tests/`.
//! Each cycle is reported with its files and the names that tie them; the exit code is 1 when
//! there is one.

mod graph;
mod lex;
mod parse;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

pub use graph::{Cycle, Target};

/// The cycles of one crate target.
#[derive(Debug)]
pub struct Finding {
    /// `karpenter-sim` (`src/lib.rs`).
    pub target: String,
    pub cycles: Vec<Cycle>,
}

/// Checks every crate under `root/crates` and prints what it found.
pub fn run(root: &Path) -> anyhow::Result<ExitCode> {
    let crates = root.join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .with_context(|| format!("listing {}", crates.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    let mut findings = Vec::new();
    let mut files = 0;
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let read = |path: &Path| std::fs::read_to_string(dir.join(path)).ok();
        for root_file in targets(dir) {
            let target = Target::load(&root_file, &read);
            files += target.file_count();
            findings.push(Finding {
                target: format!("{name} ({})", root_file.display()),
                cycles: target.cycles(),
            });
        }
    }
    let (text, clean) = report(&findings, dirs.len(), files);
    print!("{text}");
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The root files of a crate's targets, relative to its directory.
fn targets(dir: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .into_iter()
        .map(PathBuf::from)
        .filter(|p| dir.join(p).is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir.join("src/bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .filter_map(|p| p.strip_prefix(dir).ok().map(Path::to_path_buf))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

/// The report of `findings` over `crates` crates and `files` files, and whether it is clean.
pub fn report(findings: &[Finding], crates: usize, files: usize) -> (String, bool) {
    let mut out = String::new();
    let mut count = 0;
    for finding in findings {
        for cycle in &finding.cycles {
            count += 1;
            let _ = writeln!(
                out,
                "import cycle in {} between {} files:",
                finding.target,
                cycle.files.len()
            );
            for (from, to, names) in &cycle.edges {
                let _ = writeln!(
                    out,
                    "  {} -> {}: {}",
                    from.display(),
                    to.display(),
                    names.join(", ")
                );
            }
        }
    }
    if count == 0 {
        let _ = writeln!(
            out,
            "no import cycle between the files of a crate ({crates} crates, {files} files)"
        );
    } else {
        let _ = writeln!(
            out,
            "{count} import cycle(s): move what both sides need into a file of its own, or make one side stop using the other"
        );
    }
    (out, count == 0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn target(files: &[(&str, &str)]) -> Target {
        let files: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
            .collect();
        Target::load(Path::new("src/lib.rs"), &|path| files.get(path).cloned())
    }

    fn edges(cycle: &Cycle) -> Vec<String> {
        cycle
            .edges
            .iter()
            .map(|(from, to, names)| {
                format!(
                    "{} -> {}: {}",
                    from.display(),
                    to.display(),
                    names.join(", ")
                )
            })
            .collect()
    }

    #[test]
    fn a_cycle_around_three_files_is_found_with_the_names_that_tie_them() {
        let target = target(&[
            ("src/lib.rs", "pub mod batches;\npub mod timeline;"),
            (
                "src/batches.rs",
                "use crate::timeline::cluster::{Launch, SimCluster};\npub fn launch_claim() {}",
            ),
            (
                "src/timeline/mod.rs",
                "pub mod cluster;\nmod run;\npub use run::run;",
            ),
            (
                "src/timeline/cluster.rs",
                "pub struct Launch;\npub struct SimCluster;\nfn f() { super::run::pod_key(); }",
            ),
            (
                "src/timeline/run.rs",
                "use crate::batches::launch_claim;\npub fn pod_key() {}\npub fn run() {}",
            ),
        ]);
        let cycles = target.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(
            edges(&cycles[0]),
            [
                "src/batches.rs -> src/timeline/cluster.rs: Launch, SimCluster",
                "src/timeline/cluster.rs -> src/timeline/run.rs: pod_key",
                "src/timeline/run.rs -> src/batches.rs: launch_claim",
            ]
        );
        let (text, clean) = report(
            &[Finding {
                target: "sim (src/lib.rs)".into(),
                cycles,
            }],
            1,
            target.file_count(),
        );
        assert!(!clean);
        assert!(
            text.starts_with("import cycle in sim (src/lib.rs) between 3 files:\n"),
            "{text}"
        );
    }

    #[test]
    fn a_one_way_graph_through_re_exports_has_no_cycle() {
        // `lib.rs` re-exports both files and `b.rs` imports `a.rs`'s type through the
        // re-export: the root's table of contents is no dependency.
        let target = target(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\npub use a::Thing;\npub use b::{helper, Other};",
            ),
            ("src/a.rs", "pub struct Thing;"),
            (
                "src/b.rs",
                "use crate::Thing;\npub struct Other(Thing);\npub fn helper() {}",
            ),
        ]);
        assert_eq!(target.cycles(), []);
        let (text, clean) = report(&[], 1, target.file_count());
        assert!(clean);
        assert_eq!(
            text,
            "no import cycle between the files of a crate (1 crates, 3 files)\n"
        );
    }

    #[test]
    fn imports_of_a_test_module_do_not_make_a_cycle() {
        let target = target(&[
            ("src/lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod testing;"),
            ("src/a.rs", "use crate::b::B;\npub struct A;"),
            (
                "src/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}",
            ),
            ("src/testing.rs", "use crate::a::A;\nuse crate::b::B;"),
        ]);
        assert_eq!(target.cycles(), []);
    }

    #[test]
    fn two_files_importing_each_other_through_super_are_a_cycle() {
        let target = target(&[
            ("src/lib.rs", "mod audit;"),
            ("src/audit/mod.rs", "mod outside;\nmod probes;"),
            (
                "src/audit/outside.rs",
                "use super::probes::{Probe, Severity};\npub fn probes() {}",
            ),
            (
                "src/audit/probes.rs",
                "pub struct Probe;\npub enum Severity {}\nfn f() { super::outside::probes(); }",
            ),
        ]);
        let cycles = target.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(
            edges(&cycles[0]),
            [
                "src/audit/outside.rs -> src/audit/probes.rs: Probe, Severity",
                "src/audit/probes.rs -> src/audit/outside.rs: probes",
            ]
        );
    }
}
