//! One disruption pass over the consolidation benchmark cluster, printed as JSON
//! (`cargo run --release -p karpenter-disruption --example consolidation_once -- 1000 10000`).
//! `karpenter-bench consolidation` is the supported entry point; this is for profiling.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::time::Instant;

use karpenter_disruption::fixtures::{bench_now, consolidation_cluster};

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let pods = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let now = bench_now();
    let build = Instant::now();
    let snapshot = consolidation_cluster(nodes, pods, 42, now);
    let built = build.elapsed().as_secs_f64();
    let start = Instant::now();
    let decision = karpenter_disruption::decide(&snapshot, now);
    let seconds = start.elapsed().as_secs_f64();
    let removed: usize = decision.commands.iter().map(|c| c.candidates.len()).sum();
    let savings: f64 = decision.commands.iter().map(|c| c.savings_per_hour).sum();
    println!(
        "{{\"nodes\":{},\"pods\":{pods},\"build_seconds\":{built:.3},\"seconds\":{seconds:.3},\"commands\":{},\"nodes_removed\":{removed},\"savings_per_hour\":{savings:.3}}}",
        snapshot.nodes.len(),
        decision.commands.len()
    );
    for c in &decision.commands {
        println!("{}: {}", c.method.as_str(), c.explanation);
    }
}
