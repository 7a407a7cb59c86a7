//! `karpenter simulate`: what Karpenter would launch for a workload, and what it would cost,
//! offline, from ordinary manifests and the embedded EC2 catalog. The work is done by the
//! `karpenter-sim` crate; this module reads arguments and files and prints.
//!
//! Exit 0 with a plan (unschedulable pods are part of the plan); errors (unreadable files,
//! malformed YAML, invalid NodePools or EC2NodeClasses, bad options) exit 2 with every problem
//! named by file, document, object and field.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use karpenter_cloud::{Catalog, PriceTable};
use karpenter_sim::{Manifests, PricingOptions, Scenario};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files or directories (multi-document YAML; directories are read recursively,
    /// `*.yaml`, `*.yml`, `*.json`); `-` reads standard input.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR",
        required = true
    )]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Output,
    /// Spot price = on-demand x (1 - discount); spot prices are always estimates.
    #[arg(long, value_name = "F", default_value_t = karpenter_cloud::options::DEFAULT_SPOT_DISCOUNT)]
    spot_discount: f64,
    /// Region of the zones (`<region>a..c`) and labels.
    #[arg(long, value_name = "R", default_value = karpenter_cloud::options::DEFAULT_REGION)]
    region: String,
    /// Also size a fixed node group of this instance type for the same pods.
    #[arg(long, value_name = "TYPE")]
    compare_nodegroup: Option<String>,
    /// A catalog file (the embedded catalog's format) to use instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// A price file replacing the catalog's on-demand (and observed spot) prices.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let manifests = load(&args.files)?;
    let mut catalog = match &args.catalog {
        Some(path) => Catalog::from_file(path).context("reading the catalog")?,
        None => Catalog::embedded().context("reading the embedded catalog")?,
    };
    if let Some(path) = &args.prices {
        catalog = catalog.with_prices(PriceTable::from_file(path).context("reading prices")?);
    }
    let pricing = PricingOptions {
        region: args.region.clone(),
        spot_discount: args.spot_discount,
    };
    let scenario = Scenario::prepare(&manifests, &catalog, &pricing)?;
    let mut plan = karpenter_sim::plan(&scenario);
    if let Some(instance_type) = &args.compare_nodegroup {
        plan.compare_nodegroup = Some(karpenter_sim::nodegroup::compare(
            instance_type,
            &scenario.all_types,
            &scenario.daemonsets,
            &scenario.pending,
        )?);
    }
    match args.output {
        Output::Table => print!("{}", karpenter_sim::render::plan_table(&plan)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Output::Yaml => print!("{}", karpenter_api::yaml::to_yaml(&plan)?),
    }
    Ok(ExitCode::SUCCESS)
}

fn load(files: &[PathBuf]) -> anyhow::Result<Manifests> {
    let mut texts = Vec::new();
    for file in files {
        if file.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            texts.push(("<stdin>".to_string(), text));
        } else {
            texts.extend(karpenter_sim::load::read_manifest_files(
                std::slice::from_ref(file),
            )?);
        }
    }
    Ok(Manifests::load_texts(
        texts.iter().map(|(n, t)| (n.as_str(), t.as_str())),
    )?)
}
