//! `karpenter crds`: print, write or check the generated CRDs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write one file per CRD into this directory instead of printing them.
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    write: Option<PathBuf>,
    /// Compare the files in this directory with the generator; exit 1 when they differ.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let crds = karpenter_api::crds::all();
    if let Some(dir) = args.write {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for crd in &crds {
            let path = dir.join(crd.file_name);
            std::fs::write(&path, karpenter_api::crds::render(crd)?)
                .with_context(|| format!("writing {}", path.display()))?;
            crate::cmd::out::println(&format!("wrote {}", path.display()))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = args.check {
        let mut drifted = 0;
        for crd in &crds {
            let path = dir.join(crd.file_name);
            let expected = karpenter_api::crds::render(crd)?;
            match std::fs::read_to_string(&path) {
                Ok(actual) if actual == expected => {}
                Ok(_) => {
                    eprintln!("{}: differs from the generator", path.display());
                    drifted += 1;
                }
                Err(err) => {
                    eprintln!("{}: {err}", path.display());
                    drifted += 1;
                }
            }
        }
        if drifted > 0 {
            eprintln!(
                "{drifted} CRD file(s) drifted; regenerate with `karpenter crds --write {}`",
                dir.display()
            );
            return Ok(ExitCode::FAILURE);
        }
        crate::cmd::out::println(&format!(
            "{} CRDs up to date in {}",
            crds.len(),
            dir.display()
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    for (i, crd) in crds.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&karpenter_api::crds::render(crd)?);
    }
    crate::cmd::out::print(&out)?;
    Ok(ExitCode::SUCCESS)
}
