//! `karpenter simulate`: what Karpenter would launch for a workload, and what it would cost,
//! offline, from ordinary manifests and the embedded EC2 catalog. The work is done by the
//! `karpenter-sim` crate; this module reads arguments and files and prints.
//!
//! Exit 0 with a plan (unschedulable pods are part of the plan); errors (unreadable files,
//! malformed YAML, invalid NodePools or EC2NodeClasses, bad options) exit 2 with every problem
//! named by file, document, object and field.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use karpenter_cloud::{Catalog, PriceTable};
use karpenter_sim::{Manifests, PricingOptions, Scenario};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: super::input::Files,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Output,
    /// Spot price = on-demand x (1 - discount); spot prices are always estimates.
    #[arg(long, value_name = "F", default_value_t = karpenter_cloud::options::DEFAULT_SPOT_DISCOUNT)]
    spot_discount: f64,
    /// Region of the zones (`<region>a..c`) and labels.
    #[arg(long, value_name = "R", default_value = karpenter_cloud::options::DEFAULT_REGION)]
    region: String,
    /// Also size a fixed node group of this instance type for the same pods.
    #[arg(long, value_name = "TYPE")]
    compare_nodegroup: Option<String>,
    /// A catalog file (the embedded catalog's format) to use instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// A price file replacing the catalog's on-demand (and observed spot) prices.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Run provisioning over virtual time with the events of this file (see the README for
    /// the format) and report cost over time, churn and pending-time percentiles.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// With --timeline: also write a self-contained HTML report (cost, nodes and utilisation
    /// over time) to this file.
    #[arg(long, value_name = "FILE", requires = "timeline")]
    report: Option<PathBuf>,
    /// Exit 1 when some pod cannot be scheduled (for CI checks of manifests and NodePools).
    #[arg(long, conflicts_with = "timeline")]
    fail_on_unschedulable: bool,
    /// Do not pin NodeClaims of zone-level anti-affinity groups to one zone: upstream's
    /// behaviour (one pod per such group per batch), to compare batch counts.
    #[arg(long)]
    no_zone_pinning: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    karpenter_cloud::regions::check_region(&args.region)?;
    let texts = args.files.read()?;
    let manifests =
        Manifests::load_texts(texts.iter().map(|t| (t.name.as_str(), t.text.as_str())))?;
    let mut catalog = match &args.catalog {
        Some(path) => Catalog::from_file(path).context("reading the catalog")?,
        None => Catalog::embedded().context("reading the embedded catalog")?,
    };
    if let Some(path) = &args.prices {
        catalog = catalog.with_prices(PriceTable::from_file(path).context("reading prices")?);
    }
    let pricing = PricingOptions {
        region: args.region.clone(),
        spot_discount: args.spot_discount,
    };
    let mut scenario = Scenario::prepare(&manifests, &catalog, &pricing)?;
    scenario.solve_options.pin_anti_affinity_domains = !args.no_zone_pinning;
    if let Some(path) = &args.timeline {
        return run_timeline(
            path,
            &manifests,
            &catalog,
            scenario,
            args.output,
            args.report.as_deref(),
        );
    }
    // Before the plan, which moves the pending pods into its nodes.
    let compare_nodegroup = match &args.compare_nodegroup {
        Some(instance_type) => Some(karpenter_sim::nodegroup::compare(
            instance_type,
            &scenario.all_types,
            &scenario.daemonsets,
            &scenario.pending,
        )?),
        None => None,
    };
    // NodeOverlays: the plan with them and without them, side by side.
    if !manifests.node_overlays.is_empty() {
        let pinning = !args.no_zone_pinning;
        let mut comparison =
            karpenter_sim::overlays::compare(&manifests, &catalog, &pricing, |scenario| {
                scenario.solve_options.pin_anti_affinity_domains = pinning;
            })?;
        comparison.with_overlays.compare_nodegroup = compare_nodegroup;
        match args.output {
            Output::Table => {
                crate::cmd::out::print(&karpenter_sim::overlays::comparison_table(&comparison))?
            }
            Output::Json => crate::cmd::out::println(&serde_json::to_string_pretty(&comparison)?)?,
            Output::Yaml => crate::cmd::out::print(&karpenter_api::yaml::to_yaml(&comparison)?)?,
        }
        let unschedulable = comparison.with_overlays.unschedulable.len();
        if args.fail_on_unschedulable && unschedulable > 0 {
            eprintln!("{unschedulable} pod(s) cannot be scheduled (--fail-on-unschedulable)");
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut plan = karpenter_sim::plan(&mut scenario);
    plan.compare_nodegroup = compare_nodegroup;
    match args.output {
        Output::Table => crate::cmd::out::print(&karpenter_sim::render::plan_table(&plan))?,
        Output::Json => crate::cmd::out::println(&serde_json::to_string_pretty(&plan)?)?,
        Output::Yaml => crate::cmd::out::print(&karpenter_api::yaml::to_yaml(&plan)?)?,
    }
    if args.fail_on_unschedulable && !plan.unschedulable.is_empty() {
        eprintln!(
            "{} pod(s) cannot be scheduled (--fail-on-unschedulable)",
            plan.unschedulable.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_timeline(
    path: &std::path::Path,
    manifests: &Manifests,
    catalog: &Catalog,
    scenario: Scenario,
    output: Output,
    html: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let timeline = karpenter_sim::timeline::parse(&path.display().to_string(), &text)?;
    let mut bar = Progress::new();
    let report =
        karpenter_sim::timeline::run(manifests, catalog, scenario, &timeline, |at, end| {
            bar.update(at, end)
        })?;
    bar.finish();
    if let Some(html) = html {
        std::fs::write(html, karpenter_sim::html::timeline_html(&report))
            .with_context(|| format!("writing {}", html.display()))?;
        eprintln!("wrote {}", html.display());
    }
    match output {
        Output::Table => crate::cmd::out::print(&karpenter_sim::render::timeline_table(&report))?,
        Output::Json => crate::cmd::out::println(&serde_json::to_string_pretty(&report)?)?,
        Output::Yaml => crate::cmd::out::print(&karpenter_api::yaml::to_yaml(&report)?)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on stderr, only when stderr is a terminal.
struct Progress {
    enabled: bool,
    shown: usize,
}

impl Progress {
    const WIDTH: usize = 40;

    fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            enabled: std::io::stderr().is_terminal(),
            shown: usize::MAX,
        }
    }

    fn update(&mut self, at: std::time::Duration, end: std::time::Duration) {
        if !self.enabled || end.is_zero() {
            return;
        }
        let filled = ((at.as_secs_f64() / end.as_secs_f64()) * Self::WIDTH as f64) as usize;
        let filled = filled.min(Self::WIDTH);
        if filled == self.shown {
            return;
        }
        self.shown = filled;
        let secs = at.as_secs();
        eprint!(
            "\r[{}{}] {:02}:{:02}:{:02} virtual",
            "=".repeat(filled),
            " ".repeat(Self::WIDTH - filled),
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        );
    }

    fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }
}
