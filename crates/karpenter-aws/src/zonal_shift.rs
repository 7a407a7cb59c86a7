//! Amazon Application Recovery Controller (ARC) zonal shifts, the pure half of upstream's
//! `arczonalshift` provider and controller (v1.15.1, `ENABLE_ZONAL_SHIFT`, off by default).
//!
//! With the setting on, the controller asks `arc-zonal-shift:GetManagedResource` for the
//! cluster's ARN every [`POLL_INTERVAL`] (and once at start, where a cluster ARC does not know
//! stops the start, as upstream). [`shifted_zones`] turns the answer's zonal shifts into the
//! zone ids shifted away from at `now` (a shift counts while it is `APPLIED` and has not
//! expired). Every offering of a shifted zone is unavailable ([`apply`], [`is_shifted`]; a zone
//! maps to its id through the EC2NodeClass's subnets): nothing launches there, so the
//! provisioner and consolidation's replacements go to the other zones, and a pod that can only
//! run in the shifted zone waits. Disruption is otherwise unchanged (upstream: the nodes of the
//! zone are EKS's to taint), but the provider does not call `TerminateInstances` into a shifted
//! zone ([`is_shifted`] again): a termination there waits for the shift to end, as upstream, to
//! keep retries off the impaired zone.
//!
//! [`transitions`] says which NodePools to tell when a zone becomes shifted or is restored
//! (upstream's `ZonalShiftActive` / `ZonalShiftCleared` events, [`event`]).
//!
//! Better than upstream: the shifted set is the last answer's. Upstream merges a non-empty
//! answer into what it knew, so a shift cancelled while another zone stays shifted is honoured
//! until its old expiry.
//!
//! Must not: call ARC, read the clock or hold state (the provider keeps the last answer).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use karpenter_api::labels;
use karpenter_cloud::InstanceTypeInfo;
use karpenter_scheduling::RequirementSpec;

/// How often upstream asks ARC (the zonal shift controller's requeue).
pub const POLL_INTERVAL: Duration = Duration::from_secs(30);

/// One zonal shift of `GetManagedResource`'s `ZonalShifts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shift {
    /// The zone id traffic is shifted away from (`usw2-az1`).
    pub away_from: String,
    pub expiry: DateTime<Utc>,
    /// `AppliedStatus` is `APPLIED` (a shift ARC does not apply, e.g. one that a practice run
    /// or autoshift overrides, is `NOT_APPLIED`).
    pub applied: bool,
}

/// The zone ids shifted away from at `now`.
pub fn shifted_zones(shifts: &[Shift], now: DateTime<Utc>) -> BTreeSet<String> {
    shifts
        .iter()
        .filter(|s| s.applied && s.expiry > now)
        .map(|s| s.away_from.clone())
        .collect()
}

/// Whether `zone` (a name) is shifted away from; `zone_id` maps a zone name to its id (the
/// EC2NodeClass's subnets). A zone whose id is unknown is not shifted.
pub fn is_shifted<'a>(
    zone: &str,
    zone_id: impl Fn(&str) -> Option<&'a str>,
    shifted: &BTreeSet<String>,
) -> bool {
    !shifted.is_empty() && zone_id(zone).is_some_and(|id| shifted.contains(id))
}

/// Turns every offering of a shifted zone unavailable.
pub fn apply<'a>(
    infos: &mut [InstanceTypeInfo],
    zone_id: impl Fn(&str) -> Option<&'a str>,
    shifted: &BTreeSet<String>,
) {
    if shifted.is_empty() {
        return;
    }
    for info in infos {
        for offering in &mut info.offerings {
            if is_shifted(&offering.zone, &zone_id, shifted) {
                offering.available = false;
            }
        }
    }
}

/// A zone of a NodePool that became shifted or was restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub zone: String,
    pub zone_id: String,
    /// `true`: shifted away from now; `false`: restored.
    pub shifted: bool,
}

/// The transitions a NodePool is told of between two polls: zones shifted now but not before
/// and zones restored, among the pool's class's zones (`(zone, zone id)`, from its subnets)
/// that its `requirements` allow (`topology.kubernetes.io/zone` and `topology.k8s.aws/zone-id`).
pub fn transitions(
    previous: &BTreeSet<String>,
    current: &BTreeSet<String>,
    zones: &[(String, String)],
    requirements: &[RequirementSpec],
) -> Vec<Transition> {
    let allowed = |zone: &str, zone_id: &str| {
        requirements.iter().all(|r| match r.key.as_str() {
            labels::ZONE => r.matches(Some(zone)),
            labels::ZONE_ID => r.matches(Some(zone_id)),
            _ => true,
        })
    };
    let mut out = Vec::new();
    for (changed, shifted) in [
        (current.difference(previous), true),
        (previous.difference(current), false),
    ] {
        for zone_id in changed {
            let Some((zone, _)) = zones.iter().find(|(_, id)| id == zone_id) else {
                continue;
            };
            if allowed(zone, zone_id) {
                out.push(Transition {
                    zone: zone.clone(),
                    zone_id: zone_id.clone(),
                    shifted,
                });
            }
        }
    }
    out
}

/// The NodePool event of a transition: `(warning, reason, message)`, as upstream.
pub fn event(t: &Transition) -> (bool, &'static str, String) {
    if t.shifted {
        (
            true,
            "ZonalShiftActive",
            format!(
                "Zonal shift detected: offerings in zone {} ({}) are unavailable for this NodePool",
                t.zone, t.zone_id
            ),
        )
    } else {
        (
            false,
            "ZonalShiftCleared",
            format!(
                "Zonal shift cleared: offerings in zone {} ({}) are restored for this NodePool",
                t.zone, t.zone_id
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use karpenter_cloud::{CapacityType, Offering};
    use karpenter_scheduling::Operator;

    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::TimeDelta::seconds(seconds)
    }

    fn shift(zone_id: &str, expiry: i64, applied: bool) -> Shift {
        Shift {
            away_from: zone_id.into(),
            expiry: at(expiry),
            applied,
        }
    }

    fn ids(zone: &str) -> Option<&'static str> {
        match zone {
            "us-west-2a" => Some("usw2-az1"),
            "us-west-2b" => Some("usw2-az2"),
            _ => None,
        }
    }

    #[test]
    fn only_applied_unexpired_shifts_count() {
        let shifts = [
            shift("usw2-az1", 100, true),
            shift("usw2-az2", 100, false),
            shift("usw2-az3", 50, true),
        ];
        assert_eq!(
            shifted_zones(&shifts, at(50)),
            BTreeSet::from(["usw2-az1".to_owned()])
        );
        assert_eq!(shifted_zones(&shifts, at(100)), BTreeSet::new());
    }

    #[test]
    fn offerings_of_a_shifted_zone_become_unavailable_and_the_others_stay() {
        let offering = |zone: &str, capacity_type| Offering {
            zone: zone.into(),
            capacity_type,
            price_per_hour: 0.1,
            available: true,
            price_is_estimate: false,
            reservation: None,
        };
        let mut infos = vec![InstanceTypeInfo {
            name: "m5.large".into(),
            offerings: vec![
                offering("us-west-2a", CapacityType::OnDemand),
                offering("us-west-2a", CapacityType::Spot),
                offering("us-west-2b", CapacityType::OnDemand),
                offering("us-west-2c", CapacityType::OnDemand),
            ],
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            label_choices: Default::default(),
        }];
        let shifted = BTreeSet::from(["usw2-az1".to_owned()]);
        apply(&mut infos, ids, &shifted);
        let available: Vec<(&str, bool)> = infos[0]
            .offerings
            .iter()
            .map(|o| (o.zone.as_str(), o.available))
            .collect();
        assert_eq!(
            available,
            [
                ("us-west-2a", false),
                ("us-west-2a", false),
                ("us-west-2b", true),
                ("us-west-2c", true)
            ]
        );
        assert!(is_shifted("us-west-2a", ids, &shifted));
        assert!(!is_shifted("us-west-2c", ids, &shifted), "no known id");
    }

    #[test]
    fn a_pool_hears_of_the_zones_it_may_use_that_changed() {
        let zones = vec![
            ("us-west-2a".to_owned(), "usw2-az1".to_owned()),
            ("us-west-2b".to_owned(), "usw2-az2".to_owned()),
        ];
        let previous = BTreeSet::from(["usw2-az2".to_owned()]);
        let current = BTreeSet::from(["usw2-az1".to_owned(), "usw2-az4".to_owned()]);
        assert_eq!(
            transitions(&previous, &current, &zones, &[]),
            vec![
                Transition {
                    zone: "us-west-2a".into(),
                    zone_id: "usw2-az1".into(),
                    shifted: true
                },
                Transition {
                    zone: "us-west-2b".into(),
                    zone_id: "usw2-az2".into(),
                    shifted: false
                },
            ],
            "usw2-az4 is not a zone of the class"
        );
        let only_b = [RequirementSpec::new(
            labels::ZONE,
            Operator::In,
            &["us-west-2b"],
        )];
        assert_eq!(
            transitions(&previous, &current, &zones, &only_b).len(),
            1,
            "a pool kept out of us-west-2a is not told about it"
        );
        assert_eq!(transitions(&current, &current, &zones, &[]), vec![]);
    }

    #[test]
    fn events_use_upstreams_reasons_and_messages() {
        let t = Transition {
            zone: "us-west-2a".into(),
            zone_id: "usw2-az1".into(),
            shifted: true,
        };
        assert_eq!(
            event(&t),
            (
                true,
                "ZonalShiftActive",
                "Zonal shift detected: offerings in zone us-west-2a (usw2-az1) are unavailable for this NodePool".to_owned()
            )
        );
        let cleared = Transition {
            shifted: false,
            ..t
        };
        assert_eq!(event(&cleared).1, "ZonalShiftCleared");
        assert!(!event(&cleared).0);
    }
}
