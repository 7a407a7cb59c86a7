//! Criterion benchmark `scheduling`: upstream's `BenchmarkScheduling{N}` (diverse workload over
//! `fake.InstanceTypes(400)`) and `BenchmarkRespectPreferences` / `BenchmarkIgnorePreferences`
//! (4,000 preference pods), and the diverse workload with 20 NodeOverlays and 50 capacity
//! reservations. Each iteration is one solve on a fresh solver.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use karpenter_scheduling::capacity_fixtures;
use karpenter_scheduling::fixtures::{Workload, benchmark_input};
use karpenter_scheduling::{PreferencePolicy, ReservedOfferingMode, solve};

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
    // The capacity APIs' cost ([capacity]): 20 NodeOverlays and 50 reservations of 10 slots
    // over the same 400 types, against `diverse/5000` and `diverse/20000` above; each alone,
    // and the reservations in a disruption simulation's fallback mode.
    for pods in [5000, 20000] {
        let base = benchmark_input(Workload::Diverse, pods, 400, 42, PreferencePolicy::Respect);
        let names: Vec<String> = base
            .default_instance_types
            .iter()
            .map(|t| t.name.clone())
            .collect();
        let overlays = capacity_fixtures::overlays(&names, 20);
        for (name, overlays, reservations, mode) in [
            (
                "diverse-20-overlays",
                &overlays[..],
                0,
                ReservedOfferingMode::Strict,
            ),
            (
                "diverse-50-reservations",
                &[][..],
                50,
                ReservedOfferingMode::Strict,
            ),
            (
                "diverse-50-reservations-fallback",
                &[][..],
                50,
                ReservedOfferingMode::Fallback,
            ),
            (
                "diverse-20-overlays-50-reservations",
                &overlays[..],
                50,
                ReservedOfferingMode::Strict,
            ),
        ] {
            let mut input = base.clone();
            input.options.reserved_offering_mode = mode;
            capacity_fixtures::add(&mut input, overlays, reservations);
            group.throughput(Throughput::Elements(pods as u64));
            group.bench_with_input(BenchmarkId::new(name, pods), &input, |b, input| {
                b.iter(|| black_box(solve(input)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
