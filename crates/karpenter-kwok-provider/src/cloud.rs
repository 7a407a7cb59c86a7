//! The simulated cloud: Nodes created for NodeClaims (KWOK keeps them Ready), deleted with
//! them, listed as its instances; with a registration delay, the launched NodeClaims whose
//! Node is not made yet are its booting instances.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{DateTime, Utc};

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::labels;
use karpenter_api::v1::{EC2NodeClass, NodeClaim, NodeClaimStatus, NodePool, Operator};
use karpenter_cloud::launch::{cheapest, overlay_prioritized, prioritized};
use karpenter_cloud::pool_types::{PricingOptions, narrow, options_for};
use karpenter_cloud::{
    CapacityType, CatalogOptions, CloudError, CloudProvider, DriftReason, InstanceTypeInfo,
    OfferingRef, Unavailable, UnavailableOfferings,
};
use karpenter_scheduling::InstanceType;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use crate::catalog::TypeSource;
use crate::options::{KWOK_NODE, KwokOptions};
use crate::reservations::Ledger;

const PROVIDER_PREFIX: &str = "kwok://";

/// The simulated cloud.
pub struct KwokCloud {
    client: Client,
    types: TypeSource,
    pricing: PricingOptions,
    options: KwokOptions,
    /// The catalog resolved per distinct node-class options.
    resolved: Mutex<Vec<(CatalogOptions, Arc<Vec<InstanceTypeInfo>>)>>,
    unavailable: UnavailableOfferings,
    /// Node classes whose ignored fields (or absence) were already logged.
    said: Mutex<BTreeSet<String>>,
    /// Who holds the slots of `options.reservations`.
    ledger: Ledger,
}

impl std::fmt::Debug for KwokCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KwokCloud")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn provider_error(operation: &'static str, error: &kube::Error) -> CloudError {
    let retryable =
        matches!(error, kube::Error::Api(status) if status.code == 429 || status.code >= 500);
    CloudError::Provider {
        operation,
        message: error.to_string(),
        retryable,
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

impl KwokCloud {
    pub fn new(client: Client, types: TypeSource, options: KwokOptions) -> Self {
        KwokCloud {
            client,
            types,
            pricing: PricingOptions::default(),
            options,
            resolved: Mutex::new(Vec::new()),
            unavailable: UnavailableOfferings::new(),
            said: Mutex::new(BTreeSet::new()),
            ledger: Ledger::default(),
        }
    }

    /// `infos` with the reservations' offerings, the ledger first seeded from the reserved
    /// Nodes that exist (a controller that restarted); `infos` itself when there are none.
    async fn with_reservations(
        &self,
        infos: Arc<Vec<InstanceTypeInfo>>,
    ) -> Result<Arc<Vec<InstanceTypeInfo>>, CloudError> {
        if self.options.reservations.is_empty() {
            return Ok(infos);
        }
        if self.ledger.needs_seed() {
            let nodes: Api<Node> = Api::all(self.client.clone());
            let reserved = nodes
                .list(&ListParams::default().labels(labels::CAPACITY_RESERVATION_ID))
                .await
                .map_err(|e| provider_error("list reserved nodes", &e))?;
            self.ledger.seed(reserved.items.iter().filter_map(|n| {
                let id = n
                    .metadata
                    .labels
                    .as_ref()?
                    .get(labels::CAPACITY_RESERVATION_ID)?;
                Some((n.metadata.name.clone()?, id.clone()))
            }));
        }
        Ok(Arc::new(
            self.ledger.offerings(&self.options.reservations, &infos),
        ))
    }

    fn say_once(&self, key: String, message: impl FnOnce() -> String) {
        let mut said = match self.said.lock() {
            Ok(said) => said,
            Err(poisoned) => poisoned.into_inner(),
        };
        if said.insert(key) {
            tracing::info!(cloud_provider = "kwok", "{}", message());
        }
    }

    /// The EC2NodeClass the NodePool names, or AL2023 defaults.
    async fn node_class(&self, pool: &NodePool) -> Option<EC2NodeClass> {
        let reference = &pool.spec.template.spec.node_class_ref;
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        let found = if reference.kind == "EC2NodeClass" {
            api.get_opt(&reference.name).await.ok().flatten()
        } else {
            None
        };
        match found {
            Some(class) => {
                let ignored = ignored_fields(&class);
                if !ignored.is_empty() {
                    self.say_once(format!("class/{}", reference.name), || {
                        format!(
                            "EC2NodeClass {}: {} not simulated (AWS-only); instance types follow its AMI family and kubelet settings",
                            reference.name,
                            ignored.join(", ")
                        )
                    });
                }
                Some(class)
            }
            None => {
                self.say_once(format!("missing/{pool_name}/{}", reference.name), || {
                    format!(
                        "NodePool {pool_name}: {} {} not found; using AL2023 defaults",
                        reference.kind, reference.name
                    )
                });
                default_class()
            }
        }
    }

    fn unavailable_now(&self) -> Unavailable {
        self.unavailable.at(Instant::now())
    }

    /// Changes when an offering is marked unavailable or its mark expires, and when a
    /// reservation's slot is taken or given back (both only count up).
    pub fn catalog_version(&self) -> u64 {
        self.unavailable
            .version(Instant::now())
            .wrapping_add(self.ledger.version())
    }

    /// Marks offerings unavailable for [`karpenter_cloud::UNAVAILABLE_FOR`].
    pub fn mark_unavailable(&self, offerings: &[OfferingRef]) {
        self.unavailable.mark(offerings, Instant::now());
    }

    /// The offerings marked unavailable now and how long each stays so.
    pub fn unavailable_offerings(&self) -> Vec<(OfferingRef, std::time::Duration)> {
        self.unavailable.remaining(Instant::now())
    }

    /// Every instance type the pool's EC2NodeClass resolves to, shared (resolved once per
    /// distinct set of options); `None` when the class cannot be used.
    async fn resolved_infos(
        &self,
        pool: &NodePool,
    ) -> Result<Option<Arc<Vec<InstanceTypeInfo>>>, CloudError> {
        let catalog = match &self.types {
            TypeSource::Catalog(catalog) => catalog,
            TypeSource::Fixed(types) => return Ok(Some(types.clone())),
        };
        let Some(class) = self.node_class(pool).await else {
            return Ok(None);
        };
        let mut notes = Vec::new();
        let Some(options) = options_for(pool, &class, &self.pricing, &mut notes) else {
            for note in notes {
                self.say_once(note.clone(), || note);
            }
            return Ok(None);
        };
        let mut cache = match self.resolved.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((_, infos)) = cache.iter().find(|(o, _)| *o == options) {
            return Ok(Some(infos.clone()));
        }
        let infos =
            Arc::new(
                catalog
                    .instance_types(&options)
                    .map_err(|e| CloudError::Provider {
                        operation: "instance types",
                        message: e.to_string(),
                        retryable: false,
                    })?,
            );
        cache.push((options, infos.clone()));
        Ok(Some(infos))
    }

    /// The pool's instance types narrowed to its requirements, with offerings marked
    /// unavailable as they are now.
    async fn pool_infos(&self, pool: &NodePool) -> Result<Vec<InstanceTypeInfo>, CloudError> {
        let Some(resolved) = self.resolved_infos(pool).await? else {
            return Ok(Vec::new());
        };
        let resolved = self.with_reservations(resolved).await?;
        // A copy with unavailable offerings marked only when some are (most batches: none).
        let unavailable = self.unavailable_now();
        let marked;
        let infos: &[InstanceTypeInfo] = if unavailable.is_empty() {
            &resolved
        } else {
            let mut copy = resolved.as_ref().clone();
            unavailable.apply(&mut copy);
            marked = copy;
            &marked
        };
        let requirements = karpenter_scheduling::v1::node_pool(pool)
            .map(|p| p.requirements)
            .unwrap_or_default();
        Ok(narrow(infos, &requirements).infos)
    }

    fn node_for(
        &self,
        claim: &NodeClaim,
        info: &InstanceTypeInfo,
        zone: &str,
        capacity_type: CapacityType,
    ) -> Node {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let mut node_labels: BTreeMap<String, String> = info.labels.clone();
        node_labels.insert(labels::ZONE.to_owned(), zone.to_owned());
        node_labels.insert(
            labels::CAPACITY_TYPE.to_owned(),
            capacity_type.as_str().to_owned(),
        );
        for r in &claim.spec.requirements {
            if r.operator == Operator::In && r.values.len() == 1 {
                node_labels.insert(r.key.clone(), r.values[0].clone());
            }
        }
        node_labels.extend(claim.metadata.labels.clone().unwrap_or_default());
        node_labels.insert(labels::HOSTNAME.to_owned(), name.clone());
        node_labels.insert(KWOK_NODE.to_owned(), "fake".to_owned());
        let it = InstanceType::from(info);
        Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(node_labels),
                annotations: Some(BTreeMap::from([(KWOK_NODE.to_owned(), "fake".to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("{PROVIDER_PREFIX}{name}")),
                taints: Some(vec![Taint {
                    key: labels::UNREGISTERED_TAINT_KEY.to_owned(),
                    effect: "NoExecute".to_owned(),
                    ..Taint::default()
                }]),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(it.capacity.to_k8s()),
                allocatable: Some(it.allocatable().to_k8s()),
                ..NodeStatus::default()
            }),
        }
    }
}

/// The NodeClaim view of a Node (what `create`, `get` and `list` return).
fn claim_view(node: &Node, claim: Option<&NodeClaim>) -> NodeClaim {
    let mut view = claim.cloned().unwrap_or_else(|| NodeClaim {
        metadata: ObjectMeta {
            name: node.metadata.name.clone(),
            ..ObjectMeta::default()
        },
        spec: serde_json::from_value(serde_json::json!({
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
        }))
        .unwrap_or_else(|_| unreachable_spec()),
        status: None,
    });
    if view.metadata.creation_timestamp.is_none() {
        view.metadata
            .creation_timestamp
            .clone_from(&node.metadata.creation_timestamp);
    }
    let mut view_labels = node.metadata.labels.clone().unwrap_or_default();
    view_labels.remove(labels::HOSTNAME);
    view_labels.remove(KWOK_NODE);
    view.metadata.labels = Some(view_labels);
    view.status = Some(NodeClaimStatus {
        provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        capacity: node.status.as_ref().and_then(|s| s.capacity.clone()),
        allocatable: node.status.as_ref().and_then(|s| s.allocatable.clone()),
        ..NodeClaimStatus::default()
    });
    view
}

/// A spec for a NodeClaim view of a Node nobody claimed (only `list` builds those).
fn unreachable_spec() -> karpenter_api::v1::NodeClaimSpec {
    karpenter_api::v1::NodeClaimSpec {
        taints: Vec::new(),
        startup_taints: Vec::new(),
        requirements: Vec::new(),
        resources: None,
        node_class_ref: karpenter_api::v1::NodeClassReference {
            group: "karpenter.kwok.sh".to_owned(),
            kind: "KWOKNodeClass".to_owned(),
            name: "default".to_owned(),
        },
        termination_grace_period: None,
        expire_after: karpenter_api::duration::NillableDuration::never(),
    }
}

/// AL2023 with the default root volume, as `simulate` assumes for a missing class.
fn default_class() -> Option<EC2NodeClass> {
    let object = serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "kwok"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "kwok"}}]}
    });
    serde_json::from_value(object).ok()
}

/// The EC2NodeClass fields the simulated cloud does not use.
fn ignored_fields(class: &EC2NodeClass) -> Vec<&'static str> {
    let value = serde_json::to_value(&class.spec).unwrap_or_default();
    [
        ("subnetSelectorTerms", "subnetSelectorTerms"),
        ("securityGroupSelectorTerms", "securityGroupSelectorTerms"),
        (
            "capacityReservationSelectorTerms",
            "capacityReservationSelectorTerms",
        ),
        ("role", "role"),
        ("instanceProfile", "instanceProfile"),
        ("userData", "userData"),
        ("tags", "tags"),
        ("blockDeviceMappings", "blockDeviceMappings"),
        ("metadataOptions", "metadataOptions"),
        ("associatePublicIPAddress", "associatePublicIPAddress"),
        ("detailedMonitoring", "detailedMonitoring"),
        ("instanceStorePolicy", "instanceStorePolicy"),
        ("context", "context"),
    ]
    .into_iter()
    .filter(|(key, _)| value.get(key).is_some_and(|v| !v.is_null()))
    .map(|(_, name)| name)
    .collect()
}

fn node_name(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix(PROVIDER_PREFIX)
        .filter(|name| !name.is_empty())
}

impl KwokCloud {
    async fn launch(&self, claim: &NodeClaim, pool: &NodePool) -> Result<NodeClaim, CloudError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Some(existing) = nodes
            .get_opt(&name)
            .await
            .map_err(|e| provider_error("get node", &e))?
        {
            return Ok(claim_view(&existing, Some(claim)));
        }
        let Some(resolved) = self.resolved_infos(pool).await? else {
            return Err(CloudError::InsufficientCapacity {
                node_claim: name,
                offerings: Vec::new(),
                message: "the NodePool's node class cannot be used".into(),
            });
        };
        let resolved = self.with_reservations(resolved).await?;
        let unavailable = self.unavailable_now();
        let by_name: HashMap<&str, &InstanceTypeInfo> =
            resolved.iter().map(|i| (i.name.as_str(), i)).collect();
        let requirements = karpenter_scheduling::v1::node_claim_requirements(claim);
        let names = claim
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == labels::INSTANCE_TYPE && r.operator == Operator::In)
            .flat_map(|r| r.values.iter().map(String::as_str));
        // The claim's types looked up in the shared list, nothing copied: a claim may name
        // 600 types, and narrowing copies of them cost more than the rest of the launch.
        let lookup = |n: &str| by_name.get(n).copied();
        let available = |info: &InstanceTypeInfo, offering: &karpenter_cloud::Offering| {
            !unavailable.contains(&info.name, offering)
        };
        // A NodeOverlay changed a price: the claim's order (cheapest first by the overlaid
        // prices) is the priority, as upstream's AWS provider launches such claims.
        let choice = if overlay_prioritized(claim) {
            prioritized(names, &requirements, lookup, available)
        } else {
            cheapest(names, &requirements, lookup, available)
        };
        let Some(choice) = choice else {
            return Err(CloudError::InsufficientCapacity {
                node_claim: name,
                offerings: Vec::new(),
                message: "no available offering satisfies the NodeClaim's requirements".into(),
            });
        };
        let offering = OfferingRef {
            instance_type: choice.info.name.clone(),
            zone: choice.offering.zone.clone(),
            capacity_type: choice.offering.capacity_type,
        };
        if self
            .options
            .insufficient_capacity
            .iter()
            .any(|p| p.matches(&offering))
        {
            self.mark_unavailable(std::slice::from_ref(&offering));
            return Err(CloudError::InsufficientCapacity {
                node_claim: name,
                offerings: vec![offering],
                message: "injected by KWOK_INSUFFICIENT_CAPACITY".into(),
            });
        }
        let mut node = self.node_for(claim, choice.info, &offering.zone, offering.capacity_type);
        if let Some(reservation) = &choice.offering.reservation {
            // The slot is taken when the launch is decided, as EC2 takes it when the instance
            // is created (the Node may come later, after the registration delay).
            self.ledger.take(&name, &reservation.id);
            node.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(reservation.labels());
        }
        let view = claim_view(&node, Some(claim));
        // With a registration delay the instance "boots": its record is the NodeClaim the
        // launch is written to, and its Node is made when the delay has passed
        // ([`Kwok::register`]), by whichever controller runs then.
        if self.options.registration_delay.is_zero() {
            create_node(&nodes, &node).await?;
        }
        Ok(view)
    }

    /// Makes the Node of a launched NodeClaim whose registration delay has passed, from the
    /// instance type, zone and capacity type its launch recorded in its labels. `Ok(false)`
    /// when the Node already exists.
    async fn register(&self, claim: &NodeClaim, pool: &NodePool) -> Result<bool, CloudError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        if nodes
            .get_opt(&name)
            .await
            .map_err(|e| provider_error("get node", &e))?
            .is_some()
        {
            return Ok(false);
        }
        let launched = |key: &str| {
            claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .cloned()
                .ok_or_else(|| CloudError::InvalidNodeClaim {
                    node_claim: name.clone(),
                    message: format!("its launch recorded no {key} label"),
                })
        };
        let instance_type = launched(labels::INSTANCE_TYPE)?;
        let zone = launched(labels::ZONE)?;
        let capacity_type = if launched(labels::CAPACITY_TYPE)? == CapacityType::Spot.as_str() {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        };
        let resolved = self.resolved_infos(pool).await?.unwrap_or_default();
        let Some(info) = resolved.iter().find(|i| i.name == instance_type) else {
            return Err(CloudError::InvalidNodeClaim {
                node_claim: name,
                message: format!("instance type {instance_type} is not in the catalog"),
            });
        };
        let node = self.node_for(claim, info, &zone, capacity_type);
        create_node(&nodes, &node).await?;
        Ok(true)
    }
}

/// When a NodeClaim the simulated cloud launched registers: its `Launched` transition plus
/// `delay`. `None` for a NodeClaim that is not a launched instance of this cloud.
pub fn registration_due(claim: &NodeClaim, delay: std::time::Duration) -> Option<DateTime<Utc>> {
    let status = claim.status.as_ref()?;
    status
        .provider_id
        .as_deref()
        .filter(|id| id.starts_with(PROVIDER_PREFIX))?;
    let launched = status
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Launched" && c.status == "True")?;
    let at = DateTime::<Utc>::from_timestamp(
        launched.last_transition_time.0.as_second(),
        u32::try_from(launched.last_transition_time.0.subsec_nanosecond()).unwrap_or(0),
    )?;
    Some(at + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX))
}

/// A launched NodeClaim of this cloud whose Node does not exist yet (it is booting): the
/// instance exists, its record is the NodeClaim.
fn booting(claim: &NodeClaim, nodes: &BTreeSet<&str>) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(node_name)
            .is_some_and(|name| !nodes.contains(name))
}

async fn create_node(nodes: &Api<Node>, node: &Node) -> Result<(), CloudError> {
    match nodes.create(&PostParams::default(), node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(provider_error("create node", &error)),
    }
}

/// What the simulated cloud reads from the caller's view of the cluster.
pub trait NodePoolLookup: Send + Sync {
    /// The NodePool a NodeClaim belongs to.
    fn node_pool(&self, name: &str) -> Option<NodePool>;
    /// The NodeClaims: the records of instances that are still booting (launched with a
    /// registration delay, no Node yet), which `get` and `list` report as instances.
    fn node_claims(&self) -> Vec<NodeClaim> {
        Vec::new()
    }
}

impl<L: NodePoolLookup> Kwok<L> {
    /// Makes the Node of a booting instance ([`registration_due`] has passed): what the
    /// kubelet of a real instance does when it joins. `Ok(false)` when it exists already.
    pub async fn register(&self, claim: &NodeClaim) -> Result<bool, CloudError> {
        let pool = self.pool_of(claim)?;
        self.cloud.register(claim, &pool).await
    }

    /// The NodePool a NodeClaim belongs to (its `karpenter.sh/nodepool` label).
    fn pool_of(&self, claim: &NodeClaim) -> Result<NodePool, CloudError> {
        let pool_name = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::NODEPOOL))
            .map_or("", String::as_str);
        self.pools
            .node_pool(pool_name)
            .ok_or_else(|| CloudError::InvalidNodeClaim {
                node_claim: claim.metadata.name.clone().unwrap_or_default(),
                message: format!("nodepool {pool_name:?} not found"),
            })
    }

    /// The booting instances (no Node yet) as the cloud reports them: their NodeClaims.
    fn booting(&self, nodes: &[Node]) -> Vec<NodeClaim> {
        let names: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.pools
            .node_claims()
            .into_iter()
            .filter(|c| booting(c, &names))
            .collect()
    }
}

/// [`KwokCloud`] with the NodePools it launches for.
#[derive(Debug)]
pub struct Kwok<L> {
    pub cloud: KwokCloud,
    pub pools: L,
}

impl<L: NodePoolLookup> CloudProvider for Kwok<L> {
    fn name(&self) -> &'static str {
        "kwok"
    }

    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
        let pool = self.pool_of(node_claim)?;
        self.cloud.launch(node_claim, &pool).await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudError> {
        let name = node_claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(node_name)
            .map(str::to_owned)
            .or_else(|| node_claim.metadata.name.clone())
            .unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.cloud.client.clone());
        match nodes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                self.cloud.ledger.release(&name);
                Ok(())
            }
            Err(e) if is_not_found(&e) => {
                // Launched but never registered (or already gone): its slot goes back too.
                self.cloud.ledger.release(&name);
                Err(CloudError::NodeClaimNotFound {
                    what: format!("instance kwok://{name}"),
                })
            }
            Err(e) => Err(provider_error("delete node", &e)),
        }
    }

    /// As upstream's KWOK provider: the Node "boots again" at once, its `bootID` set to
    /// `kwok-<operation id>` (KWOK keeps it Ready).
    async fn reboot(&self, node_claim: &NodeClaim, operation_id: &str) -> Result<(), CloudError> {
        let claim = node_claim.metadata.name.clone().unwrap_or_default();
        let Some(node) = node_claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        else {
            return Err(CloudError::Provider {
                operation: "reboot node",
                message: format!("rebooting nodeclaim {claim}: node is not registered"),
                retryable: true,
            });
        };
        let nodes: Api<Node> = Api::all(self.cloud.client.clone());
        let patch =
            serde_json::json!({"status": {"nodeInfo": {"bootID": format!("kwok-{operation_id}")}}});
        match nodes
            .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Err(CloudError::NodeClaimNotFound {
                what: format!("instance kwok://{node}"),
            }),
            Err(e) => Err(provider_error("reboot node", &e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
        let not_found = || CloudError::NodeClaimNotFound {
            what: format!("instance {provider_id}"),
        };
        let name = node_name(provider_id).ok_or_else(not_found)?;
        let nodes: Api<Node> = Api::all(self.cloud.client.clone());
        match nodes.get_opt(name).await {
            Ok(Some(node)) if node.metadata.deletion_timestamp.is_none() => {
                Ok(claim_view(&node, None))
            }
            Ok(Some(_)) => Err(not_found()),
            Ok(None) => self
                .booting(&[])
                .into_iter()
                .find(|c| {
                    c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
                })
                .ok_or_else(not_found),
            Err(e) => Err(provider_error("get node", &e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
        let nodes: Api<Node> = Api::all(self.cloud.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| provider_error("list nodes", &e))?;
        let mut instances: Vec<NodeClaim> = list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|id| id.starts_with(PROVIDER_PREFIX))
            })
            .map(|n| claim_view(n, None))
            .collect();
        instances.extend(self.booting(&list.items));
        Ok(instances)
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<InstanceTypeInfo>, CloudError> {
        self.cloud.pool_infos(node_pool).await
    }

    async fn is_drifted(&self, _node_claim: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
        Ok(None)
    }

    fn mark_unavailable(&self, offerings: &[OfferingRef]) {
        self.cloud.mark_unavailable(offerings);
    }

    fn unavailable_offerings(&self) -> Vec<(OfferingRef, std::time::Duration)> {
        self.cloud.unavailable_offerings()
    }

    fn catalog_version(&self) -> u64 {
        self.cloud.catalog_version()
    }

    /// An EC2NodeClass is read for its AMI family and kubelet settings when it exists (built-in
    /// AL2023 defaults when not), never resolved against AWS.
    fn node_classes(&self) -> karpenter_cloud::NodeClasses {
        karpenter_cloud::NodeClasses::Simulated
    }

    fn repair_policies(&self) -> Vec<karpenter_cloud::RepairPolicy> {
        crate::repair::policies(self.cloud.options.repair_toleration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn launched_claim(name: &str, provider_id: Option<&str>, launched: Option<&str>) -> NodeClaim {
        let mut conditions = Vec::new();
        if let Some(at) = launched {
            conditions.push(serde_json::json!({"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": at}));
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": provider_id, "conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn a_launched_claim_registers_its_delay_after_the_launch_and_others_never() {
        let at = "2026-11-27T12:00:00Z";
        let claim = launched_claim("c1", Some("kwok://c1"), Some(at));
        let due = registration_due(&claim, Duration::from_secs(90)).unwrap();
        assert_eq!(due.to_rfc3339(), "2026-11-27T12:01:30+00:00");
        assert_eq!(
            registration_due(
                &launched_claim("c2", Some("kwok://c2"), None),
                Duration::ZERO
            ),
            None,
            "not launched"
        );
        assert_eq!(
            registration_due(
                &launched_claim("c3", Some("aws:///us-west-2a/i-1"), Some(at)),
                Duration::ZERO
            ),
            None,
            "another cloud's instance"
        );
    }

    #[test]
    fn a_launched_claim_without_its_node_is_a_booting_instance() {
        let claim = launched_claim("c1", Some("kwok://c1"), Some("2026-11-27T12:00:00Z"));
        assert!(booting(&claim, &BTreeSet::new()));
        assert!(!booting(&claim, &BTreeSet::from(["c1"])), "its Node exists");
        assert!(
            !booting(&launched_claim("c2", None, None), &BTreeSet::new()),
            "not launched yet: nothing exists"
        );
        let mut deleting = claim.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        assert!(!booting(&deleting, &BTreeSet::new()));
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn kwok_options_parse_the_delay_and_the_injected_offerings() {
        let options = KwokOptions::from_env(env(&[
            ("KWOK_REGISTRATION_DELAY", "5s"),
            (
                "KWOK_INSUFFICIENT_CAPACITY",
                "m5.large:us-east-1a:spot, *:us-east-1b:*",
            ),
        ]));
        let Ok(options) = options else {
            panic!("valid options: {options:?}");
        };
        assert_eq!(options.registration_delay, Duration::from_secs(5));
        let spot_a = OfferingRef {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
        };
        let on_demand_b = OfferingRef {
            instance_type: "c5.large".into(),
            zone: "us-east-1b".into(),
            capacity_type: CapacityType::OnDemand,
        };
        let on_demand_a = OfferingRef {
            capacity_type: CapacityType::OnDemand,
            ..spot_a.clone()
        };
        let matches = |o: &OfferingRef| options.insufficient_capacity.iter().any(|p| p.matches(o));
        assert!(matches(&spot_a) && matches(&on_demand_b) && !matches(&on_demand_a));
    }

    #[test]
    fn malformed_kwok_options_name_the_setting() {
        let bad = KwokOptions::from_env(env(&[("KWOK_INSUFFICIENT_CAPACITY", "m5.large:spot")]));
        assert_eq!(
            bad.err().map(|e| e.to_string()).unwrap_or_default(),
            "KWOK_INSUFFICIENT_CAPACITY: \"m5.large:spot\" is not instance-type:zone:capacity-type (use * for any)"
        );
        let bad = KwokOptions::from_env(env(&[("KWOK_REGISTRATION_DELAY", "soon")]));
        assert!(bad.err().is_some_and(|e| {
            e.to_string()
                .starts_with("KWOK_REGISTRATION_DELAY=\"soon\"")
        }));
        let bad = KwokOptions::from_env(env(&[("KWOK_REPAIR_TOLERATION", "never")]));
        assert!(bad.err().is_some_and(|e| {
            e.to_string()
                .starts_with("KWOK_REPAIR_TOLERATION=\"never\"")
        }));
        let short = KwokOptions::from_env(env(&[("KWOK_REPAIR_TOLERATION", "5s")]));
        assert_eq!(
            short.ok().and_then(|o| o.repair_toleration),
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn provider_ids_name_their_node() {
        assert_eq!(node_name("kwok://general-abc"), Some("general-abc"));
        assert_eq!(node_name("kwok://"), None);
        assert_eq!(node_name("aws:///us-east-1a/i-1"), None);
    }
}
