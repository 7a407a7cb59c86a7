//! `karpenter-bench scale`: the controller's decisions over a large generated cluster, through
//! the controller's own path and without an API server.
//!
//! Every object of the generated cluster ([`cluster`]) is slimmed and applied to a
//! [`karpenter_state::Cluster`] as the controller's watches do (`karpenter_state::slim::slim`,
//! then `Cluster::apply`); then the two loops' functions run over the index, with the
//! controller's default settings: the disruption loop's `snapshot_of` and
//! `karpenter_disruption::decide` (one full pass), and the provisioner's `launchable_pools`,
//! `batch_pods`, `Cluster::solve_input` and `karpenter_scheduling::solve` (one batch of every
//! pending pod). What the loops do around them and this does not: the API calls (NodeClaim
//! creation, events), the catalog refresh (the 400-type catalog is given), default spread
//! constraints and the orchestration queue (empty).
//!
//! Order of the phases: the bound cluster is indexed and the disruption pass runs over it (a
//! steady state: a pass sees the pending pods too and simulates them in every candidate's
//! removal, so a pass in the middle of a 50,000-pod burst is a different benchmark); then the
//! pending pods are indexed and solved against the existing nodes. `--phase` runs only one of
//! the two decisions, so a separate process gives each one's own peak memory.

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use karpenter_controller::controllers::disruption::snapshot_of;
use karpenter_controller::controllers::provisioner::{batch_pods, launchable_pools, solve_options};
use karpenter_controller::settings::Settings;
use karpenter_disruption::fixtures::bench_now;
use karpenter_scheduling::fixtures::fake_instance_types;
use karpenter_state::{Cluster, Object};

use cluster::{Generator, Sizes};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Both decisions.
    All,
    /// Index everything and solve the pending pods; no disruption pass.
    Provisioning,
    /// Index the bound cluster and run one disruption pass; no pending pods.
    Disruption,
}

#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// Managed nodes (a tenth in the tainted `batch` pool).
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Bound pods, the DaemonSets' pods (two per node) included.
    #[arg(long, default_value_t = 50_000)]
    bound_pods: usize,
    /// Pending pods (new Deployments and scale-ups of existing ones).
    #[arg(long, default_value_t = 10_000)]
    pending_pods: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Which decisions to run (a separate process per phase gives each its own peak memory).
    #[arg(long, value_enum, default_value_t = Phase::All)]
    phase: Phase,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Memory readings of this process, in MiB: resident now (`VmRSS`) and peak (`VmHWM`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Memory {
    rss_mb: f64,
    peak_rss_mb: f64,
}

fn memory(peak_rss_mb: fn() -> f64) -> Memory {
    let rss_mb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0);
    Memory {
        rss_mb,
        peak_rss_mb: peak_rss_mb(),
    }
}

/// Applies `objects` to the index as the controller's watches do; the time spent in the index
/// (generation excluded) and how many were applied.
fn index(cluster: &mut Cluster, objects: impl Iterator<Item = Object>) -> (Duration, usize) {
    let mut spent = Duration::ZERO;
    let mut count = 0;
    for mut object in objects {
        let start = Instant::now();
        karpenter_state::slim::slim(&mut object);
        cluster.apply(object);
        spent += start.elapsed();
        count += 1;
    }
    (spent, count)
}

/// The index build.
#[derive(Debug, Clone, serde::Serialize)]
struct Index {
    bound_objects: usize,
    bound_seconds: f64,
    pending_objects: usize,
    pending_seconds: f64,
    baseline_memory: Memory,
    memory_after_bound: Memory,
    /// After the pending pods too (the disruption pass, when run, is before them).
    memory_after_pending: Memory,
}

/// What the provisioning batch did.
#[derive(Debug, Clone, serde::Serialize)]
struct Provisioning {
    input_seconds: f64,
    solve_seconds: f64,
    pods: usize,
    on_existing_nodes: usize,
    on_new_node_claims: usize,
    new_node_claims: usize,
    unschedulable: usize,
    /// Pods neither placed nor reported unschedulable, or reported twice (0 when the result is
    /// consistent).
    unaccounted: usize,
    first_unschedulable: Option<String>,
    /// After the solver's input is built, before the solve.
    memory_after_input: Memory,
    memory: Memory,
}

/// What the disruption pass did.
#[derive(Debug, Clone, serde::Serialize)]
struct Disruption {
    snapshot_seconds: f64,
    decide_seconds: f64,
    nodes: usize,
    commands: usize,
    nodes_removed: usize,
    replacements: usize,
    savings_per_hour: f64,
    memory: Memory,
}

pub fn run(a: ScaleArgs, peak_rss_mb: fn() -> f64) -> anyhow::Result<ExitCode> {
    let now = bench_now();
    let settings = Settings::parse_from(["karpenter"], Vec::<(String, String)>::new())
        .context("the controller's default settings")?;
    let sizes = Sizes {
        nodes: a.nodes,
        bound_pods: a.bound_pods,
        pending_pods: if a.phase == Phase::Disruption {
            0
        } else {
            a.pending_pods
        },
        seed: a.seed,
    };
    let generator = Generator::new(sizes, fake_instance_types(400), now);
    let api_pools = generator.node_pools();
    // The controller's catalogs: each NodePool converted once and its instance types (cached
    // between batches in the controller, so not timed here).
    let solver_pools = api_pools
        .iter()
        .map(karpenter_scheduling::v1::node_pool)
        .collect::<Result<Vec<_>, _>>()
        .context("converting the generated NodePools")?;
    let instance_types: karpenter_scheduling::PoolInstanceTypes = Arc::new(
        api_pools
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .map(|name| (name, generator.catalog().to_vec()))
            .collect::<BTreeMap<_, _>>(),
    );
    let baseline = memory(peak_rss_mb);

    let mut cluster = Cluster::new();
    let (bound_time, bound_count) = index(&mut cluster, generator.bound_objects());
    let after_bound = memory(peak_rss_mb);

    let disruption = if a.phase == Phase::Provisioning {
        None
    } else {
        let start = Instant::now();
        let snapshot = snapshot_of(
            &cluster,
            &settings,
            Arc::clone(&instance_types),
            &BTreeSet::new(),
            now,
        );
        let snapshot_seconds = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let decision = karpenter_disruption::decide(&snapshot, now);
        let decide_seconds = start.elapsed().as_secs_f64();
        Some(Disruption {
            snapshot_seconds,
            decide_seconds,
            nodes: snapshot.nodes.len(),
            commands: decision.commands.len(),
            nodes_removed: decision.commands.iter().map(|c| c.candidates.len()).sum(),
            replacements: decision.commands.iter().map(|c| c.replacements.len()).sum(),
            savings_per_hour: decision.commands.iter().map(|c| c.savings_per_hour).sum(),
            memory: memory(peak_rss_mb),
        })
    };

    let (pending_time, pending_count) = index(&mut cluster, generator.pending_objects());
    let after_pending = memory(peak_rss_mb);
    let provisioning = if a.phase == Phase::Disruption {
        None
    } else {
        let start = Instant::now();
        let (launchable, _not_ready) = launchable_pools(&cluster);
        let pools = solver_pools
            .iter()
            .filter(|p| launchable.contains(&p.name))
            .cloned()
            .collect();
        let (_dra, pods) = batch_pods(&cluster, &settings);
        let input = cluster.solve_input(
            pods,
            pools,
            Arc::clone(&instance_types),
            solve_options(&settings),
        );
        let input_seconds = start.elapsed().as_secs_f64();
        let memory_after_input = memory(peak_rss_mb);
        let start = Instant::now();
        let result = karpenter_scheduling::solve(&input);
        let solve_seconds = start.elapsed().as_secs_f64();
        let on_new: usize = result.new_node_claims.iter().map(|c| c.pods.len()).sum();
        // Each pending pod once: placed on a node, on a new NodeClaim, or unschedulable.
        let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
        for pod in result
            .existing_placements
            .iter()
            .map(|p| &p.pod)
            .chain(result.new_node_claims.iter().flat_map(|c| &c.pods))
            .chain(result.unschedulable.iter().map(|u| &u.pod))
        {
            *outcomes.entry(pod.uid.as_str()).or_default() += 1;
        }
        let unaccounted = input
            .pods
            .iter()
            .filter(|p| {
                let uid = p.metadata.uid.as_deref().unwrap_or_default();
                outcomes.get(uid) != Some(&1)
            })
            .count();
        Some(Provisioning {
            input_seconds,
            solve_seconds,
            pods: input.pods.len(),
            on_existing_nodes: result.existing_placements.len(),
            on_new_node_claims: on_new,
            new_node_claims: result.new_node_claims.len(),
            unschedulable: result.unschedulable.len(),
            unaccounted,
            first_unschedulable: result
                .unschedulable
                .first()
                .map(|u| format!("{}: {}", u.pod, u.reason)),
            memory_after_input,
            memory: memory(peak_rss_mb),
        })
    };
    let index = Index {
        bound_objects: bound_count,
        bound_seconds: bound_time.as_secs_f64(),
        pending_objects: pending_count,
        pending_seconds: pending_time.as_secs_f64(),
        baseline_memory: baseline,
        memory_after_bound: after_bound,
        memory_after_pending: after_pending,
    };
    if !a.json {
        print_table(
            &generator.counts,
            &index,
            disruption.as_ref(),
            provisioning.as_ref(),
        );
        println!("peak RSS (MiB)          {:.1}", peak_rss_mb());
        return Ok(ExitCode::SUCCESS);
    }
    let report = serde_json::json!({
        "phase": format!("{:?}", a.phase).to_lowercase(),
        "generated": generator.counts,
        "index": index,
        "disruption": disruption,
        "provisioning": provisioning,
        "peak_rss_mb": peak_rss_mb(),
    });
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

fn print_table(
    counts: &cluster::Counts,
    index: &Index,
    disruption: Option<&Disruption>,
    provisioning: Option<&Provisioning>,
) {
    println!("nodes                   {}", counts.nodes);
    println!(
        "bound pods              {} ({} of DaemonSets)",
        counts.bound_pods, counts.daemonset_pods
    );
    println!(
        "pending pods            {} ({} scale-ups of existing Deployments)",
        counts.pending_pods, counts.pending_scale_ups
    );
    println!(
        "deployments / PDBs      {} / {}",
        counts.deployments, counts.pdbs
    );
    println!(
        "index: bound cluster    {:.3} s ({} objects), RSS {:.1} MiB (baseline {:.1})",
        index.bound_seconds,
        index.bound_objects,
        index.memory_after_bound.rss_mb,
        index.baseline_memory.rss_mb
    );
    if let Some(d) = disruption {
        println!(
            "disruption: snapshot    {:.3} s over {} nodes",
            d.snapshot_seconds, d.nodes
        );
        println!(
            "disruption: decide      {:.3} s, {} commands, {} nodes removed, {} replacements, savings {:.3}/h",
            d.decide_seconds, d.commands, d.nodes_removed, d.replacements, d.savings_per_hour
        );
        println!(
            "  memory after          RSS {:.1} MiB, peak {:.1} MiB",
            d.memory.rss_mb, d.memory.peak_rss_mb
        );
    }
    println!(
        "index: pending pods     {:.3} s ({} objects)",
        index.pending_seconds, index.pending_objects
    );
    if let Some(p) = provisioning {
        println!("provisioning: input     {:.3} s", p.input_seconds);
        println!(
            "provisioning: solve     {:.3} s, {} pods: {} on existing nodes, {} on {} new NodeClaims, {} unschedulable",
            p.solve_seconds,
            p.pods,
            p.on_existing_nodes,
            p.on_new_node_claims,
            p.new_node_claims,
            p.unschedulable
        );
        if let Some(u) = &p.first_unschedulable {
            println!("  first unschedulable   {u}");
        }
        println!(
            "  memory after          RSS {:.1} MiB, peak {:.1} MiB",
            p.memory.rss_mb, p.memory.peak_rss_mb
        );
    }
}
