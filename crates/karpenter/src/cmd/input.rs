//! The `-f` forms every subcommand takes: files, directories (every `*.yaml`, `*.yml` and
//! `*.json` below them, in name order; timeline files excluded), `-` for standard input, and
//! several values after one `-f` or several `-f`.
//!
//! A file that cannot be read (missing, a directory without manifests, not UTF-8) is an
//! error, which `main` turns into exit code 2 in every subcommand.

use std::io::Read;
use std::path::PathBuf;

/// Manifest files or directories; `-` reads standard input.
#[derive(Debug, Clone, clap::Args)]
pub struct Files {
    /// Manifest files or directories (multi-document YAML or JSON; directories are read
    /// recursively: `*.yaml`, `*.yml`, `*.json`); `-` reads standard input. Repeat `-f` or give
    /// several values after one.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true,
        num_args = 1..
    )]
    pub files: Vec<PathBuf>,
}

/// One input file, read.
#[derive(Debug, Clone)]
pub struct Text {
    /// As the user named it (`<stdin>` for standard input).
    pub name: String,
    pub text: String,
}

impl Files {
    /// Reads every input, in order.
    pub fn read(&self) -> anyhow::Result<Vec<Text>> {
        let mut out = Vec::new();
        for file in &self.files {
            if file.as_os_str() == "-" {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .map_err(|e| anyhow::anyhow!("reading standard input: {e}"))?;
                out.push(Text {
                    name: "<stdin>".to_owned(),
                    text: utf8("<stdin>", bytes)?,
                });
                continue;
            }
            let paths = karpenter_sim::load::manifest_paths(std::slice::from_ref(file))
                .map_err(anyhow::Error::new)?;
            for path in paths {
                let name = path.display().to_string();
                let bytes =
                    std::fs::read(&path).map_err(|e| anyhow::anyhow!("reading {name}: {e}"))?;
                out.push(Text {
                    text: utf8(&name, bytes)?,
                    name,
                });
            }
        }
        Ok(out)
    }
}

fn utf8(name: &str, bytes: Vec<u8>) -> anyhow::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "reading {name}: not UTF-8 text (byte {} is invalid); manifests must be UTF-8",
            e.utf8_error().valid_up_to() + 1
        )
    })
}
