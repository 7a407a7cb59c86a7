//! The controller's loops, one file each, every one a [`crate::reconcile::Reconciler`] run by
//! [`crate::reconcile::run`]; [`run`] starts them together as the controller future of
//! [`crate::run()`], so they act only while this replica leads (a standby keeps the index warm
//! and reports ready). Which loop does what, keyed and paced how: `docs/architecture.md`.

pub mod capacity_buffers;
pub mod capacity_reservation;
pub mod claim_disruption;
pub mod cloud_metrics;
pub mod default_spread;
pub mod deletion_cost;
pub mod discovered_capacity;
pub mod disruption;
pub mod garbage;
pub mod gauges;
pub mod instance_status;
pub mod instance_types;
pub mod interruption;
pub mod kube_dns;
pub mod kwok_registration;
pub mod lifecycle;
pub mod node_overlay;
pub mod nodeclass;
pub mod nodepool_counter;
pub mod nodepool_status;
pub mod provisioner;
pub mod reboot;
pub mod static_pools;
pub mod status_metrics;
pub mod tagging;
pub mod termination;
pub mod zonal_shift;

use std::sync::Arc;

use karpenter_api::v1::NodePool;
use karpenter_cloud::CloudProvider;
use karpenter_lifecycle::LifecycleConfig;
use tokio::task::JoinSet;

use karpenter_aws_provider::sqs::InterruptionQueue;
use karpenter_kwok_provider::{Kwok, KwokCloud, KwokOptions, NodePoolLookup, TypeSource};

use crate::cluster::index::ClusterCache;
use crate::reconcile::{self, Context, MeteredCloud, Reconciler};
use crate::report::events::Events;
use crate::report::metrics::ControllerMetrics;
use crate::run::{ControllerContext, ControllerError};
use crate::settings::CloudProviderKind;

/// A loop's bookkeeping mutex, even after a panic elsewhere poisoned it: each holds memories of
/// requests made, consistent after any single update, so a panicked holder at worst repeats a
/// write.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// NodePools as the index holds them.
#[derive(Debug, Clone)]
pub struct CachedPools(pub ClusterCache);

impl NodePoolLookup for CachedPools {
    fn node_pool(&self, name: &str) -> Option<NodePool> {
        self.0.lock().node_pool(name).cloned()
    }

    fn node_claims(&self) -> Vec<karpenter_api::v1::NodeClaim> {
        self.0.lock().node_claims().cloned().collect()
    }
}

/// Why the controllers could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("loading the instance-type catalog for the kwok cloud provider")]
    Catalog(#[source] karpenter_kwok_provider::TypeSourceError),
    #[error(transparent)]
    KwokOptions(#[from] karpenter_kwok_provider::KwokOptionsError),
    #[error("building the AWS clients")]
    AwsClients(#[from] karpenter_aws_provider::clients::ClientsError),
    #[error("starting the EC2 cloud provider")]
    Aws(#[from] karpenter_aws_provider::provider::StartError),
    #[error(
        "ENABLE_ZONAL_SHIFT: the cluster's ARN (eks:DescribeCluster) and its zonal shifts (arc-zonal-shift:GetManagedResource; is the cluster registered for zonal shift?)"
    )]
    ZonalShift(#[source] karpenter_aws_provider::AwsError),
    #[error("reading the API server's version (AMI aliases need it)")]
    KubernetesVersion(#[source] kube::Error),
    #[error(
        "EKS_CONTROL_PLANE: reading the cluster's Kubernetes version from eks:DescribeCluster (AMI aliases need it)"
    )]
    EksVersion(#[source] karpenter_aws_provider::AwsError),
}

/// Extra controllers a cloud provider starts once this replica leads.
type Extra<C> =
    Box<dyn FnOnce(&mut JoinSet<()>, &Context<MeteredCloud<C>>, &ControllerContext) + Send>;

/// Runs `reconciler` on the driver in `tasks` until `ctx.cancel` trips.
fn spawn<R: Reconciler>(
    tasks: &mut JoinSet<()>,
    reconciler: R,
    ctx: &Context<impl Send + Sync + 'static>,
    cancel: &tokio_util::sync::CancellationToken,
) {
    tasks.spawn(reconcile::run(
        Arc::new(reconciler),
        ctx.cache.clone(),
        ctx.metrics.clone(),
        ctx.fence.clone(),
        cancel.clone(),
    ));
}

/// Starts every controller and runs until `ctx.cancel` trips. The simulated cloud reads its
/// options from the process environment (`KWOK_*`).
pub async fn run(ctx: ControllerContext) -> Result<(), ControllerError> {
    match ctx.settings.cloud_provider {
        CloudProviderKind::Kwok => {
            let options = KwokOptions::from_env(|key| std::env::var(key).ok())?;
            run_kwok(ctx, options).await
        }
        CloudProviderKind::Aws => {
            let clients = karpenter_aws_provider::AwsClients::from_env()
                .await
                .map_err(StartError::from)?;
            run_aws(ctx, clients, None).await
        }
    }
}

/// Starts every controller on EC2 with `clients` (the SDK's default chain in production; an
/// emulator's in tests) and, for interruption handling, `sqs` (`None`: the default chain).
pub async fn run_aws(
    ctx: ControllerContext,
    clients: karpenter_aws_provider::AwsClients,
    sqs: Option<karpenter_aws_provider::sqs::Client>,
) -> Result<(), ControllerError> {
    use karpenter_aws_provider::AwsSettings;
    let settings = ctx.settings.clone();
    let cache = ClusterCache::new();
    cache.spawn_watchers(
        &ctx.clients.main,
        &ctx.cancel,
        ctx.settings.feature_gates.node_overlay,
    );
    let metrics = ControllerMetrics::register(&ctx.metrics);
    let ca_bundle = settings
        .cluster_ca_bundle
        .clone()
        .or_else(|| ctx.clients.ca_bundle.clone());
    let aws_settings = AwsSettings {
        cluster_name: settings.cluster_name.clone(),
        cluster_endpoint: settings.cluster_endpoint.clone(),
        cluster_ca_bundle: ca_bundle.clone(),
        isolated_vpc: settings.isolated_vpc,
        vm_memory_overhead_percent: settings.vm_memory_overhead_percent,
        reserved_enis: settings.reserved_enis,
        kube_dns_ip: kube_dns::discover(&ctx.clients.main).await,
        reboot_for_repair: settings.aws_feature_gates.reboot_for_repair,
        reserved_capacity: settings.feature_gates.reserved_capacity,
    };
    // Upstream's version provider: EKS's answer with EKS_CONTROL_PLANE, the API server's else.
    let k8s_version = if settings.eks_control_plane {
        karpenter_aws_provider::cluster_version::eks_kubernetes_version(
            &clients,
            &settings.cluster_name,
        )
        .await
        .map_err(StartError::EksVersion)?
    } else {
        ctx.clients
            .main
            .apiserver_version()
            .await
            .map_err(StartError::KubernetesVersion)?
            .git_version
    };
    tracing::info!(version = %k8s_version, source = if settings.eks_control_plane { "eks:DescribeCluster" } else { "API server" }, "discovered the Kubernetes version");
    // Upstream validates the cluster with ARC at start: an unknown cluster stops it.
    let zonal_shifts = if settings.enable_zonal_shift {
        Some(Arc::new(
            karpenter_aws_provider::zonal_shift::ZonalShifts::start(
                &clients,
                &settings.cluster_name,
            )
            .await
            .map_err(StartError::ZonalShift)?,
        ))
    } else {
        None
    };
    let classes = nodeclass::CachedClasses(cache.clone());
    let Some(mut aws_cloud) =
        start_aws_cloud(&clients, &aws_settings, &classes, &ctx.cancel).await?
    else {
        return Ok(());
    };
    if let Some(shifts) = &zonal_shifts {
        aws_cloud = aws_cloud.with_zonal_shifts(shifts.clone());
    }
    let cloud = Arc::new(aws_cloud);
    // A class is resolved as a whole (AMIs, subnets, security groups): at the shortest interval.
    let refresh = settings
        .ami_refresh_interval
        .min(settings.subnet_refresh_interval)
        .min(settings.security_group_refresh_interval);
    let extra_cloud = cloud.clone();
    let placement_groups = cloud.placement_groups();
    let reservations = cloud.capacity_reservations();
    let status_clients = clients.clone();
    let extra: Extra<karpenter_aws_provider::AwsCloud<nodeclass::CachedClasses>> =
        Box::new(move |tasks, context, ctx| {
            let cancel = &ctx.cancel;
            spawn(
                tasks,
                instance_types::InstanceTypeRefresh::new(extra_cloud),
                context,
                cancel,
            );
            spawn(
                tasks,
                tagging::Tagging {
                    ctx: context.clone(),
                    clients: clients.clone(),
                },
                context,
                cancel,
            );
            spawn(
                tasks,
                nodeclass::NodeClassController {
                    ctx: context.clone(),
                    resolver: karpenter_aws_provider::nodeclass::NodeClassResolver::new(
                        clients,
                        ctx.settings.cluster_name.clone(),
                    )
                    .with_placement_groups(placement_groups)
                    .with_capacity_reservations(reservations),
                    k8s_version,
                    ca_bundle,
                    refresh,
                    resolved: nodeclass::Resolved::default(),
                    dry_runs: nodeclass::DryRuns::default(),
                },
                context,
                cancel,
            );
            spawn(
                tasks,
                nodeclass::LaunchTemplateSweep {
                    ctx: context.clone(),
                },
                context,
                cancel,
            );
            spawn(
                tasks,
                capacity_reservation::Expiration {
                    ctx: context.clone(),
                },
                context,
                cancel,
            );
            spawn(
                tasks,
                capacity_reservation::CapacityTypeSync {
                    ctx: context.clone(),
                },
                context,
                cancel,
            );
            spawn(
                tasks,
                discovered_capacity::DiscoveredCapacity::new(context.clone()),
                context,
                cancel,
            );
            spawn(
                tasks,
                instance_status::InstanceStatus::new(
                    context.clone(),
                    status_clients.clone(),
                    ctx.settings.instance_status_interval,
                    instance_status::InstanceStatusMetrics::register(&ctx.metrics),
                ),
                context,
                cancel,
            );
            if let Some(shifts) = zonal_shifts {
                spawn(
                    tasks,
                    zonal_shift::ZonalShift::new(context.clone(), status_clients, shifts),
                    context,
                    cancel,
                );
            }
        });
    run_with(ctx, cache, metrics, cloud, sqs, Some(extra)).await
}

/// Starts the EC2 provider (it lists the region's instance types). A start that failed for a
/// passing reason (EC2 throttled, a 5xx, a timeout, after the SDK's own retries) is logged and
/// tried again with backoff until it succeeds or the controller stops (`None`): a moment of EC2
/// trouble at start delays it instead of stopping it. Access denied and a missing cluster name
/// stop the start with their error.
async fn start_aws_cloud(
    clients: &karpenter_aws_provider::AwsClients,
    settings: &karpenter_aws_provider::AwsSettings,
    classes: &nodeclass::CachedClasses,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<karpenter_aws_provider::AwsCloud<nodeclass::CachedClasses>>, StartError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let error = match karpenter_aws_provider::AwsCloud::start(
            clients.clone(),
            settings.clone(),
            classes.clone(),
        )
        .await
        {
            Ok(cloud) => return Ok(Some(cloud)),
            Err(error) => error,
        };
        let Some(wait) = error.retry_after(attempt) else {
            return Err(error.into());
        };
        let cause = std::error::Error::source(&error)
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::warn!(
            attempt,
            %error,
            %cause,
            "starting the EC2 cloud provider failed; trying again in {}s",
            wait.as_secs()
        );
        tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Starts every controller on the simulated cloud with `options`.
pub async fn run_kwok(ctx: ControllerContext, options: KwokOptions) -> Result<(), ControllerError> {
    run_kwok_with(ctx, options, None).await
}

/// [`run_kwok`], with the SQS client interruption handling uses (`None`: from the SDK's
/// default chain), e.g. one for an AWS emulator.
pub async fn run_kwok_with(
    ctx: ControllerContext,
    options: KwokOptions,
    sqs: Option<karpenter_aws_provider::sqs::Client>,
) -> Result<(), ControllerError> {
    let types = TypeSource::load(ctx.settings.instance_types_file_path.as_deref())
        .map_err(StartError::Catalog)?;
    let cache = ClusterCache::new();
    cache.spawn_watchers(
        &ctx.clients.main,
        &ctx.cancel,
        ctx.settings.feature_gates.node_overlay,
    );
    let metrics = ControllerMetrics::register(&ctx.metrics);
    let delay = options.registration_delay;
    let cloud = Kwok {
        cloud: KwokCloud::new(ctx.clients.main.clone(), types, options),
        pools: CachedPools(cache.clone()),
    };
    // Booting instances join after their delay (the NodeClaim is their record).
    let extra: Option<Extra<Kwok<CachedPools>>> = (!delay.is_zero()).then(|| {
        Box::new(
            move |tasks: &mut JoinSet<()>,
                  context: &Context<MeteredCloud<Kwok<CachedPools>>>,
                  ctx: &ControllerContext| {
                spawn(
                    tasks,
                    kwok_registration::KwokRegistration {
                        ctx: context.clone(),
                        delay,
                    },
                    context,
                    &ctx.cancel,
                );
            },
        ) as Extra<Kwok<CachedPools>>
    });
    run_with(ctx, cache, metrics, Arc::new(cloud), sqs, extra).await
}

async fn run_with<C: CloudProvider + 'static>(
    ctx: ControllerContext,
    cache: ClusterCache,
    metrics: ControllerMetrics,
    cloud: Arc<C>,
    sqs: Option<karpenter_aws_provider::sqs::Client>,
    extra: Option<Extra<C>>,
) -> Result<(), ControllerError> {
    // Node repair's policies are checked before anything starts (upstream refuses to start too).
    let repair = disruption::repair_settings(&ctx.settings, &*cloud)?;
    let mut tasks = JoinSet::new();
    // A standby keeps its caches warm and reports ready once they are synced; it writes
    // nothing until it leads.
    let readiness = ctx.readiness.clone();
    let synced_cache = cache.clone();
    let cancel = ctx.cancel.clone();
    let state_metrics = metrics.clone();
    tasks.spawn(async move {
        let mut changes = synced_cache.changes(std::time::Duration::from_millis(500));
        let mut unsynced_since: Option<tokio::time::Instant> = None;
        loop {
            let synced = synced_cache.synced();
            state_metrics.cluster_state_synced.set(i64::from(synced));
            state_metrics
                .cluster_state_node_count
                .set(i64::try_from(synced_cache.lock().nodes().count()).unwrap_or(i64::MAX));
            let unsynced = if synced {
                unsynced_since = None;
                0.0
            } else {
                unsynced_since
                    .get_or_insert_with(tokio::time::Instant::now)
                    .elapsed()
                    .as_secs_f64()
            };
            state_metrics
                .cluster_state_unsynced_time_seconds
                .set(unsynced);
            if synced {
                readiness.set_ready(true);
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
                // While unsynced, the time it has been so is kept current.
                () = tokio::time::sleep(std::time::Duration::from_secs(1)), if !synced => {}
            }
        }
    });
    let mut leading = ctx.leading.clone();
    let led = tokio::select! {
        () = ctx.cancel.cancelled() => false,
        led = leading.wait() => led,
    };
    if !led {
        while tasks.join_next().await.is_some() {}
        return Ok(());
    }
    let context = Context {
        client: ctx.clients.main.clone(),
        cache: cache.clone(),
        // Every call the loops make to the cloud is timed and counted here, once.
        cloud: Arc::new(MeteredCloud::new(cloud, metrics.clone())),
        events: Events::new(ctx.clients.main.clone()),
        metrics: metrics.clone(),
        settings: ctx.settings.clone(),
        // One instance-type conversion, shared by the loops that read it.
        catalogs: crate::reconcile::catalogs::Catalogs::default(),
        fence: ctx.fence.clone(),
        registrations: crate::reconcile::context::Registrations::default(),
        pod_times: crate::reconcile::context::PodTimes::default(),
        explanations: ctx.explanations.clone(),
    };
    let cancel = &ctx.cancel;
    if let Some(extra) = extra {
        extra(&mut tasks, &context, &ctx);
    }
    spawn(
        &mut tasks,
        provisioner::Provisioner::new(context.clone()),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        reboot::Reboot::new(context.clone()),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        claim_disruption::HashStamps {
            ctx: context.clone(),
        },
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        claim_disruption::PodEvents::new(context.clone()),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        claim_disruption::ClaimDisruption {
            ctx: context.clone(),
        },
        &context,
        cancel,
    );
    if let Some(name) = ctx.settings.interruption_queue.clone() {
        let queue = match sqs {
            Some(sqs) => InterruptionQueue::new(sqs, name),
            None => InterruptionQueue::from_env(name).await,
        };
        spawn(
            &mut tasks,
            interruption::Interruption {
                ctx: context.clone(),
                queue,
                interruption_metrics: interruption::InterruptionMetrics::register(&ctx.metrics),
            },
            &context,
            cancel,
        );
    }
    spawn(
        &mut tasks,
        cloud_metrics::CloudMetrics::new(context.clone()),
        &context,
        cancel,
    );
    // Upstream's EC2NodeClass status controller runs whatever the observability setting.
    spawn(
        &mut tasks,
        status_metrics::StatusMetrics::<status_metrics::NodeClasses, _>::new(context.clone()),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        garbage::GarbageCollection {
            ctx: context.clone(),
        },
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        disruption::Disruption::new(context.clone(), repair),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        termination::Termination::new(context.clone()),
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        lifecycle::Lifecycle {
            ctx: context.clone(),
            config: LifecycleConfig {
                registration_ttl: ctx.settings.registration_ttl,
                ..LifecycleConfig::default()
            },
        },
        &context,
        cancel,
    );
    spawn(
        &mut tasks,
        nodepool_status::NodePoolStatus {
            ctx: context.clone(),
        },
        &context,
        cancel,
    );
    if ctx.settings.feature_gates.node_overlay {
        spawn(
            &mut tasks,
            node_overlay::NodeOverlayStatus {
                ctx: context.clone(),
            },
            &context,
            cancel,
        );
    }
    spawn(
        &mut tasks,
        nodepool_counter::NodePoolCounter {
            ctx: context.clone(),
        },
        &context,
        cancel,
    );
    if ctx.settings.feature_gates.static_capacity {
        spawn(
            &mut tasks,
            static_pools::StaticPools {
                ctx: context.clone(),
            },
            &context,
            cancel,
        );
    }
    if ctx.settings.feature_gates.capacity_buffer {
        spawn(
            &mut tasks,
            capacity_buffers::CapacityBuffers {
                ctx: context.clone(),
            },
            &context,
            cancel,
        );
    }
    if ctx.settings.feature_gates.pod_deletion_cost_management {
        spawn(
            &mut tasks,
            deletion_cost::PodDeletionCost {
                ctx: context.clone(),
                metrics: deletion_cost::DeletionCostMetrics::register(&ctx.metrics),
            },
            &context,
            cancel,
        );
    }
    spawn_observability(&mut tasks, &context, cancel);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Upstream's cluster-state observability controllers: `metrics.nodepool`, `metrics.node` and
/// `metrics.pod` (the NodePool, node and pod gauges) and operatorpkg's status-condition metrics
/// of NodeClaims and NodePools. With `DISABLE_CLUSTER_STATE_OBSERVABILITY` none starts, as
/// upstream's `controllers.go` leaves them out. Returns the names of the loops it started.
fn spawn_observability<C: Send + Sync + 'static>(
    tasks: &mut JoinSet<()>,
    context: &Context<C>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Vec<&'static str> {
    if context.settings.disable_cluster_state_observability {
        return Vec::new();
    }
    spawn(
        tasks,
        nodepool_counter::NodePoolMetrics::new(context.clone()),
        context,
        cancel,
    );
    let gauges = gauges::SharedState::new(
        context.metrics.clone(),
        context.cache.clone(),
        chrono::Utc::now(),
        context.pod_times.clone(),
    );
    spawn(tasks, gauges::NodeMetrics(gauges.clone()), context, cancel);
    spawn(tasks, gauges::PodMetrics(gauges), context, cancel);
    type ClaimStatus<C> = status_metrics::StatusMetrics<status_metrics::NodeClaims, C>;
    type PoolStatus<C> = status_metrics::StatusMetrics<status_metrics::NodePools, C>;
    spawn(tasks, ClaimStatus::new(context.clone()), context, cancel);
    spawn(tasks, PoolStatus::new(context.clone()), context, cancel);
    vec![
        nodepool_counter::NodePoolMetrics::<C>::NAME,
        gauges::NodeMetrics::NAME,
        gauges::PodMetrics::NAME,
        ClaimStatus::<C>::NAME,
        PoolStatus::<C>::NAME,
    ]
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::http::Metrics;
    use crate::leader::Fence;
    use crate::reconcile::catalogs::Catalogs;
    use crate::settings::Settings;

    fn context(args: &[&str]) -> Context<()> {
        let argv = std::iter::once("karpenter").chain(args.iter().copied());
        let settings = Settings::parse_from(argv, Vec::<(String, String)>::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let config = kube::Config::new(
            "http://127.0.0.1:9"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}"));
        Context {
            client: client.clone(),
            cache: ClusterCache::new(),
            cloud: Arc::new(()),
            events: Events::new(client),
            metrics: ControllerMetrics::register(&Metrics::new()),
            settings: Arc::new(settings),
            catalogs: Catalogs::default(),
            fence: Fence::closed(),
            registrations: crate::reconcile::context::Registrations::default(),
            pod_times: crate::reconcile::context::PodTimes::default(),
            explanations: crate::explain::Explanations::default(),
        }
    }

    #[tokio::test]
    async fn disabling_cluster_state_observability_leaves_out_the_metrics_loops() {
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let started = spawn_observability(&mut tasks, &context(&[]), &cancel);
        assert_eq!(
            started,
            [
                "metrics.nodepool",
                "metrics.node",
                "metrics.pod",
                "operatorpkg.nodeclaim.status",
                "operatorpkg.nodepool.status"
            ]
        );
        assert_eq!(tasks.len(), 5);

        let mut none = JoinSet::new();
        let disabled = context(&["--disable-cluster-state-observability"]);
        assert_eq!(
            spawn_observability(&mut none, &disabled, &cancel),
            Vec::<&str>::new()
        );
        assert_eq!(none.len(), 0);

        cancel.cancel();
        while tasks.join_next().await.is_some() {}
    }
}
