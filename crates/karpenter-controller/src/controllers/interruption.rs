//! The interruption controller (upstream `interruption`): long-polls the SQS queue named by
//! `INTERRUPTION_QUEUE` ([`karpenter_aws_provider::sqs::InterruptionQueue`]) and hands each
//! body to [`karpenter_aws::interruption::plan()`], which parses it and decides; this module
//! performs the actions (offering marked unavailable, NodeClaim deleted so the normal
//! termination drains it, events), counts the metrics, and deletes or leaves the message as
//! the plan's disposition says. A body that does not parse is logged with its message id and
//! deleted; nothing here stops the loop. Messages of one receive are handled concurrently
//! (at most [`CONCURRENCY`]).

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use karpenter_api::labels;
use karpenter_api::v1::NodeClaim;
use karpenter_aws::interruption::{
    Action, ActionOutcome, ClaimRef, Disposition, EventType, InterruptionEvent, Involved, plan,
    provider_id,
};
use karpenter_cloud::{CapacityType, CloudProvider, OfferingRef};
use karpenter_state::Cluster;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::http::Metrics;
use karpenter_aws_provider::AwsError;
use karpenter_aws_provider::sqs::{InterruptionQueue, QueueMessage};

use crate::reconcile::{self, Busy, Context, Reconciler, Retry, Scan, Shape};
use crate::report::metrics::Disrupted;

/// Messages of one receive handled at once.
pub const CONCURRENCY: usize = 10;
/// After a failed SQS call.
const BACKOFF: Duration = Duration::from_secs(5);
/// How often the loop looks whether a receive is due (one is, as soon as the last ends).
const RESYNC: Duration = Duration::from_secs(1);

/// The interruption metrics (upstream names).
#[derive(Debug, Clone)]
pub struct InterruptionMetrics {
    received: Family<Vec<(&'static str, String)>, Counter>,
    deleted: Counter,
    queue_duration: Histogram,
}

impl InterruptionMetrics {
    pub fn register(registry: &Metrics) -> Self {
        let metrics = InterruptionMetrics {
            received: Family::default(),
            deleted: Counter::default(),
            queue_duration: Histogram::new(crate::report::metrics::DURATION_BUCKETS),
        };
        registry.register(
            "karpenter_interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            metrics.received.clone(),
        );
        registry.register(
            "karpenter_interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            metrics.deleted.clone(),
        );
        registry.register(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            metrics.queue_duration.clone(),
        );
        metrics
    }

    /// A message of `message_type` (upstream's kind names) was received.
    pub fn received(&self, message_type: &str) {
        self.received
            .get_or_create(&vec![("message_type", message_type.to_owned())])
            .inc();
    }

    /// A message was deleted from the queue.
    pub fn deleted(&self) {
        self.deleted.inc();
    }

    /// A message waited `seconds` on the queue before it was handled.
    pub fn queued_for(&self, seconds: f64) {
        self.queue_duration.observe(seconds);
    }
}

/// The interruption loop.
#[derive(Debug)]
pub struct Interruption<C> {
    pub ctx: Context<C>,
    pub queue: InterruptionQueue,
    pub interruption_metrics: InterruptionMetrics,
}

/// The one step: receive (a long poll) and handle what came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receive;

impl<C: CloudProvider + 'static> Reconciler for Interruption<C> {
    type Step = Receive;
    type Error = AwsError;
    const NAME: &'static str = "interruption";

    fn shape(&self) -> Shape {
        Shape::periodic(RESYNC)
    }

    fn scan(&self, _: &Cluster, _: chrono::DateTime<Utc>, busy: Busy<'_>) -> Scan<Receive> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Receive);
        }
        scan
    }

    async fn execute(&self, _: Receive) -> Result<reconcile::Action, AwsError> {
        let messages = self.queue.receive().await?;
        if !messages.is_empty() {
            let claims = claims_by_instance(&self.ctx.cache.lock());
            futures::stream::iter(messages)
                .for_each_concurrent(CONCURRENCY, |message| self.handle(&claims, message))
                .await;
        }
        // One receive (a long poll) and its messages: one reconciliation of upstream's
        // `interruption` controller; the next starts at once.
        Ok(reconcile::Action::RequeueAfter(Duration::ZERO))
    }

    fn error_policy(&self, _: &AwsError) -> Retry {
        Retry::After(BACKOFF)
    }

    fn step_name(_: &Receive) -> &'static str {
        "receive"
    }
}

fn label(claim: &karpenter_api::v1::NodeClaim, key: &str) -> Option<String> {
    claim.metadata.labels.as_ref()?.get(key).cloned()
}

/// Our NodeClaims by EC2 instance id (from their provider ids). On the simulated cloud an
/// instance is named after its Node (`kwok://<name>`), so interruption events can be
/// rehearsed there with `instance-id` set to a node's name.
pub(crate) fn claims_by_instance(cluster: &Cluster) -> HashMap<String, ClaimRef> {
    cluster
        .node_claims()
        .filter_map(|c| {
            let id = c.status.as_ref()?.provider_id.as_deref()?;
            let id = provider_id::instance_id(id).or_else(|| id.strip_prefix("kwok://"))?;
            Some((
                id.to_owned(),
                ClaimRef {
                    name: c.metadata.name.clone()?,
                    node_name: c.status.as_ref().and_then(|s| s.node_name.clone()),
                    instance_type: label(c, labels::INSTANCE_TYPE),
                    zone: label(c, labels::ZONE),
                    capacity_type: label(c, labels::CAPACITY_TYPE),
                    reservation_id: label(c, labels::CAPACITY_RESERVATION_ID),
                },
            ))
        })
        .collect()
}

impl<C: CloudProvider + 'static> Interruption<C> {
    async fn handle(&self, claims: &HashMap<String, ClaimRef>, message: QueueMessage) {
        let id = message.id.as_deref().unwrap_or("<no id>");
        let planned = plan(&message.body, |instance| claims.get(instance).cloned());
        match &planned.parsed {
            Ok(parsed) => {
                let kind = parsed.kind();
                self.interruption_metrics.received(kind.as_str());
                if let Some(seconds) = parsed.queue_seconds(Utc::now()) {
                    self.interruption_metrics.queued_for(seconds);
                }
                tracing::debug!(message = %id, kind = kind.as_str(), actions = planned.actions.len(), "interruption message");
            }
            Err(error) => {
                tracing::warn!(message = %id, %error, "an interruption message that does not parse; deleted");
            }
        }
        let mut outcomes = Vec::with_capacity(planned.actions.len());
        for action in &planned.actions {
            outcomes.push(act(&self.ctx, action).await);
        }
        match planned.disposition(&outcomes) {
            Disposition::Delete => {
                let Some(receipt) = message.receipt.as_deref() else {
                    return;
                };
                match self.queue.delete(receipt).await {
                    Ok(()) => {
                        self.interruption_metrics.deleted();
                    }
                    Err(error) => tracing::warn!(
                        message = %id,
                        %error,
                        "deleting an interruption message failed; it comes back after its visibility timeout"
                    ),
                }
            }
            Disposition::Retry => {
                tracing::warn!(message = %id, "an interruption message was not fully handled; left for redelivery");
            }
        }
    }
}

/// Performs one action of a plan (the queue's or an instance status check's).
pub(crate) async fn act<C: CloudProvider + 'static>(
    ctx: &Context<C>,
    action: &Action,
) -> ActionOutcome {
    match action {
        Action::MarkUnavailable {
            instance_type,
            zone,
            capacity_type,
        } => {
            let capacity_type = if *capacity_type == "spot" {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            };
            ctx.cloud.mark_unavailable(&[OfferingRef {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                capacity_type,
            }]);
            ActionOutcome::Done
        }
        Action::MarkReservationUnavailable {
            reservation_id,
            instance_type,
            zone,
        } => {
            tracing::debug!(reservation = %reservation_id, %instance_type, %zone, "interruption: marking the capacity reservation unavailable");
            ctx.cloud.mark_reservation_unavailable(reservation_id);
            ActionOutcome::Done
        }
        Action::DeleteNodeClaim {
            name,
            node_name,
            reason,
        } => {
            let claim = ctx.cache.lock().node_claim(name).cloned();
            if claim
                .as_ref()
                .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
            {
                // Gone or already being deleted: nothing to do, nothing to count.
                return ActionOutcome::NotFound;
            }
            match ctx.writer().delete::<NodeClaim>(name, "deleting").await {
                Ok(()) => {
                    tracing::info!(nodeclaim = %name, reason = reason.as_str(), "interruption: NodeClaim deleted");
                    // Upstream counts no pods for an interruption.
                    ctx.metrics
                        .nodeclaim_disrupted(&Disrupted::of(reason.as_str(), claim.as_ref()));
                    for event in karpenter_aws::interruption::events::terminating_on_interruption(
                        name,
                        node_name.as_deref(),
                    ) {
                        publish(ctx, &event).await;
                    }
                    ActionOutcome::Done
                }
                Err(error) => {
                    tracing::warn!(%error, "interruption: deleting a NodeClaim failed");
                    ActionOutcome::Failed
                }
            }
        }
        Action::ExpireTerminationGrace { name } => {
            let claim = ctx.cache.lock().node_claim(name).cloned();
            let Some(claim) = claim else {
                return ActionOutcome::NotFound;
            };
            if claim
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(labels::NODECLAIM_TERMINATION_TIMESTAMP))
            {
                return ActionOutcome::Done;
            }
            let now = karpenter_lifecycle::termination::deadline_annotation(Utc::now());
            match ctx
                .writer()
                .merge_metadata::<NodeClaim>(
                    name,
                    serde_json::json!({"annotations": {
                        labels::NODECLAIM_TERMINATION_TIMESTAMP: now,
                    }}),
                    "annotating the termination timestamp",
                )
                .await
            {
                Ok(Some(_)) => ActionOutcome::Done,
                Ok(None) => ActionOutcome::NotFound,
                Err(error) => {
                    tracing::warn!(%error, nodeclaim = %name, "interruption: expiring a NodeClaim's termination grace failed");
                    ActionOutcome::Failed
                }
            }
        }
        Action::Event(event) => {
            publish(ctx, event).await;
            ActionOutcome::Done
        }
    }
}

/// Records an interruption event on its NodeClaim or Node (when it still exists).
pub(crate) async fn publish<C>(ctx: &Context<C>, event: &InterruptionEvent) {
    let warning = event.event_type == EventType::Warning;
    match &event.involved {
        Involved::NodeClaim(name) => {
            let claim = ctx.cache.lock().node_claim(name).cloned();
            if let Some(claim) = claim {
                if warning {
                    ctx.events
                        .warn_node_claim(&claim, event.reason, event.message)
                        .await;
                } else {
                    ctx.events
                        .normal_node_claim(&claim, event.reason, event.message)
                        .await;
                }
            }
        }
        Involved::Node(name) => {
            let node = ctx.cache.lock().node(name).cloned();
            if let Some(node) = node {
                if warning {
                    ctx.events
                        .warn_node(&node, event.reason, event.message)
                        .await;
                } else {
                    ctx.events
                        .normal_node(&node, event.reason, event.message)
                        .await;
                }
            }
        }
    }
}
