//! Benchmark fixtures equal to upstream's scheduling benchmark: the `fake.InstanceTypes(N)`
//! catalog, the `makeDiversePods(N)` and `makePreferencePods(N)` workloads (same distributions,
//! a seeded SplitMix64 instead of Go's `math/rand`), and the benchmark NodePool.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::PodRecord;

use crate::Quantity;
use crate::builders::PodBuilder;
use crate::input::{
    InstanceType, NodePool, Offering, Operator, Overhead, PreferencePolicy, RequirementSpec,
    SolveInput, SolveOptions,
};
use crate::resources::ResourceList;

/// A small seeded generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn intn(&mut self, n: usize) -> usize {
        let n = n.max(1) as u64;
        // Lemire's multiply-shift; the tiny bias is irrelevant for these distributions.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as usize
    }
}

const CPUS: [&str; 5] = ["100m", "250m", "500m", "1000m", "1500m"];
const MEMS: [&str; 6] = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"];
const VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

fn zone_key() -> &'static str {
    karpenter_api::labels::ZONE
}

fn host_key() -> &'static str {
    karpenter_api::labels::HOSTNAME
}

/// Upstream `fake.InstanceTypes(n)`: `fake-it-<i>` with `i+1` cores, `2(i+1)Gi`, `10(i+1)` pods,
/// 100m/10Mi kube-reserved, price `0.1*cpu + 0.1*memBytes/1e9`, five offerings (spot in zones
/// 1-2, on-demand in zones 1-3).
pub fn fake_instance_types(n: usize) -> Vec<InstanceType> {
    use karpenter_api::labels as l;
    (0..n)
        .map(|i| {
            let cpu = i + 1;
            let mem_bytes = (cpu as i128) * 2 * (1 << 30);
            let price = 0.1 * cpu as f64 + (0.1 * mem_bytes as f64) / 1e9;
            let name = format!("fake-it-{i}");
            let large = cpu > 4 && mem_bytes > 8 * (1 << 30);
            let mut requirements = vec![
                RequirementSpec::is_in(l::INSTANCE_TYPE, &[&name]),
                RequirementSpec::is_in(l::ARCH, &["amd64"]),
                RequirementSpec::is_in(l::OS, &["darwin", "linux", "windows"]),
                RequirementSpec::is_in(l::ZONE, &["test-zone-1", "test-zone-2", "test-zone-3"]),
                RequirementSpec::is_in(l::CAPACITY_TYPE, &["on-demand", "spot"]),
                RequirementSpec::is_in("integer", &[&cpu.to_string()]),
                RequirementSpec::is_in("size", &[if large { "large" } else { "small" }]),
            ];
            requirements.push(if large {
                RequirementSpec::is_in("special", &["optional"])
            } else {
                RequirementSpec::new("special", Operator::DoesNotExist, &[])
            });
            let offering = |zone: &str, ct: &str| Offering {
                zone: zone.into(),
                capacity_type: ct.into(),
                price,
                available: true,
                requirements: Vec::new(),
                reservation_capacity: 0,
            };
            InstanceType {
                name,
                requirements,
                offerings: vec![
                    offering("test-zone-1", "spot"),
                    offering("test-zone-2", "spot"),
                    offering("test-zone-1", "on-demand"),
                    offering("test-zone-2", "on-demand"),
                    offering("test-zone-3", "on-demand"),
                ],
                capacity: ResourceList::new()
                    .with("cpu", Quantity::from_units(cpu as i128))
                    .with("memory", Quantity::from_units(mem_bytes))
                    .with("pods", Quantity::from_units(cpu as i128 * 10)),
                overhead: Overhead {
                    kube_reserved: ResourceList::new()
                        .with("cpu", Quantity::from_millis(100))
                        .with("memory", Quantity::from_units(10 << 20)),
                    ..Default::default()
                },
            }
        })
        .collect()
}

/// The benchmark NodePool: no requirements, huge limits, label `testing/cluster: unspecified`.
pub fn benchmark_node_pool() -> NodePool {
    NodePool {
        name: "default".into(),
        weight: 0,
        requirements: Vec::new(),
        labels: BTreeMap::from([("testing/cluster".to_string(), "unspecified".to_string())]),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        limits: ResourceList::new()
            .with("cpu", Quantity::from_units(10_000_000))
            .with("memory", Quantity::from_units(10_000_000i128 << 30)),
    }
}

/// Produces a workload's pods one at a time, in upstream's order, so very large workloads can be
/// fed to the solver in chunks without holding every `Pod` object at once.
#[derive(Debug, Clone)]
pub struct PodStream {
    workload: Workload,
    count: usize,
    next: usize,
    rng: Rng,
    /// Preference workload: the one size shared by every pod.
    shared: (&'static str, &'static str),
}

impl PodStream {
    pub fn new(workload: Workload, count: usize, mut rng: Rng) -> Self {
        let shared = match workload {
            Workload::Preference => (CPUS[rng.intn(5)], MEMS[rng.intn(6)]),
            Workload::Diverse => ("", ""),
        };
        PodStream {
            workload,
            count,
            next: 0,
            rng,
            shared,
        }
    }

    fn base(&self, i: usize, cpu: &str, mem: &str) -> PodBuilder {
        PodBuilder::new(&format!("pod-{i:06}"))
            .uid(&format!("uid-{i:06}"))
            .created_nanos(1_700_000_000_000_000_000 + i as i64)
            .label("testing/cluster", "unspecified")
            .phase("Pending")
            .cpu(cpu)
            .memory(mem)
    }

    fn size(&mut self) -> (&'static str, &'static str) {
        (CPUS[self.rng.intn(5)], MEMS[self.rng.intn(6)])
    }

    fn diverse(&mut self, i: usize) -> Pod {
        let k = self.count / 5;
        let section = i.checked_div(k).map_or(5, |s| s.min(5));
        match section {
            1 | 2 => {
                let key = if section == 1 { zone_key() } else { host_key() };
                let label = VALUES[self.rng.intn(7)];
                let selected = VALUES[self.rng.intn(7)];
                let (cpu, mem) = self.size();
                self.base(i, cpu, mem)
                    .label("my-label", label)
                    .spread_over(key, 1, &[("my-label", selected)])
                    .build()
            }
            3 => {
                let label = VALUES[self.rng.intn(7)];
                let (cpu, mem) = self.size();
                self.base(i, cpu, mem)
                    .label("my-affininity", label)
                    .affinity_to(&[("my-affininity", label)], zone_key())
                    .build()
            }
            4 => {
                let (cpu, mem) = self.size();
                self.base(i, cpu, mem)
                    .label("app", "nginx")
                    .anti_affinity_to(&[("app", "nginx")], host_key())
                    .build()
            }
            _ => {
                let label = VALUES[self.rng.intn(7)];
                let (cpu, mem) = self.size();
                self.base(i, cpu, mem).label("my-label", label).build()
            }
        }
    }

    fn preference(&mut self, i: usize) -> Pod {
        let (cpu, mem) = self.shared;
        self.base(i, cpu, mem)
            .label("app", "nginx")
            .preferred_term(1, &[(zone_key(), "In", &["test-zone-1"])])
            .preferred_anti_affinity_to(10, &[("app", "nginx")], zone_key())
            .preferred_anti_affinity_to(1, &[("app", "nginx")], host_key())
            .build()
    }

    /// The next `size` pods (fewer at the end).
    pub fn chunk(&mut self, size: usize) -> Vec<PodRecord> {
        self.by_ref().take(size).map(PodRecord::from).collect()
    }
}

impl Iterator for PodStream {
    type Item = Pod;

    fn next(&mut self) -> Option<Pod> {
        if self.next >= self.count {
            return None;
        }
        let i = self.next;
        self.next += 1;
        Some(match self.workload {
            Workload::Diverse => self.diverse(i),
            Workload::Preference => self.preference(i),
        })
    }
}

/// Upstream `makeDiversePods(n)`: fifths of generic, zone-spread, hostname-spread, zone
/// self-affinity and hostname anti-affinity pods, the remainder generic.
pub fn diverse_pods(n: usize, rng: &mut Rng) -> Vec<Pod> {
    let mut stream = PodStream::new(Workload::Diverse, n, rng.clone());
    let pods = stream.by_ref().collect();
    *rng = stream.rng;
    pods
}

/// Upstream `makePreferencePods(n)`: identical pods (one random size) preferring zone
/// `test-zone-1` (weight 1), with preferred anti-affinity on zone (weight 10) and hostname
/// (weight 1).
pub fn preference_pods(n: usize, rng: &mut Rng) -> Vec<Pod> {
    let mut stream = PodStream::new(Workload::Preference, n, rng.clone());
    let pods = stream.by_ref().collect();
    *rng = stream.rng;
    pods
}

/// Which workload to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Diverse,
    Preference,
}

/// A benchmark input without pods plus the stream of its pods.
pub fn benchmark_setup(
    workload: Workload,
    pods: usize,
    instance_types: usize,
    seed: u64,
    preference_policy: PreferencePolicy,
) -> (SolveInput, PodStream) {
    let input = SolveInput {
        node_pools: vec![benchmark_node_pool()],
        default_instance_types: fake_instance_types(instance_types),
        options: SolveOptions {
            preference_policy,
            ..Default::default()
        },
        ..Default::default()
    };
    (input, PodStream::new(workload, pods, Rng::new(seed)))
}

/// A complete benchmark input: one NodePool, `instance_types` fake types, `pods` pods.
pub fn benchmark_input(
    workload: Workload,
    pods: usize,
    instance_types: usize,
    seed: u64,
    preference_policy: PreferencePolicy,
) -> SolveInput {
    let (mut input, stream) =
        benchmark_setup(workload, pods, instance_types, seed, preference_policy);
    input.pods = stream.map(|p| Arc::new(p.into())).collect();
    input
}
