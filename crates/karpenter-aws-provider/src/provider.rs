//! [`AwsCloud`]: the EC2 `CloudProvider`.
//!
//! - **Instance types** of a NodePool: the region's types ([`crate::catalog`]) resolved for
//!   its EC2NodeClass (AMI family, kubelet, the zones of its subnets) with the current prices
//!   ([`crate::pricing`]), types no status AMI can run left out, offerings recently found
//!   without capacity marked unavailable for [`karpenter_cloud::UNAVAILABLE_FOR`]
//!   ([`karpenter_cloud::UnavailableOfferings`]), narrowed by the NodePool's
//!   requirements.
//! - **Create**: the EC2NodeClass must be `Ready` at its generation; the pure plan picks the
//!   types, capacity type, subnets and AMIs; one launch template per group; one `CreateFleet`
//!   (`instant`), shared with the equal launches of other NodeClaims ([`crate::batcher`]);
//!   the NodeClaim comes back with provider id `aws:///<zone>/<id>`, the image, labels,
//!   capacity and the EC2NodeClass hash annotations.
//! - **Get / list / delete** by instance id (`DescribeInstances` and `TerminateInstances`
//!   batched across NodeClaims) and cluster tags; **drift** from the EC2NodeClass
//!   hash, AMIs, security groups and subnets.
//! - **Zonal shifts** (`ENABLE_ZONAL_SHIFT`, [`AwsCloud::with_zonal_shifts`]): every offering
//!   of a zone ARC has shifted away from is unavailable (listings and launches), and no
//!   instance there is terminated while the shift lasts ([`karpenter_aws::zonal_shift`]).

mod dry_run;
pub use dry_run::{DryRun, probe_claim};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::labels;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodeClaimStatus, NodePool};
use karpenter_aws::discovered_capacity::{DiscoveredMemory, NodeReport};
use karpenter_aws::launch::fleet::{self, FleetError, FleetInstance, FleetOutcome, FleetRequest};
use karpenter_aws::launch::plan::{self, LaunchPlan, PlanError};
use karpenter_aws::launch::tenancy;
use karpenter_aws::launch_template::{self, LaunchTemplateRequest, ReservationLaunch};
use karpenter_aws::nodeclass::status::launchable;
use karpenter_aws::placement_group::{self, Placement, PlacementGroup};
use karpenter_aws::userdata::ClusterFacts;
use karpenter_cloud::offering::Reservation;
use karpenter_cloud::pool_types::{PricingOptions, narrow, options_for};
use karpenter_cloud::{
    CapacityType, CloudError, CloudProvider, DriftReason, InstanceTypeInfo, OfferingRef,
    Registration, UnavailableOfferings,
};
use karpenter_scheduling::{InstanceType, RequirementSpec};

use crate::batcher::ec2::Ec2Batchers;
use crate::capacity_reservations::CapacityReservations;
use crate::catalog::{self, Ec2Catalog};
use crate::clients::AwsClients;
use crate::error::AwsError;
use crate::instances::{self, Instance};
use crate::launch_templates::LaunchTemplates;
use crate::metrics::metrics;
use crate::placement_groups::PlacementGroups;
use crate::pricing::PriceBook;
use crate::zonal_shift::ZonalShifts;

/// How old the instance list drift reads may be.
pub const INSTANCE_CACHE_TTL: Duration = Duration::from_secs(30);

/// What the provider needs to know of the cluster and its settings.
#[derive(Debug, Clone, Default)]
pub struct AwsSettings {
    /// `CLUSTER_NAME`.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`; empty: from `eks:DescribeCluster`.
    pub cluster_endpoint: Option<String>,
    /// `CLUSTER_CA_BUNDLE` (base64); empty: from the controller's kube config, else EKS.
    pub cluster_ca_bundle: Option<String>,
    /// `ISOLATED_VPC`: no Pricing API.
    pub isolated_vpc: bool,
    /// `VM_MEMORY_OVERHEAD_PERCENT`.
    pub vm_memory_overhead_percent: f64,
    /// `RESERVED_ENIS`.
    pub reserved_enis: u32,
    /// The `kube-system/kube-dns` ClusterIP, the nodes' default cluster DNS.
    pub kube_dns_ip: Option<String>,
    /// AWS gate `RebootForRepair`: the reboot-clearable GPU faults reboot the node in place.
    pub reboot_for_repair: bool,
    /// Gate `ReservedCapacity`: classes' capacity reservations are offered and launched into,
    /// and launch templates target them.
    pub reserved_capacity: bool,
}

/// EC2NodeClasses as the controller's cache holds them.
pub trait NodeClasses: Send + Sync {
    fn node_class(&self, name: &str) -> Option<EC2NodeClass>;
    /// Changes whenever a class (its status above all) changes.
    fn version(&self) -> u64;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ResolvedKey {
    class: String,
    resource_version: Option<String>,
    catalog: u64,
    prices: u64,
    /// The class's placement group id.
    placement_group: Option<String>,
    /// The learned memory's version.
    discovered: u64,
}

/// The EC2 cloud provider.
pub struct AwsCloud<L> {
    clients: AwsClients,
    settings: AwsSettings,
    classes: L,
    catalog: RwLock<Arc<Ec2Catalog>>,
    catalog_seq: AtomicU64,
    prices: PriceBook,
    unavailable: UnavailableOfferings,
    resolved: Mutex<HashMap<ResolvedKey, Arc<Vec<InstanceTypeInfo>>>>,
    templates: LaunchTemplates,
    cluster: tokio::sync::Mutex<Option<ClusterFacts>>,
    instances: Mutex<Option<(Instant, InstanceMap)>>,
    /// The classes' placement groups, shared with the EC2NodeClass controller.
    placement_groups: Arc<PlacementGroups>,
    /// Offerings found without capacity inside a placement group, by group id (upstream
    /// scopes them so: the same offering outside the group stays available).
    group_unavailable: Mutex<HashMap<String, Arc<UnavailableOfferings>>>,
    /// Instance memory learned from registered nodes.
    discovered: DiscoveredMemory<Instant>,
    /// The cluster's ARC zonal shifts, with `ENABLE_ZONAL_SHIFT`.
    zonal_shifts: Option<Arc<ZonalShifts>>,
    /// The classes' capacity reservations' free slots, shared with the EC2NodeClass
    /// controller (which reads them).
    reservations: Arc<CapacityReservations>,
    /// `CreateFleet`, `DescribeInstances` by id and `TerminateInstances` of concurrent
    /// NodeClaims, batched.
    batchers: Ec2Batchers,
}

/// The cluster's instances by id, as last listed.
type InstanceMap = Arc<HashMap<String, Instance>>;

impl<L> std::fmt::Debug for AwsCloud<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCloud")
            .field("region", &self.clients.region)
            .field("cluster", &self.settings.cluster_name)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why the provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("CLUSTER_NAME is required for --cloud-provider aws")]
    NoClusterName,
    #[error("listing the region's instance types at start")]
    Catalog(#[source] AwsError),
    #[error("loading the embedded prices")]
    Prices(#[source] karpenter_cloud::CatalogError),
}

/// The first wait before a start that failed for a passing reason is tried again.
const START_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest wait between two tries of a start.
const START_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

impl StartError {
    /// How long to wait before trying the start again after its `attempt`-th failure (from
    /// 1): 1 s doubling to 30 s when EC2 may answer next time (throttled, a 5xx, a timeout or
    /// a dropped connection, each already retried by the SDK); `None` when trying again cannot
    /// help (access denied, no cluster name, the embedded prices).
    #[must_use]
    pub fn retry_after(&self, attempt: u32) -> Option<std::time::Duration> {
        match self {
            StartError::Catalog(error) if error.is_retryable() => {
                let doublings = attempt.saturating_sub(1).min(16);
                Some(
                    START_RETRY_FIRST
                        .saturating_mul(1 << doublings)
                        .min(START_RETRY_MAX),
                )
            }
            StartError::Catalog(_) | StartError::NoClusterName | StartError::Prices(_) => None,
        }
    }
}

impl<L: NodeClasses> AwsCloud<L> {
    /// Lists the region's instance types (they must be listable: upstream refuses to start
    /// otherwise) and starts from the embedded prices; call [`AwsCloud::refresh_prices`] next.
    pub async fn start(
        clients: AwsClients,
        settings: AwsSettings,
        classes: L,
    ) -> Result<Self, StartError> {
        if settings.cluster_name.is_empty() {
            return Err(StartError::NoClusterName);
        }
        let catalog = catalog::describe(&clients)
            .await
            .map_err(StartError::Catalog)?;
        let prices =
            PriceBook::new(&clients.region, settings.isolated_vpc).map_err(StartError::Prices)?;
        tracing::info!(
            region = %clients.region,
            instance_types = catalog.instance_types.len(),
            "described the region's instance types"
        );
        let batchers = Ec2Batchers::start(&clients);
        Ok(AwsCloud {
            clients,
            classes,
            catalog: RwLock::new(Arc::new(catalog)),
            catalog_seq: AtomicU64::new(0),
            prices,
            unavailable: UnavailableOfferings::new(),
            resolved: Mutex::new(HashMap::new()),
            templates: LaunchTemplates::default(),
            cluster: tokio::sync::Mutex::new(None),
            instances: Mutex::new(None),
            placement_groups: Arc::new(PlacementGroups::new()),
            group_unavailable: Mutex::new(HashMap::new()),
            discovered: DiscoveredMemory::new(),
            zonal_shifts: None,
            reservations: Arc::new(CapacityReservations::new(settings.reserved_capacity)),
            batchers,
            settings,
        })
    }

    /// Follows the cluster's ARC zonal shifts (`ENABLE_ZONAL_SHIFT`): offerings of a shifted
    /// zone are unavailable and its instances are not terminated until the shift ends.
    #[must_use]
    pub fn with_zonal_shifts(mut self, shifts: Arc<ZonalShifts>) -> Self {
        self.zonal_shifts = Some(shifts);
        self
    }

    /// The zone ids shifted away from now (none without `ENABLE_ZONAL_SHIFT`).
    fn shifted_zones(&self) -> std::collections::BTreeSet<String> {
        self.zonal_shifts
            .as_ref()
            .map(|z| z.shifted(chrono::Utc::now()))
            .unwrap_or_default()
    }

    pub fn clients(&self) -> &AwsClients {
        &self.clients
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    pub fn launch_templates(&self) -> &LaunchTemplates {
        &self.templates
    }

    /// The classes' capacity reservations (the EC2NodeClass controller reads them).
    pub fn capacity_reservations(&self) -> Arc<CapacityReservations> {
        self.reservations.clone()
    }

    /// How launch templates treat reservations: targeted (into `reservation`, or opting out
    /// of all) with the gate `ReservedCapacity` on, open without.
    fn reservation_launch<'a>(
        &self,
        reservation: Option<&'a Reservation>,
    ) -> ReservationLaunch<'a> {
        if self.reservations.enabled() {
            ReservationLaunch::Targeted(reservation)
        } else {
            ReservationLaunch::Open
        }
    }

    /// `infos` with the reserved offerings of the reservations in the class's status (their
    /// free slots as of now); `infos` itself when there is none or the gate is off.
    fn with_reservations(
        &self,
        class: &EC2NodeClass,
        infos: Arc<Vec<InstanceTypeInfo>>,
    ) -> Arc<Vec<InstanceTypeInfo>> {
        let reservations = class
            .status
            .as_ref()
            .and_then(|s| s.capacity_reservations.as_deref())
            .unwrap_or_default();
        if !self.reservations.enabled() || reservations.is_empty() {
            return infos;
        }
        let mut out = infos.as_ref().clone();
        karpenter_aws::capacity_reservation::offerings::apply(
            &mut out,
            reservations,
            self.reservations.availability(),
            Instant::now(),
        );
        Arc::new(out)
    }

    /// The reservation of the plan's offering of `instance_type` in `zone`.
    fn planned_reservation<'p>(
        plan: &'p LaunchPlan,
        instance_type: &str,
        zone: &str,
    ) -> Option<&'p Reservation> {
        plan.groups
            .iter()
            .filter(|g| {
                g.overrides
                    .iter()
                    .any(|o| o.instance_type == instance_type && o.zone == zone)
            })
            .find_map(|g| g.reservation.as_ref())
    }

    /// What a reserved launch's capacity errors mean for its reservations (upstream): a full
    /// one has no free slot until EC2 says otherwise, any other capacity error makes it
    /// unavailable for a while. The shared unavailable marks are left alone (a full but
    /// healthy reservation is no unavailable offering).
    fn account_reserved_errors(&self, plan: &LaunchPlan, errors: &[FleetError]) {
        let now = Instant::now();
        for error in errors {
            if !fleet::UNFULFILLABLE_CODES.contains(&error.code.as_str()) {
                continue;
            }
            let (Some(instance_type), Some(zone)) = (&error.instance_type, &error.zone) else {
                continue;
            };
            let Some(reservation) = Self::planned_reservation(plan, instance_type, zone) else {
                continue;
            };
            let slots = self.reservations.availability();
            if error.code == "ReservationCapacityExceeded" {
                tracing::debug!(reservation = %reservation.id, instance_type = %instance_type, zone = %zone, "the capacity reservation is full");
                slots.set(&reservation.id, 0, now);
            } else {
                tracing::debug!(reservation = %reservation.id, reason = %error.code, instance_type = %instance_type, zone = %zone, "marking reserved offering unavailable");
                slots.mark_unavailable(&reservation.id, now);
            }
        }
    }

    /// The classes' placement groups (the EC2NodeClass controller resolves into them).
    pub fn placement_groups(&self) -> Arc<PlacementGroups> {
        self.placement_groups.clone()
    }

    /// Learns an instance type's memory from a registered node of `class` (its labels, its
    /// `status.capacity.memory` in bytes, its NodeClaim's image): upstream's discovered
    /// capacity. Returns whether what instance types say changed.
    pub fn learn_node_memory(
        &self,
        class: &EC2NodeClass,
        labels: &BTreeMap<String, String>,
        memory_bytes: i64,
        image_id: &str,
    ) -> bool {
        let amis = class
            .status
            .as_ref()
            .and_then(|s| s.amis.as_deref())
            .unwrap_or_default();
        let learned = self.discovered.learn(
            amis,
            NodeReport {
                labels,
                memory_bytes,
                image_id,
            },
            Instant::now(),
        );
        if learned {
            tracing::debug!(
                ec2nodeclass = class.metadata.name.as_deref().unwrap_or_default(),
                instance_type = labels
                    .get(labels::INSTANCE_TYPE)
                    .map(String::as_str)
                    .unwrap_or_default(),
                memory_bytes,
                "updating discovered capacity cache"
            );
        }
        learned
    }

    /// The class's placement group: `None` without a selector; a selector that matches no
    /// available group makes the class not ready (its `PlacementGroupReady` says so too).
    async fn placement_group(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Option<PlacementGroup>, CloudError> {
        let Some(selector) = placement_group::selector(class) else {
            return Ok(None);
        };
        match self.placement_groups.get(&self.clients, selector).await {
            Ok(Some(group)) => Ok(Some(group)),
            Ok(None) => Err(CloudError::NodeClassNotReady {
                node_class: class.metadata.name.clone().unwrap_or_default(),
                reason: format!(
                    "spec.placementGroupSelector: Placement group {:?} not found",
                    placement_group::describe(selector)
                ),
            }),
            Err(error) => Err(error.into_cloud()),
        }
    }

    /// The marks of offerings found without capacity inside `group`.
    fn group_marks(&self, group: &PlacementGroup) -> Arc<UnavailableOfferings> {
        lock(&self.group_unavailable)
            .entry(group.id.clone())
            .or_default()
            .clone()
    }

    /// Marks offerings unavailable, inside `group` only when there is one.
    fn mark(&self, group: Option<&PlacementGroup>, offerings: &[OfferingRef]) {
        match group {
            Some(group) => self.group_marks(group).mark(offerings, Instant::now()),
            None => self.unavailable.mark(offerings, Instant::now()),
        }
    }

    /// The offerings unavailable now, for a class launching into `group`.
    fn unavailable_now(&self, group: Option<&PlacementGroup>) -> Vec<karpenter_cloud::Unavailable> {
        let now = Instant::now();
        let mut out = vec![self.unavailable.at(now)];
        if let Some(group) = group {
            out.push(self.group_marks(group).at(now));
        }
        out
    }

    /// Lists the instance types again (upstream: every 12 hours).
    pub async fn refresh_catalog(&self) -> Result<usize, AwsError> {
        let catalog = catalog::describe(&self.clients).await?;
        let count = catalog.instance_types.len();
        let mut current = self
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if **current != catalog {
            *current = Arc::new(catalog);
            self.catalog_seq.fetch_add(1, Ordering::Relaxed);
        }
        Ok(count)
    }

    /// Reads on-demand and spot prices again; each failure is returned, the other half still
    /// applies.
    pub async fn refresh_prices(&self) -> Vec<AwsError> {
        let mut errors = Vec::new();
        match self.prices.refresh_on_demand(&self.clients).await {
            Ok(count) => tracing::debug!(count, "on-demand prices refreshed"),
            Err(error) => errors.push(error),
        }
        match self.prices.refresh_spot(&self.clients).await {
            Ok(count) => tracing::debug!(count, "spot prices refreshed"),
            Err(error) => errors.push(error),
        }
        errors
    }

    fn class_of(&self, name: &str) -> Result<EC2NodeClass, CloudError> {
        let class = self
            .classes
            .node_class(name)
            .ok_or_else(|| CloudError::NodeClassNotReady {
                node_class: name.to_owned(),
                reason: "the EC2NodeClass does not exist".into(),
            })?;
        if class.metadata.deletion_timestamp.is_some() {
            return Err(CloudError::NodeClassNotReady {
                node_class: name.to_owned(),
                reason: "the EC2NodeClass is being deleted".into(),
            });
        }
        launchable(class.status.as_ref(), class.metadata.generation).map_err(|reason| {
            CloudError::NodeClassNotReady {
                node_class: name.to_owned(),
                reason,
            }
        })?;
        Ok(class)
    }

    /// Every type the class can launch (no NodePool narrowing, no unavailability), shared:
    /// with the tenancy choice, the class's placement group (`group`) and the memory learned
    /// from registered nodes.
    fn resolved(
        &self,
        pool: &NodePool,
        class: &EC2NodeClass,
        group: Option<&PlacementGroup>,
    ) -> Result<Arc<Vec<InstanceTypeInfo>>, CloudError> {
        let key = ResolvedKey {
            class: class.metadata.name.clone().unwrap_or_default(),
            resource_version: class.metadata.resource_version.clone(),
            catalog: self.catalog_seq.load(Ordering::Relaxed),
            prices: self.prices.version(),
            placement_group: group.map(|g| g.id.clone()),
            discovered: self.discovered.version(),
        };
        if let Some(found) = lock(&self.resolved).get(&key) {
            return Ok(found.clone());
        }
        let mut notes = Vec::new();
        let pricing = PricingOptions {
            region: self.clients.region.clone(),
            ..PricingOptions::default()
        };
        let Some(mut options) = options_for(pool, class, &pricing, &mut notes) else {
            return Err(CloudError::NodeClassNotReady {
                node_class: key.class.clone(),
                reason: notes.join("; "),
            });
        };
        options.zones = karpenter_aws::nodeclass::selectors::zones(class);
        options.vm_memory_overhead_percent = self.settings.vm_memory_overhead_percent;
        options.reserved_enis = self.settings.reserved_enis;
        let catalog = self
            .catalog
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // The class's own restrictions first (enclaveOptions: Nitro Enclaves support).
        let (compatible, left_out) = karpenter_aws::instance_types::compatible_with_node_class(
            &catalog.instance_types,
            &class.spec,
        );
        if let Some(first) = left_out.first() {
            tracing::debug!(
                node_class = %key.class,
                left_out = left_out.len(),
                example = %format!("{}: {}", first.instance_type, first.reason),
                "instance types the EC2NodeClass cannot launch"
            );
        }
        let resolved = self
            .prices
            .with(|prices| {
                karpenter_aws::instance_types::resolve(
                    &compatible,
                    &catalog.zones_by_type,
                    prices,
                    &options,
                )
            })
            .map_err(|e| CloudError::InvalidNodeClaim {
                node_claim: String::new(),
                message: format!("EC2NodeClass {}: {e}", key.class),
            })?;
        let amis = class
            .status
            .as_ref()
            .and_then(|s| s.amis.as_deref())
            .unwrap_or_default();
        let mut infos: Vec<InstanceTypeInfo> = resolved
            .instance_types
            .into_iter()
            .filter(|info| karpenter_aws::nodeclass::amis::ami_for(amis, &info.labels).is_some())
            .collect();
        tenancy::offer(&mut infos);
        if let Some(group) = group {
            let strategies = |name: &str| {
                catalog
                    .instance_types
                    .binary_search_by(|t| t.instance_type.as_str().cmp(name))
                    .ok()
                    .and_then(|i| catalog.instance_types[i].placement_group_info.as_ref())
                    .map(|p| p.supported_strategies.clone())
            };
            placement_group::apply(&mut infos, group, &strategies);
        }
        self.discovered.apply(&mut infos, amis, Instant::now());
        let infos = Arc::new(infos);
        let mut cache = lock(&self.resolved);
        // Keys of other resource versions of the class are stale now.
        cache.retain(|k, _| k.class != key.class);
        cache.insert(key, infos.clone());
        Ok(infos)
    }

    /// What the nodes join: endpoint, CA bundle, service CIDR, DNS.
    async fn cluster_facts(&self, need_cidr: bool) -> Result<ClusterFacts, CloudError> {
        let mut cached = self.cluster.lock().await;
        if let Some(facts) = cached.as_ref()
            && (!need_cidr || facts.service_cidr.is_some())
        {
            return Ok(facts.clone());
        }
        let mut facts = ClusterFacts {
            name: self.settings.cluster_name.clone(),
            endpoint: self.settings.cluster_endpoint.clone().unwrap_or_default(),
            ca_bundle: self.settings.cluster_ca_bundle.clone(),
            service_cidr: None,
            dns_ip: self.settings.kube_dns_ip.clone(),
        };
        if facts.endpoint.is_empty() || facts.ca_bundle.is_none() || need_cidr {
            let out = self
                .clients
                .eks
                .describe_cluster()
                .name(&self.settings.cluster_name)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("eks:DescribeCluster", &e).into_cloud())?;
            let cluster = out.cluster();
            if facts.endpoint.is_empty() {
                facts.endpoint = cluster
                    .and_then(|c| c.endpoint())
                    .unwrap_or_default()
                    .to_owned();
            }
            if facts.ca_bundle.is_none() {
                facts.ca_bundle = cluster
                    .and_then(|c| c.certificate_authority())
                    .and_then(|c| c.data())
                    .map(str::to_owned);
            }
            facts.service_cidr = cluster
                .and_then(|c| c.kubernetes_network_config())
                .and_then(|n| {
                    n.service_ipv4_cidr()
                        .or(n.service_ipv6_cidr())
                        .map(str::to_owned)
                });
        }
        if facts.endpoint.is_empty() {
            return Err(CloudError::Provider {
                operation: "eks:DescribeCluster",
                message: format!(
                    "cluster {} has no endpoint; set CLUSTER_ENDPOINT",
                    self.settings.cluster_name
                ),
                retryable: true,
            });
        }
        *cached = Some(facts.clone());
        Ok(facts)
    }

    fn instance_type_labels(
        &self,
        claim: &NodeClaim,
        class: &EC2NodeClass,
        pool: Option<&NodePool>,
        group: Option<&PlacementGroup>,
    ) -> Option<BTreeMap<String, String>> {
        let name = claim
            .metadata
            .labels
            .as_ref()?
            .get(labels::INSTANCE_TYPE)?
            .clone();
        let pool = pool?;
        let infos = self.resolved(pool, class, group).ok()?;
        infos
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.labels.clone())
    }

    async fn instance_cache(&self) -> Result<InstanceMap, AwsError> {
        if let Some((at, cached)) = lock(&self.instances).as_ref()
            && at.elapsed() < INSTANCE_CACHE_TTL
        {
            return Ok(cached.clone());
        }
        let listed = instances::list(&self.clients, &self.settings.cluster_name).await?;
        Ok(self.remember(listed))
    }

    fn remember(&self, listed: Vec<Instance>) -> InstanceMap {
        let map: InstanceMap = Arc::new(listed.into_iter().map(|i| (i.id.clone(), i)).collect());
        *lock(&self.instances) = Some((Instant::now(), map.clone()));
        map
    }

    async fn launch(
        &self,
        claim: &NodeClaim,
        class: &EC2NodeClass,
        pool: &NodePool,
    ) -> Result<NodeClaim, CloudError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let group = self.placement_group(class).await?;
        let infos = self.with_reservations(class, self.resolved(pool, class, group.as_ref())?);
        let by_name: HashMap<&str, &InstanceTypeInfo> =
            infos.iter().map(|i| (i.name.as_str(), i)).collect();
        let unavailable = self.unavailable_now(group.as_ref());
        let shifted = self.shifted_zones();
        let is_unavailable = |instance_type: &str, offering: &karpenter_cloud::Offering| {
            unavailable
                .iter()
                .any(|marks| marks.contains(instance_type, offering))
                || karpenter_aws::zonal_shift::is_shifted(
                    &offering.zone,
                    |zone| zone_id_of(class, zone),
                    &shifted,
                )
        };
        let plan = plan::plan(claim, class, &|n| by_name.get(n).copied(), &is_unavailable)
            .map_err(|error| match error {
                PlanError::NoOffering { .. } => CloudError::InsufficientCapacity {
                    node_claim: name.clone(),
                    offerings: Vec::new(),
                    message: error.to_string(),
                },
                PlanError::NoSubnet { .. } | PlanError::NoAmi { .. } => {
                    CloudError::NodeClassNotReady {
                        node_class: class.metadata.name.clone().unwrap_or_default(),
                        reason: error.to_string(),
                    }
                }
            })?;
        let family = class.spec.resolved_ami_family();
        let facts = self
            .cluster_facts(family == Some(karpenter_api::v1::AmiFamily::AL2023))
            .await?;
        let tenancy = tenancy::for_claim(claim);
        let placement = group.as_ref().map(|g| Placement::for_claim(claim, g));
        let mut names = Vec::new();
        for group in &plan.groups {
            let group_infos: Vec<InstanceTypeInfo> = group
                .instance_types
                .iter()
                .filter_map(|n| by_name.get(n.as_str()).map(|i| (*i).clone()))
                .collect();
            let template = launch_template::build(&LaunchTemplateRequest {
                node_class: class,
                node_claim: claim,
                cluster: &facts,
                region: &self.clients.region,
                image_id: &group.image_id,
                instance_types: &group_infos,
                capacity_type: plan.capacity_type.as_str(),
                tenancy,
                placement: placement.as_ref(),
                capacity_reservation: self.reservation_launch(group.reservation.as_ref()),
            })
            .map_err(|e| CloudError::InvalidNodeClaim {
                node_claim: name.clone(),
                message: format!("launch template: {e}"),
            })?;
            self.templates
                .ensure(&self.clients, &template)
                .await
                .map_err(AwsError::into_cloud)?;
            names.push(template.name);
        }
        let tags = launch_template::launch_tags(class, claim, &self.settings.cluster_name);
        let request = fleet::request(&plan, &names, tags, class.spec.context.clone());
        let (mut outcome, errors) = self.create_fleet(&request, &plan, class).await?;
        let reserved = plan.capacity_type == CapacityType::Reserved;
        if reserved {
            self.account_reserved_errors(&plan, &errors);
        }
        if let Some(group) = group.as_ref() {
            // A spread group's seven instances per zone: every type of that zone is out of the
            // group until the mark expires (upstream's IsSpreadPlacementGroupLimitError).
            let full: Vec<OfferingRef> = errors
                .iter()
                .filter(|e| placement_group::is_spread_limit(&e.message))
                .filter_map(|e| e.zone.as_deref())
                .flat_map(|zone| {
                    plan.groups
                        .iter()
                        .flat_map(|g| &g.instance_types)
                        .map(|t| OfferingRef {
                            instance_type: t.clone(),
                            zone: zone.to_owned(),
                            capacity_type: plan.capacity_type,
                        })
                })
                .collect();
            self.mark(Some(group), &full);
        }
        if let FleetOutcome::Failed { code, .. } = &outcome
            && code.starts_with("InvalidLaunchTemplateName")
        {
            // A template went missing behind our back: make them again, once.
            for template in &names {
                self.templates.forget(template);
            }
            return Err(CloudError::Provider {
                operation: "ec2:CreateFleet",
                message: format!(
                    "{code}: a launch template was gone; it is made again on the next launch"
                ),
                retryable: true,
            });
        }
        match std::mem::replace(
            &mut outcome,
            FleetOutcome::Failed {
                code: String::new(),
                message: String::new(),
            },
        ) {
            FleetOutcome::Launched {
                instance,
                unavailable,
            } => {
                if !reserved {
                    self.mark(group.as_ref(), &unavailable);
                }
                let info = by_name.get(instance.instance_type.as_str()).copied();
                let image = plan
                    .overrides()
                    .find(|o| o.instance_type == instance.instance_type && o.zone == instance.zone)
                    .or_else(|| {
                        plan.overrides()
                            .find(|o| o.instance_type == instance.instance_type)
                    })
                    .map(|o| o.image_id.clone());
                tracing::info!(nodeclaim = %name, instance = %instance.instance_id, instance_type = %instance.instance_type, zone = %instance.zone, capacity_type = instance.capacity_type.as_str(), tenancy, "launched an EC2 instance");
                let mut placed =
                    BTreeMap::from([(labels::INSTANCE_TENANCY.to_owned(), tenancy.to_owned())]);
                if let Some(reservation) =
                    Self::planned_reservation(&plan, &instance.instance_type, &instance.zone)
                        .filter(|_| instance.capacity_type == CapacityType::Reserved)
                {
                    self.reservations
                        .availability()
                        .mark_launched(&reservation.id, Instant::now());
                    placed.extend(reservation.labels());
                }
                if let Some(group) = group.as_ref() {
                    // An untargeted partition is EC2's choice: the label stays empty until the
                    // registration hook reads it (upstream's sentinel).
                    let partition = placement.as_ref().and_then(|p| p.partition_number);
                    placed.extend(placement_group::node_labels(claim, group, partition));
                }
                Ok(self.launched_view(claim, class, &instance, info, image, placed))
            }
            FleetOutcome::InsufficientCapacity {
                mut unavailable,
                spot_role_missing,
                message,
            } => {
                if !reserved {
                    self.mark(group.as_ref(), &unavailable);
                }
                if spot_role_missing {
                    let spot: Vec<OfferingRef> = plan
                        .overrides()
                        .map(|o| OfferingRef {
                            instance_type: o.instance_type.clone(),
                            zone: o.zone.clone(),
                            capacity_type: CapacityType::Spot,
                        })
                        .collect();
                    self.mark_unavailable(&spot);
                    unavailable.extend(spot);
                }
                Err(CloudError::InsufficientCapacity {
                    node_claim: name,
                    offerings: unavailable,
                    message,
                })
            }
            FleetOutcome::Failed { code, message } => Err(CloudError::Provider {
                operation: "ec2:CreateFleet",
                retryable: AwsError::new("ec2:CreateFleet", &code, "").is_retryable(),
                message: format!("{code}: {message}"),
            }),
        }
    }

    /// Launches `request` through the `create_fleet` batcher: this launch's instance (its zone
    /// asked of EC2 when the answer does not name it) and the answer's errors, counted as
    /// launch failures.
    async fn create_fleet(
        &self,
        request: &FleetRequest,
        plan: &LaunchPlan,
        class: &EC2NodeClass,
    ) -> Result<(FleetOutcome, Vec<FleetError>), CloudError> {
        let share = self
            .batchers
            .create_fleet(request)
            .await
            .map_err(AwsError::into_cloud)?;
        let mut launched = Vec::new();
        if let Some(instance) = share.instance {
            let zone = match instance.zone {
                Some(zone) => zone,
                // Not every answer names the zone: ask EC2 where it went.
                None => match self.batchers.describe(&instance.instance_id).await {
                    Ok(Some(described)) => described.zone,
                    _ => plan
                        .overrides()
                        .find(|o| o.instance_type == instance.instance_type)
                        .map(|o| o.zone.clone())
                        .unwrap_or_default(),
                },
            };
            launched.push(FleetInstance {
                instance_id: instance.instance_id,
                instance_type: instance.instance_type,
                zone,
                capacity_type: if instance.spot {
                    CapacityType::Spot
                } else {
                    request.capacity_type
                },
            });
        }
        let errors = share.errors;
        for error in &errors {
            let zone = error.zone.as_deref().unwrap_or_default();
            metrics().launch_failure(
                zone,
                &Self::zone_id(class, zone).unwrap_or_default(),
                request.capacity_type.as_str(),
                fleet::launch_failure_reason(&error.code, &error.message),
            );
        }
        Ok((
            fleet::outcome(request.capacity_type, launched, &errors),
            errors,
        ))
    }

    fn zone_id(class: &EC2NodeClass, zone: &str) -> Option<String> {
        zone_id_of(class, zone).map(str::to_owned)
    }

    fn launched_view(
        &self,
        claim: &NodeClaim,
        class: &EC2NodeClass,
        instance: &FleetInstance,
        info: Option<&InstanceTypeInfo>,
        image: Option<String>,
        placed: BTreeMap<String, String>,
    ) -> NodeClaim {
        let mut view = claim.clone();
        let mut node_labels: BTreeMap<String, String> =
            info.map(|i| i.labels.clone()).unwrap_or_default();
        // Tenancy and placement group: what this launch chose among the type's choices.
        node_labels.extend(placed);
        node_labels.insert(
            labels::INSTANCE_TYPE.to_owned(),
            instance.instance_type.clone(),
        );
        node_labels.insert(labels::ZONE.to_owned(), instance.zone.clone());
        node_labels.insert(
            labels::CAPACITY_TYPE.to_owned(),
            instance.capacity_type.as_str().to_owned(),
        );
        if let Some(zone_id) = Self::zone_id(class, &instance.zone) {
            node_labels.insert(labels::ZONE_ID.to_owned(), zone_id);
        }
        node_labels.extend(claim.metadata.labels.clone().unwrap_or_default());
        view.metadata.labels = Some(node_labels);
        let mut annotations = claim.metadata.annotations.clone().unwrap_or_default();
        let class_annotations = class.metadata.annotations.clone().unwrap_or_default();
        for key in [labels::EC2NODECLASS_HASH, labels::EC2NODECLASS_HASH_VERSION] {
            if let Some(value) = class_annotations.get(key) {
                annotations.insert(key.to_owned(), value.clone());
            }
        }
        if let Some(profile) = class
            .status
            .as_ref()
            .and_then(|s| s.instance_profile.clone())
        {
            annotations.insert(labels::INSTANCE_PROFILE_NAME.to_owned(), profile);
        }
        view.metadata.annotations = Some(annotations);
        let scheduling = info.map(InstanceType::from);
        view.status = Some(NodeClaimStatus {
            provider_id: Some(instances::provider_id(
                &instance.zone,
                &instance.instance_id,
            )),
            image_id: image,
            capacity: scheduling.as_ref().map(|it| it.capacity.to_k8s()),
            allocatable: scheduling.as_ref().map(|it| it.allocatable().to_k8s()),
            ..NodeClaimStatus::default()
        });
        view
    }

    fn instance_view(instance: &Instance) -> NodeClaim {
        let mut node_labels: BTreeMap<String, String> = BTreeMap::new();
        node_labels.insert(
            labels::INSTANCE_TYPE.to_owned(),
            instance.instance_type.clone(),
        );
        node_labels.insert(labels::ZONE.to_owned(), instance.zone.clone());
        node_labels.insert(
            labels::CAPACITY_TYPE.to_owned(),
            instance.capacity_type.as_str().to_owned(),
        );
        node_labels.insert(
            labels::INSTANCE_TENANCY.to_owned(),
            instance.tenancy.clone(),
        );
        if let Some(reservation) = &instance.reservation {
            node_labels.extend(reservation.labels());
        }
        if let Some(pool) = instance.tags.get(labels::NODEPOOL) {
            node_labels.insert(labels::NODEPOOL.to_owned(), pool.clone());
        }
        let class = instance
            .tags
            .get("karpenter.k8s.aws/ec2nodeclass")
            .cloned()
            .unwrap_or_default();
        NodeClaim {
            metadata: ObjectMeta {
                name: instance.tags.get("karpenter.sh/nodeclaim").cloned(),
                labels: Some(node_labels),
                creation_timestamp: instance.launch_time.and_then(|t| {
                    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
                        .ok()
                        .map(Time)
                }),
                ..ObjectMeta::default()
            },
            spec: karpenter_api::v1::NodeClaimSpec {
                taints: Vec::new(),
                startup_taints: Vec::new(),
                requirements: Vec::new(),
                resources: None,
                node_class_ref: karpenter_api::v1::NodeClassReference {
                    group: "karpenter.k8s.aws".to_owned(),
                    kind: "EC2NodeClass".to_owned(),
                    name: class,
                },
                termination_grace_period: None,
                expire_after: karpenter_api::duration::NillableDuration::never(),
            },
            status: Some(NodeClaimStatus {
                provider_id: Some(instance.provider_id()),
                image_id: instance.image_id.clone(),
                ..NodeClaimStatus::default()
            }),
        }
    }

    fn instance_id(provider_id: &str) -> Result<&str, CloudError> {
        karpenter_aws::interruption::provider_id::instance_id(provider_id).ok_or_else(|| {
            CloudError::NodeClaimNotFound {
                what: format!("provider id {provider_id:?} (not aws:///<zone>/<instance-id>)"),
            }
        })
    }
}

/// The id of `zone` among the class's subnets.
fn zone_id_of<'a>(class: &'a EC2NodeClass, zone: &str) -> Option<&'a str> {
    class
        .status
        .as_ref()?
        .subnets
        .as_ref()?
        .iter()
        .find(|s| s.zone == zone)
        .and_then(|s| s.zone_id.as_deref())
}

/// Why an instance in a shifted zone is not terminated now (retried until the shift ends).
fn shifted_termination(id: &str, zone: &str, zone_id: &str) -> CloudError {
    CloudError::Provider {
        operation: "ec2:TerminateInstances",
        message: format!(
            "instance {id} is in zonally shifted availability zone {zone} ({zone_id}), skipping termination"
        ),
        retryable: true,
    }
}

fn pool_of(claim: &NodeClaim) -> Option<String> {
    claim
        .metadata
        .labels
        .as_ref()?
        .get(labels::NODEPOOL)
        .cloned()
}

/// A NodePool the claim came from, for instance-type resolution (its requirements do not
/// matter there, only its name and class).
fn pool_for(claim: &NodeClaim) -> Result<NodePool, CloudError> {
    let object = serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool_of(claim).unwrap_or_default()},
        "spec": {"template": {"spec": {
            "nodeClassRef": claim.spec.node_class_ref,
            "requirements": []
        }}}
    });
    serde_json::from_value(object).map_err(|e| CloudError::InvalidNodeClaim {
        node_claim: claim.metadata.name.clone().unwrap_or_default(),
        message: format!("spec.nodeClassRef: {e}"),
    })
}

impl<L: NodeClasses> CloudProvider for AwsCloud<L> {
    fn name(&self) -> &'static str {
        "aws"
    }

    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
        let reference = &node_claim.spec.node_class_ref;
        if reference.kind != "EC2NodeClass" {
            return Err(CloudError::InvalidNodeClaim {
                node_claim: node_claim.metadata.name.clone().unwrap_or_default(),
                message: format!(
                    "spec.nodeClassRef: the aws provider launches from EC2NodeClasses, not {}",
                    reference.kind
                ),
            });
        }
        let class = self.class_of(&reference.name)?;
        self.launch(node_claim, &class, &pool_for(node_claim)?)
            .await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudError> {
        let provider_id = node_claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let id = Self::instance_id(&provider_id)?;
        let shifted = self.shifted_zones();
        let claim_label = |key: &str| {
            node_claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .cloned()
                .unwrap_or_default()
        };
        // No call at all into a shifted zone when the NodeClaim says where it is.
        let labelled_zone_id = claim_label(labels::ZONE_ID);
        if shifted.contains(&labelled_zone_id) {
            return Err(shifted_termination(
                id,
                &claim_label(labels::ZONE),
                &labelled_zone_id,
            ));
        }
        let instance = self
            .batchers
            .describe(id)
            .await
            .map_err(AwsError::into_cloud)?;
        let result = match instance {
            None => Err(CloudError::NodeClaimNotFound {
                what: format!("instance {id}"),
            }),
            Some(instance) if instance.state == "shutting-down" => Ok(()),
            Some(instance)
                if instance
                    .zone_id
                    .as_ref()
                    .is_some_and(|zone_id| shifted.contains(zone_id)) =>
            {
                Err(shifted_termination(
                    id,
                    &instance.zone,
                    instance.zone_id.as_deref().unwrap_or_default(),
                ))
            }
            Some(instance) => {
                self.batchers.terminate(id).await.map_err(|e| {
                    metrics().termination_failure(
                        &instance.zone,
                        instance.zone_id.as_deref().unwrap_or_default(),
                    );
                    if e.is_not_found() {
                        CloudError::NodeClaimNotFound {
                            what: format!("instance {id}"),
                        }
                    } else {
                        e.into_cloud()
                    }
                })?;
                tracing::info!(instance = %id, nodeclaim = node_claim.metadata.name.as_deref().unwrap_or_default(), "terminating the EC2 instance");
                Ok(())
            }
        };
        // The instance's reservation slot is free again (once per instance; upstream waits for
        // the instance to be gone, we count it from the termination on: the next
        // DescribeCapacityReservations answer corrects either way).
        let reservation = claim_label(labels::CAPACITY_RESERVATION_ID);
        if !reservation.is_empty()
            && matches!(result, Ok(()) | Err(CloudError::NodeClaimNotFound { .. }))
        {
            self.reservations
                .availability()
                .mark_terminated(&reservation, id, Instant::now());
        }
        result
    }

    /// `ec2:RebootInstances` (upstream v1.15.1): not into a zonally shifted zone (retried), a
    /// missing instance is not found, a denied call rejects the reboot (a permission does not
    /// come by retrying); EC2 has no idempotency token for it, `operation_id` is logged only.
    async fn reboot(&self, node_claim: &NodeClaim, operation_id: &str) -> Result<(), CloudError> {
        let provider_id = node_claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let id = Self::instance_id(&provider_id)?;
        let instance = self
            .batchers
            .describe(id)
            .await
            .map_err(AwsError::into_cloud)?
            .ok_or_else(|| CloudError::NodeClaimNotFound {
                what: format!("instance {id}"),
            })?;
        if let Some(zone_id) = instance
            .zone_id
            .as_ref()
            .filter(|z| self.shifted_zones().contains(*z))
        {
            return Err(CloudError::Provider {
                operation: "ec2:RebootInstances",
                message: format!(
                    "instance {id} is in zonally shifted availability zone {} ({zone_id}), skipping reboot",
                    instance.zone
                ),
                retryable: true,
            });
        }
        instances::reboot(&self.clients, id).await.map_err(|e| {
            if e.is_not_found() {
                CloudError::NodeClaimNotFound {
                    what: format!("instance {id}"),
                }
            } else if e.is_access_denied() {
                CloudError::RebootRejected {
                    node_claim: node_claim.metadata.name.clone().unwrap_or_default(),
                    message: e.detail(),
                }
            } else {
                e.into_cloud()
            }
        })?;
        tracing::info!(instance = %id, operation_id, "rebooting the EC2 instance");
        Ok(())
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
        let id = Self::instance_id(provider_id)?;
        match self
            .batchers
            .describe(id)
            .await
            .map_err(AwsError::into_cloud)?
        {
            Some(instance) => Ok(Self::instance_view(&instance)),
            None => Err(CloudError::NodeClaimNotFound {
                what: format!("instance {id}"),
            }),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
        let listed = instances::list(&self.clients, &self.settings.cluster_name)
            .await
            .map_err(AwsError::into_cloud)?;
        let map = self.remember(listed);
        Ok(map.values().map(Self::instance_view).collect())
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<InstanceTypeInfo>, CloudError> {
        let reference = &node_pool.spec.template.spec.node_class_ref;
        let class = self.class_of(&reference.name)?;
        let group = self.placement_group(&class).await?;
        let resolved =
            self.with_reservations(&class, self.resolved(node_pool, &class, group.as_ref())?);
        let mut infos: Vec<InstanceTypeInfo> = resolved.as_ref().clone();
        for marks in self.unavailable_now(group.as_ref()) {
            marks.apply(&mut infos);
        }
        karpenter_aws::zonal_shift::apply(
            &mut infos,
            |zone| zone_id_of(&class, zone),
            &self.shifted_zones(),
        );
        let requirements: Vec<RequirementSpec> = karpenter_scheduling::v1::node_pool(node_pool)
            .map(|p| p.requirements)
            .unwrap_or_default();
        Ok(narrow(&infos, &requirements).infos)
    }

    async fn is_drifted(&self, node_claim: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
        let Ok(class) = self.class_of(&node_claim.spec.node_class_ref.name) else {
            return Ok(None);
        };
        let Some(provider_id) = node_claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
        else {
            return Ok(None);
        };
        let id = Self::instance_id(provider_id)?;
        let cached = self.instance_cache().await.map_err(AwsError::into_cloud)?;
        let facts_of = |i: &Instance| karpenter_aws::drift::InstanceFacts {
            image_id: i.image_id.clone(),
            subnet_id: i.subnet_id.clone(),
            security_group_ids: i.security_group_ids.clone(),
            capacity_reservation_id: i.reservation.as_ref().map(|r| r.id.clone()),
        };
        let mut facts = cached.get(id).map(facts_of).unwrap_or_default();
        let pool = pool_for(node_claim)?;
        // A group that cannot be described now decides nothing (upstream would drift every
        // node of the group on a failed lookup).
        let group = self.placement_group(&class).await;
        let type_labels = self.instance_type_labels(
            node_claim,
            &class,
            Some(&pool),
            group.as_ref().ok().and_then(Option::as_ref),
        );
        let mut reason =
            karpenter_aws::drift::drift(node_claim, &class, type_labels.as_ref(), &facts);
        if reason == Some(karpenter_aws::drift::CAPACITY_RESERVATION_DRIFT) {
            // The cached answer may predate the reservation's end (the instance then runs
            // on-demand): ask EC2 again before calling it drifted, as upstream.
            let fresh = self
                .batchers
                .describe(id)
                .await
                .map_err(AwsError::into_cloud)?;
            facts.capacity_reservation_id = fresh.and_then(|i| i.reservation.map(|r| r.id));
            reason = karpenter_aws::drift::drift(node_claim, &class, type_labels.as_ref(), &facts);
        }
        let reason = reason.or_else(|| match &group {
            Ok(group) => placement_group::drifted(node_claim, group.as_ref()),
            Err(_) => None,
        });
        Ok(reason.map(|reason| DriftReason(reason.to_owned())))
    }

    fn mark_unavailable(&self, offerings: &[OfferingRef]) {
        self.unavailable.mark(offerings, Instant::now());
    }

    /// The region-wide marks (those scoped to a placement group or a capacity reservation
    /// are not listed).
    fn unavailable_offerings(&self) -> Vec<(OfferingRef, std::time::Duration)> {
        self.unavailable.remaining(Instant::now())
    }

    fn mark_reservation_unavailable(&self, reservation_id: &str) {
        self.reservations
            .availability()
            .mark_unavailable(reservation_id, Instant::now());
    }

    /// Upstream's placement group registration hook: a NodeClaim in a partition group whose
    /// partition EC2 chose registers once `DescribeInstances` says which partition it is.
    async fn registration(&self, node_claim: &NodeClaim) -> Result<Registration, CloudError> {
        if !placement_group::partition_pending(node_claim) {
            return Ok(Registration::Proceed);
        }
        let Some(provider_id) = node_claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
        else {
            return Ok(Registration::Wait {
                reason: "no provider id yet".into(),
            });
        };
        let id = Self::instance_id(provider_id)?;
        let described = self
            .batchers
            .describe(id)
            .await
            .map_err(AwsError::into_cloud)?;
        Ok(match described.and_then(|i| i.partition_number) {
            Some(partition) => Registration::Label(placement_group::partition_label(partition)),
            None => Registration::Wait {
                reason: format!("EC2 does not say yet which partition instance {id} is in"),
            },
        })
    }

    fn catalog_version(&self) -> u64 {
        self.unavailable
            .version(Instant::now())
            .wrapping_add(
                self.catalog_seq
                    .load(Ordering::Relaxed)
                    .wrapping_mul(1_000_003),
            )
            .wrapping_add(self.prices.version().wrapping_mul(7_919))
            .wrapping_add(self.classes.version().wrapping_mul(104_729))
            .wrapping_add(self.placement_groups.version().wrapping_mul(1_299_709))
            .wrapping_add(self.discovered.version().wrapping_mul(15_485_863))
            .wrapping_add(
                self.reservations
                    .availability()
                    .version()
                    .wrapping_mul(49_979_687),
            )
            .wrapping_add(
                self.zonal_shifts
                    .as_ref()
                    .map_or(0, |z| z.version(chrono::Utc::now()))
                    .wrapping_mul(32_452_843),
            )
            .wrapping_add(
                lock(&self.group_unavailable)
                    .values()
                    .map(|marks| marks.version(Instant::now()))
                    .fold(0u64, u64::wrapping_add)
                    .wrapping_mul(179_424_673),
            )
    }

    fn repair_policies(&self) -> Vec<karpenter_cloud::RepairPolicy> {
        crate::repair::policies(self.settings.reboot_for_repair)
    }
}

#[cfg(test)]
mod start_tests {
    use std::time::Duration;

    use super::StartError;
    use crate::AwsError;

    fn catalog(code: &str) -> StartError {
        StartError::Catalog(AwsError::new("ec2:DescribeInstanceTypes", code, "m"))
    }

    #[test]
    fn a_start_ec2_may_answer_next_time_is_tried_again_with_doubling_waits_up_to_thirty_seconds() {
        let waits: Vec<_> = (1..=7)
            .map(|attempt| catalog("Timeout").retry_after(attempt))
            .collect();
        let secs = [1, 2, 4, 8, 16, 30, 30].map(|s| Some(Duration::from_secs(s)));
        assert_eq!(waits, secs);
        for code in ["RequestLimitExceeded", "InternalError", "Dispatch"] {
            assert!(catalog(code).retry_after(1).is_some(), "{code}");
        }
        assert_eq!(
            catalog("Timeout").retry_after(u32::MAX),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn a_start_denied_or_misconfigured_is_not_tried_again() {
        assert_eq!(catalog("UnauthorizedOperation").retry_after(1), None);
        assert_eq!(StartError::NoClusterName.retry_after(1), None);
    }
}
