//! Provider drift of a launched NodeClaim (reference `karpenter-aws.md` 6), first hit wins:
//! `NodeClassDrift` (the EC2NodeClass hash moved, compared only under the same hash version),
//! `AMIDrift` (the AMI the instance type maps to now is not the one it runs), then
//! `SecurityGroupDrift`, `SubnetDrift` and `CapacityReservationDrift` (a reserved instance
//! whose reservation is no longer in the class's `status.capacityReservations`: the selector
//! moved off it, or it ended or was cancelled) against the instance as EC2 describes it.
//! The caller describes the instance again, uncached, before it reports
//! `CapacityReservationDrift`, as upstream does (a reservation can end under a cached
//! answer that still names it).
//! NodePool-level drift (template hash, requirements) is the core's.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::labels::{EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION};
use karpenter_api::v1::{EC2NodeClass, NodeClaim};

use crate::nodeclass::amis;

pub const NODECLASS_DRIFT: &str = "NodeClassDrift";
pub const AMI_DRIFT: &str = "AMIDrift";
pub const SECURITY_GROUP_DRIFT: &str = "SecurityGroupDrift";
pub const SUBNET_DRIFT: &str = "SubnetDrift";
pub const CAPACITY_RESERVATION_DRIFT: &str = "CapacityReservationDrift";

/// What EC2 says of the running instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFacts {
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_group_ids: BTreeSet<String>,
    /// The reservation a reserved instance runs in (`CapacityReservationId` of an instance
    /// launched into it); `None` for spot and on-demand ones.
    pub capacity_reservation_id: Option<String>,
}

/// The drift reason of `claim`, launched from `class`; `instance_labels` are the labels of
/// its instance type (for the AMI mapping), `None` when the type is no longer offered.
pub fn drift(
    claim: &NodeClaim,
    class: &EC2NodeClass,
    instance_labels: Option<&BTreeMap<String, String>>,
    instance: &InstanceFacts,
) -> Option<&'static str> {
    let annotation = |object: Option<&BTreeMap<String, String>>, key: &str| {
        object.and_then(|a| a.get(key)).cloned()
    };
    let class_annotations = class.metadata.annotations.as_ref();
    let claim_annotations = claim.metadata.annotations.as_ref();
    if let (Some(class_hash), Some(claim_hash)) = (
        annotation(class_annotations, EC2NODECLASS_HASH),
        annotation(claim_annotations, EC2NODECLASS_HASH),
    ) && annotation(class_annotations, EC2NODECLASS_HASH_VERSION)
        == annotation(claim_annotations, EC2NODECLASS_HASH_VERSION)
        && class_hash != claim_hash
    {
        return Some(NODECLASS_DRIFT);
    }
    let status = class.status.as_ref()?;
    let image = claim
        .status
        .as_ref()
        .and_then(|s| s.image_id.clone())
        .or_else(|| instance.image_id.clone());
    if let (Some(image), Some(labels), Some(amis)) =
        (image, instance_labels, status.amis.as_deref())
        && !amis.is_empty()
        && amis::ami_for(amis, labels).is_some_and(|ami| ami.id != image)
    {
        return Some(AMI_DRIFT);
    }
    if let Some(groups) = status.security_groups.as_deref()
        && !groups.is_empty()
        && !instance.security_group_ids.is_empty()
    {
        let wanted: BTreeSet<String> = groups.iter().map(|g| g.id.clone()).collect();
        if wanted != instance.security_group_ids {
            return Some(SECURITY_GROUP_DRIFT);
        }
    }
    if let (Some(subnet), Some(subnets)) = (&instance.subnet_id, status.subnets.as_deref())
        && !subnets.is_empty()
        && !subnets.iter().any(|s| &s.id == subnet)
    {
        return Some(SUBNET_DRIFT);
    }
    if let Some(reservation) = &instance.capacity_reservation_id
        && !status
            .capacity_reservations
            .iter()
            .flatten()
            .any(|r| &r.id == reservation)
    {
        return Some(CAPACITY_RESERVATION_DRIFT);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::labels;

    fn class(hash: &str) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "annotations": {
                EC2NODECLASS_HASH: hash, EC2NODECLASS_HASH_VERSION: "rs1"}},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
            "status": {
                "subnets": [{"id": "subnet-1", "zone": "us-west-2a"}],
                "securityGroups": [{"id": "sg-1"}],
                "amis": [{"id": "ami-new", "requirements": [
                    {"key": labels::ARCH, "operator": "In", "values": ["amd64"]}]}]
            }
        }))
        .unwrap()
    }

    fn claim(hash: &str, version: &str, image: &str) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": {
                EC2NODECLASS_HASH: hash, EC2NODECLASS_HASH_VERSION: version}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []},
            "status": {"imageID": image}
        }))
        .unwrap()
    }

    fn facts() -> InstanceFacts {
        InstanceFacts {
            image_id: Some("ami-new".into()),
            subnet_id: Some("subnet-1".into()),
            security_group_ids: ["sg-1".to_owned()].into(),
            capacity_reservation_id: None,
        }
    }

    fn with_reservations(mut class: EC2NodeClass, ids: &[&str]) -> EC2NodeClass {
        let reservations = ids
            .iter()
            .map(|id| {
                serde_json::from_value(serde_json::json!({
                    "availabilityZone": "us-west-2a", "id": id, "instanceType": "c5.large",
                    "ownerID": "111122223333", "reservationType": "default", "state": "active"
                }))
                .unwrap()
            })
            .collect();
        if let Some(status) = class.status.as_mut() {
            status.capacity_reservations = Some(reservations);
        }
        class
    }

    #[test]
    fn a_reserved_instance_drifts_once_its_reservation_leaves_the_class_status() {
        let reserved = InstanceFacts {
            capacity_reservation_id: Some("cr-1".into()),
            ..facts()
        };
        let claim = claim("1", "rs1", "ami-new");
        let still_listed = with_reservations(class("1"), &["cr-0", "cr-1"]);
        assert_eq!(
            drift(&claim, &still_listed, Some(&amd64()), &reserved),
            None
        );
        let gone = with_reservations(class("1"), &["cr-0"]);
        assert_eq!(
            drift(&claim, &gone, Some(&amd64()), &reserved),
            Some(CAPACITY_RESERVATION_DRIFT)
        );
        assert_eq!(
            drift(&claim, &class("1"), Some(&amd64()), &reserved),
            Some(CAPACITY_RESERVATION_DRIFT),
            "a class listing no reservation at all drifts it too"
        );
        assert_eq!(
            drift(&claim, &gone, Some(&amd64()), &facts()),
            None,
            "an on-demand instance has no reservation to lose"
        );
    }

    fn amd64() -> BTreeMap<String, String> {
        [(labels::ARCH.to_owned(), "amd64".to_owned())].into()
    }

    #[test]
    fn a_current_node_has_no_drift() {
        assert_eq!(
            drift(
                &claim("1", "rs1", "ami-new"),
                &class("1"),
                Some(&amd64()),
                &facts()
            ),
            None
        );
    }

    #[test]
    fn a_moved_class_hash_drifts_only_under_the_same_version() {
        assert_eq!(
            drift(
                &claim("1", "rs1", "ami-new"),
                &class("2"),
                Some(&amd64()),
                &facts()
            ),
            Some(NODECLASS_DRIFT)
        );
        assert_eq!(
            drift(
                &claim("1", "v6", "ami-new"),
                &class("2"),
                Some(&amd64()),
                &facts()
            ),
            None,
            "an upstream stamp is re-stamped, not drifted"
        );
    }

    #[test]
    fn a_new_ami_for_the_instance_type_drifts_it() {
        assert_eq!(
            drift(
                &claim("1", "rs1", "ami-old"),
                &class("1"),
                Some(&amd64()),
                &facts()
            ),
            Some(AMI_DRIFT)
        );
    }

    #[test]
    fn changed_security_groups_or_a_subnet_no_longer_selected_drift() {
        let mut other_groups = facts();
        other_groups.security_group_ids.insert("sg-2".into());
        assert_eq!(
            drift(
                &claim("1", "rs1", "ami-new"),
                &class("1"),
                Some(&amd64()),
                &other_groups
            ),
            Some(SECURITY_GROUP_DRIFT)
        );
        let mut other_subnet = facts();
        other_subnet.subnet_id = Some("subnet-9".into());
        assert_eq!(
            drift(
                &claim("1", "rs1", "ami-new"),
                &class("1"),
                Some(&amd64()),
                &other_subnet
            ),
            Some(SUBNET_DRIFT)
        );
    }
}
