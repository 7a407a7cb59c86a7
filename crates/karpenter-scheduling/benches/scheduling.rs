//! Criterion benchmark `scheduling`: upstream's `BenchmarkScheduling{N}` (diverse workload over
//! `fake.InstanceTypes(400)`) and `BenchmarkRespectPreferences` / `BenchmarkIgnorePreferences`
//! (4,000 preference pods). Each iteration is one solve on a fresh solver.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use karpenter_scheduling::fixtures::{Workload, benchmark_input};
use karpenter_scheduling::{PreferencePolicy, solve};

fn scheduling(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for pods in [1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000] {
        let input = benchmark_input(Workload::Diverse, pods, 400, 42, PreferencePolicy::Respect);
        group.throughput(Throughput::Elements(pods as u64));
        group.bench_with_input(BenchmarkId::new("diverse", pods), &input, |b, input| {
            b.iter(|| black_box(solve(input)));
        });
    }
    for (name, policy) in [
        ("respect-preferences", PreferencePolicy::Respect),
        ("ignore-preferences", PreferencePolicy::Ignore),
    ] {
        let input = benchmark_input(Workload::Preference, 4000, 400, 42, policy);
        group.throughput(Throughput::Elements(4000));
        group.bench_with_input(BenchmarkId::new(name, 4000), &input, |b, input| {
            b.iter(|| black_box(solve(input)));
        });
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
