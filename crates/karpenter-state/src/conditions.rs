//! Setting the conditions of the index's objects as their owning controllers do: a
//! condition's `lastTransitionTime` moves only when its status changes. For writers that build
//! objects in memory rather than read them from the API server (the simulator, tests); the
//! index itself never changes a condition.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::v1::NodeClaim;

/// `at` as an API timestamp (sub-second precision kept); `None` outside the API's range.
pub fn api_time(at: DateTime<Utc>) -> Option<Time> {
    let nanos = i32::try_from(at.timestamp_subsec_nanos()).ok()?;
    Timestamp::new(at.timestamp(), nanos).ok().map(Time)
}

/// An API timestamp as the decisions' clock type (the inverse of [`api_time`]). The API
/// server stores seconds; an object built in memory (the simulator's) may carry a fraction,
/// which is kept.
pub fn from_api_time(t: &Time) -> Option<DateTime<Utc>> {
    let seconds = DateTime::from_timestamp(t.0.as_second(), 0)?;
    seconds.checked_add_signed(chrono::Duration::nanoseconds(i64::from(
        t.0.subsec_nanosecond(),
    )))
}

fn status(value: bool) -> String {
    if value { "True" } else { "False" }.to_owned()
}

/// Sets condition `type_` of a NodeClaim to `status` (`True`, `False`, `Unknown`) with
/// `reason` and `message`; the transition time is `at` when the status changes (or the
/// condition is new), else unchanged. The one NodeClaim condition writer: the controller's
/// lifecycle steps and the simulator both use it.
pub fn set_node_claim_condition(
    claim: &mut NodeClaim,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    at: DateTime<Utc>,
) {
    let Some(time) = api_time(at) else {
        return;
    };
    let generation = claim.metadata.generation;
    let conditions = claim
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    karpenter_api::conditions::set(conditions, generation, type_, status, reason, message, time);
}

/// Sets condition `type_` of a Node (e.g. `Ready`) to `value` with `reason`, as the kubelet
/// does: the transition time is `at` when the status changes, the heartbeat always `at`.
pub fn set_node_condition(
    node: &mut Node,
    type_: &str,
    value: bool,
    reason: &str,
    at: DateTime<Utc>,
) {
    let Some(time) = api_time(at) else {
        return;
    };
    let status_text = status(value);
    let conditions = node
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status_text || existing.last_transition_time.is_none() {
                existing.status = status_text;
                existing.last_transition_time = Some(time.clone());
            }
            existing.reason = Some(reason.to_owned());
            existing.last_heartbeat_time = Some(time);
        }
        None => conditions.push(NodeCondition {
            type_: type_.to_owned(),
            status: status_text,
            reason: Some(reason.to_owned()),
            message: None,
            last_heartbeat_time: Some(time.clone()),
            last_transition_time: Some(time),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(seconds: i64, millis: u32) -> DateTime<Utc> {
        Utc.timestamp_opt(1_767_225_600 + seconds, millis * 1_000_000)
            .single()
            .unwrap_or_default()
    }

    fn claim() -> NodeClaim {
        match serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "general-1"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []
            }
        })) {
            Ok(claim) => claim,
            Err(e) => panic!("test NodeClaim parses: {e}"),
        }
    }

    fn transition(claim: &NodeClaim, type_: &str) -> Option<(String, Time)> {
        claim
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.last_transition_time.clone()))
    }

    #[test]
    fn api_time_keeps_a_fraction_of_a_second() {
        let time = api_time(at(1, 500));
        assert_eq!(
            time.map(|t| (t.0.as_second(), t.0.subsec_nanosecond())),
            Some((1_767_225_601, 500_000_000))
        );
    }

    #[test]
    fn a_new_node_claim_condition_transitions_at_the_given_time() {
        let mut claim = claim();
        set_node_claim_condition(
            &mut claim,
            "Initialized",
            "True",
            "Initialized",
            "",
            at(60, 0),
        );
        assert_eq!(
            transition(&claim, "Initialized"),
            Some((
                "True".to_owned(),
                Time(Timestamp::constant(1_767_225_660, 0))
            ))
        );
    }

    #[test]
    fn setting_the_same_status_again_keeps_the_transition_time() {
        let mut claim = claim();
        set_node_claim_condition(
            &mut claim,
            "Initialized",
            "True",
            "Initialized",
            "",
            at(60, 0),
        );
        set_node_claim_condition(
            &mut claim,
            "Initialized",
            "True",
            "Initialized",
            "",
            at(90, 0),
        );
        assert_eq!(
            transition(&claim, "Initialized").map(|(_, t)| t.0.as_second()),
            Some(1_767_225_660)
        );
        set_node_claim_condition(
            &mut claim,
            "Initialized",
            "False",
            "NotReady",
            "",
            at(120, 0),
        );
        assert_eq!(
            transition(&claim, "Initialized").map(|(s, t)| (s, t.0.as_second())),
            Some(("False".to_owned(), 1_767_225_720))
        );
    }

    #[test]
    fn a_node_condition_moves_its_heartbeat_but_not_its_transition_when_unchanged() {
        let mut node = Node::default();
        set_node_condition(&mut node, "Ready", true, "KubeletReady", at(60, 0));
        set_node_condition(&mut node, "Ready", true, "KubeletReady", at(70, 0));
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.first())
            .map(|c| {
                (
                    c.status.clone(),
                    c.last_transition_time.as_ref().map(|t| t.0.as_second()),
                    c.last_heartbeat_time.as_ref().map(|t| t.0.as_second()),
                )
            });
        assert_eq!(
            ready,
            Some(("True".to_owned(), Some(1_767_225_660), Some(1_767_225_670)))
        );
    }
}
