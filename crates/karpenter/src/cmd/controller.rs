//! `karpenter controller`: run the autoscaler against a cluster (kubeconfig or in-cluster).
//! Settings come from upstream's flags and environment variables (`karpenter controller
//! --help`); the controllers are `karpenter_controller::controllers`.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// The settings as flags (`karpenter controller --help` lists each with its environment
    /// variable and default).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    settings: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let argv = std::iter::once(OsString::from("karpenter controller")).chain(args.settings);
    let settings = match karpenter_controller::Settings::parse_from(argv, std::env::vars_os()) {
        Ok(settings) => settings,
        // `--help`: clap prints it to stdout and says it succeeded.
        Err(karpenter_controller::SettingsError::CommandLine(error)) if error.exit_code() == 0 => {
            match error.print() {
                // `karpenter controller --help | head` closed the pipe: the reader had enough.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(e).context("printing the help");
                }
                _ => return Ok(ExitCode::SUCCESS),
            }
        }
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::from(2));
        }
    };
    // Before anything starts or connects: a value karpenter-rs cannot honour stops here.
    if let Err(refused) = settings.validate() {
        eprintln!("{refused}");
        return Ok(ExitCode::from(2));
    }
    // One thread for the async work: watches, API calls and the executors are I/O-bound, and
    // the CPU-heavy solves run on the blocking pool. Every worker thread of a multi-threaded
    // runtime gets its own malloc arena, and objects decoded on two threads fragment two heaps
    // (peak RSS 4 MB higher at 1,000 pods for no faster scale-out; `scripts/bench-controller`).
    // Watch pages are decoded 500 objects at a time, so no single poll holds the thread long
    // enough to delay a Lease renewal.
    let runtime = tokio::runtime::Builder::new_current_thread()
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
