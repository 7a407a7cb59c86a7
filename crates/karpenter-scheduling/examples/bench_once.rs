//! One benchmark solve with a phase breakdown, for profiling:
//! `cargo run --release -p karpenter-scheduling --example bench_once -- 20000 diverse`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]
use std::time::Instant;

use karpenter_scheduling::PreferencePolicy;
use karpenter_scheduling::fixtures::{Workload, benchmark_setup};
use karpenter_scheduling::scheduler::Solver;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let (workload, policy) = match args.get(2).map(String::as_str) {
        Some("preference") => (Workload::Preference, PreferencePolicy::Respect),
        Some("ignore") => (Workload::Preference, PreferencePolicy::Ignore),
        _ => (Workload::Diverse, PreferencePolicy::Respect),
    };
    let (input, stream) = benchmark_setup(workload, n, 400, 42, policy);
    let pods: Vec<karpenter_scheduling::PodRecord> = stream.map(Into::into).collect();
    let t = Instant::now();
    let mut solver = Solver::new(&input);
    solver.add_pods(&pods);
    let compile = t.elapsed().as_secs_f64();
    let t = Instant::now();
    solver.run();
    let run = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let result = solver.result();
    let output = t.elapsed().as_secs_f64();
    println!(
        "pods={n} scheduled={} nodes={} compile={compile:.3}s run={run:.3}s result={output:.3}s total={:.3}s",
        result.scheduled_pods(),
        result.new_node_claims.len(),
        compile + run + output
    );
}
