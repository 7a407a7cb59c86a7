//! `karpenter explain`: why the running controller did what it did, asked of the controller
//! itself (its `/explain/...` answers, see `karpenter_controller::explain`): where a pod goes or
//! why nowhere, why a node is disrupted or stays, and the last disruption pass whole (the
//! consolidation dry run). It never writes to the cluster.
//!
//! The controller is reached through the API server's service proxy with the kubeconfig
//! (`--namespace`, `--service`: the chart's `karpenter` Service and its `http-metrics` port), or
//! directly with `--controller-url` (after `kubectl port-forward`, or from inside the cluster).
//!
//! Exit 0 with an answer; 1 when the controller has none (no pass yet, a pod that was not
//! pending in the last batch, a standby replica); 2 when it cannot be asked (no kubeconfig, not
//! reachable, an answer that is not one). The asking is `karpenter_controller::explain::client`'s.

use std::process::ExitCode;

use anyhow::{Context, bail};
use karpenter_controller::explain::client::{Target, ask, paths};
use karpenter_controller::explain::model::{
    CommandAnswer, DisruptionAnswer, NoAnswer, NodeAnswer, NodePoolAnswer, NodeVerdict, PodAnswer,
    PodOutcome, ReasonAnswer, ReplacementAnswer,
};

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
    /// The last disruption pass whole: its commands and every node it left, with why.
    Disruption,
}

impl What {
    fn path(&self) -> anyhow::Result<String> {
        Ok(match self {
            What::Pod { pod } => {
                let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
                if namespace.is_empty() || name.is_empty() || name.contains('/') {
                    bail!("pod {pod:?}: expected namespace/name");
                }
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
            What::Disruption => paths::DISRUPTION.to_owned(),
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.what.path()?;
    let target = match &args.controller_url {
        Some(url) => Target::Url(
            url.parse()
                .with_context(|| format!("--controller-url {url:?}"))?,
        ),
        None => Target::ServiceProxy {
            namespace: args.namespace.clone(),
            service: args.service.clone(),
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let text = runtime.block_on(async {
        match &args.what {
            What::Pod { .. } => answer(&target, &path, args.output, pod_text).await,
            What::Node { .. } => answer(&target, &path, args.output, node_text).await,
            What::Nodepool { .. } => answer(&target, &path, args.output, node_pool_text).await,
            What::Disruption => answer(&target, &path, args.output, disruption_text).await,
        }
    })?;
    match text {
        Ok(text) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(none) => {
            eprintln!("no answer: {}", none.message);
            Ok(ExitCode::from(1))
        }
    }
}

/// The controller's answer at `path`, rendered, or why it has none.
async fn answer<T: serde::de::DeserializeOwned + serde::Serialize>(
    target: &Target,
    path: &str,
    output: Output,
    text: fn(&T) -> String,
) -> anyhow::Result<Result<String, NoAnswer>> {
    let answer: T = match ask(target, path).await? {
        Ok(answer) => answer,
        Err(none) => return Ok(Err(none)),
    };
    Ok(Ok(match output {
        Output::Text => text(&answer),
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&answer)?),
        Output::Yaml => karpenter_api::yaml::to_yaml(&answer)?,
    }))
}

fn launch_text(launch: &ReplacementAnswer) -> String {
    let types = match launch.instance_types {
        1 => "1 instance type".to_owned(),
        n => format!("{n} instance types"),
    };
    match &launch.cheapest {
        Some(c) => format!(
            "nodepool {}, {types}, cheapest {} at ${:.4}/h",
            launch.node_pool, c.instance_type, c.price
        ),
        None => format!("nodepool {}, {types}", launch.node_pool),
    }
}

fn pod_text(answer: &PodAnswer) -> String {
    let mut out = format!("pod {} (batch of {})\n", answer.pod, answer.decided_at);
    match &answer.outcome {
        PodOutcome::NewNodeClaim {
            node_claim,
            launch,
            pods,
        } => {
            let claim = node_claim.as_deref().map_or_else(
                || "a new NodeClaim (not created yet)".to_owned(),
                |n| format!("new NodeClaim {n}"),
            );
            out.push_str(&format!(
                "  goes to {claim}: {}; {pods} pod(s) share it\n",
                launch_text(launch)
            ));
        }
        PodOutcome::ExistingNode { node } => {
            out.push_str(&format!("  fits on existing node {node}\n"));
        }
        PodOutcome::Unschedulable { reasons } | PodOutcome::WaitingForReservation { reasons } => {
            out.push_str(
                if matches!(answer.outcome, PodOutcome::Unschedulable { .. }) {
                    "  fits nowhere:\n"
                } else {
                    "  waits for a capacity reservation slot (deferred to the next batch):\n"
                },
            );
            for r in reasons {
                if r.place.is_empty() {
                    out.push_str(&format!("  - {}\n", r.reason));
                } else {
                    out.push_str(&format!("  - {}: {}\n", r.place, r.reason));
                }
            }
        }
    }
    out
}

fn reasons_text(out: &mut String, reasons: &[ReasonAnswer]) {
    for r in reasons {
        out.push_str(&format!(
            "  - {} ({}, told as {})\n",
            r.text, r.code, r.event
        ));
    }
}

fn command_text(out: &mut String, c: &CommandAnswer) {
    out.push_str(&format!(
        "  {} ({} budget): {}\n",
        c.method, c.reason, c.explanation
    ));
    if let Some(repair) = &c.repair {
        out.push_str(&format!("  repairs {repair}\n"));
    }
    if c.replacements.is_empty() {
        out.push_str(&format!(
            "  removes {} (no replacement)\n",
            c.nodes.join(", ")
        ));
    } else {
        out.push_str(&format!("  removes {}, replaced by:\n", c.nodes.join(", ")));
        for r in &c.replacements {
            out.push_str(&format!("  - {}\n", launch_text(r)));
        }
    }
    if c.savings_per_hour != 0.0 {
        out.push_str(&format!("  saves ${:.4}/h\n", c.savings_per_hour));
    }
}

pub(crate) fn node_text(answer: &NodeAnswer) -> String {
    let mut out = format!("node {} (pass of {})\n", answer.node, answer.decided_at);
    match &answer.verdict {
        NodeVerdict::Disrupting { command } => {
            out.push_str("  is being disrupted:\n");
            command_text(&mut out, command);
        }
        NodeVerdict::Kept { reasons } => {
            out.push_str("  stays:\n");
            reasons_text(&mut out, reasons);
        }
        NodeVerdict::NotConsidered => out.push_str(
            "  was not considered (not a node of Karpenter's when the pass ran, or newer)\n",
        ),
    }
    out
}

fn node_pool_text(answer: &NodePoolAnswer) -> String {
    let mut out = format!(
        "nodepool {} (pass of {})\n",
        answer.node_pool, answer.decided_at
    );
    for c in &answer.conditions {
        let why = [c.reason.as_str(), c.message.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        if why.is_empty() {
            out.push_str(&format!("  {}={}\n", c.type_, c.status));
        } else {
            out.push_str(&format!("  {}={} ({why})\n", c.type_, c.status));
        }
    }
    let n = &answer.nodes;
    out.push_str(&format!(
        "  nodes: {} ({} initialized, {} not ready, {} deleting, {} drifted)\n",
        n.total, n.initialized, n.not_ready, n.deleting, n.drifted
    ));
    for l in &answer.limits {
        let used = if l.used.is_empty() {
            "?"
        } else {
            l.used.as_str()
        };
        out.push_str(&format!(
            "  limit {}: {used} used of {}\n",
            l.resource, l.limit
        ));
    }
    for b in &answer.budgets {
        out.push_str(&format!(
            "  budget {}: {} more may be disrupted now ({} allowed, {} disrupting): {}\n",
            b.reason, b.allowed, b.budget, b.disrupting, b.explanation
        ));
    }
    out
}

fn disruption_text(answer: &DisruptionAnswer) -> String {
    let mut out = format!("disruption pass of {}\n", answer.decided_at);
    if answer.commands.is_empty() {
        out.push_str("no command: every node stays\n");
    }
    for c in &answer.commands {
        out.push_str("command:\n");
        command_text(&mut out, c);
    }
    for kept in &answer.kept {
        out.push_str(&format!("node {} stays:\n", kept.node));
        reasons_text(&mut out, &kept.reasons);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_controller::explain::model::{PlaceReason, PricedType};

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
    }
}
