//! `karpenter top`: the cluster's nodes, cost, NodePools and pending pods in the terminal, read
//! through the kubeconfig (it never writes). The work is `karpenter-top`'s; this module reads
//! arguments, lists, and prints.
//!
//! On a terminal it redraws every `--interval`; `--once`, or standard output that is not a
//! terminal, prints once (scripts, CI logs). Exit 0; 2 when the cluster cannot be read.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use karpenter_top::view::TablePrices;
use karpenter_top::{Options, Prices, Sort};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeSort {
    Creation,
    Name,
    Usage,
    Price,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print once and exit (also when standard output is not a terminal).
    #[arg(long)]
    once: bool,
    /// Output format (json implies --once).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
    /// Resources shown, each with a column and a header line.
    #[arg(long, value_delimiter = ',', default_value = "cpu,memory")]
    resources: Vec<String>,
    /// Only nodes with these labels (`key=value` or `key`, comma-separated).
    #[arg(long, value_delimiter = ',')]
    node_selector: Vec<String>,
    /// Label values shown as extra columns (comma-separated keys).
    #[arg(long, value_delimiter = ',')]
    extra_labels: Vec<String>,
    /// Node order.
    #[arg(long, value_enum, default_value = "creation")]
    node_sort: NodeSort,
    /// Show no prices (they come from the embedded catalog: on-demand list prices, spot as
    /// on-demand x (1 - --spot-discount)).
    #[arg(long)]
    disable_pricing: bool,
    /// Spot price estimate: on-demand x (1 - discount).
    #[arg(long, value_name = "F", default_value_t = karpenter_cloud::options::DEFAULT_SPOT_DISCOUNT)]
    spot_discount: f64,
    /// Seconds between redraws on a terminal.
    #[arg(long, default_value_t = 2)]
    interval: u64,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// Columns for the pending pods' reasons (default: $COLUMNS, else 120).
    #[arg(long)]
    width: Option<usize>,
}

fn options(args: &Args) -> anyhow::Result<Options> {
    let mut node_selector = Vec::new();
    for term in &args.node_selector {
        match term.split_once('=') {
            Some((k, v)) if !k.is_empty() => node_selector.push((k.to_owned(), Some(v.to_owned()))),
            None if !term.is_empty() => node_selector.push((term.clone(), None)),
            _ => bail!("--node-selector {term:?}: expected key=value or key"),
        }
    }
    if args.resources.iter().any(String::is_empty) {
        bail!("--resources: an empty resource name");
    }
    Ok(Options {
        resources: args.resources.clone(),
        node_selector,
        extra_labels: args.extra_labels.clone(),
        sort: match args.node_sort {
            NodeSort::Creation => Sort::Creation,
            NodeSort::Name => Sort::Name,
            NodeSort::Usage => Sort::Usage,
            NodeSort::Price => Sort::Price,
        },
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = options(&args)?;
    let prices: Box<dyn Prices> = if args.disable_pricing {
        Box::new(())
    } else {
        Box::new(TablePrices::embedded(args.spot_discount).context("reading the embedded catalog")?)
    };
    let width = args
        .width
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(120);
    let live = !args.once && args.output == Output::Text && std::io::stdout().is_terminal();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let config = kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions {
            context: args.context.clone(),
            ..Default::default()
        })
        .await
        .context("reading the kubeconfig")?;
        let client = kube::Client::try_from(config).context("a client for the kubeconfig")?;
        loop {
            let listed = karpenter_top::list(&client)
                .await
                .context("reading the cluster")?;
            let view = karpenter_top::view(&listed, prices.as_ref(), &options, chrono::Utc::now());
            match args.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&view)?),
                Output::Text if live => print!(
                    "\x1b[2J\x1b[H{}\n(every {}s; Ctrl-C to quit)\n",
                    karpenter_top::render(&view, width),
                    args.interval
                ),
                Output::Text => print!("{}", karpenter_top::render(&view, width)),
            }
            if !live {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_secs(args.interval.max(1))).await;
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
