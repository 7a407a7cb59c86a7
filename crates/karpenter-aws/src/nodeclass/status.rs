//! The EC2NodeClass status as upstream writes it: the resolved subnets, security groups, AMIs
//! and instance profile, one condition per dependency and a root `Ready` that is their AND
//! (reference `karpenter-aws.md` 1.10).
//!
//! A dependency is [`Outcome::Ready`] (a value), [`Outcome::NotReady`] (nothing matched, or a
//! setting cannot work: the value is cleared, the condition says why) or [`Outcome::Failed`]
//! (AWS could not be asked, e.g. throttling: the previous value and condition stay, as an
//! upstream reconcile that errors changes nothing, so a blip does not stop launches).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::conditions;
use karpenter_api::v1::ec2nodeclass::{
    AmiStatus, CapacityReservationStatus, SecurityGroupStatus, SubnetStatus,
};
use karpenter_api::v1::{EC2NodeClass, EC2NodeClassStatus};

pub use karpenter_api::v1::ec2nodeclass::conditions::{
    AMIS_READY, CAPACITY_RESERVATIONS_READY, INSTANCE_PROFILE_READY, PLACEMENT_GROUP_READY, READY,
    SECURITY_GROUPS_READY, SUBNETS_READY, VALIDATION_SUCCEEDED,
};

/// The dependencies the root `Ready` condition is the AND of, in the order upstream lists them.
pub const DEPENDENCIES: &[&str] = &[
    AMIS_READY,
    SUBNETS_READY,
    SECURITY_GROUPS_READY,
    INSTANCE_PROFILE_READY,
    CAPACITY_RESERVATIONS_READY,
    VALIDATION_SUCCEEDED,
    PLACEMENT_GROUP_READY,
];

/// What resolving one dependency gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    Ready(T),
    NotReady { reason: String, message: String },
    Failed { reason: String, message: String },
}

impl<T> Outcome<T> {
    pub fn not_ready(reason: &str, message: impl Into<String>) -> Self {
        Outcome::NotReady {
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    pub fn failed(reason: &str, message: impl Into<String>) -> Self {
        Outcome::Failed {
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self, Outcome::Ready(_))
    }
}

/// Everything one reconcile resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub subnets: Outcome<Vec<SubnetStatus>>,
    pub security_groups: Outcome<Vec<SecurityGroupStatus>>,
    pub amis: Outcome<Vec<AmiStatus>>,
    pub instance_profile: Outcome<String>,
    /// The reservations `spec.capacityReservationSelectorTerms` matched (`Ready` with none is
    /// no status field and the condition `True`, as upstream); `None` with the gate
    /// `ReservedCapacity` off: no field and no `CapacityReservationsReady` condition at all.
    pub capacity_reservations: Option<Outcome<Vec<CapacityReservationStatus>>>,
    /// Checks over the spec and the cluster facts (tags, AL2023's cluster CIDR, ...).
    pub validation: Outcome<()>,
    /// `spec.placementGroupSelector`: `Ready(())` without one or when it matched an available
    /// group (kept in memory by the provider, as upstream: the status has no field for it).
    pub placement_group: Outcome<()>,
}

impl Resolution {
    /// Each dependency that did not resolve, with its reason and message
    /// (`AMIsReady: AMIsResolutionFailed: ssm:GetParameter: access denied ...`), joined by
    /// `; `; empty when all resolved. A failed refresh of a dependency resolved before is
    /// here too, although the status keeps the earlier value.
    pub fn problems(&self) -> String {
        fn one<T>(condition: &str, outcome: &Outcome<T>) -> Option<String> {
            match outcome {
                Outcome::Ready(_) => None,
                Outcome::NotReady { reason, message } | Outcome::Failed { reason, message } => {
                    Some(format!("{condition}: {reason}: {message}"))
                }
            }
        }
        [
            one(AMIS_READY, &self.amis),
            one(SUBNETS_READY, &self.subnets),
            one(SECURITY_GROUPS_READY, &self.security_groups),
            one(INSTANCE_PROFILE_READY, &self.instance_profile),
            self.capacity_reservations
                .as_ref()
                .and_then(|o| one(CAPACITY_RESERVATIONS_READY, o)),
            one(VALIDATION_SUCCEEDED, &self.validation),
            one(PLACEMENT_GROUP_READY, &self.placement_group),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
    }
}

fn apply<T: Clone>(
    slot: &mut Option<T>,
    outcome: &Outcome<T>,
    condition: &str,
    list: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    generation: Option<i64>,
    at: &Time,
) {
    match outcome {
        Outcome::Ready(value) => {
            *slot = Some(value.clone());
            conditions::set(
                list,
                generation,
                condition,
                "True",
                condition,
                "",
                at.clone(),
            );
        }
        Outcome::NotReady { reason, message } => {
            *slot = None;
            conditions::set(
                list,
                generation,
                condition,
                "False",
                reason,
                message,
                at.clone(),
            );
        }
        Outcome::Failed { reason, message } => {
            // A value resolved before stays usable (a blip does not stop launches); a
            // dependency that never resolved says what the last attempt failed on.
            if !list
                .iter()
                .any(|c| c.type_ == condition && c.status == "True")
            {
                conditions::set(
                    list,
                    generation,
                    condition,
                    "Unknown",
                    reason,
                    message,
                    at.clone(),
                );
            }
        }
    }
}

/// The status after a reconcile of a class at `generation`, from the previous status.
pub fn status(
    previous: Option<&EC2NodeClassStatus>,
    generation: Option<i64>,
    resolution: &Resolution,
    at: Time,
) -> EC2NodeClassStatus {
    let mut out = previous.cloned().unwrap_or_default();
    let mut list = out.conditions.take().unwrap_or_default();
    apply(
        &mut out.subnets,
        &resolution.subnets,
        SUBNETS_READY,
        &mut list,
        generation,
        &at,
    );
    apply(
        &mut out.security_groups,
        &resolution.security_groups,
        SECURITY_GROUPS_READY,
        &mut list,
        generation,
        &at,
    );
    apply(
        &mut out.amis,
        &resolution.amis,
        AMIS_READY,
        &mut list,
        generation,
        &at,
    );
    apply(
        &mut out.instance_profile,
        &resolution.instance_profile,
        INSTANCE_PROFILE_READY,
        &mut list,
        generation,
        &at,
    );
    match &resolution.capacity_reservations {
        Some(outcome) => {
            apply(
                &mut out.capacity_reservations,
                outcome,
                CAPACITY_RESERVATIONS_READY,
                &mut list,
                generation,
                &at,
            );
            if out
                .capacity_reservations
                .as_ref()
                .is_some_and(Vec::is_empty)
            {
                out.capacity_reservations = None;
            }
        }
        None => {
            out.capacity_reservations = None;
            list.retain(|c| c.type_ != CAPACITY_RESERVATIONS_READY);
        }
    }
    let mut none: Option<()> = None;
    apply(
        &mut none,
        &resolution.validation,
        VALIDATION_SUCCEEDED,
        &mut list,
        generation,
        &at,
    );
    let mut none: Option<()> = None;
    apply(
        &mut none,
        &resolution.placement_group,
        PLACEMENT_GROUP_READY,
        &mut list,
        generation,
        &at,
    );
    let unhealthy: Vec<String> = DEPENDENCIES
        .iter()
        .filter_map(|d| {
            let c = list.iter().find(|c| c.type_ == *d)?;
            (c.status != "True").then(|| format!("{d}={}", c.status))
        })
        .collect();
    if unhealthy.is_empty() {
        conditions::set(&mut list, generation, READY, "True", READY, "", at);
    } else {
        let status = if unhealthy.iter().any(|u| u.ends_with("=False")) {
            "False"
        } else {
            "Unknown"
        };
        conditions::set(
            &mut list,
            generation,
            READY,
            status,
            "UnhealthyDependents",
            &unhealthy.join(", "),
            at,
        );
    }
    // A stable order keeps status patches small and diffs readable.
    list.sort_by(|a, b| a.type_.cmp(&b.type_));
    out.conditions = Some(list);
    out
}

/// Each dependency that is not `True`, with its reason and message:
/// `AMIsReady=Unknown (AMIsResolutionFailed: ssm:GetParameter: access denied ...)`, joined
/// by `; `. Empty when every dependency is `True`. The root `Ready` message names only the
/// dependencies (as upstream's); logs, events and launch errors say this instead.
pub fn not_ready_dependencies(status: Option<&EC2NodeClassStatus>) -> String {
    let list = status.and_then(|s| s.conditions.as_deref());
    DEPENDENCIES
        .iter()
        .filter_map(|d| conditions::get(list, d))
        .filter(|c| c.status != "True")
        .map(|c| {
            if c.message.is_empty() {
                format!("{}={} ({})", c.type_, c.status, c.reason)
            } else {
                format!("{}={} ({}: {})", c.type_, c.status, c.reason, c.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the class may launch: `Ready=True` observed at its current generation (upstream's
/// rule in `CloudProvider.Create`). The error names each dependency that is not ready and why.
pub fn launchable(
    status: Option<&EC2NodeClassStatus>,
    generation: Option<i64>,
) -> Result<(), String> {
    let list = status.and_then(|s| s.conditions.as_deref());
    match conditions::get(list, READY) {
        None => Err("it has no Ready condition yet".into()),
        Some(c) if c.status != "True" => {
            let why = not_ready_dependencies(status);
            Err(if why.is_empty() {
                format!("Ready={}: {}", c.status, c.message)
            } else {
                format!("Ready={}: {why}", c.status)
            })
        }
        Some(c) if generation.is_some() && c.observed_generation != generation => Err(format!(
            "Ready was observed at generation {}, the class is at {}",
            c.observed_generation.unwrap_or_default(),
            generation.unwrap_or_default()
        )),
        Some(_) => Ok(()),
    }
}

/// `ValidationSucceeded` over the spec: the checks the API server does not make (upstream's
/// validation controller, without its dry runs), in its order:
///
/// 1. `spec.kubelet` (an open map since v1.15): every problem of the first kind found, as
///    [`karpenter_api::validation::kubelet_problems`] classifies them — not a valid kubelet
///    `KubeletConfiguration` or against upstream's rules (`InvalidKubeletConfiguration`), a CEL
///    expression (`KubeletExpressionsDisabled`), fields the AMI family would drop
///    (`UnsupportedKubeletConfiguration`);
/// 2. tags Karpenter sets itself (`TagValidationFailed`).
pub fn validate(class: &EC2NodeClass) -> Outcome<()> {
    if let Some(kubelet) = &class.spec.kubelet {
        let problems =
            karpenter_api::validation::kubelet_problems(kubelet, class.spec.resolved_ami_family());
        if let Some(kind) = problems.iter().map(|p| p.kind).min() {
            let message = problems
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| p.error.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return Outcome::not_ready(kind.reason(), message);
        }
    }
    const RESERVED: &[&str] = &[
        "eks:eks-cluster-name",
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.k8s.aws/ec2nodeclass",
    ];
    for key in class.spec.tags.iter().flatten().map(|(k, _)| k) {
        if RESERVED.contains(&key.as_str()) || key.starts_with("kubernetes.io/cluster/") {
            return Outcome::not_ready(
                "TagValidationFailed",
                format!("spec.tags: {key:?} is set by Karpenter and may not be given"),
            );
        }
    }
    Outcome::Ready(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap_or_default())
    }

    fn ready() -> Resolution {
        Resolution {
            subnets: Outcome::Ready(vec![SubnetStatus {
                id: "subnet-1".into(),
                zone: "us-west-2a".into(),
                zone_id: None,
            }]),
            security_groups: Outcome::Ready(vec![SecurityGroupStatus {
                id: "sg-1".into(),
                name: None,
            }]),
            amis: Outcome::Ready(vec![]),
            instance_profile: Outcome::Ready("demo_1".into()),
            capacity_reservations: Some(Outcome::Ready(Vec::new())),
            validation: Outcome::Ready(()),
            placement_group: Outcome::Ready(()),
        }
    }

    fn condition<'a>(
        status: &'a EC2NodeClassStatus,
        type_: &str,
    ) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        conditions::get(status.conditions.as_deref(), type_).unwrap()
    }

    #[test]
    fn every_dependency_ready_makes_the_class_ready_and_launchable() {
        let status = status(None, Some(3), &ready(), t(1));
        assert_eq!(condition(&status, READY).status, "True");
        assert_eq!(status.instance_profile.as_deref(), Some("demo_1"));
        assert_eq!(launchable(Some(&status), Some(3)), Ok(()));
        assert!(
            launchable(Some(&status), Some(4)).is_err(),
            "a newer generation is not observed yet"
        );
        assert_eq!(status.conditions.as_ref().unwrap().len(), 8);
        assert_eq!(condition(&status, PLACEMENT_GROUP_READY).status, "True");
    }

    #[test]
    fn a_placement_group_not_found_makes_the_class_not_ready_naming_it() {
        let mut missing = ready();
        missing.placement_group = Outcome::not_ready(
            "PlacementGroupNotFound",
            "Placement group \"kafka\" not found",
        );
        let status = status(None, Some(1), &missing, t(1));
        let pg = condition(&status, PLACEMENT_GROUP_READY);
        assert_eq!(
            (pg.status.as_str(), pg.reason.as_str()),
            ("False", "PlacementGroupNotFound")
        );
        assert_eq!(condition(&status, READY).status, "False");
        assert!(
            launchable(Some(&status), Some(1))
                .unwrap_err()
                .contains("Placement group \"kafka\" not found")
        );
    }

    #[test]
    fn matched_reservations_are_listed_none_is_no_field_and_the_gate_off_drops_the_condition() {
        let reservation = CapacityReservationStatus {
            availability_zone: "us-west-2a".into(),
            id: "cr-1".into(),
            instance_type: "c5.large".into(),
            owner_id: "123456789012".into(),
            state: Some("active".into()),
            ..CapacityReservationStatus::default()
        };
        let mut with = ready();
        with.capacity_reservations = Some(Outcome::Ready(vec![reservation.clone()]));
        let listed = status(None, Some(1), &with, t(1));
        assert_eq!(listed.capacity_reservations, Some(vec![reservation]));
        assert_eq!(
            condition(&listed, CAPACITY_RESERVATIONS_READY).status,
            "True"
        );
        assert_eq!(condition(&listed, READY).status, "True");

        let none = status(Some(&listed), Some(1), &ready(), t(2));
        assert_eq!(
            none.capacity_reservations, None,
            "upstream writes nil, not []"
        );
        assert_eq!(condition(&none, CAPACITY_RESERVATIONS_READY).status, "True");

        let mut off = ready();
        off.capacity_reservations = None;
        let off = status(Some(&listed), Some(1), &off, t(3));
        assert_eq!(off.capacity_reservations, None);
        assert!(conditions::get(off.conditions.as_deref(), CAPACITY_RESERVATIONS_READY).is_none());
        assert_eq!(condition(&off, READY).status, "True");
    }

    #[test]
    fn no_subnets_clears_them_and_says_why_in_ready() {
        let first = status(None, Some(1), &ready(), t(1));
        let mut none = ready();
        none.subnets = Outcome::not_ready(
            "SubnetsNotFound",
            "SubnetSelector did not match any Subnets",
        );
        let second = status(Some(&first), Some(1), &none, t(2));
        assert_eq!(second.subnets, None);
        let root = condition(&second, READY);
        assert_eq!(
            (root.status.as_str(), root.reason.as_str()),
            ("False", "UnhealthyDependents")
        );
        assert_eq!(root.message, "SubnetsReady=False");
        assert_eq!(condition(&second, SUBNETS_READY).reason, "SubnetsNotFound");
        assert!(
            launchable(Some(&second), Some(1))
                .unwrap_err()
                .contains("SubnetsReady=False")
        );
    }

    #[test]
    fn a_failed_lookup_keeps_what_was_resolved_before() {
        let first = status(None, Some(1), &ready(), t(1));
        let mut throttled = ready();
        throttled.subnets = Outcome::failed("SubnetsResolutionFailed", "RequestLimitExceeded");
        let second = status(Some(&first), Some(1), &throttled, t(2));
        assert_eq!(second.subnets, first.subnets);
        assert_eq!(condition(&second, SUBNETS_READY).status, "True");
        assert_eq!(condition(&second, READY).status, "True");
        // With nothing before, the dependency is Unknown and so is Ready.
        let fresh = status(None, Some(1), &throttled, t(1));
        assert_eq!(condition(&fresh, SUBNETS_READY).status, "Unknown");
        assert_eq!(condition(&fresh, READY).status, "Unknown");
    }

    #[test]
    fn a_dependency_that_never_resolved_says_what_the_latest_attempt_failed_on() {
        let mut denied = ready();
        denied.amis = Outcome::failed(
            "AMIsResolutionFailed",
            "ssm:GetParameter: access denied (AccessDenied): not allowed",
        );
        let first = status(None, Some(1), &denied, t(1));
        denied.amis = Outcome::failed(
            "AMIsResolutionFailed",
            "ec2:DescribeImages: RequestLimitExceeded: slow down",
        );
        let second = status(Some(&first), Some(1), &denied, t(2));
        let amis = condition(&second, AMIS_READY);
        assert_eq!(amis.status, "Unknown");
        assert_eq!(
            amis.message,
            "ec2:DescribeImages: RequestLimitExceeded: slow down"
        );
        let why = launchable(Some(&second), Some(1)).unwrap_err();
        assert_eq!(
            why,
            "Ready=Unknown: AMIsReady=Unknown (AMIsResolutionFailed: ec2:DescribeImages: RequestLimitExceeded: slow down)"
        );
        assert_eq!(
            not_ready_dependencies(Some(&status(None, Some(1), &ready(), t(1)))),
            ""
        );
        assert_eq!(
            denied.problems(),
            "AMIsReady: AMIsResolutionFailed: ec2:DescribeImages: RequestLimitExceeded: slow down"
        );
        assert_eq!(ready().problems(), "");
    }

    fn class_with(kubelet: serde_json::Value, alias: &str) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "KarpenterNodeRole-demo",
                "amiSelectorTerms": [{"alias": alias}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "kubelet": kubelet,
                "tags": {"kubernetes.io/cluster/demo": "owned"},
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn not_ready(outcome: Outcome<()>) -> (String, String) {
        match outcome {
            Outcome::NotReady { reason, message } => (reason, message),
            other => panic!("expected NotReady, got {other:?}"),
        }
    }

    #[test]
    fn a_kubelet_field_the_kubelet_does_not_have_fails_validation_not_the_apply() {
        let (reason, message) = not_ready(validate(&class_with(
            serde_json::json!({"maxPod": 10, "shutdownGracePeriod": 30}),
            "al2023@latest",
        )));
        assert_eq!(reason, "InvalidKubeletConfiguration");
        assert_eq!(
            message,
            "spec.kubelet: unknown field \"maxPod\" (did you mean \"maxPods\"?); spec.kubelet: json: cannot unmarshal number 30 into Go struct field KubeletConfiguration.shutdownGracePeriod of type v1.Duration"
        );
    }

    #[test]
    fn kubelet_problems_are_reported_before_tags_and_by_their_first_kind() {
        let (reason, _) = not_ready(validate(&class_with(
            serde_json::json!({"maxPods": "vcpus * 8", "containerLogMaxSize": "50Mi"}),
            "bottlerocket@latest",
        )));
        assert_eq!(reason, "KubeletExpressionsDisabled");
        let (reason, message) = not_ready(validate(&class_with(
            serde_json::json!({"containerLogMaxSize": "50Mi"}),
            "bottlerocket@latest",
        )));
        assert_eq!(reason, "UnsupportedKubeletConfiguration");
        assert!(message.contains("containerLogMaxSize"), "{message}");
        let (reason, _) = not_ready(validate(&class_with(
            serde_json::json!({"containerLogMaxSize": "50Mi", "shutdownGracePeriod": "30s"}),
            "al2023@latest",
        )));
        assert_eq!(reason, "TagValidationFailed", "valid kubelet, reserved tag");
    }
}
