//! Static NodePools (`spec.replicas` set, feature gate `StaticCapacity`): how many nodes a pool
//! has in each state (upstream `NodePoolState.GetNodeCount`), its `limits.nodes`, and what its
//! replica count asks for now (upstream `static.provisioning` and `static.deprovisioning`):
//! NodeClaims to launch, NodeClaims to remove, or nothing.
//!
//! The rules, per pool, from its nodes at one moment:
//! - a pool being deleted is left alone (its NodeClaims go with it);
//! - **scale up**: while running + pending-disruption nodes are fewer than `replicas`, launch
//!   the difference, capped by the room under `limits.nodes` (every node of the pool, deleting
//!   ones included, counts against it). Only a `Ready` pool launches. Upstream launches
//!   `replicas - running`, counting nodes pending disruption as missing although the disruption
//!   command that holds them launches their replacements itself, so a pool with a drift in
//!   flight and a node lost overshoots and then scales down again; here pending nodes count as
//!   present;
//! - **scale down** (whatever the pool's readiness, not bound by disruption budgets: the user
//!   asked for less): the running nodes beyond `replicas` go (nodes pending disruption do not
//!   count: their command is replacing them one for one), in upstream's order: NodeClaims not
//!   launched yet first, then empty nodes (no pods but DaemonSet ones, none with an active
//!   `karpenter.sh/do-not-disrupt`), then the rest, nodes without a protected pod before nodes
//!   with one, each group by disruption cost (`Σ EvictionCost(pods) × LifetimeRemaining`),
//!   lowest first. Ties go by name, so a repeated decision names the same NodeClaims.
//!   Terminal pods count as gone (upstream counts every pod bound to the node).
//!
//! Static nodes are launched whether or not pods exist; the NodeClaim they launch is the
//! pool's template alone ([`karpenter_scheduling::template::template_claim`]), as for a static
//! drift replacement (`methods::static_drift`).

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use karpenter_api::v1::NodePool;

use crate::cost::{disruption_cost, lifetime_remaining};
use crate::do_not_disrupt::{PodProtection, pod_protection};
use crate::pods::{cost_input, started};
use crate::snapshot::{Features, NodeState};

/// Node counts of one pool (upstream `NodePoolState.GetNodeCount`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Not deleting and not marked for deletion.
    pub running: i64,
    /// Marked for deletion (or queued for disruption), not yet deleting.
    pub pending_disruption: i64,
    /// Every node of the pool, deleting ones included: what counts against `limits.nodes`.
    pub total: i64,
}

impl PoolCounts {
    /// The counts of pool `pool_name` among `nodes`.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a NodeState>, pool_name: &str) -> Self {
        let mut counts = PoolCounts::default();
        for node in nodes.into_iter().filter(|n| in_pool(n, pool_name)) {
            counts.total += 1;
            if node.deleting {
                continue;
            }
            if pending_disruption(node) {
                counts.pending_disruption += 1;
            } else {
                counts.running += 1;
            }
        }
        counts
    }
}

fn in_pool(node: &NodeState, pool_name: &str) -> bool {
    node.managed() && node.node_pool() == Some(pool_name)
}

fn pending_disruption(node: &NodeState) -> bool {
    node.marked_for_deletion || node.queued
}

/// `limits.nodes`, when set and a whole number.
pub fn node_limit(node_pool: &NodePool) -> Option<i64> {
    let quantity = node_pool.spec.limits.as_ref()?.get("nodes")?;
    quantity.0.trim().parse::<i64>().ok()
}

/// What a static pool's replica count asks for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replicas {
    /// Nothing: the pool has its replicas (or is not static, or is being deleted).
    Steady,
    /// Launch this many NodeClaims from the pool's template.
    Launch(usize),
    /// Delete these NodeClaims, in this order.
    Remove(Vec<String>),
    /// Nodes are missing but none may be launched now.
    Held(Held),
}

/// Why a pool missing nodes launches none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The pool's `Ready` condition is not `True`.
    NotReady { missing: i64 },
    /// The pool has no room under `limits.nodes`.
    AtNodeLimit {
        missing: i64,
        total: i64,
        limit: i64,
    },
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::NotReady { missing } => write!(
                f,
                "{missing} node(s) short of its replicas, but the nodepool is not Ready"
            ),
            Held::AtNodeLimit {
                missing,
                total,
                limit,
            } => write!(
                f,
                "{missing} node(s) short of its replicas, but it has {total} node(s) and limits.nodes is {limit}"
            ),
        }
    }
}

/// What `pool`'s replica count asks for, given the cluster's `nodes` (every pool's; only
/// `pool`'s are read) at `now`.
pub fn replicas(
    pool: &NodePool,
    nodes: &[NodeState],
    features: Features,
    now: DateTime<Utc>,
) -> Replicas {
    let Some(replicas) = pool.spec.replicas else {
        return Replicas::Steady;
    };
    if pool.metadata.deletion_timestamp.is_some() {
        return Replicas::Steady;
    }
    let name = crate::pool::name(pool);
    let counts = PoolCounts::of(nodes, name);
    let surplus = counts.running - replicas;
    if surplus > 0 {
        let count = usize::try_from(surplus).unwrap_or(usize::MAX);
        return Replicas::Remove(scale_down_order(pool, nodes, features, now, count));
    }
    let missing = replicas - counts.running - counts.pending_disruption;
    if missing <= 0 {
        return Replicas::Steady;
    }
    if !ready(pool) {
        return Replicas::Held(Held::NotReady { missing });
    }
    let room = node_limit(pool).map_or(i64::MAX, |limit| (limit - counts.total).max(0));
    let count = missing.min(room);
    if count <= 0 {
        return Replicas::Held(Held::AtNodeLimit {
            missing,
            total: counts.total,
            limit: node_limit(pool).unwrap_or_default(),
        });
    }
    Replicas::Launch(usize::try_from(count).unwrap_or(usize::MAX))
}

/// The pool's `Ready` condition is `True` (upstream's root condition).
fn ready(pool: &NodePool) -> bool {
    karpenter_api::conditions::get(
        pool.status.as_ref().and_then(|s| s.conditions.as_deref()),
        karpenter_api::v1::nodepool::conditions::READY,
    )
    .is_some_and(|c| c.status == "True")
}

/// How a running node ranks for removal: lower goes first.
#[derive(Debug, PartialEq, PartialOrd)]
enum Rank {
    /// No instance launched yet.
    NotLaunched,
    /// Only DaemonSet pods, none protected.
    Empty,
    /// Pods to move: protected ones last, then by disruption cost.
    Busy { protected: bool, cost: f64 },
}

fn rank(pool: &NodePool, node: &NodeState, features: Features, now: DateTime<Utc>) -> Rank {
    if !node.launched {
        return Rank::NotLaunched;
    }
    let pods: Vec<_> = node.pods.iter().filter(|p| !p.is_terminal()).collect();
    let protected = pods.iter().any(|p| {
        matches!(
            pod_protection(
                p.annotation(karpenter_api::labels::DO_NOT_DISRUPT),
                started(p),
                now
            ),
            PodProtection::Protected(_)
        )
    });
    if !protected && pods.iter().all(|p| p.is_daemonset()) {
        return Rank::Empty;
    }
    let inputs: Vec<_> = pods.iter().map(|p| cost_input(p, features)).collect();
    let age = (now - node.created).to_std().unwrap_or_default();
    let expire_after = node
        .expire_after
        .or_else(|| pool.spec.template.spec.expire_after.duration());
    Rank::Busy {
        protected,
        cost: disruption_cost(&inputs, lifetime_remaining(expire_after, age)),
    }
}

/// The first `count` running nodes of `pool` to remove, as NodeClaim names.
fn scale_down_order(
    pool: &NodePool,
    nodes: &[NodeState],
    features: Features,
    now: DateTime<Utc>,
    count: usize,
) -> Vec<String> {
    let name = crate::pool::name(pool);
    let mut ranked: Vec<(Rank, &NodeState)> = nodes
        .iter()
        .filter(|n| in_pool(n, name) && !n.deleting && !pending_disruption(n))
        .map(|n| (rank(pool, n, features, now), n))
        .collect();
    ranked.sort_by(|(ra, a), (rb, b)| {
        ra.partial_cmp(rb)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
    ranked
        .into_iter()
        .filter_map(|(_, n)| n.node_claim.clone())
        .take(count)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use karpenter_api::labels;
    use karpenter_scheduling::builders::PodBuilder;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    fn pool(replicas: i64, limit: Option<i64>, ready: &str) -> NodePool {
        let mut spec = serde_json::json!({
            "replicas": replicas,
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
                "requirements": []}}
        });
        if let Some(limit) = limit {
            spec["limits"] = serde_json::json!({"nodes": limit.to_string()});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "static"},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "r",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn node(name: &str) -> NodeState {
        let mut n = NodeState::new(name, now() - chrono::Duration::hours(1));
        n.node_claim = Some(format!("{name}-claim"));
        n.labels
            .insert(labels::NODEPOOL.to_owned(), "static".to_owned());
        n
    }

    fn with_pod(mut n: NodeState, pod: PodBuilder) -> NodeState {
        n.pods.push(Arc::new(pod.build().into()));
        n
    }

    fn decide(pool: &NodePool, nodes: &[NodeState]) -> Replicas {
        replicas(pool, nodes, Features::default(), now())
    }

    #[test]
    fn a_static_pool_without_nodes_launches_its_replicas_whether_or_not_pods_exist() {
        assert_eq!(decide(&pool(3, None, "True"), &[]), Replicas::Launch(3));
        assert_eq!(
            decide(&pool(3, None, "True"), &[node("a")]),
            Replicas::Launch(2)
        );
        assert_eq!(
            decide(&pool(2, None, "True"), &[node("a"), node("b")]),
            Replicas::Steady
        );
    }

    #[test]
    fn launches_stop_at_the_room_left_under_limits_nodes_counting_deleting_nodes() {
        let mut deleting = node("c");
        deleting.deleting = true;
        let nodes = [node("a"), deleting];
        assert_eq!(
            decide(&pool(5, Some(4), "True"), &nodes),
            Replicas::Launch(2),
            "2 nodes (one deleting) under a limit of 4 leave room for 2 of the 4 missing"
        );
        assert_eq!(
            decide(&pool(5, Some(2), "True"), &nodes),
            Replicas::Held(Held::AtNodeLimit {
                missing: 4,
                total: 2,
                limit: 2
            })
        );
    }

    #[test]
    fn a_pool_that_is_not_ready_launches_nothing_but_still_scales_down() {
        assert_eq!(
            decide(&pool(2, None, "False"), &[]),
            Replicas::Held(Held::NotReady { missing: 2 })
        );
        assert_eq!(
            decide(&pool(0, None, "False"), &[node("a")]),
            Replicas::Remove(vec!["a-claim".to_owned()])
        );
    }

    #[test]
    fn a_node_pending_disruption_counts_as_present_for_launches_and_is_never_removed() {
        let mut drifting = node("a");
        drifting.marked_for_deletion = true;
        assert_eq!(
            decide(&pool(2, None, "True"), &[drifting.clone(), node("b")]),
            Replicas::Steady,
            "the disruption command replaces the drifting node itself"
        );
        assert_eq!(
            decide(&pool(1, None, "True"), &[drifting, node("b"), node("c")]),
            Replicas::Remove(vec!["b-claim".to_owned()])
        );
    }

    #[test]
    fn a_pool_being_deleted_or_without_replicas_is_left_alone() {
        let mut deleting = pool(0, None, "True");
        deleting.metadata.deletion_timestamp =
            serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).ok();
        assert!(deleting.metadata.deletion_timestamp.is_some());
        assert_eq!(decide(&deleting, &[node("a")]), Replicas::Steady);
        let mut dynamic = pool(0, None, "True");
        dynamic.spec.replicas = None;
        assert_eq!(decide(&dynamic, &[node("a")]), Replicas::Steady);
    }

    #[test]
    fn scale_down_removes_unlaunched_claims_then_empty_nodes_then_the_cheapest_to_disrupt_and_protected_pods_last()
     {
        let mut unlaunched = node("z-unlaunched");
        unlaunched.launched = false;
        unlaunched.has_node = false;
        let empty = with_pod(
            node("y-daemons-only"),
            PodBuilder::new("ds").owned_by("DaemonSet", "agent"),
        );
        let one_pod = with_pod(node("x-one-pod"), PodBuilder::new("web-1"));
        let two_pods = with_pod(
            with_pod(node("w-two-pods"), PodBuilder::new("web-2")),
            PodBuilder::new("web-3"),
        );
        let mut protected_pod = PodBuilder::new("batch").build();
        protected_pod.metadata.annotations =
            Some([(labels::DO_NOT_DISRUPT.to_owned(), "true".to_owned())].into());
        let mut protected_daemon = protected_pod.clone();
        protected_daemon.metadata.owner_references = PodBuilder::new("agent")
            .owned_by("DaemonSet", "agent")
            .build()
            .metadata
            .owner_references;
        let mut protected = node("a-protected");
        protected.pods.push(Arc::new(protected_pod.into()));
        let mut protected_daemon_only = node("b-protected-daemon");
        protected_daemon_only
            .pods
            .push(Arc::new(protected_daemon.into()));
        let nodes = [
            protected_daemon_only,
            protected,
            two_pods,
            one_pod,
            empty,
            unlaunched,
            node("v-empty"),
        ];
        let order = |replicas: i64| match decide(&pool(replicas, None, "True"), &nodes) {
            Replicas::Remove(claims) => claims,
            other => panic!("expected a scale-down, got {other:?}"),
        };
        assert_eq!(
            order(0),
            [
                "z-unlaunched-claim",
                "v-empty-claim",
                "y-daemons-only-claim",
                "x-one-pod-claim",
                "w-two-pods-claim",
                "a-protected-claim",
                "b-protected-daemon-claim"
            ]
        );
        assert_eq!(order(5), ["z-unlaunched-claim", "v-empty-claim"]);
    }

    #[test]
    fn among_busy_nodes_the_one_closer_to_expiry_goes_first() {
        let mut old = with_pod(node("old"), PodBuilder::new("a"));
        old.expire_after = Some(Duration::from_secs(2 * 3600));
        let mut young = with_pod(node("young"), PodBuilder::new("b"));
        young.expire_after = Some(Duration::from_secs(100 * 3600));
        assert_eq!(
            decide(&pool(1, None, "True"), &[young, old]),
            Replicas::Remove(vec!["old-claim".to_owned()])
        );
    }

    #[test]
    fn other_pools_nodes_are_not_counted() {
        let mut other = node("o");
        other
            .labels
            .insert(labels::NODEPOOL.to_owned(), "other".to_owned());
        assert_eq!(
            decide(&pool(1, None, "True"), &[other]),
            Replicas::Launch(1)
        );
    }
}
