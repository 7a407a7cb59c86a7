//! `karpenter explain`: why Karpenter does what it does: where a pod goes or why nowhere, why
//! a node is disrupted or stays, a NodePool's readiness, limits and budgets, and a disruption
//! pass whole (the consolidation dry run). It never writes to the cluster.
//!
//! Two sources, one set of answers (`karpenter_controller::explain::model`, printed by
//! [`text`]):
//!
//! - **the running controller** (default): its `/explain/...` answers, reached through the API
//!   server's service proxy with the kubeconfig (`--kubeconfig`, `--context`; `--namespace`,
//!   `--service`: the chart's
//!   `karpenter` Service and its `http-metrics` port), or directly with `--controller-url`. The
//!   asking is `karpenter_controller::explain::client`'s.
//! - **the live cluster, without the controller** (`--no-controller`): its objects listed
//!   through the kubeconfig ([`live`]) and answered as `-f` answers.
//! - **manifests, offline** (`-f`): loaded as `simulate` loads them, applied to the cluster index
//!   the controller builds (`karpenter_sim::index`), then one provisioning solve and one
//!   disruption pass at `--now` ([`offline`], through
//!   `karpenter_controller::explain::recompute`).
//!
//! Exit 0 with an answer; 1 when there is none (no pass yet, a pod that was not pending in the
//! last batch, a standby replica; offline: a pod, node or NodePool not in the manifests); 2 when
//! the controller cannot be asked (no kubeconfig, not reachable, an answer that is not one) or
//! the manifests cannot be read.

mod live;
mod offline;
pub mod text;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use karpenter_controller::explain::client::{Kubeconfig, Target, ask, paths};
use karpenter_controller::explain::model::NoAnswer;

use text::{disruption_text, node_pool_text, node_text, pod_text, removal_text};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "text",
        global = true
    )]
    output: Output,
    /// Answer offline from these manifests (files or directories, as `simulate -f`; `-` reads
    /// standard input) instead of asking the controller: the cluster's objects (NodePools,
    /// NodeClaims, Nodes, Pods, PodDisruptionBudgets, ...), e.g. an export with `kubectl get
    /// -o yaml`.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        num_args = 1..,
        global = true,
        conflicts_with = "controller_url"
    )]
    files: Vec<PathBuf>,
    /// With -f: the time the pass runs at (RFC 3339; default: now). Budgets' schedules,
    /// `consolidateAfter` and expiry are read against it.
    #[arg(long, value_name = "TIME", global = true, requires = "files")]
    now: Option<String>,
    /// With -f: the region of the instance types and prices (as `simulate --region`).
    #[arg(long, value_name = "R", default_value = karpenter_cloud::options::DEFAULT_REGION, global = true)]
    region: String,
    /// Answer without the controller: list the live cluster's objects through the kubeconfig
    /// (`--kubeconfig`, `--context`; read only) and recompute the answers as `-f` does. What
    /// only the controller knows is not known then: the instance types and prices EC2 described
    /// to it (the embedded catalog stands in), offerings marked unavailable, why a node was
    /// launched.
    #[arg(long, global = true, conflicts_with_all = ["controller_url", "files"])]
    no_controller: bool,
    /// Print to standard error how long listing and recomputing took (`-f`, `--no-controller`).
    #[arg(long, global = true)]
    timings: bool,
    /// Ask the controller at this URL (e.g. `http://127.0.0.1:8080`, its metrics port) instead
    /// of through the API server's service proxy.
    #[arg(long, value_name = "URL", global = true)]
    controller_url: Option<String>,
    /// The namespace of the controller's Service (service proxy).
    #[arg(long, default_value = "kube-system", global = true)]
    namespace: String,
    /// The controller's Service and its metrics port name (service proxy).
    #[arg(long, default_value = "karpenter:http-metrics", global = true)]
    service: String,
    /// The kubeconfig file of the service proxy (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE", global = true)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context of the service proxy (default: the current one).
    #[arg(long, value_name = "NAME", global = true)]
    context: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Where the last provisioning batch put a pending pod, or why nowhere (per NodePool).
    Pod {
        /// `namespace/name` (`name` alone: the `default` namespace).
        pod: String,
    },
    /// Why the last disruption pass disrupts a node, or every reason it stays.
    Node {
        /// The Node's name.
        node: String,
    },
    /// A NodePool: readiness, limits used, budgets allowed now per reason, its nodes.
    Nodepool {
        /// The NodePool's name.
        name: String,
    },
    /// The last disruption pass whole: its commands and every node it left, with why (the
    /// consolidation dry run); with `--node`, that node's removal simulation.
    #[command(alias = "consolidation")]
    Disruption {
        /// Simulate removing this node alone: can its pods go elsewhere, where each would go,
        /// is a replacement needed and would it be cheaper; or why it cannot be removed.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
    },
}

impl What {
    /// The pod as `(namespace, name)`.
    fn pod_key(pod: &str) -> anyhow::Result<(&str, &str)> {
        let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            bail!("pod {pod:?}: expected namespace/name");
        }
        Ok((namespace, name))
    }

    fn path(&self) -> anyhow::Result<String> {
        Ok(match self {
            What::Pod { pod } => {
                let (namespace, name) = Self::pod_key(pod)?;
                paths::pod(namespace, name)
            }
            What::Node { node } => {
                if node.is_empty() || node.contains('/') {
                    bail!("node {node:?}: expected a Node name");
                }
                paths::node(node)
            }
            What::Nodepool { name } => {
                if name.is_empty() || name.contains('/') {
                    bail!("nodepool {name:?}: expected a NodePool name");
                }
                paths::node_pool(name)
            }
            What::Disruption { node: None } => paths::DISRUPTION.to_owned(),
            What::Disruption { node: Some(node) } => {
                if node.is_empty() || node.contains('/') {
                    bail!("--node {node:?}: expected a Node name");
                }
                paths::removal(node)
            }
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.what.path()?;
    let text = if args.no_controller {
        from_cluster(&args)?
    } else if args.files.is_empty() {
        from_controller(&args, &path)?
    } else {
        offline::answer(&args)?
    };
    match text {
        Ok(text) => {
            crate::cmd::out::print(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(none) => {
            eprintln!("no answer: {}", none.message);
            Ok(ExitCode::from(1))
        }
    }
}

/// The answer recomputed over the live cluster's objects ([`live`]), rendered.
fn from_cluster(args: &Args) -> anyhow::Result<Result<String, NoAnswer>> {
    let (manifests, listing) = live::read(&Kubeconfig {
        path: args.kubeconfig.clone(),
        context: args.context.clone(),
    })?;
    if args.timings {
        eprintln!(
            "timing: listed {} objects in {:.2} s",
            listing.objects,
            listing.took.as_secs_f64()
        );
    }
    offline::answer_from(
        args,
        &manifests,
        offline::Source::Cluster,
        chrono::Utc::now(),
    )
}

/// The controller's answer, rendered, or why it has none.
fn from_controller(args: &Args, path: &str) -> anyhow::Result<Result<String, NoAnswer>> {
    let target = match &args.controller_url {
        Some(url) => Target::Url(
            url.parse()
                .with_context(|| format!("--controller-url {url:?}"))?,
        ),
        None => Target::ServiceProxy {
            namespace: args.namespace.clone(),
            service: args.service.clone(),
            kubeconfig: Kubeconfig {
                path: args.kubeconfig.clone(),
                context: args.context.clone(),
            },
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let output = args.output;
        match &args.what {
            What::Pod { .. } => render(ask(&target, path).await?, output, pod_text),
            What::Node { .. } => render(ask(&target, path).await?, output, node_text),
            What::Nodepool { .. } => render(ask(&target, path).await?, output, node_pool_text),
            What::Disruption { node: None } => {
                render(ask(&target, path).await?, output, disruption_text)
            }
            What::Disruption { node: Some(_) } => {
                render(ask(&target, path).await?, output, removal_text)
            }
        }
    })
}

/// An answer (or why there is none) in the `output` format.
fn render<T: serde::Serialize>(
    answer: Result<T, NoAnswer>,
    output: Output,
    text: fn(&T) -> String,
) -> anyhow::Result<Result<String, NoAnswer>> {
    let answer = match answer {
        Ok(answer) => answer,
        Err(none) => return Ok(Err(none)),
    };
    Ok(Ok(match output {
        Output::Text => text(&answer),
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&answer)?),
        Output::Yaml => karpenter_api::yaml::to_yaml(&answer)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_controller::explain::model::{
        PlaceReason, PodAnswer, PodOutcome, PricedType, ReplacementAnswer, UnavailableAnswer,
    };

    #[test]
    fn a_pod_is_named_namespace_slash_name_or_by_name_in_default() {
        let path = |pod: &str| What::Pod { pod: pod.into() }.path();
        assert_eq!(
            path("shop/web").ok().as_deref(),
            Some("/explain/pod/shop/web")
        );
        assert_eq!(
            path("web").ok().as_deref(),
            Some("/explain/pod/default/web")
        );
        assert!(path("a/b/c").is_err());
        assert!(path("/web").is_err());
        assert!(What::Node { node: "x/y".into() }.path().is_err());
    }

    #[test]
    fn an_unschedulable_pod_reads_one_line_per_place() {
        let answer = PodAnswer {
            pod: "shop/huge".into(),
            decided_at: "2026-11-27T10:00:00Z".into(),
            outcome: PodOutcome::Unschedulable {
                reasons: vec![PlaceReason {
                    place: "nodepool general".into(),
                    reason: "no instance type has enough resources".into(),
                    closest: None,
                    unavailable: Vec::new(),
                }],
            },
        };
        assert_eq!(
            pod_text(&answer),
            "pod shop/huge (batch of 2026-11-27T10:00:00Z)\n  fits nowhere:\n  - nodepool general: no instance type has enough resources\n"
        );
        let launched = PodAnswer {
            outcome: PodOutcome::NewNodeClaim {
                node_claim: Some("general-x1".into()),
                launch: ReplacementAnswer {
                    node_pool: "general".into(),
                    instance_types: 12,
                    cheapest: Some(PricedType {
                        instance_type: "c5.large".into(),
                        price: 0.085,
                    }),
                },
                pods: 3,
                unavailable: vec![UnavailableAnswer {
                    instance_type: "c5.large".into(),
                    zone: "us-east-1a".into(),
                    capacity_type: "spot".into(),
                    price: 0.031,
                    until: "2026-11-27T10:02:30Z".into(),
                    remaining: "2m30s".into(),
                }],
            },
            ..answer
        };
        assert!(
            pod_text(&launched).contains(
                "goes to new NodeClaim general-x1: nodepool general, 12 instance types, cheapest c5.large at $0.0850/h; 3 pod(s) share it"
            ),
            "{}",
            pod_text(&launched)
        );
        assert!(
            pod_text(&launched).contains(
                "  cheaper offerings not picked, marked unavailable after insufficient capacity:\n  - c5.large spot us-east-1a ($0.0310/h) until 2026-11-27T10:02:30Z (2m30s remaining)\n"
            ),
            "{}",
            pod_text(&launched)
        );
    }
}
