//! `karpenter-bench consolidation`: one full disruption pass (`karpenter_disruption::decide`)
//! over upstream's diverse workload spread across `--nodes` nodes of the 400-type catalog at
//! low utilisation; reports time, commands, nodes removed, savings and peak memory.

use std::process::ExitCode;
use std::time::Instant;

use karpenter_disruption::fixtures::{bench_now, consolidation_cluster};

#[derive(Debug, clap::Args)]
pub struct ConsolidationArgs {
    /// Number of nodes in the cluster.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Number of pods spread over them.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Seed of the workload generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: ConsolidationArgs, peak_rss_mb: fn() -> f64) -> anyhow::Result<ExitCode> {
    let now = bench_now();
    let snapshot = consolidation_cluster(a.nodes, a.pods, a.seed, now);
    let start = Instant::now();
    let decision = karpenter_disruption::decide(&snapshot, now);
    let seconds = start.elapsed().as_secs_f64();
    let commands = decision.commands.len();
    let removed: usize = decision.commands.iter().map(|c| c.candidates.len()).sum();
    let launched: usize = decision.commands.iter().map(|c| c.replacements.len()).sum();
    let savings: f64 = decision.commands.iter().map(|c| c.savings_per_hour).sum();
    let rss = peak_rss_mb();
    if a.json {
        let out = serde_json::json!({
            "nodes": snapshot.nodes.len(),
            "pods": a.pods,
            "seconds": seconds,
            "commands": commands,
            "nodes_removed": removed,
            "savings_per_hour": savings,
            "peak_rss_mb": rss,
        });
        println!("{out}");
    } else {
        println!("nodes            {}", snapshot.nodes.len());
        println!("pods             {}", a.pods);
        println!("seconds          {seconds:.4}");
        println!("commands         {commands}");
        for c in &decision.commands {
            println!("  {}: {}", c.method.as_str(), c.explanation);
        }
        println!("nodes removed    {removed}");
        println!("replacements     {launched}");
        println!("savings per hour {savings:.4}");
        println!("peak RSS (MiB)   {rss:.1}");
    }
    Ok(ExitCode::SUCCESS)
}
