//! The timeline runner: the virtual clock, the event loop, pending pods and the report; the
//! nodes live in [`super::cluster`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use karpenter_cloud::Catalog;
use karpenter_disruption::{Command, PASS_INTERVAL, Queue, Replacement, Step};
use karpenter_lifecycle::Batcher;
use karpenter_lifecycle::batcher::{DEFAULT_IDLE, DEFAULT_MAX, nomination_window};
use karpenter_scheduling::pod_record;
use serde::Serialize;

use super::cluster::SimCluster;
use super::events::{Action, Timeline};
use crate::batches::launch_claim;
use crate::error::TimelineError;
use crate::load::Manifests;
use crate::nodepool::name_of;
use crate::resources::round_price;
use crate::scenario::Scenario;

/// From launch to Ready (a typical EC2 boot and kubelet registration).
pub const NODE_STARTUP: Duration = Duration::from_secs(60);

/// The provisioning batch window: the controller's [`Batcher`] with upstream's default
/// durations, on the virtual clock. Every cause of a batch (pods an event made pending, a
/// command handed over, ...) is a trigger of its own, so each one extends an open window.
#[derive(Debug)]
struct BatchWindow {
    batcher: Batcher<Duration>,
    triggers: u64,
}

impl BatchWindow {
    fn new() -> Self {
        BatchWindow {
            batcher: Batcher::new(DEFAULT_IDLE, DEFAULT_MAX),
            triggers: 0,
        }
    }

    fn trigger(&mut self, now: Duration) {
        self.triggers += 1;
        self.batcher.trigger(&self.triggers.to_string(), now);
    }

    fn is_open(&self) -> bool {
        self.batcher.is_open()
    }
}

/// The cluster at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub at_seconds: u64,
    pub nodes: usize,
    pub pods_running: usize,
    pub pods_pending: usize,
    pub cost_per_hour: f64,
    /// Requests over allocatable across all nodes, 0..1.
    pub cpu_utilisation: f64,
}

/// Pending-time percentiles, in seconds (nearest rank).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            if sorted.is_empty() {
                return 0.0;
            }
            let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        Percentiles {
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// What happened over the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineReport {
    pub duration_seconds: u64,
    /// USD over the whole timeline.
    pub total_cost: f64,
    pub average_cost_per_hour: f64,
    pub peak_cost_per_hour: f64,
    pub peak_nodes: usize,
    pub launches: usize,
    pub interruptions: usize,
    /// Nodes removed by disruption (emptiness, drift, consolidation).
    pub disruptions: usize,
    /// Pods displaced from their node by interruptions and disruption.
    pub evictions: usize,
    /// Pods that went from pending to running.
    pub pods_started: usize,
    pub pods_still_pending: usize,
    pub pending_seconds: Percentiles,
    /// One sample per change of the cluster.
    pub samples: Vec<Sample>,
    /// `HH:MM:SS what happened`.
    pub log: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
struct PendingPod {
    pod: Pod,
    since: Duration,
}

/// The simulated cluster and its clock.
#[derive(Debug)]
pub struct Runner<'a> {
    catalog: &'a Catalog,
    manifests: Manifests,
    scenario: Scenario,
    now: Duration,
    /// Nodes, NodeClaims and bound pods, in the cluster-state index.
    cluster: SimCluster,
    pending: Vec<PendingPod>,
    replicas: BTreeMap<(String, String), usize>,
    next_node: usize,
    next_disruption: Duration,
    /// Last time the cluster changed (disruption passes run for a while after each change).
    changed_at: Duration,
    /// Changes of the cluster so far (launches, bindings, removals, NodePool changes).
    changes: u64,
    /// `changes` when the last batch was solved: pods it left pending are retried in a new
    /// batch once the cluster has changed since (its own launches included), as the
    /// controller retries them; solving an unchanged cluster again would decide the same.
    solved_at_change: Option<u64>,
    disruptions: usize,
    cost: f64,
    pending_times: Vec<f64>,
    launches: usize,
    interruptions: usize,
    evictions: usize,
    samples: Vec<Sample>,
    log: Vec<String>,
    notes: Vec<String>,
    /// Upstream's orchestration queue, the same step machine the controller drives.
    queue: Queue,
    /// When each replacement launched by a command is (or would have been) ready: the
    /// timeline learns a replacement's fate at that moment.
    replacement_ready_at: BTreeMap<String, Duration>,
}

/// Refuses a timeline whose scale events would, together, run more pods at once than
/// simulate's ceiling ([`crate::limits::MAX_PODS`]): each event is checked alone when the
/// file is parsed, the sum over workloads here, naming the first event that crosses it.
pub fn check_total_pods(
    workloads: &[crate::Workload],
    timeline: &Timeline,
) -> Result<(), TimelineError> {
    let mut replicas: BTreeMap<(String, String), usize> = workloads
        .iter()
        .map(|w| ((w.reference(), w.namespace().to_owned()), w.replicas()))
        .collect();
    for (index, event) in timeline.events.iter().enumerate() {
        let Action::Scale {
            workload,
            namespace,
            replicas: to,
        } = &event.action
        else {
            continue;
        };
        if let Some(count) = replicas.get_mut(&(workload.clone(), namespace.clone())) {
            *count = *to;
        }
        let total = replicas.values().fold(0usize, |a, b| a.saturating_add(*b));
        if total > crate::limits::MAX_PODS {
            return Err(TimelineError::Event {
                file: "timeline".to_string(),
                index,
                message: format!(
                    "scale {workload} to {to}: the workloads would run {total} pods together, more than simulate's ceiling of {} pods",
                    crate::limits::MAX_PODS
                ),
            });
        }
    }
    Ok(())
}

/// Runs a timeline over the manifests.
pub fn run(
    manifests: &Manifests,
    catalog: &Catalog,
    scenario: Scenario,
    timeline: &Timeline,
    mut progress: impl FnMut(Duration, Duration),
) -> Result<TimelineReport, TimelineError> {
    check_total_pods(&scenario.workloads, timeline)?;
    let mut runner = Runner::new(manifests, catalog, scenario);
    let mut events = timeline.events.iter().peekable();
    let mut batch = BatchWindow::new();
    if !runner.pending.is_empty() {
        batch.trigger(Duration::ZERO);
    }
    loop {
        let next_event = events.peek().map(|e| e.at);
        let batch_close = batch.batcher.deadline();
        let tick = runner.next_tick();
        let handover = runner.next_handover();
        let validation = runner.next_validation();
        let next = match [next_event, batch_close, tick, handover, validation]
            .into_iter()
            .flatten()
            .min()
        {
            Some(next) => next,
            None => break,
        };
        if next > timeline.duration {
            break;
        }
        runner.advance(next);
        progress(next, timeline.duration);
        // The batch closes now when its deadline is now (`next` is never past it).
        let closes = batch.batcher.poll(next);
        let mut opened_pending = false;
        while let Some(event) = events.next_if(|e| e.at == next) {
            opened_pending |= runner.apply(&event.action)?;
        }
        // Pods made pending at the moment the batch closes are provisioned with it.
        if opened_pending && !closes {
            batch.trigger(next);
        }
        if closes {
            runner.provision();
        }
        if handover == Some(next) && runner.finish_orchestrations() && !batch.is_open() {
            batch.trigger(next);
        }
        if validation == Some(next) && runner.validate_commands() && !batch.is_open() {
            batch.trigger(next);
        }
        if tick == Some(next) && runner.disruption_pass() && !batch.is_open() {
            batch.trigger(next);
        }
        if !batch.is_open() && runner.retry_due() {
            batch.trigger(next);
        }
        runner.skip_ticks();
    }
    runner.advance(timeline.duration);
    progress(timeline.duration, timeline.duration);
    Ok(runner.report(timeline.duration))
}

fn clock(at: Duration) -> String {
    let s = at.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The names of a command's candidate nodes.
fn candidate_names(command: &Command) -> BTreeSet<String> {
    command.candidates.iter().map(|c| c.node.clone()).collect()
}

/// The virtual time of a queue timestamp (the inverse of [`super::disruption::instant`]).
fn virtual_time(at: chrono::DateTime<chrono::Utc>) -> Duration {
    (at - super::disruption::instant(Duration::ZERO))
        .to_std()
        .unwrap_or_default()
}

/// `a, b, c`.
fn join(names: &BTreeSet<String>) -> String {
    names
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl<'a> Runner<'a> {
    fn new(manifests: &Manifests, catalog: &'a Catalog, scenario: Scenario) -> Self {
        let pending = scenario
            .pending
            .iter()
            .map(|pod| PendingPod {
                pod: pod.clone(),
                since: Duration::ZERO,
            })
            .collect();
        let replicas = scenario
            .workloads
            .iter()
            .map(|w| ((w.namespace().to_string(), w.reference()), w.replicas()))
            .collect();
        let mut cluster = SimCluster::new();
        for existing in &scenario.existing_nodes {
            let manifest = manifests
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(existing.name.as_str()));
            if let Some(node) = manifest {
                cluster.add_existing(
                    node,
                    existing.pods.iter().map(|p| Pod::from(&**p)).collect(),
                );
            }
        }
        let mut notes = scenario.notes.clone();
        notes.push(super::disruption::NOTE.to_string());
        Runner {
            catalog,
            manifests: manifests.clone(),
            scenario,
            now: Duration::ZERO,
            cluster,
            pending,
            replicas,
            next_node: 0,
            next_disruption: PASS_INTERVAL,
            queue: Queue::new(),
            replacement_ready_at: BTreeMap::new(),
            changed_at: Duration::ZERO,
            changes: 0,
            solved_at_change: None,
            disruptions: 0,
            cost: 0.0,
            pending_times: Vec::new(),
            launches: 0,
            interruptions: 0,
            evictions: 0,
            samples: Vec::new(),
            log: Vec::new(),
            notes,
        }
    }

    /// Notes a change of the cluster now.
    fn changed(&mut self) {
        self.changed_at = self.now;
        self.changes += 1;
    }

    /// Pods are pending and the cluster changed since they were last solved: the controller
    /// would place them in its next batch.
    fn retry_due(&self) -> bool {
        !self.pending.is_empty() && self.solved_at_change != Some(self.changes)
    }

    fn cost_per_hour(&self) -> f64 {
        self.cluster.cost_per_hour()
    }

    /// Moves the clock to `to`, accruing cost; the nodes whose startup is over by then boot.
    fn advance(&mut self, to: Duration) {
        self.accrue(to);
        self.cluster.boot(self.now);
    }

    /// The next disruption tick, while one may find something: passes run every
    /// [`PASS_INTERVAL`] until [`super::disruption::QUIET_AFTER`] plus the longest
    /// `consolidateAfter` has passed since the last change of the cluster.
    fn next_tick(&self) -> Option<Duration> {
        let window = super::disruption::QUIET_AFTER + self.longest_consolidate_after();
        (self.next_disruption <= self.changed_at + window).then_some(self.next_disruption)
    }

    fn longest_consolidate_after(&self) -> Duration {
        self.scenario
            .node_pools
            .iter()
            .filter_map(|p| p.spec.disruption.consolidate_after.duration())
            .max()
            .unwrap_or_default()
    }

    fn skip_ticks(&mut self) {
        while self.next_disruption <= self.now {
            self.next_disruption += PASS_INTERVAL;
        }
    }

    fn accrue(&mut self, to: Duration) {
        if to > self.now {
            let hours = (to - self.now).as_secs_f64() / 3600.0;
            self.cost += self.cost_per_hour() * hours;
            self.now = to;
        }
    }

    /// One disruption pass (the timeline's `disruption` module); true when pods became pending.
    ///
    /// Commands go through the orchestration queue ([`karpenter_disruption::Queue`]) as the
    /// controller's do: graceful ones (emptiness, consolidation) are held for
    /// [`karpenter_disruption::queue::VALIDATION_DELAY`] and validated again
    /// ([`Self::validate_commands`]); drift starts at once. Starting a command taints its
    /// candidates (no pod lands on them any more) and launches the replacements; the
    /// candidates are deleted, their pods evicted and pending again, once every replacement is
    /// ready ([`Self::finish_orchestrations`]). A delete without replacements happens at once.
    pub fn disruption_pass(&mut self) -> bool {
        if !self.queue.may_decide() {
            return false;
        }
        let snapshot = self.disruption_snapshot();
        let now = super::disruption::instant(self.now);
        let decision = karpenter_disruption::decide(&snapshot, now);
        let mut evicted = false;
        for command in decision.commands {
            let step = self.queue.submit(command, now);
            evicted |= self.execute(step);
        }
        evicted
    }

    fn disruption_snapshot(&self) -> karpenter_disruption::Snapshot {
        super::disruption::snapshot(
            &self.scenario,
            self.cluster.node_states(self.now, &self.queue.held_nodes()),
            self.pending.iter().map(|p| p.pod.clone()).collect(),
        )
    }

    /// When the next command waiting for validation is due.
    fn next_validation(&self) -> Option<Duration> {
        self.queue.next_validation().map(virtual_time)
    }

    /// Validates the commands that are due against the cluster as it is now, and starts the
    /// ones that still hold; true when pods became pending.
    pub fn validate_commands(&mut self) -> bool {
        let now = super::disruption::instant(self.now);
        let mut evicted = false;
        let due = self.queue.take_due(now);
        if due.is_empty() {
            return false;
        }
        let snapshot = self.disruption_snapshot();
        for step in self.queue.validate(due, &snapshot, now) {
            evicted |= self.execute(step);
        }
        evicted
    }

    /// Performs one step of the orchestration queue; true when pods became pending.
    fn execute(&mut self, step: Step) -> bool {
        match step {
            Step::Hold { .. } => false,
            Step::Start { id, command } => {
                self.start(id, command);
                false
            }
            Step::Delete { command } => {
                self.cluster
                    .mark_for_deletion(&candidate_names(&command), true);
                self.changed();
                self.delete_candidates(&command)
            }
            Step::Abandon { command, reason } => {
                self.cluster
                    .mark_for_deletion(&candidate_names(&command), false);
                self.changed();
                self.say(format!(
                    "disruption: {} on {} abandoned: {reason}",
                    command.method.as_str(),
                    join(&candidate_names(&command)),
                ));
                false
            }
            Step::Drop { command, rejection } => {
                self.say(format!(
                    "disruption: {} on {} dropped at validation: {rejection}",
                    command.method.as_str(),
                    command.candidate_names().join(", ")
                ));
                false
            }
        }
    }

    /// Starts a command: taints the candidates and launches the replacements, reported back
    /// to the queue.
    fn start(&mut self, id: karpenter_disruption::CommandId, command: Command) {
        let candidates = candidate_names(&command);
        self.cluster.mark_for_deletion(&candidates, true);
        let mut launched = Vec::new();
        let mut replacements = Vec::new();
        for claim in &command.replacements {
            if let Some((text, name)) = self.launch(claim, Vec::new()) {
                launched.push(text);
                if let Some(ready_at) = self.cluster.ready_at(&name) {
                    self.replacement_ready_at.insert(name.clone(), ready_at);
                }
                replacements.push(name);
            }
        }
        self.queue.launched(id, replacements);
        self.changed();
        self.say(format!(
            "disruption: {} started on {}: launched {}; candidates tainted until the replacements are ready ({})",
            command.method.as_str(),
            join(&candidates),
            launched.join(", "),
            command.explanation
        ));
        self.sample();
    }

    /// When the next command in progress can hand over to its replacements: when its last
    /// replacement is (or would have been) ready.
    fn next_handover(&self) -> Option<Duration> {
        self.queue
            .in_flight()
            .iter()
            .map(|flight| {
                flight
                    .replacements
                    .iter()
                    .filter_map(|r| self.replacement_ready_at.get(r).copied())
                    .max()
                    .unwrap_or_else(|| virtual_time(flight.started))
            })
            .min()
    }

    /// Completes the commands whose replacements are ready; true when pods became pending.
    /// A command whose replacement went away meanwhile (a spot interruption) is abandoned and
    /// its candidates untainted, as upstream does when a replacement fails to initialize.
    pub fn finish_orchestrations(&mut self) -> bool {
        let now = self.now;
        let cluster = &self.cluster;
        let ready_at = &self.replacement_ready_at;
        let steps = self.queue.poll(super::disruption::instant(now), |name| {
            match ready_at.get(name) {
                Some(at) if *at > now => Replacement::Pending,
                _ if cluster.contains(name) => Replacement::Ready,
                _ => Replacement::Gone,
            }
        });
        let mut evicted = false;
        for step in steps {
            evicted |= self.execute(step);
        }
        let in_flight: BTreeSet<&String> = self
            .queue
            .in_flight()
            .iter()
            .flat_map(|f| f.replacements.iter())
            .collect();
        self.replacement_ready_at
            .retain(|name, _| in_flight.contains(name));
        evicted
    }

    /// Deletes a command's candidates: their pods are evicted and pending again.
    fn delete_candidates(&mut self, command: &Command) -> bool {
        let now = self.now;
        let candidates = candidate_names(command);
        let removed: Vec<_> = self
            .cluster
            .launch_order()
            .into_iter()
            .filter(|name| candidates.contains(name))
            .filter_map(|name| self.cluster.remove_node(&name))
            .collect();
        let mut moved = 0;
        for node in removed.iter() {
            moved += node.pods.len();
            self.pending.extend(node.pods.iter().map(|pod| PendingPod {
                pod: pod.clone(),
                since: now,
            }));
        }
        self.disruptions += removed.len();
        self.evictions += moved;
        self.changed();
        let names: Vec<&str> = removed.iter().map(|n| n.name.as_str()).collect();
        self.say(format!(
            "disruption: {} removed {}; {moved} pod(s) rescheduled ({})",
            command.method.as_str(),
            names.join(", "),
            command.explanation
        ));
        self.sample();
        moved > 0
    }

    fn say(&mut self, message: String) {
        self.log.push(format!("{} {message}", clock(self.now)));
    }

    fn sample(&mut self) {
        let (used, total) = self.cluster.cpu();
        self.samples.push(Sample {
            at_seconds: self.now.as_secs(),
            nodes: self.cluster.len(),
            pods_running: self.cluster.pods_running(),
            pods_pending: self.pending.len(),
            cost_per_hour: round_price(self.cost_per_hour()),
            cpu_utilisation: if total > 0 {
                ((used as f64 / total as f64) * 1000.0).round() / 1000.0
            } else {
                0.0
            },
        });
    }

    /// Applies an event; true when pods became pending.
    fn apply(&mut self, action: &Action) -> Result<bool, TimelineError> {
        let before = self.pending.len();
        match action {
            Action::Scale {
                workload,
                namespace,
                replicas,
            } => self.scale(workload, namespace, *replicas),
            Action::DeletePods {
                workload,
                namespace,
                count,
            } => self.delete_pods(workload, namespace, *count),
            Action::InterruptSpot { node, zone } => {
                self.interrupt(node.as_deref(), zone.as_deref())
            }
            Action::NodePool(pool) => self.change_nodepool(pool)?,
        }
        self.sample();
        Ok(self.pending.len() > before)
    }

    fn find_workload(&self, reference: &str, namespace: &str) -> Option<crate::Workload> {
        self.scenario
            .workloads
            .iter()
            .find(|w| w.reference() == reference && w.namespace() == namespace)
            .cloned()
    }

    fn present(&self) -> BTreeSet<String> {
        self.pending
            .iter()
            .map(|p| pod_record::key(&p.pod.metadata))
            .chain(self.cluster.pod_keys())
            .collect()
    }

    fn scale(&mut self, reference: &str, namespace: &str, replicas: usize) {
        let Some(workload) = self.find_workload(reference, namespace) else {
            self.say(format!(
                "scale {namespace}/{reference}: no such workload, ignored"
            ));
            return;
        };
        let key = (namespace.to_string(), reference.to_string());
        let current = self.replicas.get(&key).copied().unwrap_or(0);
        let expansion = workload.with_replicas(replicas.max(current)).expand();
        if replicas > current {
            let present = self.present();
            let claims: BTreeSet<String> = self
                .scenario
                .persistent_volume_claims
                .iter()
                .map(|c| format!("{:?}/{:?}", c.metadata.namespace, c.metadata.name))
                .collect();
            for claim in expansion.persistent_volume_claims {
                let id = format!("{:?}/{:?}", claim.metadata.namespace, claim.metadata.name);
                if !claims.contains(&id) {
                    self.scenario.persistent_volume_claims.push(claim);
                }
            }
            let now = self.now;
            self.pending.extend(
                expansion
                    .pods
                    .into_iter()
                    .filter(|p| !present.contains(&pod_record::key(&p.metadata)))
                    .map(|pod| PendingPod { pod, since: now }),
            );
        } else {
            let remove: BTreeSet<String> = expansion
                .pods
                .iter()
                .skip(replicas)
                .map(|p| pod_record::key(&p.metadata))
                .collect();
            self.remove_pods(&remove);
        }
        self.replicas.insert(key, replicas);
        self.say(format!(
            "scale {namespace}/{reference}: {current} -> {replicas} replicas"
        ));
    }

    fn delete_pods(&mut self, reference: &str, namespace: &str, count: Option<usize>) {
        let Some(workload) = self.find_workload(reference, namespace) else {
            self.say(format!(
                "delete pods of {namespace}/{reference}: no such workload, ignored"
            ));
            return;
        };
        let key = (namespace.to_string(), reference.to_string());
        let current = self.replicas.get(&key).copied().unwrap_or(0);
        let present = self.present();
        let names: Vec<String> = workload
            .with_replicas(current)
            .expand()
            .pods
            .iter()
            .rev()
            .map(|p| pod_record::key(&p.metadata))
            .filter(|k| present.contains(k))
            .take(count.unwrap_or(usize::MAX))
            .collect();
        let removed = names.len();
        self.remove_pods(&names.into_iter().collect());
        self.say(format!(
            "deleted {removed} pod(s) of {namespace}/{reference}"
        ));
    }

    fn remove_pods(&mut self, keys: &BTreeSet<String>) {
        self.pending
            .retain(|p| !keys.contains(&pod_record::key(&p.pod.metadata)));
        let now = self.now;
        self.cluster.remove_pods(keys, now);
        self.changed();
    }

    fn interrupt(&mut self, node: Option<&str>, zone: Option<&str>) {
        let label = |labels: &BTreeMap<String, String>, key: &str| -> String {
            labels.get(key).cloned().unwrap_or_default()
        };
        let victim = self
            .cluster
            .find(|name, labels| match node {
                Some(wanted) => name == wanted,
                None => {
                    label(labels, karpenter_api::labels::CAPACITY_TYPE) == "spot"
                        && zone.is_none_or(|z| label(labels, karpenter_api::labels::ZONE) == z)
                }
            })
            .and_then(|name| self.cluster.remove_node(&name));
        let Some(victim) = victim else {
            self.say("spot interruption: no matching spot node".to_string());
            return;
        };
        let count = victim.pods.len();
        let now = self.now;
        self.pending.extend(
            victim
                .pods
                .into_iter()
                .map(|pod| PendingPod { pod, since: now }),
        );
        self.interruptions += 1;
        self.evictions += count;
        self.changed();
        self.say(format!(
            "spot interruption: {} ({} {}) removed, {count} pod(s) pending again",
            victim.name, victim.instance_type, victim.zone
        ));
    }

    fn change_nodepool(&mut self, pool: &karpenter_api::v1::NodePool) -> Result<(), TimelineError> {
        let name = name_of(pool);
        if self.manifests.node_pools.is_empty() {
            self.manifests.node_pools = self.scenario.node_pools.clone();
        }
        match self
            .manifests
            .node_pools
            .iter_mut()
            .find(|p| name_of(p) == name)
        {
            Some(existing) => *existing = pool.clone(),
            None => self.manifests.node_pools.push(pool.clone()),
        }
        let updated = Scenario::prepare(&self.manifests, self.catalog, &self.scenario.pricing)?;
        self.scenario.node_pools = updated.node_pools;
        self.scenario.pools = updated.pools;
        self.scenario.pool_types = updated.pool_types;
        self.changed();
        self.say(format!("NodePool {name} applied"));
        Ok(())
    }

    /// Launches a node for a NodeClaim with its cheapest offering, with `pods` bound to it;
    /// `None` when no offering is allowed. (Pods of a claim without an offering stay lost.)
    /// Returns the log text and the node's name.
    fn launch(
        &mut self,
        claim: &karpenter_scheduling::NewNodeClaim,
        pods: Vec<Pod>,
    ) -> Option<(String, String)> {
        let name = format!("{}-{}", claim.node_pool, self.next_node + 1);
        let count = pods.len();
        let (launch, offer) = launch_claim(&self.scenario, claim, &name, pods)?;
        let text = format!(
            "{} {} {} ${:.4}/h ({count} pods)",
            offer.info.name,
            offer.offering.capacity_type.as_str(),
            offer.offering.zone,
            launch.price_per_hour,
        );
        self.next_node += 1;
        let now = self.now;
        self.cluster.launch(launch, now, now + NODE_STARTUP);
        self.launches += 1;
        Some((text, name))
    }

    /// Closes a batch: solve the pending pods and act on the result.
    fn provision(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.solved_at_change = Some(self.changes);
        let pods: Vec<Pod> = self.pending.iter().map(|p| p.pod.clone()).collect();
        let result = self.scenario.solve(pods, &self.cluster.existing());
        let mut by_key: BTreeMap<String, PendingPod> = self
            .pending
            .drain(..)
            .map(|p| (pod_record::key(&p.pod.metadata), p))
            .collect();
        let now = self.now;
        for placement in &result.existing_placements {
            let Some(pending) = by_key.remove(&placement.pod.to_string()) else {
                continue;
            };
            if let Some(ready_at) = self.cluster.ready_at(&placement.node) {
                let running = ready_at.max(now);
                self.pending_times
                    .push((running - pending.since).as_secs_f64());
                self.cluster.bind(
                    &placement.node,
                    pending.pod,
                    now,
                    now + nomination_window(DEFAULT_MAX),
                );
            }
        }
        let mut launched = Vec::new();
        for claim in &result.new_node_claims {
            let mut pods = Vec::new();
            for pod in &claim.pods {
                if let Some(pending) = by_key.remove(&pod.to_string()) {
                    self.pending_times
                        .push((now + NODE_STARTUP - pending.since).as_secs_f64());
                    pods.push(pending.pod);
                }
            }
            if let Some((text, _)) = self.launch(claim, pods) {
                launched.push(text);
            }
        }
        if !launched.is_empty() || !result.existing_placements.is_empty() {
            self.changed();
        }
        self.pending = by_key.into_values().collect();
        self.pending.sort_by_key(|p| p.since);
        let placed = result.existing_placements.len();
        let message = format!(
            "provisioning: {} pod(s) to existing nodes, {} node(s) launched{}{}",
            placed,
            launched.len(),
            if launched.is_empty() {
                String::new()
            } else {
                format!(": {}", launched.join(", "))
            },
            if self.pending.is_empty() {
                String::new()
            } else {
                format!("; {} pod(s) still pending", self.pending.len())
            }
        );
        self.say(message);
        self.sample();
    }

    fn report(mut self, duration: Duration) -> TimelineReport {
        self.sample();
        let hours = duration.as_secs_f64() / 3600.0;
        let still_pending = self.pending.len();
        for pending in &self.pending {
            self.pending_times
                .push((duration.saturating_sub(pending.since)).as_secs_f64());
        }
        TimelineReport {
            duration_seconds: duration.as_secs(),
            total_cost: round_price(self.cost),
            average_cost_per_hour: if hours > 0.0 {
                round_price(self.cost / hours)
            } else {
                0.0
            },
            peak_cost_per_hour: self
                .samples
                .iter()
                .map(|s| s.cost_per_hour)
                .fold(0.0, f64::max),
            peak_nodes: self.samples.iter().map(|s| s.nodes).max().unwrap_or(0),
            launches: self.launches,
            interruptions: self.interruptions,
            disruptions: self.disruptions,
            evictions: self.evictions,
            pods_started: self.pending_times.len() - still_pending,
            pods_still_pending: still_pending,
            pending_seconds: Percentiles::of(&self.pending_times),
            samples: self.samples,
            log: self.log,
            notes: self.notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&values);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
    }
}
