//! `karpenter-bench`: benchmarks of the decision engines and the EC2 provider, comparable with
//! upstream's. A binary of its own so that the shipped `karpenter` carries no benchmark
//! workloads, fixtures or emulator set-up (the pure crates' `test-support`).
//!
//! `karpenter-bench scheduling` builds upstream's benchmark input (one NodePool,
//! `fake.InstanceTypes(N)`, the diverse or preference workload), runs one solve on a fresh
//! solver and reports throughput, node count, cost and peak memory. `consolidation`,
//! `scale`, `interruption` and `ec2` live next to it and share its peak-RSS reading.

mod consolidation;
mod ec2;
mod interruption;
mod scale;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use karpenter_scheduling::PreferencePolicy;
use karpenter_scheduling::capacity_fixtures;
use karpenter_scheduling::fixtures::{Workload, benchmark_setup};
use karpenter_scheduling::scheduler::Solver;

/// Pods generated per chunk; generation is not timed, compiling them into the solver is.
const CHUNK: usize = 1000;

/// Benchmarks of karpenter-rs's decision engines and EC2 provider.
#[derive(Debug, clap::Parser)]
#[command(
    name = "karpenter-bench",
    version,
    about = "Benchmarks of karpenter-rs's decision engines and EC2 provider, comparable with upstream's"
)]
struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// One provisioning solve over upstream's benchmark workload.
    Scheduling(SchedulingArgs),
    /// One full disruption pass over the diverse workload spread across many nodes.
    Consolidation(consolidation::ConsolidationArgs),
    /// The controller's index, one provisioning solve and one disruption pass over a large
    /// generated cluster (nodes, bound and pending pods of Deployments, DaemonSets, PDBs).
    Scale(scale::ScaleArgs),
    /// The interruption handler, from SQS message body to decision, over generated messages.
    Interruption(interruption::InterruptionArgs),
    /// The EC2 provider against an EC2 endpoint (the emulator): instance-type refresh and
    /// launches, with the AWS calls each made.
    Ec2(ec2::Ec2Args),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum WorkloadArg {
    /// Generic, zone-spread, hostname-spread, zone-affinity and hostname-anti-affinity pods.
    Diverse,
    /// Identical pods with preferred zone affinity and preferred anti-affinity.
    Preference,
}

#[derive(Debug, clap::Args)]
struct SchedulingArgs {
    /// Number of pods.
    #[arg(long, default_value_t = 1000)]
    pods: usize,
    /// Number of generated instance types (upstream uses 400).
    #[arg(long, default_value_t = 400)]
    instance_types: usize,
    #[arg(long, value_enum, default_value_t = WorkloadArg::Diverse)]
    workload: WorkloadArg,
    /// Ignore preferences (upstream's `BenchmarkIgnorePreferences`).
    #[arg(long)]
    ignore_preferences: bool,
    /// Seed of the workload generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// NodeOverlays lowering the price of slices of the catalog (applied before the solve, as
    /// the controller applies them).
    #[arg(long, default_value_t = 0)]
    overlays: usize,
    /// Capacity reservations of 10 slots each, offered as `reserved` offerings of types spread
    /// over the catalog.
    #[arg(long, default_value_t = 0)]
    reservations: usize,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let result = match args.command {
        BenchCommand::Scheduling(a) => scheduling(a),
        BenchCommand::Consolidation(a) => consolidation::run(a, peak_rss_mb),
        BenchCommand::Scale(a) => scale::run(a, peak_rss_mb),
        BenchCommand::Interruption(a) => interruption::run(a, peak_rss_mb),
        BenchCommand::Ec2(a) => ec2::run(a, peak_rss_mb),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// NodeClaims pinned to capacity type `reserved`.
fn reserved_nodes(result: &karpenter_scheduling::SolveResult) -> usize {
    result
        .new_node_claims
        .iter()
        .filter(|c| {
            c.requirements.iter().any(|r| {
                r.key == karpenter_api::labels::CAPACITY_TYPE
                    && r.values == [karpenter_api::labels::CAPACITY_TYPE_RESERVED]
            })
        })
        .count()
}

/// Peak resident set size in MiB (`VmHWM`), when the platform reports it.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn scheduling(a: SchedulingArgs) -> anyhow::Result<ExitCode> {
    let workload = match a.workload {
        WorkloadArg::Diverse => Workload::Diverse,
        WorkloadArg::Preference => Workload::Preference,
    };
    let policy = if a.ignore_preferences {
        PreferencePolicy::Ignore
    } else {
        PreferencePolicy::Respect
    };
    let (mut input, mut stream) =
        benchmark_setup(workload, a.pods, a.instance_types, a.seed, policy);
    let names: Vec<String> = input
        .default_instance_types
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let overlays = capacity_fixtures::overlays(&names, a.overlays);
    capacity_fixtures::add(&mut input, &overlays, a.reservations);
    // A fresh solver; pods are generated in chunks (untimed) and handed over, so the benchmark
    // never holds every Kubernetes Pod object at once.
    let mut elapsed = Duration::ZERO;
    let start = Instant::now();
    let mut solver = Solver::new(&input);
    elapsed += start.elapsed();
    loop {
        let chunk = stream.chunk(CHUNK);
        if chunk.is_empty() {
            break;
        }
        let start = Instant::now();
        solver.add_pods(&chunk);
        elapsed += start.elapsed();
    }
    let start = Instant::now();
    solver.run();
    let result = solver.result();
    elapsed += start.elapsed();
    let seconds = elapsed.as_secs_f64();
    let scheduled = result.scheduled_pods();
    let nodes = result.new_node_claims.len();
    let pods_per_sec = if seconds > 0.0 {
        a.pods as f64 / seconds
    } else {
        0.0
    };
    let cost = result.cost_per_hour();
    let rss = peak_rss_mb();
    if a.json {
        let out = serde_json::json!({
            "pods": a.pods,
            "scheduled": scheduled,
            "nodes": nodes,
            "seconds": seconds,
            "pods_per_sec": pods_per_sec,
            "cost_per_hour": cost,
            "peak_rss_mb": rss,
            "overlays": a.overlays,
            "reservations": a.reservations,
            "reserved_nodes": reserved_nodes(&result),
        });
        println!("{out}");
    } else {
        println!("workload        {:?}", a.workload);
        println!("instance types  {}", a.instance_types);
        println!("pods            {}", a.pods);
        println!("scheduled       {scheduled}");
        println!("nodes           {nodes}");
        println!("seconds         {seconds:.4}");
        println!("pods/s          {pods_per_sec:.0}");
        println!("cost per hour   {cost:.4}");
        println!("peak RSS (MiB)  {rss:.1}");
        if a.overlays + a.reservations > 0 {
            println!("overlays        {}", a.overlays);
            println!("reservations    {}", a.reservations);
            println!("reserved nodes  {}", reserved_nodes(&result));
        }
        if let Some(u) = result.unschedulable.first() {
            println!("first unschedulable: {} ({})", u.pod, u.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}
