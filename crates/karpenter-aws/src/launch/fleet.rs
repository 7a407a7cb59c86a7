//! The `CreateFleet` request of a launch plan and what its answer means (reference
//! `karpenter-aws.md` 2.3 and 2.5).
//!
//! `Type=instant`, one instance, one launch-template config per template group with an
//! override per (instance type, zone), spot with `price-capacity-optimized`, on-demand with
//! `lowest-price`, a reservation as upstream buys it ([`Market`]: an ODCR as on-demand, a
//! Capacity Block as `capacity-block`, an interruptible reservation as `reserved-capacity`)
//! (a prioritized plan, after a NodeOverlay changed a price: spot
//! `capacity-optimized-prioritized`, on-demand `prioritized`, as upstream); the instance, its volumes and the fleet tagged with the launch tags. An
//! answer without an instance is insufficient capacity when every error is one of the
//! unfulfillable codes (the offerings it names are then marked unavailable), otherwise a
//! launch failure named after the first error.

use std::collections::BTreeMap;

use karpenter_cloud::offering::ReservationKind;
use karpenter_cloud::{CapacityType, OfferingRef};

use super::plan::LaunchPlan;

/// EC2 error codes that mean "no capacity for this offering now" (upstream's unfulfillable
/// capacity codes).
pub const UNFULFILLABLE_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
];

/// The service-linked role for spot is missing and we may not create it: spot is unavailable.
pub const SPOT_ROLE_MISSING: &str = "AuthFailure.ServiceLinkedRoleCreationNotPermitted";

/// One launch-template config of the request.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateConfig {
    pub launch_template_name: String,
    pub overrides: Vec<super::plan::Override>,
}

/// A `CreateFleet` request, as values.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    pub capacity_type: CapacityType,
    /// `price-capacity-optimized` (spot) or `lowest-price` (on-demand); prioritized:
    /// `capacity-optimized-prioritized` or `prioritized`.
    pub allocation_strategy: &'static str,
    pub configs: Vec<TemplateConfig>,
    /// Tags of the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    /// `spec.context` of the EC2NodeClass.
    pub context: Option<String>,
    /// A reserved launch: the kind of its reservations and whether they are interruptible
    /// (one kind per launch).
    pub reservation: Option<(ReservationKind, bool)>,
}

/// How the fleet buys its instance: `DefaultTargetCapacityType` and the options that go with
/// it, as upstream's `CreateFleetInputBuilder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Market {
    /// `spot`, with `SpotOptions.AllocationStrategy`.
    Spot,
    /// `on-demand`, with `OnDemandOptions.AllocationStrategy`: on-demand, and a launch into
    /// an ODCR (its launch template targets it).
    OnDemand,
    /// `capacity-block`, no options: a launch into a Capacity Block.
    CapacityBlock,
    /// `reserved-capacity` with `ReservedCapacityOptions.ReservationTypes`
    /// `[interruptible-capacity-reservation]`: a launch into an interruptible reservation.
    InterruptibleReservation,
}

impl FleetRequest {
    /// How this request buys its instance.
    pub fn market(&self) -> Market {
        match (self.capacity_type, self.reservation) {
            (CapacityType::Spot, _) => Market::Spot,
            (CapacityType::Reserved, Some((ReservationKind::CapacityBlock, _))) => {
                Market::CapacityBlock
            }
            (CapacityType::Reserved, Some((ReservationKind::Default, true))) => {
                Market::InterruptibleReservation
            }
            _ => Market::OnDemand,
        }
    }
}

/// The request for `plan`, with `template_names[i]` the launch template of `plan.groups[i]`.
pub fn request(
    plan: &LaunchPlan,
    template_names: &[String],
    tags: BTreeMap<String, String>,
    context: Option<String>,
) -> FleetRequest {
    let configs = plan
        .groups
        .iter()
        .zip(template_names)
        .map(|(group, name)| TemplateConfig {
            launch_template_name: name.clone(),
            overrides: group.overrides.clone(),
        })
        .collect();
    FleetRequest {
        capacity_type: plan.capacity_type,
        allocation_strategy: match (plan.capacity_type, plan.prioritized) {
            (CapacityType::Spot, false) => "price-capacity-optimized",
            (CapacityType::OnDemand, false) => "lowest-price",
            (CapacityType::Spot, true) => "capacity-optimized-prioritized",
            (CapacityType::OnDemand, true) => "prioritized",
            // A reservation is bought as on-demand capacity targeted at it.
            (CapacityType::Reserved, false) => "lowest-price",
            (CapacityType::Reserved, true) => "prioritized",
        },
        configs,
        tags,
        context,
        reservation: plan
            .groups
            .iter()
            .find_map(|g| g.reservation.as_ref())
            .map(|r| (r.kind, r.interruptible)),
    }
}

/// An instance the fleet launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetInstance {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

/// One entry of the answer's `Errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

/// What the answer means.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetOutcome {
    Launched {
        instance: FleetInstance,
        /// Offerings that failed on the way (marked unavailable all the same).
        unavailable: Vec<OfferingRef>,
    },
    InsufficientCapacity {
        unavailable: Vec<OfferingRef>,
        /// Spot as a whole is unavailable (the spot service-linked role is missing).
        spot_role_missing: bool,
        message: String,
    },
    Failed {
        code: String,
        message: String,
    },
}

/// Upstream's reason for a failed launch (`awserrors.ToReasonMessage` of `"<code>: <message>"`):
/// the `reason` label of `karpenter_cloudprovider_instance_launch_failures_total`.
pub fn launch_failure_reason(code: &str, message: &str) -> &'static str {
    let text = format!("{code}: {message}");
    let has = |s: &str| text.contains(s);
    if has("AuthFailure.ServiceLinkedRoleCreationNotPermitted") {
        return "SpotSLRCreationFailed";
    }
    if has("UnauthorizedOperation") || has("AccessDenied") || has("AuthFailure") {
        return if has("Not authorized for images")
            && !has("with an explicit deny in a permissions boundary")
            && !has("with an explicit deny in a service control policy")
        {
            "AMIAuthorizationFailure"
        } else {
            "Unauthorized"
        };
    }
    let rules: [(&[&str], &'static str); 14] = [
        (
            &["InvalidParameter", "belong to different networks"],
            "SecurityGroupSubnetVPCMismatch",
        ),
        (
            &["iamInstanceProfile.name is invalid"],
            "InstanceProfileNameInvalid",
        ),
        (
            &["InvalidLaunchTemplateId.NotFound"],
            "LaunchTemplateNotFound",
        ),
        (&["User data is limited to"], "UserDataSizeLimitExceeded"),
        (&["InvalidAMIID.Malformed"], "InvalidAMIID"),
        (&["InvalidAMIID.NotFound"], "AMINotFound"),
        (&["RequestLimitExceeded"], "RequestLimitExceeded"),
        (&["InternalError"], "InternalError"),
        (&["not eligible for Free Tier"], "FreeTierIneligible"),
        (&["MaxFleetCountExceeded"], "FleetQuotaExceeded"),
        (&["PendingVerification"], "AccountPendingVerification"),
        (&["MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded"),
        (&["VcpuLimitExceeded"], "VCPULimitExceeded"),
        (
            &["InsufficientFreeAddressesInSubnet"],
            "InsufficientFreeAddressesInSubnet",
        ),
    ];
    rules
        .iter()
        .find(|(needles, _)| needles.iter().all(|n| has(n)))
        .map_or("LaunchFailed", |(_, reason)| reason)
}

/// Reads a `CreateFleet` answer.
pub fn outcome(
    capacity_type: CapacityType,
    instances: Vec<FleetInstance>,
    errors: &[FleetError],
) -> FleetOutcome {
    let unfulfillable = |e: &&FleetError| UNFULFILLABLE_CODES.contains(&e.code.as_str());
    let mut unavailable: Vec<OfferingRef> = errors
        .iter()
        .filter(unfulfillable)
        .filter_map(|e| {
            Some(OfferingRef {
                instance_type: e.instance_type.clone()?,
                zone: e.zone.clone()?,
                capacity_type,
            })
        })
        .collect();
    unavailable.sort();
    unavailable.dedup();
    if let Some(instance) = instances.into_iter().next() {
        return FleetOutcome::Launched {
            instance,
            unavailable,
        };
    }
    let spot_role_missing = errors.iter().any(|e| e.code == SPOT_ROLE_MISSING);
    let other = errors
        .iter()
        .find(|e| !unfulfillable(e) && e.code != SPOT_ROLE_MISSING);
    match other {
        Some(error) => FleetOutcome::Failed {
            code: error.code.clone(),
            message: error.message.clone(),
        },
        None if errors.is_empty() => FleetOutcome::Failed {
            code: "LaunchFailed".into(),
            message: "CreateFleet returned neither an instance nor an error".into(),
        },
        None => FleetOutcome::InsufficientCapacity {
            message: errors
                .iter()
                .map(|e| e.code.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", "),
            unavailable,
            spot_role_missing,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_failures_get_upstreams_reasons() {
        assert_eq!(
            launch_failure_reason("InsufficientInstanceCapacity", "none left"),
            "LaunchFailed"
        );
        assert_eq!(
            launch_failure_reason("VcpuLimitExceeded", "quota"),
            "VCPULimitExceeded"
        );
        assert_eq!(
            launch_failure_reason(
                "UnauthorizedOperation",
                "Not authorized for images: [ami-1]"
            ),
            "AMIAuthorizationFailure"
        );
        assert_eq!(
            launch_failure_reason(
                "UnauthorizedOperation",
                "with an explicit deny in a service control policy"
            ),
            "Unauthorized"
        );
        assert_eq!(
            launch_failure_reason("InvalidParameter", "groups belong to different networks"),
            "SecurityGroupSubnetVPCMismatch"
        );
    }
    use crate::launch::plan::{Override, TemplateGroup};

    fn error(code: &str, instance_type: &str, zone: &str) -> FleetError {
        FleetError {
            code: code.into(),
            message: format!("{code} message"),
            instance_type: Some(instance_type.into()),
            zone: Some(zone.into()),
        }
    }

    fn instance() -> FleetInstance {
        FleetInstance {
            instance_id: "i-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-west-2a".into(),
            capacity_type: CapacityType::Spot,
        }
    }

    #[test]
    fn a_reservation_is_bought_as_upstream_buys_it() {
        let request = |capacity_type, reservation| FleetRequest {
            capacity_type,
            allocation_strategy: "lowest-price",
            configs: Vec::new(),
            tags: BTreeMap::new(),
            context: None,
            reservation,
        };
        assert_eq!(request(CapacityType::Spot, None).market(), Market::Spot);
        assert_eq!(
            request(CapacityType::OnDemand, None).market(),
            Market::OnDemand
        );
        assert_eq!(
            request(
                CapacityType::Reserved,
                Some((ReservationKind::Default, false))
            )
            .market(),
            Market::OnDemand
        );
        assert_eq!(
            request(
                CapacityType::Reserved,
                Some((ReservationKind::CapacityBlock, false))
            )
            .market(),
            Market::CapacityBlock
        );
        assert_eq!(
            request(
                CapacityType::Reserved,
                Some((ReservationKind::Default, true))
            )
            .market(),
            Market::InterruptibleReservation
        );
    }

    #[test]
    fn a_request_has_one_config_per_template_and_the_strategy_of_its_capacity_type() {
        let plan = LaunchPlan {
            capacity_type: CapacityType::Spot,
            groups: vec![TemplateGroup {
                image_id: "ami-1".into(),
                max_pods: 29,
                instance_types: vec!["m5.large".into()],
                reservation: None,
                overrides: vec![Override {
                    instance_type: "m5.large".into(),
                    zone: "us-west-2a".into(),
                    subnet_id: "subnet-1".into(),
                    image_id: "ami-1".into(),
                    priority: 0.04,
                }],
            }],
            prioritized: false,
        };
        let request = request(
            &plan,
            &["karpenter.k8s.aws/1".into()],
            BTreeMap::new(),
            None,
        );
        assert_eq!(request.allocation_strategy, "price-capacity-optimized");
        let prioritized = super::request(
            &LaunchPlan {
                prioritized: true,
                ..plan.clone()
            },
            &["karpenter.k8s.aws/1".into()],
            BTreeMap::new(),
            None,
        );
        assert_eq!(
            prioritized.allocation_strategy,
            "capacity-optimized-prioritized"
        );
        assert_eq!(request.configs.len(), 1);
        assert_eq!(
            request.configs[0].launch_template_name,
            "karpenter.k8s.aws/1"
        );
    }

    #[test]
    fn an_instance_is_a_launch_even_when_other_offerings_failed() {
        let out = outcome(
            CapacityType::Spot,
            vec![instance()],
            &[error(
                "InsufficientInstanceCapacity",
                "c5.large",
                "us-west-2b",
            )],
        );
        let FleetOutcome::Launched {
            instance,
            unavailable,
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(instance.instance_id, "i-1");
        assert_eq!(unavailable.len(), 1);
    }

    #[test]
    fn only_unfulfillable_errors_mean_insufficient_capacity() {
        let out = outcome(
            CapacityType::OnDemand,
            vec![],
            &[
                error("InsufficientInstanceCapacity", "m5.large", "us-west-2a"),
                error("UnfulfillableCapacity", "m5.large", "us-west-2b"),
            ],
        );
        let FleetOutcome::InsufficientCapacity { unavailable, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(unavailable.len(), 2);
        let failed = outcome(
            CapacityType::OnDemand,
            vec![],
            &[
                error("InsufficientInstanceCapacity", "m5.large", "us-west-2a"),
                error("InvalidParameterValue", "m5.large", "us-west-2b"),
            ],
        );
        assert!(
            matches!(failed, FleetOutcome::Failed { ref code, .. } if code == "InvalidParameterValue")
        );
        assert!(matches!(
            outcome(CapacityType::Spot, vec![], &[]),
            FleetOutcome::Failed { .. }
        ));
    }
}
