//! Project generators, run as `cargo xtask <task>` (alias in `.cargo/config.toml`).
//!
//! - `cargo xtask catalog` regenerates `crates/karpenter-cloud/data/ec2-catalog.jsonl` from moto's
//!   EC2 data (the pinned moto wheel, fetched with pip into `.cache/xtask/` when not cached).
//! - `cargo xtask catalog --check` exits non-zero when the committed file differs from what the
//!   generator writes (for CI). Works offline once the wheel is cached.
//!
//! Options: `--wheel PATH` reads a moto wheel from PATH instead of the cache (it must still be
//! the pinned version: its SHA-256 is checked).
//!
//! - `cargo xtask cycles [WORKSPACE_DIR]` exits non-zero when two files of a crate (under
//!   `crates/` of this workspace, or of `WORKSPACE_DIR`) import each other, directly or around a
//!   loop, naming the files and what ties them ([`cycles`]).

mod catalog;
mod cycles;
mod ec2_data;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

const USAGE: &str = "usage: cargo xtask catalog [--check] [--wheel PATH]\n       cargo xtask cycles [WORKSPACE_DIR]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> anyhow::Result<ExitCode> {
    let mut args = args.into_iter();
    match args.next().as_deref() {
        Some("catalog") => {}
        Some("cycles") => {
            let root = match args.next() {
                Some(dir) if !dir.starts_with('-') => PathBuf::from(dir),
                Some(other) => bail!("unknown argument {other:?}\n{USAGE}"),
                None => workspace_root()?,
            };
            return cycles::run(&root);
        }
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(other) => bail!("unknown task {other:?}\n{USAGE}"),
    }
    let mut check = false;
    let mut wheel: Option<PathBuf> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--wheel" => {
                let path = args.next().context("--wheel needs a path")?;
                wheel = Some(PathBuf::from(path));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let root = workspace_root()?;
    let wheel = match wheel {
        Some(path) => path,
        None => ec2_data::cached_wheel(&root)?,
    };
    let generated = catalog::generate(&wheel)?;
    let target = root.join(catalog::OUTPUT);
    if check {
        catalog::check(&target, &generated.text)
    } else {
        std::fs::write(&target, &generated.text)
            .with_context(|| format!("writing {}", target.display()))?;
        println!(
            "wrote {} ({} instance types, {} bytes) from {}",
            catalog::OUTPUT,
            generated.count,
            generated.text.len(),
            ec2_data::SOURCE,
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// The workspace root: two levels above this crate's manifest directory.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .and_then(|crates| crates.parent())
        .map(PathBuf::from)
        .context("cannot find the workspace root above crates/xtask")
}
