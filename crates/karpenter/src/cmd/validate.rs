//! `karpenter validate`: check manifests against the v1 validation rules.
//!
//! Prints one line per problem (`FILE:DOC: Kind/name: field.path: message`), one line per
//! skipped document, and a summary on stderr. Exit 0 when every Karpenter object is valid,
//! 1 when any is invalid or a file cannot be read as YAML.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use karpenter_api::validation::{DocumentIdentity, Outcome, validate_document};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files (multi-document YAML); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

/// Counts of what was found, for the summary line.
#[derive(Debug, Default)]
struct Tally {
    valid: usize,
    invalid: usize,
    skipped: usize,
    unreadable: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut tally = Tally::default();
    for file in &args.files {
        let (name, text) = read_input(file)?;
        check_file(&name, &text, &mut tally);
    }
    eprintln!(
        "{} valid, {} invalid, {} skipped{}",
        tally.valid,
        tally.invalid,
        tally.skipped,
        if tally.unreadable > 0 {
            format!(", {} unreadable file(s)", tally.unreadable)
        } else {
            String::new()
        }
    );
    Ok(if tally.invalid > 0 || tally.unreadable > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
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

fn check_file(name: &str, text: &str, tally: &mut Tally) {
    let docs = match karpenter_api::yaml::parse_documents(text) {
        Ok(docs) => docs,
        Err(err) => {
            println!("{name}: invalid YAML: {}", err.describe());
            tally.unreadable += 1;
            return;
        }
    };
    for (index, doc) in docs.iter().enumerate() {
        let id = DocumentIdentity::of(doc);
        let object = if id.name.is_empty() {
            id.kind.clone()
        } else {
            format!("{}/{}", id.kind, id.name)
        };
        match validate_document(doc) {
            Outcome::Valid => tally.valid += 1,
            Outcome::Invalid(errors) => {
                tally.invalid += 1;
                for error in errors {
                    println!("{name}:{}: {object}: {error}", index + 1);
                }
            }
            Outcome::Skipped { reason } => {
                tally.skipped += 1;
                println!("{name}:{}: skipped: {reason}", index + 1);
            }
        }
    }
}
