//! The controllers: watches into the cluster-state index, the provisioner, the NodeClaim
//! lifecycle, termination, disruption (with the NodeClaim-side conditions and hash stamps),
//! garbage collection and the NodePool counter, started together by [`run`] as the controller
//! future of [`crate::run()`] (so only while this replica leads).

pub mod cache;
pub mod catalogs;
pub mod claim_disruption;
pub mod disruption;
pub mod event_series;
pub mod events;
pub mod garbage;
pub mod in_flight;
pub mod interruption;
pub mod metrics;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool_counter;
pub mod provisioner;
pub mod tagging;
pub mod termination;
pub mod writes;

use std::sync::Arc;

use karpenter_api::v1::NodePool;
use karpenter_cloud::CloudProvider;
use karpenter_lifecycle::LifecycleConfig;
use tokio::task::JoinSet;

use crate::cloud::kwok::{Kwok, KwokCloud, KwokOptions, NodePoolLookup, TypeSource};
use crate::run::{ControllerContext, ControllerError};
use crate::settings::CloudProviderKind;
use cache::ClusterCache;
use events::Events;
use metrics::ControllerMetrics;

/// NodePools as the index holds them.
#[derive(Debug, Clone)]
pub struct CachedPools(pub ClusterCache);

impl NodePoolLookup for CachedPools {
    fn node_pool(&self, name: &str) -> Option<NodePool> {
        self.0.lock().node_pool(name).cloned()
    }
}

/// Why the controllers could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("loading the instance-type catalog for the kwok cloud provider")]
    Catalog(#[source] crate::cloud::kwok::TypeSourceError),
    #[error(transparent)]
    KwokOptions(#[from] crate::cloud::kwok::KwokOptionsError),
    #[error("building the AWS clients")]
    AwsClients(#[from] karpenter_aws_provider::clients::ClientsError),
    #[error("starting the EC2 cloud provider")]
    Aws(#[from] karpenter_aws_provider::provider::StartError),
    #[error("reading the API server's version (AMI aliases need it)")]
    KubernetesVersion(#[source] kube::Error),
}

/// Extra controllers a cloud provider starts once this replica leads.
type Extra = Box<dyn FnOnce(&mut JoinSet<()>, &Events, &ControllerContext) + Send>;

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
    sqs: Option<aws_sdk_sqs::Client>,
) -> Result<(), ControllerError> {
    use karpenter_aws_provider::{AwsCloud, AwsSettings};
    let settings = ctx.settings.clone();
    let cache = ClusterCache::new();
    cache.spawn_watchers(&ctx.clients.main, &ctx.cancel);
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
        kube_dns_ip: None,
    };
    let k8s_version = ctx
        .clients
        .main
        .apiserver_version()
        .await
        .map_err(StartError::KubernetesVersion)?
        .git_version;
    let cloud = Arc::new(
        AwsCloud::start(
            clients.clone(),
            aws_settings,
            nodeclass::CachedClasses(cache.clone()),
        )
        .await
        .map_err(StartError::from)?,
    );
    let refresh = settings
        .ami_refresh_interval
        .min(settings.subnet_refresh_interval);
    let extra_cloud = cloud.clone();
    let extra_cache = cache.clone();
    let extra: Extra = Box::new(move |tasks, events, ctx| {
        let cloud = extra_cloud;
        tasks.spawn(refresh_aws_catalog(cloud.clone(), ctx.cancel.clone()));
        tasks.spawn(
            tagging::Tagging {
                cache: extra_cache.clone(),
                client: ctx.clients.main.clone(),
                clients: clients.clone(),
                cluster: ctx.settings.cluster_name.clone(),
            }
            .run(ctx.cancel.clone()),
        );
        tasks.spawn(
            nodeclass::NodeClassController {
                cache: extra_cache,
                client: ctx.clients.main.clone(),
                resolver: karpenter_aws_provider::nodeclass::NodeClassResolver::new(
                    clients,
                    ctx.settings.cluster_name.clone(),
                ),
                cloud,
                events: events.clone(),
                k8s_version,
                ca_bundle,
                refresh,
            }
            .run(ctx.cancel.clone()),
        );
    });
    run_with(ctx, cache, metrics, cloud, sqs, Some(extra)).await
}

/// Prices at once, then prices and instance types every 12 hours (upstream's schedule); a
/// failed refresh keeps what was known and is tried again in 5 minutes.
async fn refresh_aws_catalog<L: karpenter_aws_provider::NodeClasses>(
    cloud: Arc<karpenter_aws_provider::AwsCloud<L>>,
    cancel: tokio_util::sync::CancellationToken,
) {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(12 * 3600);
    const RETRY: std::time::Duration = std::time::Duration::from_secs(300);
    let mut first = true;
    loop {
        let mut failed = false;
        if !first && let Err(error) = cloud.refresh_catalog().await {
            tracing::warn!(%error, "refreshing the instance types failed; the last list stays");
            failed = true;
        }
        for error in cloud.refresh_prices().await {
            tracing::warn!(%error, "refreshing prices failed; the last prices (or the embedded ones) stay");
            failed = true;
        }
        first = false;
        let wait = if failed { RETRY } else { EVERY };
        tokio::select! {
            () = cancel.cancelled() => return,
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
    sqs: Option<aws_sdk_sqs::Client>,
) -> Result<(), ControllerError> {
    let types = TypeSource::load(ctx.settings.instance_types_file_path.as_deref())
        .map_err(StartError::Catalog)?;
    let cache = ClusterCache::new();
    cache.spawn_watchers(&ctx.clients.main, &ctx.cancel);
    let metrics = ControllerMetrics::register(&ctx.metrics);
    let cloud = Kwok {
        cloud: KwokCloud::new(ctx.clients.main.clone(), types, options),
        pools: CachedPools(cache.clone()),
    };
    run_with(ctx, cache, metrics, Arc::new(cloud), sqs, None).await
}

async fn run_with<C: CloudProvider + 'static>(
    ctx: ControllerContext,
    cache: ClusterCache,
    metrics: ControllerMetrics,
    cloud: Arc<C>,
    sqs: Option<aws_sdk_sqs::Client>,
    extra: Option<Extra>,
) -> Result<(), ControllerError> {
    let mut tasks = JoinSet::new();
    // A standby keeps its caches warm and reports ready once they are synced; it writes
    // nothing until it leads.
    let readiness = ctx.readiness.clone();
    let synced_cache = cache.clone();
    let cancel = ctx.cancel.clone();
    let state_metrics = metrics.clone();
    tasks.spawn(async move {
        let mut changes = synced_cache.changes(std::time::Duration::from_millis(500));
        loop {
            let synced = synced_cache.synced();
            state_metrics.cluster_state_synced.set(i64::from(synced));
            state_metrics
                .cluster_state_node_count
                .set(i64::try_from(synced_cache.lock().nodes().count()).unwrap_or(i64::MAX));
            if synced {
                readiness.set_ready(true);
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {}
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
    let client = ctx.clients.main.clone();
    let events = Events::new(client.clone());
    // One instance-type conversion, shared by the loops that read it.
    let catalogs = catalogs::Catalogs::default();
    if let Some(extra) = extra {
        extra(&mut tasks, &events, &ctx);
    }
    tasks.spawn(
        provisioner::Provisioner {
            cache: cache.clone(),
            cloud: cloud.clone(),
            client: client.clone(),
            settings: ctx.settings.clone(),
            events: events.clone(),
            metrics: metrics.clone(),
            catalogs: catalogs.clone(),
        }
        .run(ctx.cancel.clone()),
    );
    tasks.spawn(
        claim_disruption::ClaimDisruption {
            cache: cache.clone(),
            cloud: cloud.clone(),
            client: client.clone(),
            settings: ctx.settings.clone(),
            events: events.clone(),
            catalogs: catalogs.clone(),
        }
        .run(ctx.cancel.clone()),
    );
    if let Some(queue) = ctx.settings.interruption_queue.clone() {
        tasks.spawn(
            interruption::Interruption {
                cache: cache.clone(),
                cloud: cloud.clone(),
                client: client.clone(),
                sqs: match sqs {
                    Some(sqs) => sqs,
                    None => interruption::sqs_client().await,
                },
                queue,
                events: events.clone(),
                metrics: metrics.clone(),
                interruption_metrics: interruption::InterruptionMetrics::register(&ctx.metrics),
            }
            .run(ctx.cancel.clone()),
        );
    }
    tasks.spawn(
        garbage::GarbageCollection {
            cache: cache.clone(),
            cloud: cloud.clone(),
            client: client.clone(),
            metrics: metrics.clone(),
        }
        .run(ctx.cancel.clone()),
    );
    tasks.spawn(
        disruption::Disruption {
            cache: cache.clone(),
            cloud: cloud.clone(),
            client: client.clone(),
            settings: ctx.settings.clone(),
            events: events.clone(),
            metrics: metrics.clone(),
            catalogs,
        }
        .run(ctx.cancel.clone()),
    );
    tasks.spawn(
        termination::Termination {
            cache: cache.clone(),
            cloud: cloud.clone(),
            client: client.clone(),
            events: events.clone(),
            metrics: metrics.clone(),
        }
        .run(ctx.cancel.clone()),
    );
    tasks.spawn(
        nodeclaim::Lifecycle {
            cache: cache.clone(),
            cloud,
            client: client.clone(),
            events,
            metrics: metrics.clone(),
            config: LifecycleConfig {
                registration_ttl: ctx.settings.registration_ttl,
                ..LifecycleConfig::default()
            },
        }
        .run(ctx.cancel.clone()),
    );
    tasks.spawn(nodepool_counter::run(
        cache.clone(),
        client,
        metrics.clone(),
        ctx.cancel.clone(),
    ));
    while tasks.join_next().await.is_some() {}
    Ok(())
}
