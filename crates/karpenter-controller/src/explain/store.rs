//! The record the loops keep: the last disruption pass's decision and the last provisioning
//! batch's outcome per pod, and the answers computed from them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use karpenter_disruption::{Decision, Snapshot};
use karpenter_scheduling::closest::closest_instance_type;
use karpenter_scheduling::pod::pod_requests;
use karpenter_scheduling::{NewNodeClaim, PodRecord, PoolInstanceTypes, ResourceList, SolveResult};

/// How the solver begins a pool's reason when no instance type holds a pod.
const NO_INSTANCE_TYPE: &str = "no instance type satisfies";

use super::convert::{command_answer, launch, reason_answers, rfc3339};
use super::model::{
    DisruptionAnswer, KeptNode, LaunchAnswer, MAX_LAUNCH_PODS, NodeAnswer, NodePoolAnswer,
    NodeVerdict, PlaceReason, PodAnswer, PodOutcome, PricedType,
};
use super::unavailable::{self, Mark};

/// At most this many launches are remembered (the oldest go first); a NodeClaim's goes when it
/// terminates.
pub const MAX_LAUNCHES: usize = 10_000;

/// Why there is no answer yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotKnown {
    /// No disruption pass has run in this process (a standby replica, or one just started).
    #[error(
        "no disruption pass has run in this controller yet (a standby replica answers nothing: ask the leader)"
    )]
    NoDisruptionPass,
    /// No NodePool of that name was in the last disruption pass.
    #[error("NodePool {0} was not in the last disruption pass (no such NodePool then)")]
    NodePoolNotInPass(String),
    /// The pod was not in the last provisioning batch.
    #[error(
        "pod {0} was not in the last provisioning batch: it was not pending then (or no batch has run in this controller; a standby replica answers nothing)"
    )]
    PodNotInBatch(String),
    /// No node of that name was in the last disruption pass.
    #[error("node {0} was not in the last disruption pass (no such node then)")]
    NodeNotInPass(String),
}

#[derive(Debug, Default)]
struct Record {
    disruption: Option<(DateTime<Utc>, Decision)>,
    /// The NodePools as the last pass saw them.
    node_pools: Vec<NodePoolAnswer>,
    /// By `namespace/name`: the last batch's outcome for each of its pods.
    pods: HashMap<String, PodAnswer>,
    /// The last pass's snapshot (shared, not copied), for removal simulations on request.
    snapshot: Option<(DateTime<Utc>, Arc<Snapshot>)>,
    /// When the last provisioning batch ran.
    batch_at: Option<DateTime<Utc>>,
    /// Why each NodeClaim this controller created was launched, by NodeClaim name.
    launches: HashMap<String, LaunchAnswer>,
    /// The names of `launches`, oldest first (to drop the oldest past [`MAX_LAUNCHES`]).
    launch_order: VecDeque<String>,
}

/// What the loops decided last, shared with the HTTP endpoints.
#[derive(Debug, Clone, Default)]
pub struct Explanations(Arc<Mutex<Record>>);

impl Explanations {
    fn lock(&self) -> MutexGuard<'_, Record> {
        // Whole values replaced at once: a panicked holder leaves them usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A disruption pass at `at` decided `decision`.
    pub fn disruption_decided(&self, at: DateTime<Utc>, decision: &Decision) {
        let kept = Decision {
            commands: decision.commands.clone(),
            considered: decision.considered.clone(),
            ..Decision::default()
        };
        self.lock().disruption = Some((at, kept));
    }

    /// The snapshot the disruption pass at `at` decided on (kept until the next one).
    pub fn snapshot_observed(&self, at: DateTime<Utc>, snapshot: Arc<Snapshot>) {
        self.lock().snapshot = Some((at, snapshot));
    }

    /// The last pass's snapshot and its time.
    pub fn snapshot(&self) -> Result<(DateTime<Utc>, Arc<Snapshot>), NotKnown> {
        self.lock()
            .snapshot
            .clone()
            .ok_or(NotKnown::NoDisruptionPass)
    }

    /// Node `name`'s removal simulation over the last pass's snapshot (a solve: call it off
    /// the async threads).
    pub fn removal(&self, name: &str) -> Result<super::model::RemovalAnswer, NotKnown> {
        let (at, snapshot) = self.snapshot()?;
        super::removal::removal(&snapshot, name, at)
            .ok_or_else(|| NotKnown::NodeNotInPass(name.to_owned()))
    }

    /// The NodePools as the last disruption pass saw them ([`super::node_pools`]).
    pub fn node_pools_observed(&self, pools: Vec<NodePoolAnswer>) {
        self.lock().node_pools = pools;
    }

    /// Every NodePool as the last disruption pass saw it.
    pub fn node_pools(&self) -> Result<Vec<NodePoolAnswer>, NotKnown> {
        let record = self.lock();
        if record.disruption.is_none() {
            return Err(NotKnown::NoDisruptionPass);
        }
        Ok(record.node_pools.clone())
    }

    /// NodePool `name` as the last disruption pass saw it.
    pub fn node_pool(&self, name: &str) -> Result<NodePoolAnswer, NotKnown> {
        let record = self.lock();
        if record.disruption.is_none() {
            return Err(NotKnown::NoDisruptionPass);
        }
        record
            .node_pools
            .iter()
            .find(|p| p.node_pool == name)
            .cloned()
            .ok_or_else(|| NotKnown::NodePoolNotInPass(name.to_owned()))
    }

    /// A provisioning batch at `at` decided `result` (it replaces the last batch's pods).
    /// `not_ready` are the NodePools left out of the solve and why (added to each
    /// unschedulable pod's reasons, as its event says them); `ignored` the pods left out of the
    /// solve (`namespace/name`) and why.
    pub fn batch_decided(
        &self,
        at: DateTime<Utc>,
        result: &SolveResult,
        not_ready: &[(String, String)],
        ignored: &[(String, &str)],
    ) {
        let mut pods = HashMap::new();
        for (key, why) in ignored {
            let reasons = vec![PlaceReason {
                place: "validation".to_owned(),
                reason: (*why).to_owned(),
                closest: None,
                unavailable: Vec::new(),
            }];
            pods.insert(
                key.clone(),
                answer(key.clone(), at, PodOutcome::Unschedulable { reasons }),
            );
        }
        for claim in &result.new_node_claims {
            for pod in &claim.pods {
                let key = pod.to_string();
                let outcome = PodOutcome::NewNodeClaim {
                    node_claim: None,
                    launch: launch(claim),
                    pods: claim.pods.len(),
                    unavailable: Vec::new(),
                };
                pods.insert(key.clone(), answer(key, at, outcome));
            }
        }
        for placed in &result.existing_placements {
            let key = placed.pod.to_string();
            let outcome = PodOutcome::ExistingNode {
                node: placed.node.clone(),
            };
            pods.insert(key.clone(), answer(key, at, outcome));
        }
        for failed in &result.unschedulable {
            let key = failed.pod.to_string();
            let mut reasons: Vec<PlaceReason> = if failed.reasons.is_empty() {
                vec![PlaceReason {
                    place: String::new(),
                    reason: failed.reason.clone(),
                    closest: None,
                    unavailable: Vec::new(),
                }]
            } else {
                failed
                    .reasons
                    .iter()
                    .map(|(place, reason)| PlaceReason {
                        place: place.clone(),
                        reason: reason.clone(),
                        closest: None,
                        unavailable: Vec::new(),
                    })
                    .collect()
            };
            reasons.extend(not_ready.iter().map(|(pool, why)| PlaceReason {
                place: format!("nodepool {pool}"),
                reason: why.clone(),
                closest: None,
                unavailable: Vec::new(),
            }));
            let outcome = if failed.deferred {
                PodOutcome::WaitingForReservation { reasons }
            } else {
                PodOutcome::Unschedulable { reasons }
            };
            pods.insert(key.clone(), answer(key, at, outcome));
        }
        let mut record = self.lock();
        record.pods = pods;
        record.batch_at = Some(at);
    }

    /// Names, for each of `pods` that the last batch found no instance type of a NodePool
    /// large enough for, that pool's closest instance type and what it lacks
    /// ([`karpenter_scheduling::closest`]); `instance_types` by NodePool name.
    pub fn closest_types(&self, pods: &[Arc<PodRecord>], instance_types: &PoolInstanceTypes) {
        let mut record = self.lock();
        for pod in pods {
            let Some(PodAnswer {
                outcome: PodOutcome::Unschedulable { reasons },
                ..
            }) = record.pods.get_mut(&pod.key())
            else {
                continue;
            };
            let Ok(requests) = pod_requests(pod.spec.as_deref()) else {
                continue;
            };
            for reason in reasons
                .iter_mut()
                .filter(|r| r.reason.starts_with(NO_INSTANCE_TYPE))
            {
                let Some(types) = reason
                    .place
                    .strip_prefix("nodepool ")
                    .and_then(|pool| instance_types.get(pool))
                else {
                    continue;
                };
                reason.closest = closest_instance_type(types, &requests, &ResourceList::new())
                    .map(|c| c.to_string());
            }
        }
    }

    /// Tells the last batch's pods (of `result`, solved at `at`) the offerings marked
    /// unavailable after insufficient capacity (`marks`, with how long each stays so): to a
    /// pod placed nowhere, per NodePool, those of the pool's types that hold it; to a pod
    /// launched for, those cheaper than its NodeClaim's cheapest type that the NodeClaim's
    /// requirements allow ([`super::unavailable`]). `instance_types` by NodePool name.
    pub fn unavailable_offerings(
        &self,
        at: DateTime<Utc>,
        marks: &[Mark],
        result: &SolveResult,
        pods: &[Arc<PodRecord>],
        instance_types: &PoolInstanceTypes,
    ) {
        if marks.is_empty() {
            return;
        }
        let mut record = self.lock();
        for claim in &result.new_node_claims {
            let Some(types) = instance_types.get(&claim.node_pool) else {
                continue;
            };
            let told = unavailable::cheaper(at, marks, types, claim);
            if told.is_empty() {
                continue;
            }
            for pod in &claim.pods {
                if let Some(PodAnswer {
                    outcome: PodOutcome::NewNodeClaim { unavailable, .. },
                    ..
                }) = record.pods.get_mut(&pod.to_string())
                {
                    unavailable.clone_from(&told);
                }
            }
        }
        for pod in pods {
            let Some(PodAnswer {
                outcome: PodOutcome::Unschedulable { reasons },
                ..
            }) = record.pods.get_mut(&pod.key())
            else {
                continue;
            };
            let Ok(requests) = pod_requests(pod.spec.as_deref()) else {
                continue;
            };
            for reason in reasons.iter_mut() {
                let Some(types) = reason
                    .place
                    .strip_prefix("nodepool ")
                    .and_then(|pool| instance_types.get(pool))
                else {
                    continue;
                };
                reason.unavailable = unavailable::holding(at, marks, types, &requests);
            }
        }
    }

    /// The NodeClaim created for `claim` (of the last batch) is named `name`: its pods are
    /// told so, and why it was launched is kept for `name` until it terminates
    /// ([`Self::node_claim_terminated`]; at most `MAX_LAUNCHES`, the oldest dropped first).
    pub fn node_claim_created(&self, name: &str, claim: &NewNodeClaim) {
        let mut record = self.lock();
        for pod in &claim.pods {
            if let Some(PodAnswer {
                outcome: PodOutcome::NewNodeClaim { node_claim, .. },
                ..
            }) = record.pods.get_mut(&pod.to_string())
            {
                *node_claim = Some(name.to_owned());
            }
        }
        let priced = |i: usize| {
            claim.instance_type_options.get(i).map(|o| PricedType {
                instance_type: o.name.to_string(),
                price: o.price,
            })
        };
        let launch = LaunchAnswer {
            node_claim: name.to_owned(),
            node_pool: claim.node_pool.clone(),
            batch: record.batch_at.map(rfc3339).unwrap_or_default(),
            pods: claim
                .pods
                .iter()
                .take(MAX_LAUNCH_PODS)
                .map(ToString::to_string)
                .collect(),
            pod_count: claim.pods.len(),
            instance_types: claim.instance_type_options.len(),
            cheapest: priced(0),
            next_cheapest: priced(1),
            launched_as: None,
        };
        if record.launches.insert(name.to_owned(), launch).is_none() {
            record.launch_order.push_back(name.to_owned());
        }
        while record.launch_order.len() > MAX_LAUNCHES {
            if let Some(oldest) = record.launch_order.pop_front() {
                record.launches.remove(&oldest);
            }
        }
    }

    /// NodeClaim `name` was launched as `instance_type`.
    pub fn node_claim_launched(&self, name: &str, instance_type: &str) {
        if let Some(launch) = self.lock().launches.get_mut(name) {
            launch.launched_as = Some(instance_type.to_owned());
        }
    }

    /// NodeClaim `name` terminated: why it was launched is forgotten.
    pub fn node_claim_terminated(&self, name: &str) {
        let mut record = self.lock();
        if record.launches.remove(name).is_some() {
            record.launch_order.retain(|n| n != name);
        }
    }

    /// Why node `name` (or NodeClaim `name`) was launched, if this controller launched it.
    fn launch_of(record: &Record, name: &str) -> Option<LaunchAnswer> {
        if let Some(launch) = record.launches.get(name) {
            return Some(launch.clone());
        }
        let (_, snapshot) = record.snapshot.as_ref()?;
        let claim = snapshot
            .nodes
            .iter()
            .find(|n| n.name == name)?
            .node_claim
            .as_deref()?;
        record.launches.get(claim).cloned()
    }

    /// What the last batch decided for pod `key` (`namespace/name`).
    pub fn pod(&self, key: &str) -> Result<PodAnswer, NotKnown> {
        self.lock()
            .pods
            .get(key)
            .cloned()
            .ok_or_else(|| NotKnown::PodNotInBatch(key.to_owned()))
    }

    /// What the last disruption pass decided for node `name`.
    pub fn node(&self, name: &str) -> Result<NodeAnswer, NotKnown> {
        let record = self.lock();
        let (at, decision) = record
            .disruption
            .as_ref()
            .ok_or(NotKnown::NoDisruptionPass)?;
        let verdict = if let Some(command) = decision
            .commands
            .iter()
            .find(|c| c.candidates.iter().any(|n| n.node == name))
        {
            NodeVerdict::Disrupting {
                command: command_answer(command),
            }
        } else if let Some(reasons) = decision.reasons_for(name) {
            NodeVerdict::Kept {
                reasons: reason_answers(reasons),
            }
        } else {
            NodeVerdict::NotConsidered
        };
        Ok(NodeAnswer {
            node: name.to_owned(),
            decided_at: rfc3339(*at),
            verdict,
            launch: Self::launch_of(&record, name),
        })
    }

    /// The last disruption pass, whole.
    pub fn disruption(&self) -> Result<DisruptionAnswer, NotKnown> {
        let record = self.lock();
        let (at, decision) = record
            .disruption
            .as_ref()
            .ok_or(NotKnown::NoDisruptionPass)?;
        Ok(DisruptionAnswer {
            decided_at: rfc3339(*at),
            commands: decision.commands.iter().map(command_answer).collect(),
            kept: decision
                .considered
                .iter()
                .map(|c| KeptNode {
                    node: c.node.clone(),
                    reasons: reason_answers(&c.reason),
                })
                .collect(),
        })
    }
}

fn answer(pod: String, decided_at: DateTime<Utc>, outcome: PodOutcome) -> PodAnswer {
    PodAnswer {
        pod,
        decided_at: rfc3339(decided_at),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use karpenter_disruption::{
        Code, Command, CommandCandidate, Considered, Method, Reason, Reasons, RepairCommand,
    };
    use karpenter_scheduling::{
        ExistingPlacement, InstanceTypeOption, NewNodeClaim, PodRef, ResourceList, Unschedulable,
    };

    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-27T10:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "shop".into(),
            name: name.into(),
            uid: name.into(),
        }
    }

    fn claim(pods: &[&str]) -> NewNodeClaim {
        NewNodeClaim {
            node_pool: "general".into(),
            requirements: Vec::new(),
            instance_type_min_values: None,
            instance_type_options: vec![
                InstanceTypeOption {
                    name: "c5.large".into(),
                    price: 0.085,
                },
                InstanceTypeOption {
                    name: "m5.large".into(),
                    price: 0.096,
                },
            ],
            requests: ResourceList::new(),
            pods: pods.iter().map(|p| pod(p)).collect(),
            min_values_relaxed: false,
            labels: Default::default(),
        }
    }

    fn batch() -> SolveResult {
        SolveResult {
            new_node_claims: vec![claim(&["web-1", "web-2"])],
            existing_placements: vec![ExistingPlacement {
                pod: pod("api"),
                node: "node-a".into(),
            }],
            unschedulable: vec![Unschedulable {
                pod: pod("huge"),
                reason: "no instance type has enough resources".into(),
                reasons: vec![(
                    "nodepool general".into(),
                    "no instance type has enough resources".into(),
                )],
                deferred: false,
            }],
            ..SolveResult::default()
        }
    }

    #[test]
    fn a_pod_deferred_for_a_reservation_is_told_it_waits_not_that_it_fits_nowhere() {
        let explanations = Explanations::default();
        let mut result = batch();
        result.unschedulable[0].deferred = true;
        result.unschedulable[0].reasons = vec![(
            "nodepool general".into(),
            "compatible reserved offerings have capacity, but this solve has already promised it"
                .into(),
        )];
        explanations.batch_decided(at(), &result, &[], &[]);
        match explanations.pod("shop/huge").map(|a| a.outcome) {
            Ok(PodOutcome::WaitingForReservation { reasons }) => {
                assert_eq!(reasons.len(), 1);
                assert!(reasons[0].reason.contains("already promised"));
            }
            other => panic!("huge waits for a reservation slot, not {other:?}"),
        }
    }

    #[test]
    fn each_pod_of_the_batch_is_told_where_it_goes_or_why_nowhere() {
        let explanations = Explanations::default();
        explanations.batch_decided(
            at(),
            &batch(),
            &[("gpu".into(), "NodeClassReady=False".into())],
            &[("shop/dra".into(), "DRA requirements")],
        );
        explanations.node_claim_created("general-abcde", &batch().new_node_claims[0]);
        let web = explanations
            .pod("shop/web-1")
            .expect("web-1 was in the batch");
        assert_eq!(web.decided_at, "2026-11-27T10:00:00Z");
        match web.outcome {
            PodOutcome::NewNodeClaim {
                node_claim,
                launch,
                pods,
                ..
            } => {
                assert_eq!(node_claim.as_deref(), Some("general-abcde"));
                assert_eq!(pods, 2);
                assert_eq!(launch.instance_types, 2);
                assert_eq!(
                    launch.cheapest.map(|c| c.instance_type).as_deref(),
                    Some("c5.large")
                );
            }
            other => panic!("web-1 goes to a new NodeClaim, not {other:?}"),
        }
        assert_eq!(
            explanations.pod("shop/api").map(|a| a.outcome),
            Ok(PodOutcome::ExistingNode {
                node: "node-a".into()
            })
        );
        let places = |key: &str| match explanations.pod(key).map(|a| a.outcome) {
            Ok(PodOutcome::Unschedulable { reasons }) => reasons
                .into_iter()
                .map(|r| format!("{}: {}", r.place, r.reason))
                .collect::<Vec<_>>(),
            other => panic!("{key} is unschedulable, not {other:?}"),
        };
        assert_eq!(
            places("shop/huge"),
            [
                "nodepool general: no instance type has enough resources",
                "nodepool gpu: NodeClassReady=False"
            ]
        );
        assert_eq!(places("shop/dra"), ["validation: DRA requirements"]);
        // The next batch replaces this one: a pod not in it is not known any more.
        explanations.batch_decided(at(), &SolveResult::default(), &[], &[]);
        assert_eq!(
            explanations.pod("shop/web-1"),
            Err(NotKnown::PodNotInBatch("shop/web-1".into()))
        );
    }

    #[test]
    fn a_pod_too_large_for_every_type_of_a_pool_is_told_the_closest_and_what_it_lacks() {
        let explanations = Explanations::default();
        let mut result = batch();
        result.unschedulable[0].reasons = vec![
            (
                "nodepool general".into(),
                "no instance type satisfies cpu=96".into(),
            ),
            ("nodepool gpu".into(), "incompatible with taints".into()),
        ];
        explanations.batch_decided(at(), &result, &[], &[]);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "huge", "namespace": "shop", "uid": "huge"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "96"}}}]}
        }))
        .expect("a pod");
        let mut capacity = ResourceList::new();
        capacity.set(
            "cpu",
            karpenter_scheduling::Quantity::parse("64").unwrap_or_default(),
        );
        capacity.set(
            "pods",
            karpenter_scheduling::Quantity::parse("234").unwrap_or_default(),
        );
        let largest = karpenter_scheduling::InstanceType {
            name: "m5.16xlarge".into(),
            requirements: Vec::new(),
            offerings: Vec::new(),
            capacity,
            overhead: Default::default(),
        };
        let types: PoolInstanceTypes = Arc::new(
            [("general".to_owned(), vec![largest])]
                .into_iter()
                .collect(),
        );
        explanations.closest_types(&[Arc::new(PodRecord::from(pod))], &types);
        match explanations.pod("shop/huge").map(|a| a.outcome) {
            Ok(PodOutcome::Unschedulable { reasons }) => {
                assert_eq!(
                    reasons[0].closest.as_deref(),
                    Some("m5.16xlarge: needs 96 cpu, has 64 allocatable")
                );
                assert_eq!(reasons[1].closest, None, "not a resource shortfall");
            }
            other => panic!("huge fits nowhere, not {other:?}"),
        }
    }

    #[test]
    fn pods_are_told_the_offerings_marked_unavailable_and_when_they_come_back() {
        use karpenter_cloud::{CapacityType, OfferingRef};
        let explanations = Explanations::default();
        explanations.batch_decided(at(), &batch(), &[], &[]);
        let offering = |price: f64| karpenter_scheduling::Offering {
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
            price,
            available: false,
            requirements: Vec::new(),
            reservation_capacity: 0,
        };
        let instance_type =
            |name: &str, cpu: &str, price: f64| karpenter_scheduling::InstanceType {
                name: name.into(),
                requirements: Vec::new(),
                offerings: vec![offering(price)],
                capacity: ResourceList::new()
                    .with(
                        "cpu",
                        karpenter_scheduling::Quantity::parse(cpu).unwrap_or_default(),
                    )
                    .with(
                        "pods",
                        karpenter_scheduling::Quantity::parse("110").unwrap_or_default(),
                    ),
                overhead: Default::default(),
            };
        let types: PoolInstanceTypes = Arc::new(
            [(
                "general".to_owned(),
                vec![
                    instance_type("t3.large", "2", 0.083),
                    instance_type("m5.24xlarge", "96", 4.608),
                ],
            )]
            .into_iter()
            .collect(),
        );
        let mark = |name: &str| {
            (
                OfferingRef {
                    instance_type: name.into(),
                    zone: "us-east-1a".into(),
                    capacity_type: CapacityType::OnDemand,
                },
                std::time::Duration::from_secs(100),
            )
        };
        let huge: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "huge", "namespace": "shop", "uid": "huge"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "64"}}}]}
        }))
        .expect("a pod");
        explanations.unavailable_offerings(
            at(),
            &[mark("t3.large"), mark("m5.24xlarge")],
            &batch(),
            &[Arc::new(PodRecord::from(huge))],
            &types,
        );
        match explanations.pod("shop/huge").map(|a| a.outcome) {
            Ok(PodOutcome::Unschedulable { reasons }) => {
                let told: Vec<(&str, &str)> = reasons[0]
                    .unavailable
                    .iter()
                    .map(|u| (u.instance_type.as_str(), u.until.as_str()))
                    .collect();
                assert_eq!(told, [("m5.24xlarge", "2026-11-27T10:01:40Z")]);
            }
            other => panic!("huge fits nowhere, not {other:?}"),
        }
        match explanations.pod("shop/web-1").map(|a| a.outcome) {
            Ok(PodOutcome::NewNodeClaim { unavailable, .. }) => {
                let told: Vec<&str> = unavailable
                    .iter()
                    .map(|u| u.instance_type.as_str())
                    .collect();
                assert_eq!(told, ["t3.large"], "cheaper than c5.large at $0.085");
            }
            other => panic!("web-1 goes to a new NodeClaim, not {other:?}"),
        }
    }

    #[test]
    fn a_node_is_told_why_it_was_launched_until_its_nodeclaim_terminates() {
        let explanations = Explanations::default();
        explanations.batch_decided(at(), &batch(), &[], &[]);
        explanations.node_claim_created("general-abcde", &batch().new_node_claims[0]);
        explanations.node_claim_launched("general-abcde", "c5.large");
        explanations.disruption_decided(at(), &decision());
        let launch = explanations
            .node("general-abcde")
            .expect("a pass ran")
            .launch
            .expect("this controller launched it");
        assert_eq!(launch.batch, "2026-11-27T10:00:00Z");
        assert_eq!(launch.node_pool, "general");
        assert_eq!(launch.pods, ["shop/web-1", "shop/web-2"]);
        assert_eq!(launch.pod_count, 2);
        assert_eq!(launch.instance_types, 2);
        let name = |p: Option<PricedType>| p.map(|p| (p.instance_type, p.price));
        assert_eq!(name(launch.cheapest), Some(("c5.large".into(), 0.085)));
        assert_eq!(name(launch.next_cheapest), Some(("m5.large".into(), 0.096)));
        assert_eq!(launch.launched_as.as_deref(), Some("c5.large"));
        explanations.node_claim_terminated("general-abcde");
        assert_eq!(
            explanations.node("general-abcde").map(|a| a.launch),
            Ok(None),
            "forgotten once terminated"
        );
    }

    #[test]
    fn launches_are_remembered_up_to_a_cap_the_oldest_dropped_first() {
        let explanations = Explanations::default();
        explanations.batch_decided(at(), &batch(), &[], &[]);
        explanations.disruption_decided(at(), &decision());
        let claim = claim(&["web"]);
        for i in 0..=MAX_LAUNCHES {
            explanations.node_claim_created(&format!("c-{i}"), &claim);
        }
        let known = |name: &str| {
            explanations
                .node(name)
                .ok()
                .and_then(|a| a.launch)
                .is_some()
        };
        assert!(!known("c-0"), "the oldest is dropped past the cap");
        assert!(known("c-1"));
        assert!(known(&format!("c-{MAX_LAUNCHES}")));
        assert_eq!(explanations.lock().launches.len(), MAX_LAUNCHES);
        assert_eq!(explanations.lock().launch_order.len(), MAX_LAUNCHES);
    }

    fn decision() -> Decision {
        Decision {
            commands: vec![Command {
                method: Method::Repair,
                reason: Method::Repair.reason(),
                candidates: vec![CommandCandidate {
                    node: "broken".into(),
                    node_claim: "broken".into(),
                    node_pool: "general".into(),
                    instance_type: "m5.large".into(),
                    capacity_type: "on-demand".into(),
                    zone: "us-east-1a".into(),
                    price: 0.096,
                    pods: 3,
                }],
                replacements: vec![claim(&[])],
                savings_per_hour: 0.0,
                explanation: "repairing node broken".into(),
                balanced: Vec::new(),
                repair: Some(RepairCommand {
                    condition: "Ready".into(),
                    status: "False".into(),
                    reason: "KubeletNotReady".into(),
                    reboot: false,
                    termination_grace_period: None,
                }),
                terminate_first: None,
            }],
            considered: vec![Considered {
                node: "busy".into(),
                reason: Reasons::new(vec![Reason::new(
                    Code::PodDoNotDisrupt,
                    "pod shop/db has karpenter.sh/do-not-disrupt",
                )]),
            }],
            ..Decision::default()
        }
    }

    #[test]
    fn a_node_is_told_the_command_that_disrupts_it_or_the_reasons_it_stays() {
        let explanations = Explanations::default();
        assert_eq!(
            explanations.node("busy"),
            Err(NotKnown::NoDisruptionPass),
            "nothing is known before the first pass"
        );
        explanations.disruption_decided(at(), &decision());
        match explanations.node("broken").map(|a| a.verdict) {
            Ok(NodeVerdict::Disrupting { command }) => {
                assert_eq!(command.method, "Repair");
                assert_eq!(command.reason, "Unhealthy");
                assert_eq!(
                    command.repair.as_deref(),
                    Some("Ready=False (KubeletNotReady)")
                );
                assert_eq!(command.replacements.len(), 1);
            }
            other => panic!("broken is being repaired, not {other:?}"),
        }
        match explanations.node("busy").map(|a| a.verdict) {
            Ok(NodeVerdict::Kept { reasons }) => {
                assert_eq!(reasons.len(), 1);
                assert_eq!(reasons[0].code, "PodDoNotDisrupt");
                assert!(reasons[0].text.contains("shop/db"), "{reasons:?}");
            }
            other => panic!("busy stays, not {other:?}"),
        }
        assert_eq!(
            explanations.node("elsewhere").map(|a| a.verdict),
            Ok(NodeVerdict::NotConsidered)
        );
        let whole = explanations.disruption().expect("a pass ran");
        assert_eq!(whole.commands.len(), 1);
        assert_eq!(whole.kept.len(), 1);
        assert_eq!(whole.kept[0].node, "busy");
    }
}
