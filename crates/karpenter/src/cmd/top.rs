//! `karpenter top`: the cluster's nodes, cost, NodePools, pending pods and Karpenter's events in
//! the terminal, read through the kubeconfig (it never writes). The work is `karpenter-top`'s; this module reads
//! arguments, lists, and prints.
//!
//! On a terminal it is interactive (`live`: keys to sort, page, select and explain a node;
//! it lists once, then watches, and updates the view at most every `--interval`); `--once`, or standard output that is not a terminal,
//! prints once (scripts, CI logs). Exit 0; 2 when the cluster cannot be read.

mod controller;
mod live;
mod prices;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use karpenter_controller::explain::client::{Kubeconfig, Target};
use karpenter_top::view::TablePrices;
use karpenter_top::{Explained, Options, Sort};

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
    /// Show no prices.
    #[arg(long)]
    disable_pricing: bool,
    /// Where prices come from: `auto`, AWS's (the Pricing API's on-demand prices and EC2's spot
    /// price history) when AWS credentials are found, else the embedded catalog; `aws`, AWS's
    /// (no credentials is an error); `catalog`, the embedded catalog's list prices only.
    #[arg(long, value_enum, default_value = "auto")]
    pricing: prices::Pricing,
    /// The region whose AWS prices are read (default: the nodes' topology.kubernetes.io/region,
    /// else the AWS configuration's).
    #[arg(long)]
    region: Option<String>,
    /// Spot price estimate where no spot price is known: on-demand x (1 - discount).
    #[arg(long, value_name = "F", default_value_t = karpenter_cloud::options::DEFAULT_SPOT_DISCOUNT)]
    spot_discount: f64,
    /// On a terminal: the least seconds between two updates of the view from the cluster's
    /// watches, and between questions to the controller.
    #[arg(long, default_value_t = 2)]
    interval: u64,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// Ask the controller at this URL (its metrics port, e.g. `http://127.0.0.1:8080`) for the
    /// verdicts and explanations, instead of through the API server's service proxy.
    #[arg(long, value_name = "URL")]
    controller_url: Option<String>,
    /// The namespace of the controller's Service (service proxy).
    #[arg(long, default_value = "kube-system")]
    namespace: String,
    /// The controller's Service and its metrics port name (service proxy).
    #[arg(long, default_value = "karpenter:http-metrics")]
    service: String,
    /// Do not ask the controller (no verdicts, no explanations).
    #[arg(long)]
    no_controller: bool,
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
    let table =
        TablePrices::embedded(args.spot_discount).context("reading the embedded catalog")?;
    let width = args
        .width
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(120);
    let live = !args.once && args.output == Output::Text && std::io::stdout().is_terminal();
    // One worker: the live view's list and controller tasks run on it while the main thread
    // owns the terminal.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let kubeconfig = Kubeconfig {
        path: args.kubeconfig.clone(),
        context: args.context.clone(),
    };
    let client = runtime
        .block_on(kubeconfig.client())
        .context("a client for the kubeconfig")?;
    let target = match (&args.controller_url, args.no_controller) {
        (_, true) => None,
        (Some(url), false) => Some(Target::Url(
            url.parse()
                .with_context(|| format!("--controller-url {url:?}"))?,
        )),
        (None, false) => Some(Target::ServiceProxy {
            namespace: args.namespace.clone(),
            service: args.service.clone(),
            kubeconfig,
        }),
    };
    let ask_aws = !args.disable_pricing && args.pricing != prices::Pricing::Catalog;
    if live {
        // The view starts on the catalog's prices; AWS's replace them once read, and are read
        // again every `prices::REFRESH`.
        let first: prices::Shared = if args.disable_pricing {
            Arc::new(())
        } else {
            Arc::new(prices::CatalogPrices {
                table: table.clone(),
                without_aws: ask_aws.then(|| "reading AWS's prices…".to_owned()),
            })
        };
        let (tx, prices) = tokio::sync::watch::channel(first);
        if ask_aws {
            let (client, pricing, region) = (client.clone(), args.pricing, args.region.clone());
            runtime.spawn(async move {
                loop {
                    let region = match &region {
                        Some(r) => Some(r.clone()),
                        None => prices::cluster_region(&client).await,
                    };
                    let read = prices::read(pricing, region, table.clone())
                        .await
                        .unwrap_or_else(|why| {
                            Arc::new(prices::CatalogPrices {
                                table: table.clone(),
                                without_aws: Some(format!("--pricing aws: {why}")),
                            })
                        });
                    if tx.send(read).is_err() {
                        return;
                    }
                    tokio::time::sleep(prices::REFRESH).await;
                }
            });
        }
        live::run(
            &runtime,
            live::Live {
                client,
                prices,
                options,
                interval: Duration::from_secs(args.interval.max(1)),
                controller: target,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let prices: prices::Shared = if args.disable_pricing {
        Arc::new(())
    } else {
        let region = match &args.region {
            Some(r) => Some(r.clone()),
            None if ask_aws => runtime.block_on(prices::cluster_region(&client)),
            None => None,
        };
        runtime
            .block_on(prices::read(args.pricing, region, table))
            .map_err(|why| anyhow!("--pricing aws: {why}"))?
    };
    let listed = runtime
        .block_on(karpenter_top::list(&client))
        .context("reading the cluster")?;
    let mut explained = Explained::default();
    if let Some(target) = &target {
        match runtime.block_on(controller::ask_pass(target)) {
            Ok(Some(pass)) => pass.into_explained(&mut explained),
            Ok(None) => eprintln!("note: the controller has no disruption pass yet: no verdicts"),
            Err(e) => eprintln!(
                "note: the controller cannot be asked (no verdicts, no budgets; --no-controller does not ask): {e}"
            ),
        }
    }
    let mut view = karpenter_top::view(&listed, prices.as_ref(), &options, chrono::Utc::now());
    karpenter_top::view::explain(&mut view, &explained);
    match args.output {
        Output::Json => crate::cmd::out::println(&serde_json::to_string_pretty(&view)?)?,
        Output::Text => crate::cmd::out::print(&karpenter_top::render(&view, width))?,
    }
    Ok(ExitCode::SUCCESS)
}
