//! The EC2NodeClass controller (`--cloud-provider aws`): keeps each class's status, hash
//! annotations and finalizer as upstream's `nodeclass` controllers do.
//!
//! Per class, at most every `AMI_REFRESH_INTERVAL`/`SUBNET_REFRESH_INTERVAL` (the shorter) and
//! at once when its generation changes: the finalizer `karpenter.k8s.aws/termination`; the
//! hash annotations; the NodeClaims of the class re-stamped when their hash version is not
//! ours (a switch from upstream drifts nothing); the subnets, security groups, AMIs and
//! instance profile resolved against AWS ([`karpenter_aws_provider::nodeclass`]) and written
//! to the status with its conditions. A class being deleted keeps its finalizer until no
//! NodeClaim uses it, then its managed instance profile and its launch templates are deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use karpenter_api::hash::{node_class_annotations, node_class_hash, restamp_node_class};
use karpenter_api::labels::AWS_TERMINATION_FINALIZER as FINALIZER;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_aws::nodeclass::dry_run;
use karpenter_aws::nodeclass::status::{self, Outcome};
use karpenter_aws_provider::nodeclass::NodeClassResolver;
use karpenter_aws_provider::{AwsCloud, AwsError, DryRun, NodeClasses};
use karpenter_state::Cluster;
use serde_json::json;

use crate::cluster::index::ClusterCache;
use crate::cluster::writes::WriteError;
use crate::reconcile::{Action, Busy, Context, MeteredCloud, Reconciler, Retry, Scan, Shape};

/// How often a class being deleted looks again for NodeClaims that still use it.
const WAIT_FOR_CLAIMS: Duration = Duration::from_secs(10);
/// How often unused launch templates are looked for.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// EC2NodeClasses from the cluster-state index, for the provider.
#[derive(Debug, Clone)]
pub struct CachedClasses(pub ClusterCache);

impl NodeClasses for CachedClasses {
    fn node_class(&self, name: &str) -> Option<EC2NodeClass> {
        self.0.lock().node_class(name).cloned()
    }

    fn version(&self) -> u64 {
        let cluster = self.0.lock();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for class in cluster.node_classes() {
            for part in [
                class.metadata.name.as_deref().unwrap_or_default(),
                class
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default(),
            ] {
                for byte in part.bytes().chain(std::iter::once(0)) {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
        hash
    }
}

/// The controller.
#[derive(Debug)]
pub struct NodeClassController<L> {
    pub ctx: Context<MeteredCloud<AwsCloud<L>>>,
    pub resolver: NodeClassResolver,
    /// The API server's version (`v1.36.3`), for AMI aliases.
    pub k8s_version: String,
    /// The CA bundle nodes get (it is hashed: a rotation drifts nodes).
    pub ca_bundle: Option<String>,
    pub refresh: Duration,
    /// When each class was last resolved, at which generation.
    pub resolved: Resolved,
    /// The authorization dry runs' verdicts, by class.
    pub dry_runs: DryRuns,
}

/// Per class: the last verdict of the authorization dry runs, what it was given for
/// ([`karpenter_aws::nodeclass::dry_run::cache_key`]) and when (kept for
/// [`karpenter_aws::nodeclass::dry_run::TTL`]).
#[derive(Debug, Clone, Default)]
pub struct DryRuns(Arc<Mutex<HashMap<String, Verdict>>>);

/// A cached verdict: its key, when it was given, the outcome.
type Verdict = (String, Instant, Outcome<()>);

impl DryRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Verdict>> {
        match self.0.lock() {
            Ok(map) => map,
            // Only cached verdicts: a panicked holder at worst makes the calls once more.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The verdict for `key`, while it is fresh.
    fn get(&self, class: &str, key: &str) -> Option<Outcome<()>> {
        self.lock()
            .get(class)
            .filter(|(k, at, _)| k == key && at.elapsed() < dry_run::TTL)
            .map(|(_, _, outcome)| outcome.clone())
    }

    fn put(&self, class: &str, key: String, outcome: Outcome<()>) {
        self.lock()
            .insert(class.to_owned(), (key, Instant::now(), outcome));
    }

    fn forget(&self, class: &str) {
        self.lock().remove(class);
    }
}

fn uses(claim: &NodeClaim, class: &str) -> bool {
    claim.spec.node_class_ref.kind == "EC2NodeClass" && claim.spec.node_class_ref.name == class
}

/// Per class: the generation last resolved, when, and the problems last reported (logged
/// and evented once per change, not on every refresh).
#[derive(Debug, Clone)]
struct Seen {
    generation: Option<i64>,
    at: Instant,
    reported: String,
}

type Generations = HashMap<String, Seen>;

/// When each class was last resolved, at which generation, and what was reported of it.
#[derive(Debug, Clone, Default)]
pub struct Resolved(Arc<Mutex<Generations>>);

impl Resolved {
    fn lock(&self) -> MutexGuard<'_, Generations> {
        match self.0.lock() {
            Ok(map) => map,
            // Only timestamps: a panicked holder at worst resolves a class once more.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// What a class needs.
#[derive(Debug, Clone)]
pub enum ClassStep {
    /// Finalizer, hash annotations, NodeClaims re-stamped, and (when `resolve`) the status
    /// resolved against AWS.
    Reconcile { class: EC2NodeClass, resolve: bool },
    /// Deleted, and no NodeClaim uses it any more: its instance profile and launch templates
    /// go, then the finalizer.
    Finalize { class: EC2NodeClass },
}

/// A step failed.
#[derive(Debug, thiserror::Error)]
pub enum ClassError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{step} of ec2nodeclass {class}: {source}")]
    Aws {
        step: &'static str,
        class: String,
        #[source]
        source: AwsError,
    },
}

impl<L: NodeClasses + 'static> Reconciler for NodeClassController<L> {
    type Step = ClassStep;
    type Error = ClassError;
    const NAME: &'static str = "nodeclass";

    fn shape(&self) -> Shape {
        Shape::new(
            Duration::from_millis(500),
            self.refresh.min(WAIT_FOR_CLAIMS),
        )
        .concurrency(4)
    }

    fn scan(&self, cluster: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<ClassStep> {
        let mut scan = Scan::new();
        let mut resolved = self.resolved.lock();
        resolved.retain(|name, _| cluster.node_class(name).is_some());
        for class in cluster.node_classes() {
            let Some(name) = class.metadata.name.as_deref() else {
                continue;
            };
            if busy.contains(name) {
                continue;
            }
            let has_finalizer = class
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER);
            if class.metadata.deletion_timestamp.is_some() {
                if !has_finalizer {
                    continue;
                }
                if cluster.node_claims().any(|c| uses(c, name)) {
                    scan.requeue_after(WAIT_FOR_CLAIMS);
                } else {
                    scan.step(
                        name,
                        ClassStep::Finalize {
                            class: class.clone(),
                        },
                    );
                }
                continue;
            }
            // A class selecting capacity reservations is read every minute, as upstream polls
            // them (their free slots change with every other launch into them).
            let refresh = if self.resolver.polls_reservations(class) {
                self.refresh
                    .min(karpenter_aws::capacity_reservation::POLL_PERIOD)
            } else {
                self.refresh
            };
            let resolve = match resolved.get(name) {
                Some(seen) => {
                    let due = seen.generation != class.metadata.generation
                        || seen.at.elapsed() >= refresh;
                    if !due {
                        scan.requeue_after(refresh.saturating_sub(seen.at.elapsed()));
                    }
                    due
                }
                None => true,
            };
            let stale = !has_finalizer
                || node_class_annotations(class, self.ca_bundle.as_deref()).is_some()
                || restamps(cluster, class, name, self.ca_bundle.as_deref())
                    .next()
                    .is_some();
            if resolve || stale {
                scan.step(
                    name,
                    ClassStep::Reconcile {
                        class: class.clone(),
                        resolve,
                    },
                );
            }
        }
        scan
    }

    async fn execute(&self, step: ClassStep) -> Result<Action, ClassError> {
        match step {
            ClassStep::Reconcile { class, resolve } => self.reconcile(class, resolve).await?,
            ClassStep::Finalize { class } => self.finalize(&class).await?,
        }
        Ok(Action::AwaitChange)
    }

    fn error_policy(&self, error: &ClassError) -> Retry {
        match error {
            ClassError::Write(error) => error.retry(),
            ClassError::Aws { .. } => Retry::Backoff,
        }
    }

    fn step_name(step: &ClassStep) -> &'static str {
        match step {
            ClassStep::Reconcile { .. } => "reconcile",
            ClassStep::Finalize { .. } => "finalize",
        }
    }
}

/// The NodeClaims of `class` stamped by another hash version, and the annotations each gets
/// (upstream's rule: a switch from upstream drifts nothing).
fn restamps<'a>(
    cluster: &'a Cluster,
    class: &EC2NodeClass,
    name: &'a str,
    ca_bundle: Option<&str>,
) -> impl Iterator<Item = (String, std::collections::BTreeMap<String, String>)> + 'a {
    let hash = node_class_hash(class, ca_bundle);
    cluster
        .node_claims()
        .filter(move |c| uses(c, name))
        .filter_map(move |claim| {
            let drifted = karpenter_api::conditions::is_true(
                claim.status.as_ref().and_then(|s| s.conditions.as_deref()),
                "Drifted",
            );
            let annotations =
                restamp_node_class(&hash, claim.metadata.annotations.as_ref(), drifted)?;
            Some((claim.metadata.name.clone()?, annotations))
        })
}

impl<L: NodeClasses + 'static> NodeClassController<L> {
    async fn reconcile(&self, mut class: EC2NodeClass, resolve: bool) -> Result<(), ClassError> {
        let writer = self.ctx.writer();
        let name = class.metadata.name.clone().unwrap_or_default();
        match writer
            .set_finalizer(&class, FINALIZER, true, "adding the finalizer")
            .await?
        {
            Some(patched) => class = patched,
            None => return Ok(()),
        }
        if let Some(annotations) = node_class_annotations(&class, self.ca_bundle.as_deref()) {
            match writer
                .merge_metadata::<EC2NodeClass>(
                    &name,
                    json!({"annotations": annotations}),
                    "writing the hash annotations",
                )
                .await?
            {
                Some(patched) => class = patched,
                None => return Ok(()),
            }
        }
        let restamp: Vec<_> = {
            let cluster = self.ctx.cache.lock();
            restamps(&cluster, &class, &name, self.ca_bundle.as_deref()).collect()
        };
        for (claim, annotations) in restamp {
            writer
                .merge_metadata::<NodeClaim>(
                    &claim,
                    json!({"annotations": annotations}),
                    "re-stamping the EC2NodeClass hash",
                )
                .await?;
        }
        if !resolve {
            return Ok(());
        }
        let (mut resolution, _ips) = self
            .resolver
            .resolve(&class, &self.k8s_version, Utc::now())
            .await;
        let Some(at) = karpenter_state::conditions::api_time(Utc::now()) else {
            return Ok(());
        };
        // Transition times move only with a status, so an unchanged resolution is an equal
        // status and nothing is written.
        let mut new = status::status(
            class.status.as_ref(),
            class.metadata.generation,
            &resolution,
            at.clone(),
        );
        if let Some(validation) = self.authorization(&class, &resolution, &new).await {
            resolution.validation = validation;
            new = status::status(
                class.status.as_ref(),
                class.metadata.generation,
                &resolution,
                at,
            );
        }
        if class.status.as_ref() != Some(&new)
            && writer
                .patch_status(&class, json!(new), "writing the status")
                .await?
                .is_none()
        {
            return Ok(());
        }
        let problems = resolution.problems();
        let previous = self
            .resolved
            .lock()
            .insert(
                name.clone(),
                Seen {
                    generation: class.metadata.generation,
                    at: Instant::now(),
                    reported: problems.clone(),
                },
            )
            .map(|seen| seen.reported);
        if previous.as_deref() != Some(problems.as_str()) {
            self.report(&class, &new, &problems).await;
        }
        Ok(())
    }

    /// `ValidationSucceeded`'s authorization dry runs (upstream's validation controller),
    /// once the class's subnets, security groups, AMIs and instance profile resolved and its
    /// spec passed the other checks; `None` leaves the outcome as resolved. A verdict is kept
    /// for `dry_run::TTL` while nothing it depends on changes; when EC2 cannot answer now, the
    /// condition stays as it was. `DISABLE_DRY_RUN=true` skips them (the condition is `True`),
    /// as upstream.
    async fn authorization(
        &self,
        class: &EC2NodeClass,
        resolution: &status::Resolution,
        new: &karpenter_api::v1::EC2NodeClassStatus,
    ) -> Option<Outcome<()>> {
        if self.ctx.settings.disable_dry_run
            || !(resolution.subnets.is_ready()
                && resolution.security_groups.is_ready()
                && resolution.amis.is_ready()
                && resolution.instance_profile.is_ready()
                && resolution.validation.is_ready())
        {
            return None;
        }
        let name = class.metadata.name.clone().unwrap_or_default();
        let mut resolved = class.clone();
        resolved.status = Some(new.clone());
        let pool = {
            let cluster = self.ctx.cache.lock();
            cluster
                .node_pools()
                .find(|p| {
                    p.spec.template.spec.node_class_ref.kind == "EC2NodeClass"
                        && p.spec.template.spec.node_class_ref.name == name
                })
                .cloned()
        };
        let probe_claim_tags = karpenter_aws::launch_template::launch_tags(
            &resolved,
            &karpenter_aws_provider::probe_claim(&resolved, pool.as_ref())?,
            &self.ctx.settings.cluster_name,
        );
        let key = dry_run::cache_key(&resolved, &probe_claim_tags);
        if let Some(outcome) = self.dry_runs.get(&name, &key) {
            return Some(outcome);
        }
        match self
            .ctx
            .cloud
            .inner()
            .authorization_dry_runs(&resolved, pool.as_ref())
            .await
        {
            DryRun::Done(verdict) => {
                let outcome = verdict.outcome()?;
                if let Outcome::NotReady { reason, message } = &outcome {
                    tracing::error!(ec2nodeclass = %name, reason, "{message}");
                }
                self.dry_runs.put(&name, key, outcome.clone());
                Some(outcome)
            }
            DryRun::Retry(why) => {
                tracing::debug!(ec2nodeclass = %name, %why, "authorization checks asked again later");
                Some(previous_validation(class).unwrap_or_else(|| {
                    Outcome::failed("AuthorizationCheckPending", format!("asking again: {why}"))
                }))
            }
        }
    }

    /// Says once per change what the class could not resolve: a log line and an event on the
    /// class naming each dependency, the AWS operation and its error; and when it resolves
    /// again.
    async fn report(
        &self,
        class: &EC2NodeClass,
        new: &karpenter_api::v1::EC2NodeClassStatus,
        problems: &str,
    ) {
        let name = class.metadata.name.as_deref().unwrap_or_default();
        let ready = karpenter_api::conditions::is_true(new.conditions.as_deref(), status::READY);
        if problems.is_empty() {
            if ready {
                tracing::info!(ec2nodeclass = %name, "EC2NodeClass ready");
            }
            return;
        }
        if ready {
            // A refresh failed; the values resolved before stay in use.
            tracing::warn!(ec2nodeclass = %name, %problems, "EC2NodeClass refresh failed; keeping what was resolved before");
            self.ctx
                .events
                .warn_node_class(class, "FailedResolving", problems)
                .await;
        } else {
            tracing::warn!(ec2nodeclass = %name, %problems, "EC2NodeClass not ready");
            self.ctx
                .events
                .warn_node_class(class, "NodeClassNotReady", problems)
                .await;
        }
    }

    async fn finalize(&self, class: &EC2NodeClass) -> Result<(), ClassError> {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.dry_runs.forget(&name);
        let cloud = &self.ctx.cloud;
        if let Err(source) = self.resolver.delete_instance_profile(class).await {
            self.ctx
                .events
                .warn_node_class(class, "FailedDeletingInstanceProfile", &source.to_string())
                .await;
            return Err(ClassError::Aws {
                step: "deleting the instance profile",
                class: name,
                source,
            });
        }
        let count = cloud
            .launch_templates()
            .delete_for_class(cloud.clients(), &cloud.settings().cluster_name, &name)
            .await
            .map_err(|source| ClassError::Aws {
                step: "deleting the launch templates",
                class: name.clone(),
                source,
            })?;
        tracing::info!(
            ec2nodeclass = %name,
            launch_templates = count,
            "deleted the EC2NodeClass's launch templates"
        );
        if self
            .ctx
            .writer()
            .set_finalizer(class, FINALIZER, false, "removing the finalizer")
            .await?
            .is_some()
        {
            tracing::info!(ec2nodeclass = %name, "EC2NodeClass finalized");
        }
        Ok(())
    }
}

/// Unused launch templates of this cluster, deleted every [`SWEEP_INTERVAL`].
#[derive(Debug)]
pub struct LaunchTemplateSweep<L> {
    pub ctx: Context<MeteredCloud<AwsCloud<L>>>,
}

/// The one step of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep;

impl<L: NodeClasses + 'static> Reconciler for LaunchTemplateSweep<L> {
    type Step = Sweep;
    type Error = std::convert::Infallible;
    const NAME: &'static str = "launchtemplate.garbagecollection";

    fn shape(&self) -> Shape {
        Shape::periodic(SWEEP_INTERVAL)
    }

    fn scan(&self, _: &Cluster, _: DateTime<Utc>, busy: Busy<'_>) -> Scan<Sweep> {
        let mut scan = Scan::new();
        if !busy.contains(Self::NAME) {
            scan.step(Self::NAME, Sweep);
        }
        scan
    }

    async fn execute(&self, _: Sweep) -> Result<Action, std::convert::Infallible> {
        let cloud = &self.ctx.cloud;
        cloud.launch_templates().sweep(cloud.clients()).await;
        Ok(Action::RequeueAfter(SWEEP_INTERVAL))
    }

    fn error_policy(&self, _: &std::convert::Infallible) -> Retry {
        Retry::Backoff
    }

    fn step_name(_: &Sweep) -> &'static str {
        "sweep"
    }
}

/// The class's `ValidationSucceeded` as it stands, as an outcome (`None`: not decided yet).
fn previous_validation(class: &EC2NodeClass) -> Option<Outcome<()>> {
    let condition = karpenter_api::conditions::get(
        class.status.as_ref()?.conditions.as_deref(),
        "ValidationSucceeded",
    )?;
    let ours = [
        dry_run::Check::CreateLaunchTemplate.reason(),
        dry_run::Check::CreateFleet.reason(),
        dry_run::Check::RunInstances.reason(),
        dry_run::USER_DATA_TOO_LARGE,
    ];
    match condition.status.as_str() {
        "True" => Some(Outcome::Ready(())),
        "False" if ours.contains(&condition.reason.as_str()) => Some(Outcome::not_ready(
            &condition.reason,
            condition.message.clone(),
        )),
        _ => None,
    }
}
