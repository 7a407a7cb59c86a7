//! NodePool status (upstream `nodepool.counter`): `status.resources` (capacity of the pool's
//! NodeClaims, in-flight ones included) and `status.nodes`, written when they change, checked
//! every [`INTERVAL`]; and the same figures, the pool's limits and its cost as metrics
//! (upstream `metrics.nodepool`), one loop each. A NodeClaim that names its offering but cannot
//! be priced (its pool has no instance-type listing, or the listing lacks the offering) is
//! counted once in `karpenter_nodepools_cost_tracker_errors_total`, as upstream's cost tracker
//! counts the NodeClaims it fails to add.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::labels;
use karpenter_api::v1::NodePool;
use karpenter_scheduling::ResourceList;
use karpenter_state::Cluster;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::json;

use super::gauges::{resource_type, resource_value};
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Labels;

pub const INTERVAL: Duration = Duration::from_secs(5);

/// One pool's figures: `status.resources`, `status.nodes`, whether the status already says
/// so, and its limits.
#[derive(Debug, Clone)]
pub struct PoolFigures {
    pub pool: NodePool,
    pub resources: BTreeMap<String, Quantity>,
    pub nodes: u64,
    pub unchanged: bool,
    pub limits: Option<ResourceList>,
}

/// Every NodePool's figures, from the index.
fn figures<'a>(cluster: &'a Cluster, busy: Busy<'a>) -> impl Iterator<Item = PoolFigures> + 'a {
    cluster
        .node_pools()
        .filter(move |pool| {
            pool.metadata
                .name
                .as_deref()
                .is_some_and(|n| !busy.contains(n))
        })
        .map(|pool| {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let usage = cluster.node_pool_usage(&name);
            let resources = usage.resources.to_k8s();
            let status = pool.status.as_ref();
            let unchanged = status.and_then(|s| s.resources.as_ref()) == Some(&resources)
                && status.and_then(|s| s.nodes) == i64::try_from(usage.nodes).ok();
            let limits = pool
                .spec
                .limits
                .as_ref()
                .and_then(|l| ResourceList::from_k8s(l).ok());
            PoolFigures {
                pool: pool.clone(),
                resources,
                nodes: usage.nodes,
                unchanged,
                limits,
            }
        })
}

fn name(figures: &PoolFigures) -> String {
    figures.pool.metadata.name.clone().unwrap_or_default()
}

/// `nodepool.counter`: writes a NodePool's status when its figures change.
#[derive(Debug)]
pub struct NodePoolCounter<C> {
    pub ctx: Context<C>,
}

impl<C: Send + Sync + 'static> Reconciler for NodePoolCounter<C> {
    type Step = PoolFigures;
    type Error = WriteError;
    const NAME: &'static str = "nodepool.counter";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL).concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<PoolFigures> {
        let mut scan = Scan::new();
        for f in figures(cluster, busy).filter(|f| !f.unchanged) {
            scan.step(name(&f), f);
        }
        scan
    }

    async fn execute(&self, f: PoolFigures) -> Result<Action, WriteError> {
        self.ctx
            .writer()
            .patch_status(
                &f.pool,
                json!({"resources": f.resources, "nodes": f.nodes}),
                "updating the status",
            )
            .await?;
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &WriteError) -> Retry {
        error.retry()
    }

    fn step_name(_: &PoolFigures) -> &'static str {
        "status"
    }
}

/// `metrics.nodepool`: each NodePool's usage, limits and cost as gauges, rebuilt every
/// [`INTERVAL`]; the series of a NodePool that is gone (or of a resource it no longer has) are
/// removed, as upstream's metric store removes them.
#[derive(Debug)]
pub struct NodePoolMetrics<C> {
    pub ctx: Context<C>,
    series: Mutex<PoolSeries>,
}

impl<C> NodePoolMetrics<C> {
    pub fn new(ctx: Context<C>) -> Self {
        NodePoolMetrics {
            ctx,
            series: Mutex::default(),
        }
    }
}

/// The series the last pass set, per gauge, and the NodeClaims it could not price.
#[derive(Debug, Default)]
struct PoolSeries {
    usage: HashSet<Labels>,
    limit: HashSet<Labels>,
    cost: HashSet<Labels>,
    unpriced: HashSet<String>,
}

/// A pool's cost, and the NodeClaims of the pool that name an offering it has no price for.
#[derive(Debug, Default, PartialEq)]
struct PoolCost {
    cost: f64,
    unpriced: Vec<String>,
}

/// The one step of `metrics.nodepool`: rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuild;

/// The hourly price of each NodeClaim of `pool` that names its instance type, capacity type
/// and zone, summed (upstream's cost tracker: an offering missing from the catalog costs 0 and
/// is an error). A NodeClaim without those labels yet is neither priced nor an error.
fn pool_cost(
    cluster: &Cluster,
    pool: &str,
    instance_types: Option<&Vec<karpenter_scheduling::InstanceType>>,
) -> PoolCost {
    let mut cost = PoolCost::default();
    for claim in cluster.node_claims() {
        let Some(labels) = claim.metadata.labels.as_ref() else {
            continue;
        };
        let (Some(it), Some(capacity), Some(zone), Some(owner)) = (
            labels.get(labels::INSTANCE_TYPE),
            labels.get(labels::CAPACITY_TYPE),
            labels.get(labels::ZONE),
            labels.get(labels::NODEPOOL),
        ) else {
            continue;
        };
        if owner != pool {
            continue;
        }
        let price = instance_types
            .into_iter()
            .flatten()
            .filter(|t| t.name == *it)
            .flat_map(|t| &t.offerings)
            .find(|o| o.zone == *zone && o.capacity_type == *capacity)
            .map(|o| o.price);
        match price {
            Some(price) => cost.cost += price,
            None => cost
                .unpriced
                .push(claim.metadata.name.clone().unwrap_or_default()),
        }
    }
    cost
}

/// Counts the NodeClaims in `now` that were not unpriced in the last pass (`counted`) as
/// errors of their pool, and remembers `now`: a NodeClaim is counted once while it stays
/// unpriced, and again if it is unpriced after having been priced.
fn count_unpriced(
    family: &Family<Labels, prometheus_client::metrics::counter::Counter>,
    counted: &mut HashSet<String>,
    now: Vec<(String, String)>,
) {
    let mut next = HashSet::with_capacity(now.len());
    for (pool, claim) in now {
        if !counted.contains(&claim) {
            family.get_or_create(&vec![("nodepool", pool)]).inc();
        }
        next.insert(claim);
    }
    *counted = next;
}

/// Sets `wanted` in `family`, removes what `previous` had that is not wanted any more, and
/// remembers `wanted`.
fn replace(
    family: &Family<Labels, Gauge<f64, AtomicU64>>,
    previous: &mut HashSet<Labels>,
    wanted: Vec<(Labels, f64)>,
) {
    let wanted: HashMap<Labels, f64> = wanted.into_iter().collect();
    for old in previous.iter() {
        if !wanted.contains_key(old) {
            family.remove(old);
        }
    }
    previous.clear();
    for (labels, value) in wanted {
        family.get_or_create(&labels).set(value);
        previous.insert(labels);
    }
}

fn pool_resource(pool: &str, resource: &str) -> Labels {
    vec![
        ("nodepool", pool.to_owned()),
        ("resource_type", resource_type(resource)),
    ]
}

impl<C: Send + Sync + 'static> Reconciler for NodePoolMetrics<C> {
    type Step = Rebuild;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "metrics.nodepool";

    fn shape(&self) -> Shape {
        Shape::periodic(INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Rebuild> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Rebuild);
        }
        scan
    }

    async fn execute(&self, _: Rebuild) -> Result<Action, std::convert::Infallible> {
        // Prices from the instance types the other loops listed last (none before the first
        // listing or while one is under way: the costs wait for the next pass).
        let catalogs = self.ctx.catalogs.latest();
        let (mut usage, mut limit, mut cost, mut unpriced) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        {
            let cluster = self.ctx.cache.lock();
            for f in figures(&cluster, Busy::none()) {
                let name = name(&f);
                for (resource, quantity) in &f.resources {
                    if let Ok(q) = quantity.0.parse::<karpenter_scheduling::Quantity>() {
                        usage.push((pool_resource(&name, resource), resource_value(resource, q)));
                    }
                }
                for (resource, quantity) in f.limits.iter().flat_map(|l| l.iter()) {
                    limit.push((
                        pool_resource(&name, resource),
                        resource_value(resource, *quantity),
                    ));
                }
                if let Some(catalogs) = &catalogs {
                    let priced = pool_cost(&cluster, &name, catalogs.instance_types.get(&name));
                    unpriced.extend(priced.unpriced.into_iter().map(|c| (name.clone(), c)));
                    cost.push((vec![("nodepool", name)], priced.cost));
                }
            }
        }
        let metrics = &self.ctx.metrics;
        let mut series = match self.series.lock() {
            Ok(series) => series,
            // Only the label sets of the last pass: keep using them.
            Err(poisoned) => poisoned.into_inner(),
        };
        replace(&metrics.nodepool_usage, &mut series.usage, usage);
        replace(&metrics.nodepool_limit, &mut series.limit, limit);
        if catalogs.is_some() {
            replace(&metrics.nodepools_cost, &mut series.cost, cost);
            count_unpriced(
                &metrics.nodepools_cost_tracker_errors,
                &mut series.unpriced,
                unpriced,
            );
        }
        Ok(Action::RequeueAfter(INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Rebuild) -> &'static str {
        "gauges"
    }
}

#[cfg(test)]
mod tests {
    use karpenter_scheduling::{InstanceType, Offering};
    use karpenter_state::Object;

    use super::*;
    use crate::http::Metrics;
    use crate::report::metrics::ControllerMetrics;

    fn claim(name: &str, pool: &str, it: &str, zone: &str) -> karpenter_api::v1::NodeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": it,
                "karpenter.sh/capacity-type": "spot", "topology.kubernetes.io/zone": zone}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}
        }))
        .expect("a NodeClaim")
    }

    fn instance_type(name: &str, price: f64) -> InstanceType {
        InstanceType {
            name: name.to_owned(),
            requirements: Vec::new(),
            offerings: vec![Offering {
                zone: "us-east-1a".into(),
                capacity_type: "spot".into(),
                price,
                available: true,
                requirements: Vec::new(),
                reservation_capacity: 0,
            }],
            capacity: ResourceList::new(),
            overhead: Default::default(),
        }
    }

    #[test]
    fn a_pools_cost_sums_its_nodeclaims_offering_prices() {
        let mut cluster = Cluster::new();
        cluster.apply(Object::NodeClaim(claim(
            "a",
            "general",
            "m5.large",
            "us-east-1a",
        )));
        cluster.apply(Object::NodeClaim(claim(
            "b",
            "general",
            "m5.large",
            "us-east-1a",
        )));
        cluster.apply(Object::NodeClaim(claim(
            "c",
            "general",
            "c5.large",
            "us-east-1a",
        )));
        cluster.apply(Object::NodeClaim(claim(
            "d",
            "general",
            "m5.large",
            "us-east-1b",
        )));
        cluster.apply(Object::NodeClaim(claim(
            "e",
            "other",
            "m5.large",
            "us-east-1a",
        )));
        let types = vec![
            instance_type("m5.large", 0.04),
            instance_type("c5.large", 0.03),
        ];
        let cost = pool_cost(&cluster, "general", Some(&types));
        assert!(
            (cost.cost - 0.11).abs() < 1e-9,
            "{cost:?}: the offering in us-east-1b is unknown"
        );
        assert_eq!(cost.unpriced, vec!["d".to_owned()]);
        let unlisted = pool_cost(&cluster, "general", None);
        assert_eq!(unlisted.cost, 0.0);
        assert_eq!(unlisted.unpriced.len(), 4, "{unlisted:?}");
    }

    #[test]
    fn an_unpriced_nodeclaim_is_one_error_while_it_stays_unpriced_and_again_if_it_comes_back() {
        let registry = Metrics::new();
        let metrics = ControllerMetrics::register(&registry);
        let family = &metrics.nodepools_cost_tracker_errors;
        let errors = |pool: &str| {
            family
                .get_or_create(&vec![("nodepool", pool.to_owned())])
                .get()
        };
        let mut counted = HashSet::new();
        let claim = |pool: &str, name: &str| (pool.to_owned(), name.to_owned());
        count_unpriced(family, &mut counted, vec![claim("a", "x"), claim("b", "y")]);
        count_unpriced(family, &mut counted, vec![claim("a", "x"), claim("b", "y")]);
        assert_eq!((errors("a"), errors("b")), (1, 1));
        count_unpriced(family, &mut counted, vec![claim("b", "y")]);
        count_unpriced(family, &mut counted, vec![claim("a", "x"), claim("b", "y")]);
        assert_eq!((errors("a"), errors("b")), (2, 1));
    }

    #[test]
    fn a_series_no_longer_wanted_is_removed() {
        let registry = Metrics::new();
        let metrics = ControllerMetrics::register(&registry);
        let mut previous = HashSet::new();
        let labels = |pool: &str| vec![("nodepool", pool.to_owned())];
        replace(
            &metrics.nodepools_cost,
            &mut previous,
            vec![(labels("a"), 1.0), (labels("b"), 2.0)],
        );
        replace(
            &metrics.nodepools_cost,
            &mut previous,
            vec![(labels("b"), 3.0)],
        );
        let text = registry.encode().expect("encodes");
        assert!(!text.contains("nodepool=\"a\""), "{text}");
        assert!(
            text.contains("karpenter_nodepools_cost_total{nodepool=\"b\"} 3.0"),
            "{text}"
        );
    }
}
