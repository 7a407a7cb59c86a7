//! The cloud-provider seam: what the controller asks of a cloud, and the typed errors it acts on.
//!
//! Two implementations exist above this crate: the EC2 provider (`karpenter-aws-provider`) and
//! the simulated cloud (`--cloud-provider kwok`, in the controller), which creates Node objects
//! for KWOK to keep Ready. Both keep offerings that ran out of capacity in one
//! [`crate::UnavailableOfferings`]. The trait returns futures but names no runtime: implementations
//! write `async fn` and run on whatever executor the controller uses.
//!
//! Errors are values the controller decides on, as upstream does: insufficient capacity marks
//! the named offerings unavailable and deletes the NodeClaim so the next batch picks another;
//! not found means the instance is gone (termination is done, garbage collection may act); a
//! node class that is not ready holds the launch.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use karpenter_api::v1::{NodeClaim, NodePool};

use crate::InstanceTypeInfo;
use crate::offering::CapacityType;

/// One offering (instance type x zone x capacity type), as named in capacity errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OfferingRef {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

impl fmt::Display for OfferingRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.instance_type,
            self.capacity_type.as_str(),
            self.zone
        )
    }
}

fn list(offerings: &[OfferingRef]) -> String {
    let names: Vec<String> = offerings.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// Why a cloud call failed, typed by what the caller does about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// No capacity for any of the offerings tried; they are to be marked unavailable.
    #[error("launching nodeclaim {node_claim}: insufficient capacity for {}: {message}", list(.offerings))]
    InsufficientCapacity {
        node_claim: String,
        offerings: Vec<OfferingRef>,
        message: String,
    },
    /// The instance behind a NodeClaim (or provider id) does not exist (any more).
    #[error("{what} not found in the cloud")]
    NodeClaimNotFound { what: String },
    /// The NodeClaim's node class is missing or not ready; the launch waits for it.
    #[error("nodeclass {node_class} is not ready: {reason}")]
    NodeClassNotReady { node_class: String, reason: String },
    /// The NodeClaim cannot be launched as written (no instance type option, bad requirement).
    #[error("nodeclaim {node_claim}: {message}")]
    InvalidNodeClaim { node_claim: String, message: String },
    /// The cloud refused to reboot the NodeClaim's instance for good (no reboot in this cloud,
    /// no permission): retrying cannot help.
    #[error("rebooting nodeclaim {node_claim}: {message}")]
    RebootRejected { node_claim: String, message: String },
    /// Any other failure of a provider call, named after the call.
    #[error("{operation}: {message}")]
    Provider {
        operation: &'static str,
        message: String,
        /// Worth retrying as is (throttling, a transient server error).
        retryable: bool,
    },
}

impl CloudError {
    /// A stable code for events and metric labels.
    pub fn code(&self) -> &'static str {
        match self {
            CloudError::InsufficientCapacity { .. } => "InsufficientCapacity",
            CloudError::NodeClaimNotFound { .. } => "NodeClaimNotFound",
            CloudError::NodeClassNotReady { .. } => "NodeClassNotReady",
            CloudError::InvalidNodeClaim { .. } => "InvalidNodeClaim",
            CloudError::RebootRejected { .. } => "RebootRejected",
            CloudError::Provider { .. } => "ProviderError",
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, CloudError::NodeClaimNotFound { .. })
    }
}

/// Why the cloud considers a launched NodeClaim drifted (`AMIDrift`, `SubnetDrift`,
/// `SecurityGroupDrift`, `NodeClassDrift`, ...): the `Drifted` condition's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftReason(pub String);

impl fmt::Display for DriftReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a cloud says before a launched NodeClaim's Node is registered (upstream's
/// `NodeLifecycleHook.Registered`): the Node loses its `karpenter.sh/unregistered` taint only
/// once every label pods may select on is right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Register now.
    Proceed,
    /// Set these labels on the NodeClaim first (registration copies them to the Node).
    Label(BTreeMap<String, String>),
    /// Not yet (the cloud does not know something yet): look again shortly.
    Wait { reason: String },
}

/// A cloud the controller launches nodes in.
pub trait CloudProvider: Send + Sync {
    /// `kwok`, `aws`: for logs and metric labels.
    fn name(&self) -> &'static str;

    /// Launches an instance for the NodeClaim and returns the NodeClaim as launched: status
    /// `providerID`, `capacity` and `allocatable`, and labels for the instance type, zone and
    /// capacity type it got (plus the provider's own).
    fn create(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<NodeClaim, CloudError>> + Send;

    /// Terminates the NodeClaim's instance. [`CloudError::NodeClaimNotFound`] once it is gone.
    fn delete(&self, node_claim: &NodeClaim)
    -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Asks the cloud to restart the NodeClaim's instance in place (upstream `Reboot`, v1.15)
    /// and returns once it accepted; the reboot controller observes the new boot.
    /// `operation_id` is the same for every try of one reboot (a cloud with idempotent
    /// requests maps it to them). [`CloudError::RebootRejected`] by default: the cloud cannot
    /// reboot, the reboot fails and the node is replaced.
    fn reboot(
        &self,
        node_claim: &NodeClaim,
        operation_id: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send {
        let _ = operation_id;
        std::future::ready(Err(CloudError::RebootRejected {
            node_claim: node_claim.metadata.name.clone().unwrap_or_default(),
            message: format!(
                "reboot is not implemented by the {} cloud provider",
                self.name()
            ),
        }))
    }

    /// The launched NodeClaim behind a provider id.
    fn get(&self, provider_id: &str) -> impl Future<Output = Result<NodeClaim, CloudError>> + Send;

    /// Every instance this cluster owns, as NodeClaims (for garbage collection).
    fn list(&self) -> impl Future<Output = Result<Vec<NodeClaim>, CloudError>> + Send;

    /// The instance types (with offerings and prices) the NodePool may launch.
    fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> impl Future<Output = Result<Vec<InstanceTypeInfo>, CloudError>> + Send;

    /// Provider-specific drift of a launched NodeClaim (AMI, subnet, security groups, node
    /// class hash); `None` when it is current.
    fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Option<DriftReason>, CloudError>> + Send;

    /// Marks offerings unavailable for a while (insufficient capacity, a spot interruption):
    /// instance-type listings leave them out until then.
    fn mark_unavailable(&self, offerings: &[OfferingRef]);

    /// The offerings marked unavailable now ([`Self::mark_unavailable`], and those a launch
    /// found without capacity) and how long each stays so: read for explanations, never for
    /// decisions (instance-type listings already leave them out). A cloud without marks has
    /// none.
    fn unavailable_offerings(&self) -> Vec<(OfferingRef, std::time::Duration)> {
        Vec::new()
    }

    /// Marks one capacity reservation's offerings unavailable for a while (its instance was
    /// interrupted), leaving other reservations of the same instance type and zone offered
    /// (upstream's reservation-scoped unavailable mark). A cloud without reservations ignores
    /// it.
    fn mark_reservation_unavailable(&self, reservation_id: &str) {
        let _ = reservation_id;
    }

    /// Asked before a launched NodeClaim's Node is registered; [`Registration::Proceed`]
    /// unless the cloud has a label to settle first (on EC2: the partition of a partition
    /// placement group, known only once the instance runs).
    fn registration(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Registration, CloudError>> + Send {
        let _ = node_claim;
        std::future::ready(Ok(Registration::Proceed))
    }

    /// A number that changes whenever [`CloudProvider::instance_types`] may answer differently
    /// for an unchanged NodePool: offerings marked unavailable or available again, prices or
    /// instance types refreshed (upstream's unavailable-offerings `SeqNum`). Callers cache
    /// converted catalogs under it.
    fn catalog_version(&self) -> u64;

    /// The unhealthy Node conditions this cloud repairs, and how (upstream
    /// `RepairPolicies`): the complete, static set, validated by
    /// [`crate::RepairMatcher::new`]. None by default: node repair then refuses to start.
    fn repair_policies(&self) -> Vec<crate::RepairPolicy> {
        Vec::new()
    }

    /// How this cloud reads a NodePool's `nodeClassRef`. Upstream's rule by default: only
    /// classes of [`NodeClasses::Resolved`]'s kind are this cloud's; a NodePool naming another
    /// kind is not managed, and one naming a missing or unready class is not `Ready`.
    fn node_classes(&self) -> NodeClasses {
        NodeClasses::Resolved {
            group: karpenter_api::labels::AWS_GROUP,
            kind: "EC2NodeClass",
        }
    }
}

/// How a cloud reads NodePools' node classes ([`CloudProvider::node_classes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeClasses {
    /// The class must exist and report `Ready` (it is resolved against the cloud).
    Resolved {
        group: &'static str,
        kind: &'static str,
    },
    /// The class is optional and never resolved (a simulated cloud: built-in defaults when it
    /// is missing); any kind is accepted and it is always ready.
    Simulated,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    /// Polls a future that never waits (the test cloud does no I/O).
    fn ready<F: Future>(future: F) -> F::Output {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("the test cloud never waits"),
        }
    }

    /// A cloud with one launchable instance type, which refuses spot.
    #[derive(Debug, Default)]
    struct OneTypeCloud {
        launched: Mutex<Vec<String>>,
    }

    impl CloudProvider for OneTypeCloud {
        fn name(&self) -> &'static str {
            "test"
        }

        async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
            let name = node_claim.metadata.name.clone().unwrap_or_default();
            let wants_spot = node_claim
                .spec
                .requirements
                .iter()
                .any(|r| r.key == karpenter_api::labels::CAPACITY_TYPE && r.values == ["spot"]);
            if wants_spot {
                return Err(CloudError::InsufficientCapacity {
                    node_claim: name,
                    offerings: vec![OfferingRef {
                        instance_type: "m5.large".into(),
                        zone: "us-east-1a".into(),
                        capacity_type: CapacityType::Spot,
                    }],
                    message: "no spot capacity".into(),
                });
            }
            let mut launched = node_claim.clone();
            let status = launched.status.get_or_insert_with(Default::default);
            status.provider_id = Some(format!("test://{name}"));
            if let Ok(mut all) = self.launched.lock() {
                all.push(name);
            }
            Ok(launched)
        }

        async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudError> {
            let name = node_claim.metadata.name.clone().unwrap_or_default();
            let mut all = self.launched.lock().map_err(|_| CloudError::Provider {
                operation: "delete",
                message: "poisoned".into(),
                retryable: false,
            })?;
            let before = all.len();
            all.retain(|n| *n != name);
            if all.len() == before {
                return Err(CloudError::NodeClaimNotFound {
                    what: format!("nodeclaim {name}"),
                });
            }
            Ok(())
        }

        async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
            Err(CloudError::NodeClaimNotFound {
                what: provider_id.to_owned(),
            })
        }

        async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
            Ok(Vec::new())
        }

        async fn instance_types(
            &self,
            _node_pool: &NodePool,
        ) -> Result<Vec<InstanceTypeInfo>, CloudError> {
            Ok(Vec::new())
        }

        async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<DriftReason>, CloudError> {
            Ok(None)
        }

        fn mark_unavailable(&self, _: &[OfferingRef]) {}

        fn catalog_version(&self) -> u64 {
            0
        }
    }

    fn claim(name: &str, capacity_type: &str) -> NodeClaim {
        let object = serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}
                ]
            }
        });
        match serde_json::from_value(object) {
            Ok(claim) => claim,
            Err(e) => panic!("test NodeClaim parses: {e}"),
        }
    }

    #[test]
    fn a_provider_without_a_registration_hook_lets_every_node_register() {
        let cloud = OneTypeCloud::default();
        assert_eq!(
            ready(cloud.registration(&claim("a", "on-demand"))),
            Ok(Registration::Proceed)
        );
    }

    #[test]
    fn a_provider_written_with_async_fn_launches_and_deletes_through_the_trait() {
        let cloud = OneTypeCloud::default();
        let launched = ready(cloud.create(&claim("a", "on-demand")));
        let provider_id = launched
            .ok()
            .and_then(|c| c.status)
            .and_then(|s| s.provider_id);
        assert_eq!(provider_id.as_deref(), Some("test://a"));
        assert_eq!(ready(cloud.delete(&claim("a", "on-demand"))), Ok(()));
        let again = ready(cloud.delete(&claim("a", "on-demand")));
        assert!(
            again.as_ref().is_err_and(CloudError::is_not_found),
            "{again:?}"
        );
    }

    #[test]
    fn insufficient_capacity_names_the_offerings_and_has_a_stable_code() {
        let cloud = OneTypeCloud::default();
        let Err(error) = ready(cloud.create(&claim("b", "spot"))) else {
            panic!("spot must be refused");
        };
        assert_eq!(error.code(), "InsufficientCapacity");
        assert_eq!(
            error.to_string(),
            "launching nodeclaim b: insufficient capacity for m5.large spot us-east-1a: no spot capacity"
        );
    }
}
