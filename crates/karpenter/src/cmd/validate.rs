//! `karpenter validate`: check manifests against the v1 validation rules.
//!
//! Prints one line per problem (`FILE:LINE:COLUMN: Kind/name: field.path: message`, the
//! position of the field's value, or of the object when the field is missing), one line per
//! skipped document, and a summary on stderr. `List` documents (`kubectl get -o yaml`) are
//! checked item by item. Exit 0 when every Karpenter object is valid, 1 when any is invalid or
//! a file is not YAML, 2 when a file cannot be read.

use std::process::ExitCode;

use karpenter_api::validation::{DocumentIdentity, Outcome, validate_document};
use karpenter_api::yaml::SourceMap;

use super::input::Files;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: Files,
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
    for input in args.files.read()? {
        check_file(&input.name, &input.text, &mut tally)?;
    }
    eprintln!(
        "{} valid, {} invalid, {} skipped{}",
        tally.valid,
        tally.invalid,
        tally.skipped,
        if tally.unreadable > 0 {
            format!(", {} file(s) not YAML", tally.unreadable)
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

fn check_file(name: &str, text: &str, tally: &mut Tally) -> anyhow::Result<()> {
    let docs = match karpenter_api::yaml::parse_documents(text) {
        Ok(docs) => docs,
        Err(err) => {
            crate::cmd::out::println(&format!(
                "{}: invalid YAML: {}",
                err.position_in(name),
                err.message
            ))?;
            tally.unreadable += 1;
            return Ok(());
        }
    };
    let map = SourceMap::new(text);
    let at = |document: usize, path: &str| match map.locate(document, path) {
        Some(position) => format!("{name}:{position}"),
        None => format!("{name}:document {}", document + 1),
    };
    for (index, doc) in docs.iter().enumerate() {
        for (prefix, object) in list_items(doc) {
            let id = DocumentIdentity::of(object);
            let described = if id.name.is_empty() {
                id.kind.clone()
            } else {
                format!("{}/{}", id.kind, id.name)
            };
            match validate_document(object) {
                Outcome::Valid => tally.valid += 1,
                Outcome::Invalid(errors) => {
                    tally.invalid += 1;
                    for error in errors {
                        let path = format!("{prefix}{}", error.path);
                        crate::cmd::out::println(&format!(
                            "{}: {described}: {error}",
                            at(index, &path)
                        ))?;
                    }
                }
                Outcome::Skipped { reason } => {
                    tally.skipped += 1;
                    crate::cmd::out::println(&format!(
                        "{}: skipped: {reason}",
                        at(index, &prefix)
                    ))?;
                }
            }
        }
    }
    Ok(())
}

/// The objects of a document with their path prefix: a `List` (or `NodePoolList`, ...) stands
/// for its items (`items[3].`), anything else for itself.
fn list_items(doc: &serde_json::Value) -> Vec<(String, &serde_json::Value)> {
    let is_list = doc
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|kind| kind.ends_with("List"));
    match doc.get("items").and_then(serde_json::Value::as_array) {
        Some(items) if is_list => items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("items[{i}]."), item))
            .collect(),
        _ => vec![(String::new(), doc)],
    }
}
