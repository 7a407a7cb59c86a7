use karpenter_scheduling::fixtures::{Workload, benchmark_input};
use karpenter_scheduling::{PreferencePolicy, solve};
fn main() {
    let input = benchmark_input(Workload::Preference, 40, 400, 42, PreferencePolicy::Respect);
    let result = solve(&input);
    for c in &result.new_node_claims {
        println!(
            "{} pods={:?} reqs={:?}",
            c.node_pool,
            c.pods.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            c.requirements
                .iter()
                .filter(|r| r.key.contains("zone"))
                .collect::<Vec<_>>()
        );
    }
}
