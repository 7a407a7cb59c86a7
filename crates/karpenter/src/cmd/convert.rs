//! `karpenter convert`: migrate v1alpha5/v1alpha1 and v1beta1 manifests to v1 (or v1beta1).
//!
//! Reads every `-f` file, directory or `-` (stdin) as multi-document YAML, converts all
//! documents together (so a Provisioner's kubelet settings can move onto the EC2NodeClass
//! converted from its AWSNodeTemplate, even from another file), writes the result on stdout
//! and every warning on stderr as `file:line:column: Kind/name: field: message`. Bad YAML or
//! an object that cannot be converted prints every problem, writes nothing on stdout and exits
//! 1; an unreadable file exits 2.

use std::process::ExitCode;

use karpenter_api::convert::{self, Input, Options, Target};
use karpenter_api::yaml::SourceMap;

use super::input::Files;

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
    #[command(flatten)]
    files: Files,
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

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut inputs = Vec::new();
    let mut failed = false;
    for file in args.files.read()? {
        match karpenter_api::yaml::parse_documents(&file.text) {
            Ok(docs) => {
                let map = SourceMap::new(&file.text);
                inputs.extend(docs.into_iter().enumerate().flat_map(|(i, value)| {
                    items(value)
                        .into_iter()
                        .map(|(prefix, value)| Input {
                            file: file.name.clone(),
                            document: i + 1,
                            position: map.locate(i, &prefix),
                            value,
                        })
                        .collect::<Vec<_>>()
                }));
            }
            Err(err) => {
                eprintln!(
                    "error: {}: invalid YAML: {}",
                    err.position_in(&file.name),
                    err.message
                );
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
    crate::cmd::out::print(&text)?;
    eprintln!(
        "{} object(s) written, {} warning(s)",
        conversion.objects.len(),
        warnings.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// A `List` document (`kubectl get -o yaml`) stands for its items, each with its path.
fn items(value: serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let is_list = value
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|kind| kind.ends_with("List"));
    match value {
        serde_json::Value::Object(mut map)
            if is_list && map.get("items").is_some_and(serde_json::Value::is_array) =>
        {
            let Some(serde_json::Value::Array(items)) = map.remove("items") else {
                return Vec::new();
            };
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (format!("items[{i}]"), item))
                .collect()
        }
        other => vec![(String::new(), other)],
    }
}
