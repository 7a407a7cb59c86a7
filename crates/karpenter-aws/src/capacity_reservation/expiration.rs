//! Capacity Block expiry (upstream v1.15.1's `capacityreservation.expiration` controller): EC2
//! starts reclaiming a Capacity Block's instances 30 minutes before the block ends, so the
//! NodeClaims launched into a block are deleted (drained, their pods rescheduled) from
//! [`EXPIRATION_WINDOW`] (40 minutes) before its end: 10 minutes before EC2 begins, in line
//! with the interruption warning EC2 emits.
//!
//! Owns: which Capacity Blocks end when ([`BlockEnds::of_classes`], read from the
//! EC2NodeClasses' `status.capacityReservations`), and the rule ([`decide`]): a NodeClaim whose
//! `karpenter.k8s.aws/capacity-reservation-id` names a block at or past its expiring moment
//! (`end - 40m`) is deleted; NodeClaims already being deleted are left alone; the soonest
//! expiring moment still ahead says when to look again. Open ODCRs and reservations without an
//! end never expire here (only Capacity Blocks do, as upstream's `expiring` state).
//!
//! Must not: read the clock, delete anything or talk to EC2.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::labels::CAPACITY_RESERVATION_ID;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};

/// A Capacity Block is `expiring` this long before its end (upstream's
/// `capacityReservationExpirationPeriod`): no new launches into it, and the NodeClaims in it
/// are deleted.
pub const EXPIRATION_WINDOW: chrono::Duration = chrono::Duration::minutes(40);

/// The `reservationType` of a Capacity Block.
pub const CAPACITY_BLOCK: &str = "capacity-block";

/// When a reservation of `kind` ending at `end` starts expiring: `end - 40m` for a Capacity
/// Block, never for anything else.
pub fn expiring_from(kind: &str, end: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    (kind == CAPACITY_BLOCK)
        .then_some(end?)?
        .checked_sub_signed(EXPIRATION_WINDOW)
}

/// Capacity Blocks by id, with their end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockEnds(BTreeMap<String, DateTime<Utc>>);

impl BlockEnds {
    /// The Capacity Blocks the classes' statuses list (with an end time). One reservation in
    /// two classes is one block: EC2 gave both the same end.
    pub fn of_classes<'a>(classes: impl IntoIterator<Item = &'a EC2NodeClass>) -> Self {
        let mut ends = BTreeMap::new();
        for class in classes {
            let listed = class
                .status
                .as_ref()
                .and_then(|s| s.capacity_reservations.as_deref())
                .unwrap_or_default();
            for reservation in listed {
                if reservation.reservation_type.as_deref() != Some(CAPACITY_BLOCK) {
                    continue;
                }
                if let Some(end) = reservation.end_time.as_ref().and_then(from_api_time) {
                    ends.insert(reservation.id.clone(), end);
                }
            }
        }
        BlockEnds(ends)
    }

    /// Adds (or moves) one block's end.
    pub fn insert(&mut self, id: impl Into<String>, end: DateTime<Utc>) {
        self.0.insert(id.into(), end);
    }

    /// The end of block `id`, when it is one.
    pub fn end(&self, id: &str) -> Option<DateTime<Utc>> {
        self.0.get(id).copied()
    }
}

fn from_api_time(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().try_into().ok()?)
}

/// One NodeClaim to delete, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expiring {
    pub node_claim: String,
    pub reservation_id: String,
    /// The block's end.
    pub ends_at: DateTime<Utc>,
}

impl fmt::Display for Expiring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "capacity block {} ends at {} (NodeClaims in it are deleted from {}m before)",
            self.reservation_id,
            self.ends_at.to_rfc3339(),
            EXPIRATION_WINDOW.num_minutes(),
        )
    }
}

/// What to do now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// In NodeClaim order.
    pub delete: Vec<Expiring>,
    /// The soonest moment after `now` a block one of the claims runs in starts expiring.
    pub next: Option<DateTime<Utc>>,
}

/// The NodeClaims among `claims` to delete at `now` because their Capacity Block (in `ends`)
/// is about to end.
pub fn decide<'a>(
    ends: &BlockEnds,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    now: DateTime<Utc>,
) -> Decision {
    let mut decision = Decision::default();
    for claim in claims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (Some(name), Some(reservation)) = (
            claim.metadata.name.as_deref(),
            claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CAPACITY_RESERVATION_ID)),
        ) else {
            continue;
        };
        let Some(end) = ends.end(reservation) else {
            continue;
        };
        let Some(from) = expiring_from(CAPACITY_BLOCK, Some(end)) else {
            continue;
        };
        if now >= from {
            decision.delete.push(Expiring {
                node_claim: name.to_owned(),
                reservation_id: reservation.clone(),
                ends_at: end,
            });
        } else {
            decision.next = Some(decision.next.map_or(from, |next| next.min(from)));
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("a time")
            .with_timezone(&Utc)
    }

    fn claim(name: &str, reservation: Option<&str>) -> NodeClaim {
        let mut labels = serde_json::json!({"karpenter.sh/capacity-type": "reserved"});
        if let Some(r) = reservation {
            labels[CAPACITY_RESERVATION_ID] = r.into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []}
        }))
        .expect("a NodeClaim")
    }

    fn class(reservations: serde_json::Value) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
            "status": {"capacityReservations": reservations}
        }))
        .expect("an EC2NodeClass")
    }

    const END: &str = "2026-03-01T12:00:00Z";

    fn block_ends() -> BlockEnds {
        let mut ends = BlockEnds::default();
        ends.insert("cr-block", at(END));
        ends
    }

    #[test]
    fn a_claim_in_a_capacity_block_is_deleted_from_forty_minutes_before_its_end_and_not_a_second_earlier()
     {
        let claims = [claim("in-block", Some("cr-block"))];
        let boundary = at(END) - Duration::minutes(40);
        let before = decide(&block_ends(), &claims, boundary - Duration::seconds(1));
        assert_eq!(before.delete, vec![]);
        assert_eq!(
            before.next,
            Some(boundary),
            "it looks again at the boundary"
        );
        let expiring = Expiring {
            node_claim: "in-block".into(),
            reservation_id: "cr-block".into(),
            ends_at: at(END),
        };
        for now in [boundary, at(END) - Duration::minutes(1), at(END)] {
            let decision = decide(&block_ends(), &claims, now);
            assert_eq!(decision.delete, vec![expiring.clone()], "at {now}");
            assert_eq!(decision.next, None);
        }
        assert_eq!(
            expiring.to_string(),
            "capacity block cr-block ends at 2026-03-01T12:00:00+00:00 (NodeClaims in it are deleted from 40m before)"
        );
    }

    #[test]
    fn claims_outside_a_known_block_or_already_deleting_are_left_alone() {
        let mut deleting = claim("deleting", Some("cr-block"));
        deleting.metadata.deletion_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(0).expect("a time"),
        ));
        let claims = [
            claim("on-demand", None),
            claim("other-odcr", Some("cr-odcr")),
            deleting,
        ];
        assert_eq!(decide(&block_ends(), &claims, at(END)), Decision::default());
    }

    #[test]
    fn only_capacity_blocks_with_an_end_are_read_from_the_class_status() {
        let class = class(serde_json::json!([
            {"availabilityZone": "us-west-2a", "id": "cr-block", "instanceType": "p5.48xlarge",
             "ownerID": "1", "reservationType": "capacity-block", "state": "active", "endTime": END},
            {"availabilityZone": "us-west-2a", "id": "cr-odcr", "instanceType": "c5.large",
             "ownerID": "1", "reservationType": "default", "state": "active", "endTime": END},
            {"availabilityZone": "us-west-2a", "id": "cr-unended", "instanceType": "c5.large",
             "ownerID": "1", "reservationType": "capacity-block", "state": "active"}
        ]));
        let ends = BlockEnds::of_classes([&class]);
        assert_eq!(ends, block_ends());
        assert_eq!(expiring_from("default", Some(at(END))), None);
        assert_eq!(expiring_from(CAPACITY_BLOCK, None), None);
    }
}
