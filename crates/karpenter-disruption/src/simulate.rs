//! Rescheduling simulations (upstream `SimulateScheduling`): would the candidates' pods fit
//! elsewhere, and what would have to be launched for them?
//!
//! The [`Simulator`] converts the snapshot into a solver input once; each simulation takes the
//! candidates out of the existing nodes, adds their reschedulable pods to the pending pods and
//! the pods of nodes already being deleted, runs the solver, and puts the nodes back. A
//! candidate pod that fits nowhere, or only on a node that is not initialized yet, makes the
//! simulation fail with that pod's reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use karpenter_api::labels::CAPACITY_RESERVATION_ID;
use karpenter_scheduling::PodRecord;
use karpenter_scheduling::{
    ExistingNode, NewNodeClaim, Offering, ReservedOfferingMode, SolveInput, SolveOptions,
    SolveResult,
};

use crate::candidate::Candidate;
use crate::pool;
use crate::reason::{Code, Reason};
use crate::snapshot::{NodeState, Snapshot};

/// What a simulation found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every candidate pod fits on existing nodes.
    Fits,
    /// Every candidate pod fits, with these new NodeClaims.
    NeedsNew(Vec<NewNodeClaim>),
    /// Some candidate pod cannot be placed; the reason names it.
    Unschedulable(Reason),
}

/// A delete's pods placed the way kube-scheduler spreads them ([`Simulator::spread`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Spread {
    /// They still fit on existing nodes.
    Holds,
    /// Some would be stranded: new nodes of this cheapest price per hour take them (`pod` is
    /// one of them).
    Launches { price: f64, pod: String },
    /// Some would fit nowhere.
    Unschedulable(Reason),
}

/// Reusable solver input for one snapshot.
#[derive(Debug)]
pub struct Simulator {
    input: SolveInput,
    /// What each simulation compiled of the cluster, for the next (the same nodes' pods).
    cache: karpenter_scheduling::SolveCache,
    /// Pods waiting (pending pods and pods of nodes being deleted).
    base_pods: Vec<Arc<PodRecord>>,
    initialized: BTreeMap<String, bool>,
    /// The consolidation simulations since the last commit, by their candidates' indexes
    /// (sorted): a command's commit reuses its simulation instead of solving again.
    consolidations: HashMap<Vec<usize>, SolveResult>,
    /// Number of solver runs so far, but for [`Simulator::spread`]'s (the pass's work budget
    /// counts searching, not checking what a search found).
    pub runs: usize,
    /// Number of [`Simulator::spread`] checks so far.
    pub spread_checks: usize,
    /// NodePools the solver could not take (pool name, why): they launch no replacements.
    pub unconverted: Vec<(String, String)>,
}

/// The pod as a simulation's pending pod: unbound, with a uid (shared, not copied, when it
/// already is). Its spec stays the one `Arc` it shares with its replicas: a record's node
/// name is beside its spec, not in it.
fn pending(pod: &Arc<PodRecord>) -> Arc<PodRecord> {
    if pod.metadata.uid.is_some() && pod.node_name.is_none() {
        return Arc::clone(pod);
    }
    let mut p = PodRecord::clone(pod);
    if p.metadata.uid.is_none() {
        p.metadata.uid = Some(pod.key());
    }
    p.node_name = None;
    Arc::new(p)
}

/// Upstream `IsUnderConsolidateAfter`: the node's NodePool has a non-zero `consolidateAfter`
/// and the node had a pod event (or, without one, was initialized) less than that long ago.
fn under_consolidate_after(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> bool {
    let Some(pool) = node.node_pool().and_then(|p| snapshot.node_pool(p)) else {
        return false;
    };
    let Some(after) = pool::consolidate_after(pool).filter(|d| !d.is_zero()) else {
        return false;
    };
    if !node.initialized {
        return false;
    }
    let Some(since) = node.last_pod_event.or(node.initialized_at) else {
        return false;
    };
    chrono::Duration::from_std(after).is_ok_and(|after| now - since < after)
}

fn existing(snapshot: &Snapshot, node: &NodeState, now: DateTime<Utc>) -> ExistingNode {
    ExistingNode {
        name: node.name.clone(),
        labels: node.labels.clone(),
        taints: node.taints.clone(),
        capacity: node.capacity.clone(),
        allocatable: node.allocatable.clone(),
        pods: node
            .pods
            .iter()
            .filter(|p| !p.is_terminal())
            .cloned()
            .collect(),
        initialized: node.initialized,
        deleting: node.deleting || node.marked_for_deletion,
        volume_limits: BTreeMap::new(),
        refuses_relocated_pods: under_consolidate_after(snapshot, node, now),
    }
}

impl Simulator {
    pub fn new(snapshot: &Snapshot, now: DateTime<Utc>) -> Self {
        let mut base_pods: Vec<Arc<PodRecord>> =
            snapshot.pending_pods.iter().map(pending).collect();
        for node in snapshot
            .nodes
            .iter()
            .filter(|n| n.deleting || n.marked_for_deletion)
        {
            base_pods.extend(
                node.pods
                    .iter()
                    .filter(|p| p.is_reschedulable())
                    .map(pending),
            );
        }
        let mut node_pools = Vec::with_capacity(snapshot.node_pools.len());
        let mut unconverted = Vec::new();
        // Like upstream's scheduler, replacements only come from NodePools that are Ready (a
        // pool whose status says otherwise: its class is missing or not ready, or it failed
        // validation). A pool without conditions (a manifest, offline) counts as Ready.
        for pool in snapshot
            .node_pools
            .iter()
            .filter(|p| !pool::reported_not_ready(p))
        {
            match karpenter_scheduling::v1::node_pool(pool) {
                Ok(converted) => node_pools.push(converted),
                Err(error) => unconverted.push((pool::name(pool).to_owned(), error.to_string())),
            }
        }
        let input = SolveInput {
            node_pools,
            instance_types: snapshot.instance_types.clone(),
            default_instance_types: Vec::new(),
            existing_nodes: snapshot
                .nodes
                .iter()
                .map(|n| existing(snapshot, n, now))
                .collect(),
            daemonsets: snapshot.daemonsets.clone(),
            pods: Vec::new(),
            options: SolveOptions {
                // Upstream's disruption simulations: a full reservation passes the pod to the
                // next NodePool, and a NodeClaim without a slot falls back to on-demand or spot.
                reserved_offering_mode: ReservedOfferingMode::Fallback,
                ..snapshot.solve_options.clone()
            },
            ..Default::default()
        };
        Simulator {
            input,
            cache: Default::default(),
            consolidations: HashMap::new(),
            base_pods,
            initialized: snapshot
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.initialized))
                .collect(),
            runs: 0,
            spread_checks: 0,
            unconverted,
        }
    }

    /// Simulates removing `candidates` (all from `snapshot`, which built this simulator). In a
    /// `consolidation` simulation (upstream `IsConsolidationSimulation`) the candidates' pods may
    /// not move onto nodes still within their NodePool's `consolidateAfter`; drift's may.
    pub fn simulate(
        &mut self,
        snapshot: &Snapshot,
        candidates: &[&Candidate],
        consolidation: bool,
    ) -> (Outcome, SolveResult) {
        let mut indexes: Vec<usize> = candidates.iter().map(|c| c.index).collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut moving: Vec<Arc<PodRecord>> = Vec::new();
        for c in candidates {
            if let Some(node) = snapshot.nodes.get(c.index) {
                moving.extend(
                    c.reschedulable
                        .iter()
                        .filter_map(|&i| node.pods.get(i))
                        .map(pending),
                );
            }
        }
        let watched: BTreeSet<String> = moving.iter().map(|p| p.uid_or_key()).collect();
        let mut removed: Vec<(usize, ExistingNode)> = Vec::with_capacity(indexes.len());
        for &i in indexes.iter().rev() {
            if i < self.input.existing_nodes.len() {
                removed.push((i, self.input.existing_nodes.remove(i)));
            }
        }
        let mut pods = self.base_pods.clone();
        pods.extend(moving);
        self.input.pods = pods;
        if consolidation {
            self.input.relocating = watched.clone();
        }
        let result = karpenter_scheduling::solve_cached(&self.input, &mut self.cache);
        self.runs += 1;
        self.input.pods = Vec::new();
        self.input.relocating.clear();
        for (i, node) in removed.into_iter().rev() {
            self.input.existing_nodes.insert(i, node);
        }
        if consolidation {
            self.consolidations.insert(indexes, result.clone());
        }
        (self.classify(&watched, &result), result)
    }

    /// What removing `candidates`, whose pods all fit on existing nodes as simulated, needs
    /// when each pod goes where kube-scheduler's default scoring sends it (the most free share
    /// of cpu and memory first, [`SolveOptions::spread_over_existing`]) rather than where the
    /// plan packs it: kube-scheduler places the evicted pods, and a pod it strands makes the
    /// provisioner launch a node right after the consolidation.
    pub fn spread(&mut self, snapshot: &Snapshot, candidates: &[&Candidate]) -> Spread {
        let mut indexes: Vec<usize> = candidates.iter().map(|c| c.index).collect();
        indexes.sort_unstable();
        indexes.dedup();
        // The planned simulation stays the one a commit reuses.
        let planned = self.consolidations.remove(&indexes);
        self.input.options.spread_over_existing = true;
        let (outcome, result) = self.simulate(snapshot, candidates, true);
        self.input.options.spread_over_existing = false;
        self.runs -= 1;
        self.spread_checks += 1;
        match planned {
            Some(planned) => self.consolidations.insert(indexes, planned),
            None => self.consolidations.remove(&indexes),
        };
        match outcome {
            Outcome::Fits => Spread::Holds,
            Outcome::Unschedulable(why) => Spread::Unschedulable(why),
            Outcome::NeedsNew(claims) => Spread::Launches {
                price: claims.iter().map(NewNodeClaim::cheapest_price).sum(),
                pod: result
                    .new_node_claims
                    .iter()
                    .flat_map(|c| c.pods.iter())
                    .next()
                    .map_or_else(String::new, |p| p.to_string()),
            },
        }
    }

    /// Makes a decided command part of every later simulation of this pass, so that one pass
    /// can decide several commands that hold together: the candidates leave (their nodes are
    /// deleting and empty), the pods they move onto existing nodes are bound there, and the
    /// pending pods the simulation put on the command's replacement wait no longer. Returns the
    /// indexes of the existing nodes that received pods: they may not be candidates of a later
    /// command (their moved pods are not in the snapshot).
    ///
    /// The replacement itself is not added to later simulations: no candidate's pods could
    /// move onto an uninitialized node anyway, and the pods placed on it stop counting for
    /// topology for the rest of the pass. Validation re-simulates each command against the
    /// cluster as it is by then.
    pub fn commit(&mut self, snapshot: &Snapshot, candidates: &[&Candidate]) -> BTreeSet<usize> {
        let mut indexes: Vec<usize> = candidates.iter().map(|c| c.index).collect();
        indexes.sort_unstable();
        indexes.dedup();
        // The command's own simulation, unless it was not simulated since the last commit.
        let result = match self.consolidations.remove(&indexes) {
            Some(result) => result,
            None => self.simulate(snapshot, candidates, true).1,
        };
        self.consolidations.clear();
        let mut moving: HashMap<String, Arc<PodRecord>> = HashMap::new();
        for c in candidates {
            if let Some(node) = snapshot.nodes.get(c.index) {
                for pod in c.reschedulable.iter().filter_map(|&i| node.pods.get(i)) {
                    let pending = pending(pod);
                    moving.insert(pending.uid_or_key(), pending);
                }
            }
        }
        let position: HashMap<&str, usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut destinations = BTreeSet::new();
        for placement in &result.existing_placements {
            let (Some(pod), Some(&i)) = (
                moving.get(&placement.pod.uid),
                position.get(placement.node.as_str()),
            ) else {
                continue;
            };
            if let Some(node) = self.input.existing_nodes.get_mut(i) {
                node.pods.push(Arc::clone(pod));
                destinations.insert(i);
            }
        }
        for c in candidates {
            if let Some(node) = self.input.existing_nodes.get_mut(c.index) {
                node.pods.clear();
                node.deleting = true;
            }
        }
        let placed_new: BTreeSet<&str> = result
            .new_node_claims
            .iter()
            .flat_map(|claim| claim.pods.iter().map(|p| p.uid.as_str()))
            .collect();
        self.base_pods
            .retain(|p| !placed_new.contains(p.uid_or_key().as_str()));
        destinations
    }

    /// Terminate-first's simulation (upstream's second pass of
    /// `SimulateSchedulingWithReservedFallback`): as [`Simulator::simulate`] of one candidate,
    /// with the slot it holds in `reservation` credited back and no fallback from reserved
    /// capacity (strict, as provisioning will be), so it tells whether the candidate's pods fit
    /// once it is gone and its slot is free.
    pub fn simulate_credited(
        &mut self,
        snapshot: &Snapshot,
        candidate: &Candidate,
        reservation: &str,
    ) -> (Outcome, SolveResult) {
        let catalogs = Arc::clone(&self.input.instance_types);
        let mut credited = (*catalogs).clone();
        for offering in credited
            .values_mut()
            .flatten()
            .flat_map(|it| it.offerings.iter_mut())
            .filter(|o| reservation_id(o) == Some(reservation))
        {
            offering.reservation_capacity += 1;
        }
        self.input.instance_types = Arc::new(credited);
        let mode = std::mem::replace(
            &mut self.input.options.reserved_offering_mode,
            ReservedOfferingMode::Strict,
        );
        let out = self.simulate(snapshot, &[candidate], false);
        self.input.options.reserved_offering_mode = mode;
        self.input.instance_types = catalogs;
        out
    }

    fn classify(&self, watched: &BTreeSet<String>, result: &SolveResult) -> Outcome {
        if let Some(u) = result
            .unschedulable
            .iter()
            .find(|u| watched.contains(&u.pod.uid))
        {
            return Outcome::Unschedulable(Reason::new(
                Code::Unschedulable,
                format!("pod {} cannot be rescheduled: {}", u.pod, u.reason),
            ));
        }
        if let Some(p) = result.existing_placements.iter().find(|p| {
            watched.contains(&p.pod.uid) && !self.initialized.get(&p.node).copied().unwrap_or(true)
        }) {
            return Outcome::Unschedulable(Reason::new(
                Code::UninitializedDestination,
                format!(
                    "pod {} would only fit on node {}, which is not initialized",
                    p.pod, p.node
                ),
            ));
        }
        if result.new_node_claims.is_empty() {
            Outcome::Fits
        } else {
            Outcome::NeedsNew(result.new_node_claims.clone())
        }
    }
}

/// The reservation id of a reserved offering (its `capacity-reservation-id` requirement).
pub(crate) fn reservation_id(o: &Offering) -> Option<&str> {
    o.requirements
        .iter()
        .find(|r| r.key == CAPACITY_RESERVATION_ID)
        .and_then(|r| r.values.first())
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;
    use karpenter_scheduling::builders::PodBuilder;

    use super::*;

    fn bound(name: &str, spec: &Arc<PodSpec>) -> Arc<PodRecord> {
        let mut pod = PodRecord::from(PodBuilder::new(name).build());
        pod.spec = Some(Arc::clone(spec));
        pod.node_name = Some("n1".into());
        Arc::new(pod)
    }

    #[test]
    fn pods_sharing_a_spec_become_pending_still_sharing_it() {
        let spec = Arc::new(PodSpec::default());
        let (a, b) = (bound("a", &spec), bound("b", &spec));
        let (pa, pb) = (pending(&a), pending(&b));
        let (sa, sb) = (pa.spec.as_ref().unwrap(), pb.spec.as_ref().unwrap());
        assert!(Arc::ptr_eq(sa, sb) && Arc::ptr_eq(sa, &spec));
        assert_eq!((pa.node_name(), pb.node_name()), (None, None));
        assert_eq!(a.node_name(), Some("n1"), "the bound pod is not changed");
        assert_eq!(pa.metadata.name.as_deref(), Some("a"));
        assert_eq!(pb.metadata.name.as_deref(), Some("b"));
    }

    #[test]
    fn a_pending_pod_with_a_uid_is_shared_as_it_is() {
        let mut pod = PodRecord::from(PodBuilder::new("p").build());
        pod.metadata.uid = Some("u".into());
        let pod = Arc::new(pod);
        assert!(Arc::ptr_eq(&pending(&pod), &pod));
    }
}
