//! One benchmark solve, for profiling: `cargo run --release --example bench_once -- 5000 diverse`.
use karpenter_scheduling::fixtures::{Workload, benchmark_input};
use karpenter_scheduling::{PreferencePolicy, solve};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let (workload, policy) = match args.get(2).map(String::as_str) {
        Some("preference") => (Workload::Preference, PreferencePolicy::Respect),
        Some("ignore") => (Workload::Preference, PreferencePolicy::Ignore),
        _ => (Workload::Diverse, PreferencePolicy::Respect),
    };
    let input = benchmark_input(workload, n, 400, 42, policy);
    let rss = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("VmHWM"))
            .unwrap_or("")
            .to_string()
    };
    eprintln!("after input: {}", rss());
    let start = std::time::Instant::now();
    let result = solve(&input);
    let secs = start.elapsed().as_secs_f64();
    eprintln!("after solve: {}", rss());
    println!(
        "pods={} scheduled={} nodes={} seconds={secs:.3} pods/s={:.0} cost={:.2} unsched={}",
        n,
        result.scheduled_pods(),
        result.new_node_claims.len(),
        n as f64 / secs,
        result.cost_per_hour(),
        result
            .unschedulable
            .first()
            .map(|u| u.reason.clone())
            .unwrap_or_default()
    );
}
