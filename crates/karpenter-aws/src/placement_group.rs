//! Placement groups (upstream v1.15.1 `placementGroupSelector`, design
//! `designs/placement-groups-support.md`): an EC2NodeClass names one placement group by name
//! or id, and every instance launched from it goes into that group.
//!
//! # What this module owns
//!
//! * the `DescribePlacementGroups` question for a selector ([`query`]: the group id or name,
//!   `state=available`) and what the answer means for the class's `PlacementGroupReady`
//!   condition ([`outcome`]: `PlacementGroupNotFound` when nothing matched);
//! * what a resolved group does to the class's instance types ([`apply`]): types whose
//!   `PlacementGroupInfo.SupportedStrategies` lack the group's strategy are left out (upstream's
//!   compatibility check), the others carry `karpenter.k8s.aws/placement-group-id` and, for a
//!   partition group, the label choice `karpenter.k8s.aws/placement-group-partition` in
//!   `1..=PartitionCount` (upstream injects the same requirements, so NodePools and pods can
//!   select the group and spread over its partitions);
//! * the partition a NodeClaim targets ([`target_partition`]: the lowest value its requirements
//!   allow, as upstream), the launch template's `Placement` ([`Placement`]), the labels of a
//!   launched NodeClaim ([`node_labels`]), whether its registration waits for EC2 to say the
//!   partition ([`partition_pending`]), the `PlacementGroupDrift` check ([`drifted`]) and the
//!   spread-limit error ([`is_spread_limit`]).
//!
//! # What it must not do
//!
//! Ask EC2 or cache: the async shell describes the group (and keeps the answer in memory, as
//! upstream: a placement group has no status field) and feeds it here.

use std::collections::BTreeMap;

use karpenter_api::labels::{PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION};
use karpenter_api::v1::ec2nodeclass::PlacementGroupSelector;
use karpenter_api::v1::{EC2NodeClass, NodeClaim};
use karpenter_cloud::InstanceTypeInfo;

use crate::nodeclass::status::Outcome;

/// The class's condition for its placement group.
pub use karpenter_api::v1::ec2nodeclass::conditions::PLACEMENT_GROUP_READY;

/// Upstream's reason when the selector matched no available group.
pub const NOT_FOUND: &str = "PlacementGroupNotFound";
/// Upstream's reason when `DescribePlacementGroups` failed.
pub const RESOLUTION_FAILED: &str = "PlacementGroupResolutionFailed";
/// The drift reason when a node's group is not the class's any more.
pub const PLACEMENT_GROUP_DRIFT: &str = "PlacementGroupDrift";

/// A placement group's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    Cluster,
    Partition,
    Spread,
}

impl Strategy {
    /// EC2's spelling (`cluster`, `partition`, `spread`).
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Cluster => "cluster",
            Strategy::Partition => "partition",
            Strategy::Spread => "spread",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "cluster" => Some(Strategy::Cluster),
            "partition" => Some(Strategy::Partition),
            "spread" => Some(Strategy::Spread),
            _ => None,
        }
    }
}

/// A resolved placement group (upstream's `placementgroup.PlacementGroup`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlacementGroup {
    /// `pg-...`.
    pub id: String,
    pub name: String,
    pub strategy: Strategy,
    /// Partition groups only.
    pub partition_count: u32,
    /// Spread groups only: `rack` or `host`.
    pub spread_level: Option<String>,
}

/// What to ask `DescribePlacementGroups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub group_ids: Vec<String>,
    pub group_names: Vec<String>,
    /// `(name, values)`: always `state = available`.
    pub filters: Vec<(String, Vec<String>)>,
}

/// The question for a selector: by id when it has one, else by name; available groups only.
pub fn query(selector: &PlacementGroupSelector) -> Query {
    let id = selector.id.clone().filter(|id| !id.is_empty());
    let name = selector.name.clone().filter(|name| !name.is_empty());
    Query {
        group_names: if id.is_none() {
            name.into_iter().collect()
        } else {
            Vec::new()
        },
        group_ids: id.into_iter().collect(),
        filters: vec![("state".to_owned(), vec!["available".to_owned()])],
    }
}

/// How the selector names its group, for messages (`name`, else `id`).
pub fn describe(selector: &PlacementGroupSelector) -> String {
    selector
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| selector.id.clone())
        .unwrap_or_default()
}

/// The class's placement group outcome from what EC2 answered (the first group, as upstream):
/// `Ready(None)` without a selector, `Ready(Some(group))` when found, `NotReady`
/// (`PlacementGroupNotFound`) when nothing available matched.
pub fn outcome(
    selector: Option<&PlacementGroupSelector>,
    found: Option<PlacementGroup>,
) -> Outcome<Option<PlacementGroup>> {
    let Some(selector) = selector else {
        return Outcome::Ready(None);
    };
    match found {
        Some(group) => Outcome::Ready(Some(group)),
        None => Outcome::not_ready(
            NOT_FOUND,
            format!("Placement group {:?} not found", describe(selector)),
        ),
    }
}

/// The selector of a class, if it has one.
pub fn selector(class: &EC2NodeClass) -> Option<&PlacementGroupSelector> {
    class.spec.placement_group_selector.as_ref()
}

/// Whether a type whose `PlacementGroupInfo.SupportedStrategies` are `supported` can launch
/// into a group of `strategy`. A type EC2 described without the field is taken as supporting
/// it (EC2 then decides at launch).
pub fn compatible(strategy: Strategy, supported: Option<&[String]>) -> bool {
    supported.is_none_or(|list| list.iter().any(|s| s == strategy.as_str()))
}

/// The class's instance types for `group`: the types that cannot join it are left out; the
/// others carry the group id label and, for a partition group, the partition choice.
/// `supported` gives each type's supported strategies as EC2 described them.
pub fn apply(
    infos: &mut Vec<InstanceTypeInfo>,
    group: &PlacementGroup,
    supported: &dyn Fn(&str) -> Option<Vec<String>>,
) {
    infos.retain(|info| compatible(group.strategy, supported(&info.name).as_deref()));
    for info in infos.iter_mut() {
        info.labels
            .insert(PLACEMENT_GROUP_ID.to_owned(), group.id.clone());
        if group.strategy == Strategy::Partition && group.partition_count > 0 {
            info.label_choices.insert(
                PLACEMENT_GROUP_PARTITION.to_owned(),
                (1..=group.partition_count).map(|p| p.to_string()).collect(),
            );
        }
    }
}

/// The values a NodeClaim's requirements allow for `key` among `candidates`; `None` when no
/// requirement names the key.
fn allowed_values(claim: &NodeClaim, key: &str, candidates: &[String]) -> Option<Vec<String>> {
    let requirements: Vec<_> = karpenter_scheduling::v1::node_claim_requirements(claim)
        .into_iter()
        .filter(|r| r.key == key)
        .collect();
    if requirements.is_empty() {
        return None;
    }
    Some(
        candidates
            .iter()
            .filter(|value| requirements.iter().all(|r| r.matches(Some(value))))
            .cloned()
            .collect(),
    )
}

/// The partition a NodeClaim targets in a partition group: the lowest (as strings sort, as
/// upstream picks it) of the partitions its requirements allow; `None` when it names none
/// (EC2 then assigns one).
pub fn target_partition(claim: &NodeClaim, group: &PlacementGroup) -> Option<u32> {
    if group.strategy != Strategy::Partition {
        return None;
    }
    let candidates: Vec<String> = (1..=group.partition_count).map(|p| p.to_string()).collect();
    let mut allowed = allowed_values(claim, PLACEMENT_GROUP_PARTITION, &candidates)?;
    allowed.sort();
    allowed.first()?.parse().ok()
}

/// The launch template's `Placement` for a group: `GroupId` and, when targeted,
/// `PartitionNumber`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Placement {
    pub group_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_number: Option<u32>,
}

impl Placement {
    pub fn for_claim(claim: &NodeClaim, group: &PlacementGroup) -> Self {
        Placement {
            group_id: group.id.clone(),
            partition_number: target_partition(claim, group),
        }
    }
}

/// The labels a NodeClaim launched into `group` gets: the group id and, for a partition group,
/// the partition (`launched` when EC2 said where it went, else the one the claim targeted,
/// else empty: upstream's sentinel for "not known yet", settled before registration).
pub fn node_labels(
    claim: &NodeClaim,
    group: &PlacementGroup,
    launched: Option<u32>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::from([(PLACEMENT_GROUP_ID.to_owned(), group.id.clone())]);
    if group.strategy == Strategy::Partition {
        let partition = launched
            .or_else(|| target_partition(claim, group))
            .map(|p| p.to_string())
            .unwrap_or_default();
        out.insert(PLACEMENT_GROUP_PARTITION.to_owned(), partition);
    }
    out
}

/// Whether a NodeClaim's registration waits for EC2 to say which partition its instance is in
/// (upstream's `PlacementGroupRegistrationHook`): it is in a placement group and its partition
/// label is the empty sentinel. No partition label at all (a cluster or spread group) or a set
/// one waits for nothing.
pub fn partition_pending(claim: &NodeClaim) -> bool {
    let Some(labels) = claim.metadata.labels.as_ref() else {
        return false;
    };
    labels.contains_key(PLACEMENT_GROUP_ID)
        && labels
            .get(PLACEMENT_GROUP_PARTITION)
            .is_some_and(String::is_empty)
}

/// The label that settles a pending partition.
pub fn partition_label(partition: u32) -> BTreeMap<String, String> {
    BTreeMap::from([(PLACEMENT_GROUP_PARTITION.to_owned(), partition.to_string())])
}

/// `PlacementGroupDrift` when the NodeClaim's group id label is not the class's resolved group
/// (a selector added, removed or pointed elsewhere); `group` is `None` when the class has no
/// placement group.
pub fn drifted(claim: &NodeClaim, group: Option<&PlacementGroup>) -> Option<&'static str> {
    let labelled = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(PLACEMENT_GROUP_ID))
        .map(String::as_str)
        .unwrap_or_default();
    let wanted = group.map(|g| g.id.as_str()).unwrap_or_default();
    (labelled != wanted).then_some(PLACEMENT_GROUP_DRIFT)
}

/// Whether a `CreateFleet` error is a spread group's seven-instances-per-zone limit (upstream's
/// `IsSpreadPlacementGroupLimitError`): every type of that zone is then unavailable in the group.
pub fn is_spread_limit(message: &str) -> bool {
    message.contains("limit of instances in this spread placement group")
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloud::Resources;

    fn selector(name: Option<&str>, id: Option<&str>) -> PlacementGroupSelector {
        PlacementGroupSelector {
            name: name.map(str::to_owned),
            id: id.map(str::to_owned),
        }
    }

    fn group(strategy: Strategy, partitions: u32) -> PlacementGroup {
        PlacementGroup {
            id: "pg-0123".into(),
            name: "kafka".into(),
            strategy,
            partition_count: partitions,
            spread_level: None,
        }
    }

    fn claim(requirements: serde_json::Value, labels: serde_json::Value) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": labels},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": requirements}
        }))
        .unwrap()
    }

    fn info(name: &str) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.into(),
            labels: BTreeMap::new(),
            capacity: Resources::default(),
            overhead: Default::default(),
            offerings: Vec::new(),
            label_choices: BTreeMap::new(),
        }
    }

    #[test]
    fn a_selector_is_asked_by_id_when_it_has_one_else_by_name_and_only_for_available_groups() {
        let by_name = query(&selector(Some("kafka"), None));
        assert_eq!(by_name.group_names, ["kafka"]);
        assert!(by_name.group_ids.is_empty());
        let by_id = query(&selector(None, Some("pg-0123")));
        assert_eq!(by_id.group_ids, ["pg-0123"]);
        assert!(by_id.group_names.is_empty());
        assert_eq!(
            by_id.filters,
            [("state".to_owned(), vec!["available".to_owned()])]
        );
    }

    #[test]
    fn a_selector_matching_nothing_is_not_ready_with_upstreams_reason_and_none_is_ready() {
        assert_eq!(outcome(None, None), Outcome::Ready(None));
        assert_eq!(
            outcome(Some(&selector(Some("gone"), None)), None),
            Outcome::not_ready(NOT_FOUND, "Placement group \"gone\" not found")
        );
        let found = group(Strategy::Cluster, 0);
        assert_eq!(
            outcome(Some(&selector(Some("kafka"), None)), Some(found.clone())),
            Outcome::Ready(Some(found))
        );
    }

    #[test]
    fn types_that_cannot_join_the_group_are_left_out_and_the_others_carry_its_id() {
        let mut infos = vec![info("m5.large"), info("t3.micro"), info("x9.unknown")];
        let supported = |name: &str| match name {
            "m5.large" => Some(vec!["cluster".to_owned(), "partition".to_owned()]),
            "t3.micro" => Some(vec!["partition".to_owned(), "spread".to_owned()]),
            _ => None,
        };
        apply(&mut infos, &group(Strategy::Cluster, 0), &supported);
        let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(
            names,
            ["m5.large", "x9.unknown"],
            "burstable t3 has no cluster"
        );
        assert!(
            infos
                .iter()
                .all(|i| i.labels.get(PLACEMENT_GROUP_ID).map(String::as_str) == Some("pg-0123"))
        );
        assert!(infos.iter().all(|i| i.label_choices.is_empty()));
    }

    #[test]
    fn a_partition_group_offers_each_of_its_partitions() {
        let mut infos = vec![info("m5.large")];
        apply(&mut infos, &group(Strategy::Partition, 3), &|_| None);
        assert_eq!(
            infos[0].label_choices.get(PLACEMENT_GROUP_PARTITION),
            Some(&vec!["1".to_owned(), "2".to_owned(), "3".to_owned()])
        );
    }

    #[test]
    fn a_claim_targets_the_lowest_partition_its_requirements_allow_and_none_without_one() {
        let pg = group(Strategy::Partition, 5);
        let open = claim(serde_json::json!([]), serde_json::json!({}));
        assert_eq!(target_partition(&open, &pg), None);
        let some = claim(
            serde_json::json!([{"key": PLACEMENT_GROUP_PARTITION, "operator": "In", "values": ["4", "2"]}]),
            serde_json::json!({}),
        );
        assert_eq!(target_partition(&some, &pg), Some(2));
        let not_one = claim(
            serde_json::json!([{"key": PLACEMENT_GROUP_PARTITION, "operator": "NotIn", "values": ["1"]}]),
            serde_json::json!({}),
        );
        assert_eq!(target_partition(&not_one, &pg), Some(2));
        assert_eq!(
            target_partition(&some, &group(Strategy::Cluster, 0)),
            None,
            "only partition groups have partitions"
        );
        assert_eq!(
            Placement::for_claim(&some, &pg),
            Placement {
                group_id: "pg-0123".into(),
                partition_number: Some(2)
            }
        );
    }

    #[test]
    fn launched_nodes_carry_the_group_and_the_partition_ec2_chose() {
        let open = claim(serde_json::json!([]), serde_json::json!({}));
        let partition = group(Strategy::Partition, 3);
        assert_eq!(
            node_labels(&open, &partition, Some(3)),
            BTreeMap::from([
                (PLACEMENT_GROUP_ID.to_owned(), "pg-0123".to_owned()),
                (PLACEMENT_GROUP_PARTITION.to_owned(), "3".to_owned()),
            ])
        );
        assert_eq!(
            node_labels(&open, &partition, None)
                .get(PLACEMENT_GROUP_PARTITION)
                .map(String::as_str),
            Some(""),
            "unknown yet: upstream's empty sentinel"
        );
        assert_eq!(
            node_labels(&open, &group(Strategy::Spread, 0), None).len(),
            1,
            "no partition label outside partition groups"
        );
    }

    #[test]
    fn only_an_empty_partition_label_in_a_group_holds_registration() {
        let pending = claim(
            serde_json::json!([]),
            serde_json::json!({PLACEMENT_GROUP_ID: "pg-0123", PLACEMENT_GROUP_PARTITION: ""}),
        );
        assert!(partition_pending(&pending));
        let known = claim(
            serde_json::json!([]),
            serde_json::json!({PLACEMENT_GROUP_ID: "pg-0123", PLACEMENT_GROUP_PARTITION: "2"}),
        );
        assert!(!partition_pending(&known));
        let cluster = claim(
            serde_json::json!([]),
            serde_json::json!({PLACEMENT_GROUP_ID: "pg-0123"}),
        );
        assert!(
            !partition_pending(&cluster),
            "no partition in a cluster group"
        );
        let outside = claim(serde_json::json!([]), serde_json::json!({}));
        assert!(!partition_pending(&outside));
        assert_eq!(
            partition_label(3),
            BTreeMap::from([(PLACEMENT_GROUP_PARTITION.to_owned(), "3".to_owned())])
        );
    }

    #[test]
    fn a_node_whose_group_is_not_the_classs_is_drifted() {
        let pg = group(Strategy::Cluster, 0);
        let inside = claim(
            serde_json::json!([]),
            serde_json::json!({PLACEMENT_GROUP_ID: "pg-0123"}),
        );
        let outside = claim(serde_json::json!([]), serde_json::json!({}));
        assert_eq!(drifted(&inside, Some(&pg)), None);
        assert_eq!(drifted(&outside, Some(&pg)), Some(PLACEMENT_GROUP_DRIFT));
        assert_eq!(drifted(&inside, None), Some(PLACEMENT_GROUP_DRIFT));
        assert_eq!(drifted(&outside, None), None);
    }

    #[test]
    fn the_spread_limit_is_told_apart_from_plain_insufficient_capacity() {
        assert!(is_spread_limit(
            "You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone."
        ));
        assert!(!is_spread_limit(
            "We currently do not have sufficient capacity"
        ));
    }
}
