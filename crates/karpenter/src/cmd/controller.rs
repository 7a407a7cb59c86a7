//! `karpenter controller`: run the autoscaler against a cluster (kubeconfig or in-cluster).
//! Settings come from upstream's flags and environment variables (`karpenter controller
//! --help`); the controllers are `karpenter_controller::controllers`.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// Settings flags (`--help` lists them with their environment variables and defaults).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    settings: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let argv = std::iter::once(OsString::from("karpenter controller")).chain(args.settings);
    let settings = match karpenter_controller::Settings::parse_from(argv, std::env::vars_os()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime
        .block_on(karpenter_controller::run(
            settings,
            karpenter_controller::controllers::run,
        ))
        .context("controller")?;
    Ok(ExitCode::SUCCESS)
}
