//! `karpenter`: the karpenter-rs command line.
//!
//! Each subcommand lives in its own module under `cmd/` and keeps its logic in a library crate;
//! this file only parses arguments and maps results to exit codes. `anyhow` is used here and
//! nowhere else.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "karpenter",
    version,
    about = "karpenter-rs: a Kubernetes node autoscaler, API-compatible with Karpenter v1"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the autoscaler against a cluster (upstream's settings: `controller --help`).
    Controller(cmd::controller::Args),
    /// Print the CustomResourceDefinitions (NodePool, NodeClaim, EC2NodeClass, NodeOverlay, CapacityBuffer) as YAML.
    Crds(cmd::crds::Args),
    /// Validate NodePool, NodeClaim and EC2NodeClass manifests against the v1 rules.
    Validate(cmd::validate::Args),
    /// Convert v1alpha5/v1alpha1 and v1beta1 manifests (Provisioner, AWSNodeTemplate, ...) to v1.
    Convert(cmd::convert::Args),
    /// Least-privilege IAM: generate the controller policy or CloudFormation template, audit a policy.
    Iam(cmd::iam::Args),
    /// What Karpenter would launch for your manifests, and what it would cost (offline).
    Simulate(cmd::simulate::Args),
    /// Why the running controller did what it did: a pod's placement, a node's disruption.
    Explain(cmd::explain::Args),
    /// The cluster's nodes, cost, NodePools, pending pods and Karpenter's events, live (read only).
    Top(cmd::top::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Controller(args) => cmd::controller::run(args),
        Command::Crds(args) => cmd::crds::run(args),
        Command::Validate(args) => cmd::validate::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Iam(args) => cmd::iam::run(args),
        Command::Simulate(args) => cmd::simulate::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Top(args) => cmd::top::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
