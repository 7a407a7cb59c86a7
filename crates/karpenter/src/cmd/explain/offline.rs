//! `karpenter explain -f`: the answers recomputed from manifests, offline. The manifests are
//! loaded as `simulate` loads them (`karpenter_sim::Manifests`), applied to the controller's
//! cluster index (`karpenter_sim::index`), their NodePools' instance types resolved from the
//! embedded catalog as `simulate` resolves them (`karpenter_sim::scenario::pool_catalog`), and
//! the controller's provisioning solve and disruption pass run once at `--now`
//! (`karpenter_controller::explain::recompute`), with the controller's default settings.
//!
//! A pod, node or NodePool the manifests do not have is no answer (exit 1), said so. The same
//! answers over the live cluster's objects ([`super::live`], `--no-controller`) go through
//! [`answer_from`].

use anyhow::Context;
use chrono::{DateTime, Utc};
use karpenter_cloud::Catalog;
use karpenter_cloud::pool_types::CatalogCache;
use karpenter_controller::explain::model::NoAnswer;
use karpenter_controller::explain::{NotKnown, Recomputed, recompute};
use karpenter_controller::settings::Settings;
use karpenter_sim::{Manifests, PricingOptions};
use karpenter_state::Cluster;

use super::text::{disruption_text, node_pool_text, node_text, pod_text, removal_text};
use super::{Args, What, render};

/// Where the objects came from, as the answers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `-f`: manifests.
    Manifests,
    /// `--no-controller`: the live cluster, listed.
    Cluster,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Manifests => "the manifests",
            Source::Cluster => "the cluster",
        }
    }
}

/// The answer to `args.what` from `args.files`, rendered.
pub fn answer(args: &Args) -> anyhow::Result<Result<String, NoAnswer>> {
    let now = match &args.now {
        Some(text) => DateTime::parse_from_rfc3339(text)
            .with_context(|| format!("--now {text:?}: expected RFC 3339 (2026-11-27T10:00:00Z)"))?
            .with_timezone(&Utc),
        None => Utc::now(),
    };
    let files = crate::cmd::input::Files {
        files: args.files.clone(),
    };
    let texts = files.read()?;
    let manifests =
        Manifests::load_texts(texts.iter().map(|t| (t.name.as_str(), t.text.as_str())))?;
    answer_from(args, &manifests, Source::Manifests, now)
}

/// The answer to `args.what` recomputed over `manifests` (from `source`) at `now`, rendered.
pub fn answer_from(
    args: &Args,
    manifests: &Manifests,
    source: Source,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<String, NoAnswer>> {
    karpenter_cloud::regions::check_region(&args.region)?;
    let started = std::time::Instant::now();
    let (cluster, recomputed, notes) = recompute_manifests(manifests, &args.region, now)?;
    if args.timings {
        eprintln!(
            "timing: indexed and recomputed in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    for note in &notes {
        eprintln!("note: {note}");
    }
    if matches!(args.what, What::Pod { .. }) {
        // The marks live in the controller's memory only.
        eprintln!(
            "note: offerings marked unavailable after insufficient capacity are known to the controller only (every offering is taken as available): ask the controller"
        );
    }
    let not_in = |what: &str| NoAnswer {
        message: format!("{what} is not in {}", source.name()),
    };
    let explanations = &recomputed.explanations;
    match &args.what {
        What::Pod { pod } => {
            let (namespace, name) = What::pod_key(pod)?;
            let answer = if cluster.pod(namespace, name).is_none() {
                Err(not_in(&format!("pod {namespace}/{name}")))
            } else {
                known(explanations.pod(&format!("{namespace}/{name}")))
            };
            render(answer, args.output, pod_text)
        }
        What::Node { node } => {
            let answer = if cluster.node(node).is_none() && cluster.node_claim(node).is_none() {
                Err(not_in(&format!("node {node}")))
            } else {
                known(explanations.node(node))
            };
            render(answer, args.output, node_text)
        }
        What::Nodepool { name } => {
            let answer = if cluster
                .node_pools()
                .all(|p| p.metadata.name.as_deref() != Some(name))
            {
                Err(not_in(&format!("NodePool {name}")))
            } else {
                known(explanations.node_pool(name))
            };
            render(answer, args.output, node_pool_text)
        }
        What::Disruption { node: None } => render(
            known(explanations.disruption()),
            args.output,
            disruption_text,
        ),
        What::Disruption { node: Some(node) } => {
            let answer = karpenter_controller::explain::removal(&recomputed.snapshot, node, now)
                .ok_or_else(|| not_in(&format!("node {node}")));
            render(answer, args.output, removal_text)
        }
    }
}

/// The record's answer, or why it has none.
fn known<T>(answer: Result<T, NotKnown>) -> Result<T, NoAnswer> {
    answer.map_err(|why| NoAnswer {
        message: why.to_string(),
    })
}

/// The index of `manifests` and the answers recomputed over it at `now`, with what was assumed.
pub fn recompute_manifests(
    manifests: &Manifests,
    region: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<(Cluster, Recomputed, Vec<String>)> {
    let catalog = Catalog::embedded().context("reading the embedded catalog")?;
    let pricing = PricingOptions {
        region: region.to_owned(),
        spot_discount: karpenter_cloud::options::DEFAULT_SPOT_DISCOUNT,
    };
    let (cluster, mut notes) = karpenter_sim::index::cluster(manifests, now);
    let live: Vec<karpenter_api::v1::NodePool> = manifests
        .node_pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let mut cache = CatalogCache::new(&catalog);
    let catalog = karpenter_sim::scenario::pool_catalog(
        &live,
        &manifests.node_classes,
        &manifests.node_overlays,
        &mut cache,
        &pricing,
        &mut notes,
    )?;
    let settings = Settings::parse_from(["karpenter"], Vec::<(String, String)>::new())
        .context("the controller's default settings")?;
    let recomputed = recompute(
        &cluster,
        &catalog.pools,
        &catalog.instance_types(),
        &settings,
        now,
    );
    Ok((cluster, recomputed, notes))
}
