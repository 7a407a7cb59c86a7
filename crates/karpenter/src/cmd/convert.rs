//! `karpenter convert`: migrate v1alpha5/v1alpha1 and v1beta1 manifests to v1 (or v1beta1).
//!
//! Reads every `-f` file (`-` for stdin) as multi-document YAML, converts all documents
//! together (so a Provisioner's kubelet settings can move onto the EC2NodeClass converted from
//! its AWSNodeTemplate, even from another file), writes the result on stdout and every warning
//! on stderr as `file:document: Kind/name: field: message`. Any error (unreadable file, bad
//! YAML, an object that cannot be converted) prints every problem, writes nothing on stdout
//! and exits 1.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use karpenter_api::convert::{self, Input, Options, Target};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ToVersion {
    V1,
    V1beta1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OutputFormat {
    Yaml,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files (multi-document YAML); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// API version to convert to.
    #[arg(long = "to", value_enum, default_value = "v1")]
    to: ToVersion,
    /// Output format. YAML carries comments on fields that need a human decision.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: OutputFormat,
    /// Node IAM role name for EC2NodeClasses converted from AWSNodeTemplates (default: the
    /// placeholder `$KARPENTER_NODE_ROLE`).
    #[arg(long = "node-role", value_name = "NAME")]
    node_role: Option<String>,
}

fn read_input(file: &PathBuf) -> anyhow::Result<(String, String)> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        return Ok(("<stdin>".to_owned(), text));
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Ok((file.display().to_string(), text))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut inputs = Vec::new();
    let mut failed = false;
    for file in &args.files {
        let (name, text) = match read_input(file) {
            Ok(read) => read,
            Err(err) => {
                eprintln!("error: {err:#}");
                failed = true;
                continue;
            }
        };
        match karpenter_api::yaml::parse_documents(&text) {
            Ok(docs) => inputs.extend(docs.into_iter().enumerate().map(|(i, value)| Input {
                file: name.clone(),
                document: i + 1,
                value,
            })),
            Err(err) => {
                eprintln!("error: {name}: invalid YAML: {}", err.describe());
                failed = true;
            }
        }
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    let options = Options {
        target: match args.to {
            ToVersion::V1 => Target::V1,
            ToVersion::V1beta1 => Target::V1beta1,
        },
        node_role: args.node_role,
    };
    let conversion = match convert::convert(&inputs, &options) {
        Ok(conversion) => conversion,
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            eprintln!("{} error(s); nothing written", errors.len());
            return Ok(ExitCode::FAILURE);
        }
    };
    let warnings = conversion.warnings();
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    let text = match args.output {
        OutputFormat::Yaml => convert::emit::to_yaml(&conversion)?,
        OutputFormat::Json => convert::emit::to_json(&conversion)?,
    };
    print!("{text}");
    eprintln!(
        "{} object(s) written, {} warning(s)",
        conversion.objects.len(),
        warnings.len()
    );
    Ok(ExitCode::SUCCESS)
}
