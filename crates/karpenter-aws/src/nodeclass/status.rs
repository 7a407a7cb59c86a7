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
use karpenter_api::v1::EC2NodeClassStatus;
use karpenter_api::v1::ec2nodeclass::{AmiStatus, SecurityGroupStatus, SubnetStatus};

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
    /// Capacity reservations are not launched into yet: `Ready(())` when the class selects
    /// none, `NotReady` when it selects some.
    pub capacity_reservations: Outcome<()>,
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
            one(CAPACITY_RESERVATIONS_READY, &self.capacity_reservations),
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
    let mut none: Option<()> = None;
    apply(
        &mut none,
        &resolution.capacity_reservations,
        CAPACITY_RESERVATIONS_READY,
        &mut list,
        generation,
        &at,
    );
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
            capacity_reservations: Outcome::Ready(()),
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
}
