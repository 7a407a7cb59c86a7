//! One full disruption pass over the consolidation benchmark cluster (diverse workload spread
//! over nodes of the 400-type catalog at low utilisation). `karpenter-bench consolidation`
//! runs the same pass once and reports it as JSON.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use criterion::{Criterion, criterion_group, criterion_main};
use karpenter_disruption::fixtures::{bench_now, consolidation_cluster};

fn consolidation(c: &mut Criterion) {
    let now = bench_now();
    let mut group = c.benchmark_group("consolidation");
    group.sample_size(10);
    for (nodes, pods) in [(100, 1_000), (1_000, 10_000)] {
        let snapshot = consolidation_cluster(nodes, pods, 42, now);
        group.bench_function(format!("decide/{nodes}-nodes-{pods}-pods"), |b| {
            b.iter(|| karpenter_disruption::decide(&snapshot, now))
        });
    }
    group.finish();
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
