//! Interruption handling from SQS body to actions and disposition: documented-format messages
//! (fixtures written after AWS's EventBridge examples), hostile bodies, and property tests that
//! no body panics and every one ends deleted or retried.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::HashMap;

use karpenter_aws::interruption::message::{MAX_BODY_BYTES, NoOpReason, ScheduledChange};
use karpenter_aws::interruption::{
    Action, ActionOutcome, ClaimRef, Detail, Disposition, EventType, InstanceState,
    InterruptionEvent, Involved, MessageKind, ParseError, decide, decide_for, parse, plan,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/interruption/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const SPOT_ID: &str = "i-0b2f3c4d5e6f70812";
const STATE_ID: &str = "i-0a1b2c3d4e5f60718";
const RESERVED_ID: &str = "i-0e5f60718293a4b5c";
const RESERVATION: &str = "cr-0123456789abcdef0";
const HEALTH_IDS: [&str; 2] = ["i-0c3d4e5f60718293a", "i-0d4e5f60718293a4b"];

/// Our NodeClaims by instance id; `i-0d4e...` (the second Health entity) is not ours.
fn cluster() -> HashMap<String, ClaimRef> {
    let claim = |name: &str, node: Option<&str>, it: &str, zone: &str, ct: &str| ClaimRef {
        name: name.to_owned(),
        node_name: node.map(str::to_owned),
        instance_type: Some(it.to_owned()),
        zone: Some(zone.to_owned()),
        capacity_type: Some(ct.to_owned()),
        reservation_id: None,
    };
    HashMap::from([
        (
            SPOT_ID.to_owned(),
            claim(
                "default-spot1",
                Some("ip-10-0-1-5.us-west-2.compute.internal"),
                "m5.large",
                "us-west-2b",
                "spot",
            ),
        ),
        (
            STATE_ID.to_owned(),
            claim("default-od1", None, "c6i.xlarge", "us-west-2a", "on-demand"),
        ),
        (
            RESERVED_ID.to_owned(),
            ClaimRef {
                reservation_id: Some(RESERVATION.to_owned()),
                ..claim(
                    "default-reserved1",
                    Some("ip-10-0-3-7.us-west-2.compute.internal"),
                    "p5.48xlarge",
                    "us-west-2a",
                    "reserved",
                )
            },
        ),
        (
            HEALTH_IDS[0].to_owned(),
            claim(
                "default-od2",
                Some("ip-10-0-2-9.us-west-2.compute.internal"),
                "r6g.large",
                "us-west-2c",
                "on-demand",
            ),
        ),
    ])
}

fn lookup(cluster: &HashMap<String, ClaimRef>) -> impl Fn(&str) -> Option<ClaimRef> + '_ {
    |id| cluster.get(id).cloned()
}

fn event(involved: Involved, t: EventType, reason: &'static str, message: &'static str) -> Action {
    Action::Event(InterruptionEvent {
        involved,
        event_type: t,
        reason,
        message,
    })
}

// ---------------------------------------------------------------------------------------------
// Documented formats

#[test]
fn each_documented_message_parses_to_its_kind_and_instance_ids() {
    let cases: [(&str, MessageKind, &[&str]); 10] = [
        (
            "spot_interruption.json",
            MessageKind::SpotInterrupted,
            &[SPOT_ID],
        ),
        (
            "rebalance_recommendation.json",
            MessageKind::RebalanceRecommendation,
            &[SPOT_ID],
        ),
        ("state_change_pending.json", MessageKind::NoOp, &[STATE_ID]),
        ("state_change_running.json", MessageKind::NoOp, &[STATE_ID]),
        (
            "state_change_stopping.json",
            MessageKind::InstanceStopped,
            &[STATE_ID],
        ),
        (
            "state_change_stopped.json",
            MessageKind::InstanceStopped,
            &[STATE_ID],
        ),
        (
            "state_change_shutting-down.json",
            MessageKind::InstanceTerminated,
            &[STATE_ID],
        ),
        (
            "state_change_terminated.json",
            MessageKind::InstanceTerminated,
            &[STATE_ID],
        ),
        (
            "health_scheduled_change.json",
            MessageKind::ScheduledChange,
            &HEALTH_IDS,
        ),
        ("health_issue_not_scheduled.json", MessageKind::NoOp, &[]),
    ];
    for (file, kind, ids) in cases {
        let message = parse(&fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(message.kind(), kind, "{file}");
        assert_eq!(message.instance_ids(), ids, "{file}");
        assert_eq!(message.envelope.account, "111122223333", "{file}");
        assert_eq!(message.envelope.region, "us-west-2", "{file}");
        assert!(message.envelope.time.is_some(), "{file}");
    }
}

#[test]
fn a_spot_interruption_carries_its_action_envelope_id_and_time() {
    let message = parse(&fixture("spot_interruption.json")).unwrap();
    assert_eq!(
        message.detail,
        Detail::SpotInterruption {
            instance_id: SPOT_ID.to_owned(),
            action: Some("terminate".to_owned()),
        }
    );
    assert_eq!(message.envelope.id, "1e5527d7-bb36-4607-3370-4164db56a40e");
    assert_eq!(
        message.envelope.resources,
        ["arn:aws:ec2:us-west-2b:instance/i-0b2f3c4d5e6f70812"]
    );
    let sent = message.envelope.time.unwrap();
    assert_eq!(sent.to_rfc3339(), "2024-05-14T09:41:07+00:00");
    let later = sent + chrono::Duration::milliseconds(2_500);
    assert_eq!(message.queue_seconds(later), Some(2.5));
}

#[test]
fn a_health_scheduled_change_keeps_its_event_code_arn_and_window() {
    let message = parse(&fixture("health_scheduled_change.json")).unwrap();
    let Detail::ScheduledChange(ScheduledChange {
        event_type_code,
        event_arn,
        start_time,
        end_time,
        ..
    }) = message.detail
    else {
        panic!("not a scheduled change: {:?}", message.detail);
    };
    assert_eq!(
        event_type_code.as_deref(),
        Some("AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED")
    );
    assert!(
        event_arn
            .unwrap()
            .starts_with("arn:aws:health:us-west-2::event/EC2/")
    );
    assert_eq!(start_time.as_deref(), Some("Tue, 28 May 2024 08:00:00 GMT"));
    assert_eq!(end_time.as_deref(), Some("Tue, 28 May 2024 10:00:00 GMT"));
}

#[test]
fn a_health_event_that_is_not_a_scheduled_change_is_a_no_op_naming_its_category() {
    let message = parse(&fixture("health_issue_not_scheduled.json")).unwrap();
    assert_eq!(
        message.detail,
        Detail::NoOp(NoOpReason::UnwatchedHealthEvent {
            service: "EC2".into(),
            category: "issue".into()
        })
    );
}

#[test]
fn a_state_change_without_an_envelope_version_is_a_no_op_as_upstream() {
    // AWS's documentation example omits `version`; delivered events carry "0", and upstream
    // selects its parser by (version, source, detail-type).
    let message = parse(&fixture("state_change_as_documented_without_version.json")).unwrap();
    assert_eq!(message.detail, Detail::NoOp(NoOpReason::UnsupportedVersion));
    let later = message.envelope.time.unwrap() + chrono::Duration::seconds(1);
    assert_eq!(
        message.queue_seconds(later),
        None,
        "no-ops are not observed"
    );
}

#[test]
fn a_capacity_reservation_interruption_names_its_instance_and_action() {
    let message = parse(&fixture("capacity_reservation_interruption.json")).unwrap();
    assert_eq!(
        message.detail,
        Detail::CapacityReservationInterruption {
            instance_id: RESERVED_ID.into(),
            action: Some("terminate".into()),
        }
    );
    assert_eq!(message.kind(), MessageKind::CapacityReservationInterrupted);
    assert_eq!(message.instance_ids(), [RESERVED_ID.to_owned()]);
}

#[test]
fn a_malformed_capacity_reservation_interruption_names_the_field() {
    let body = |detail: &str| {
        format!(
            r#"{{"version":"0","source":"aws.ec2","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","detail":{detail}}}"#
        )
    };
    let cases = [
        (
            body(r#"{"instance-action":"terminate"}"#),
            "detail.instance-id",
        ),
        (body(r#"{"instance-id":"  "}"#), "detail.instance-id"),
        (body(r#"{"instance-id":7}"#), "detail.instance-id"),
        (body("[]"), "detail"),
        (body("null"), "detail"),
    ];
    for (body, field) in cases {
        let error = parse(&body).expect_err(&body);
        assert_eq!(error.field(), field, "{body}: {error}");
    }
    let missing = r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Capacity Reservation Instance Interruption Warning"}"#;
    assert_eq!(parse(missing).unwrap_err().to_string(), "detail: missing");
    let truncated = body(r#"{"instance-id":"i-1""#);
    assert!(
        matches!(parse(&truncated), Err(ParseError::Json { .. })),
        "{truncated}"
    );
}

#[test]
fn a_state_change_keeps_the_state_it_reports() {
    let message = parse(&fixture("state_change_shutting-down.json")).unwrap();
    assert_eq!(
        message.detail,
        Detail::StateChange {
            instance_id: STATE_ID.into(),
            state: InstanceState::ShuttingDown
        }
    );
}

// ---------------------------------------------------------------------------------------------
// Decisions

#[test]
fn a_spot_interruption_records_events_marks_the_spot_offering_and_deletes_the_nodeclaim() {
    let c = cluster();
    let actions = decide(
        &parse(&fixture("spot_interruption.json")).unwrap(),
        lookup(&c),
    );
    let node = "ip-10-0-1-5.us-west-2.compute.internal";
    let msg = "Spot interruption warning was triggered";
    assert_eq!(
        actions,
        vec![
            event(
                Involved::NodeClaim("default-spot1".into()),
                EventType::Warning,
                "SpotInterrupted",
                msg
            ),
            event(
                Involved::Node(node.into()),
                EventType::Warning,
                "SpotInterrupted",
                msg
            ),
            Action::MarkUnavailable {
                instance_type: "m5.large".into(),
                zone: "us-west-2b".into(),
                capacity_type: "spot",
            },
            Action::DeleteNodeClaim {
                name: "default-spot1".into(),
                node_name: Some(node.into()),
                reason: MessageKind::SpotInterrupted,
            },
        ]
    );
}

#[test]
fn a_capacity_reservation_interruption_marks_only_its_reservation_and_deletes_the_nodeclaim() {
    let c = cluster();
    let actions = decide(
        &parse(&fixture("capacity_reservation_interruption.json")).unwrap(),
        lookup(&c),
    );
    let node = "ip-10-0-3-7.us-west-2.compute.internal";
    let msg = "Capacity Reservation interruption warning was triggered";
    let reason = "CapacityReservationInstanceInterrupted";
    assert_eq!(
        actions,
        vec![
            event(
                Involved::NodeClaim("default-reserved1".into()),
                EventType::Warning,
                reason,
                msg
            ),
            event(Involved::Node(node.into()), EventType::Warning, reason, msg),
            Action::MarkReservationUnavailable {
                reservation_id: RESERVATION.into(),
                instance_type: "p5.48xlarge".into(),
                zone: "us-west-2a".into(),
            },
            Action::DeleteNodeClaim {
                name: "default-reserved1".into(),
                node_name: Some(node.into()),
                reason: MessageKind::CapacityReservationInterrupted,
            },
        ]
    );
    // Without the reservation label there is nothing to scope a mark to: delete only.
    let mut unlabelled = c.clone();
    if let Some(claim) = unlabelled.get_mut(RESERVED_ID) {
        claim.reservation_id = None;
    }
    let actions = decide(
        &parse(&fixture("capacity_reservation_interruption.json")).unwrap(),
        lookup(&unlabelled),
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::MarkReservationUnavailable { .. })),
        "{actions:?}"
    );
    assert!(matches!(
        actions.last(),
        Some(Action::DeleteNodeClaim { .. })
    ));
}

#[test]
fn a_rebalance_recommendation_only_records_normal_events() {
    let c = cluster();
    let actions = decide(
        &parse(&fixture("rebalance_recommendation.json")).unwrap(),
        lookup(&c),
    );
    assert_eq!(actions.len(), 2);
    for a in &actions {
        let Action::Event(e) = a else {
            panic!("a rebalance recommendation must not act: {a:?}");
        };
        assert_eq!(e.reason, "SpotRebalanceRecommendation");
        assert_eq!(e.event_type, EventType::Normal);
    }
}

#[test]
fn state_changes_delete_with_the_upstream_event_for_their_state_and_ignore_the_rest() {
    let c = cluster();
    let cases = [
        ("state_change_pending.json", None),
        ("state_change_running.json", None),
        ("state_change_stopping.json", Some("InstanceStopping")),
        ("state_change_stopped.json", Some("InstanceStopping")),
        (
            "state_change_shutting-down.json",
            Some("InstanceTerminating"),
        ),
        ("state_change_terminated.json", Some("InstanceTerminating")),
    ];
    for (file, reason) in cases {
        let message = parse(&fixture(file)).unwrap();
        let actions = decide(&message, lookup(&c));
        match reason {
            None => assert_eq!(actions, vec![], "{file}"),
            Some(reason) => {
                // The claim has no Node yet: one event, then the deletion.
                assert_eq!(actions.len(), 2, "{file}: {actions:?}");
                assert!(
                    matches!(&actions[0], Action::Event(e) if e.reason == reason
                        && e.involved == Involved::NodeClaim("default-od1".into())),
                    "{file}: {actions:?}"
                );
                assert_eq!(
                    actions[1],
                    Action::DeleteNodeClaim {
                        name: "default-od1".into(),
                        node_name: None,
                        reason: message.kind(),
                    },
                    "{file}"
                );
            }
        }
    }
}

#[test]
fn a_scheduled_change_deletes_only_the_nodeclaims_that_are_ours_and_marks_nothing() {
    let c = cluster();
    let actions = decide(
        &parse(&fixture("health_scheduled_change.json")).unwrap(),
        lookup(&c),
    );
    let deletes: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteNodeClaim { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, ["default-od2"]);
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::MarkUnavailable { .. }))
    );
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Event(e) if e.reason == "InstanceUnhealthy"))
    );
}

#[test]
fn a_failed_status_check_expires_the_grace_then_deletes_and_an_event_only_deletes() {
    let c = cluster();
    let ids = [HEALTH_IDS[0].to_owned(), HEALTH_IDS[1].to_owned()];
    let node = "ip-10-0-2-9.us-west-2.compute.internal";
    let unhealthy = |involved| {
        event(
            involved,
            EventType::Warning,
            "InstanceUnhealthy",
            "An unhealthy warning was triggered for the instance",
        )
    };
    let delete = |reason| Action::DeleteNodeClaim {
        name: "default-od2".into(),
        node_name: Some(node.into()),
        reason,
    };
    for kind in [MessageKind::InstanceStatus, MessageKind::SystemStatus] {
        assert_eq!(
            decide_for(kind, &ids, lookup(&c)),
            vec![
                unhealthy(Involved::NodeClaim("default-od2".into())),
                unhealthy(Involved::Node(node.into())),
                Action::ExpireTerminationGrace {
                    name: "default-od2".into()
                },
                delete(kind),
            ],
            "{kind}: only our instance, grace expired before the deletion"
        );
    }
    assert_eq!(
        decide_for(MessageKind::EventStatus, &ids, lookup(&c)),
        vec![
            unhealthy(Involved::NodeClaim("default-od2".into())),
            unhealthy(Involved::Node(node.into())),
            delete(MessageKind::EventStatus),
        ],
        "a scheduled event drains as usual"
    );
}

#[test]
fn a_message_about_an_instance_that_is_not_ours_decides_nothing_and_is_deleted() {
    let body = fixture("spot_interruption.json").replace(SPOT_ID, "i-0fffffffffffffff0");
    let c = cluster();
    let p = plan(&body, lookup(&c));
    assert_eq!(p.kind(), Some(MessageKind::SpotInterrupted));
    assert_eq!(p.actions, vec![]);
    assert_eq!(p.disposition(&[]), Disposition::Delete);
}

#[test]
fn a_spot_interruption_without_zone_or_type_labels_deletes_without_marking() {
    let mut c = cluster();
    if let Some(claim) = c.get_mut(SPOT_ID) {
        claim.zone = None;
    }
    let actions = decide(
        &parse(&fixture("spot_interruption.json")).unwrap(),
        lookup(&c),
    );
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::MarkUnavailable { .. }))
    );
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::DeleteNodeClaim { .. }))
    );
}

#[test]
fn a_scheduled_change_naming_an_instance_twice_deletes_its_nodeclaim_once() {
    let body = fixture("health_scheduled_change.json").replace(HEALTH_IDS[1], HEALTH_IDS[0]);
    let c = cluster();
    let p = plan(&body, lookup(&c));
    let deletes = p
        .actions
        .iter()
        .filter(|a| matches!(a, Action::DeleteNodeClaim { .. }))
        .count();
    assert_eq!(deletes, 1);
}

// ---------------------------------------------------------------------------------------------
// Dispositions

#[test]
fn a_message_is_retried_only_when_a_nodeclaim_deletion_failed_or_was_not_performed() {
    let c = cluster();
    let p = plan(&fixture("spot_interruption.json"), lookup(&c));
    use ActionOutcome::{Done, Failed, NotFound};
    // events x2, mark, delete
    assert_eq!(
        p.disposition(&[Done, Done, Done, Done]),
        Disposition::Delete
    );
    assert_eq!(
        p.disposition(&[Done, Done, Done, NotFound]),
        Disposition::Delete
    );
    assert_eq!(
        p.disposition(&[Failed, Failed, Failed, Done]),
        Disposition::Delete,
        "events and marks are best effort"
    );
    assert_eq!(
        p.disposition(&[Done, Done, Done, Failed]),
        Disposition::Retry
    );
    assert_eq!(p.disposition(&[Done, Done, Done]), Disposition::Retry);
}

#[test]
fn a_malformed_body_is_deleted_whatever_the_shell_reports() {
    let p = plan("{\"version\":", |_| None);
    assert!(p.parsed.is_err());
    assert_eq!(p.kind(), None);
    assert_eq!(p.disposition(&[ActionOutcome::Failed]), Disposition::Delete);
}

// ---------------------------------------------------------------------------------------------
// Hostile bodies

fn spot_with_detail(detail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2024-05-14T09:41:07Z","region":"us-west-2","resources":[],"detail":{detail}}}"#
    )
}

#[test]
fn hostile_bodies_fail_with_an_error_naming_the_field() {
    let spot = fixture("spot_interruption.json");
    let health = fixture("health_scheduled_change.json");
    let state = fixture("state_change_stopped.json");
    let cases: Vec<(&str, String, &str)> = vec![
        ("truncated", spot[..spot.len() / 2].to_owned(), "EOF"),
        ("not JSON", "hello".to_owned(), "body: expected value"),
        (
            "a JSON array",
            r#"["0","x","EC2 Spot Instance Interruption Warning","aws.ec2"]"#.to_owned(),
            "body: invalid type: sequence, expected a JSON object",
        ),
        ("a JSON string", "\"x\"".to_owned(), "body: invalid type: string"),
        (
            "a detail given as an array, field by field",
            spot_with_detail(r#"["i-0b2f3c4d5e6f70812","terminate"]"#),
            "detail: invalid type: sequence, expected a JSON object",
        ),
        (
            "an entity given as an array",
            health.replace(
                r#"{"entityValue": "i-0d4e5f60718293a4b", "lastUpdatedTime": "Tue, 14 May 2024 01:43:21 GMT", "status": "PENDING"}"#,
                r#"["i-0d4e5f60718293a4b"]"#,
            ),
            "detail.affectedEntities[1]: invalid type: sequence, expected a JSON object",
        ),
        (
            "trailing garbage",
            format!("{spot} }}"),
            "body: trailing characters",
        ),
        (
            "a resource of the wrong type",
            spot.replace(
                r#"["arn:aws:ec2:us-west-2b:instance/i-0b2f3c4d5e6f70812"]"#,
                "[42]",
            ),
            "resources[0]: invalid type: integer `42`, expected a string",
        ),
        (
            "detail instance id of the wrong type",
            spot_with_detail(r#"{"instance-id":42}"#),
            "detail.instance-id: invalid type: integer `42`, expected a string",
        ),
        (
            "missing instance id",
            spot_with_detail(r#"{"instance-action":"terminate"}"#),
            "detail.instance-id: missing",
        ),
        (
            "empty instance id",
            spot_with_detail(r#"{"instance-id":"  "}"#),
            "detail.instance-id: empty",
        ),
        (
            "detail of the wrong type",
            spot_with_detail(r#""i-0123""#),
            "detail: invalid type: string",
        ),
        ("no detail", spot_with_detail("null"), "detail: missing"),
        (
            "source of the wrong type",
            spot.replace(r#""source": "aws.ec2""#, r#""source": ["aws.ec2"]"#),
            "source: invalid type: sequence",
        ),
        (
            "unparseable time",
            spot.replace("2024-05-14T09:41:07Z", "yesterday"),
            "time: not an RFC 3339 timestamp",
        ),
        (
            "state missing",
            state.replace(r#""state": "stopped""#, r#""status": "stopped""#),
            "detail.state: missing",
        ),
        (
            "entity without a value",
            health.replace(r#""entityValue": "i-0d4e5f60718293a4b""#, r#""entityVal": 1"#),
            "detail.affectedEntities[1].entityValue: missing",
        ),
        (
            "entities of the wrong type",
            health.replace(r#""affectedEntities": ["#, r#""affectedEntities": 7, "x": ["#),
            "detail.affectedEntities: invalid type: integer `7`",
        ),
        (
            "duplicate key",
            spot.replacen(r#""id":"#, r#""id": "a", "id":"#, 1),
            "duplicate field `id`",
        ),
    ];
    for (what, body, expected) in cases {
        let err = parse(&body).expect_err(what);
        let text = err.to_string();
        assert!(
            text.contains(expected),
            "{what}: {text:?} lacks {expected:?}"
        );
    }
}

#[test]
fn a_body_above_256_kib_is_rejected_by_size_without_parsing() {
    // Not even JSON: the size check comes first.
    let body = "{".repeat(MAX_BODY_BYTES + 10);
    let err = parse(&body).unwrap_err();
    assert_eq!(
        err,
        ParseError::TooLarge {
            bytes: MAX_BODY_BYTES + 10
        }
    );
    assert_eq!(err.field(), "body");
    assert!(err.to_string().contains("262154 bytes"), "{err}");
}

#[test]
fn unknown_kinds_other_versions_and_an_empty_body_are_no_ops_not_errors() {
    let cases = [
        (
            r#"{"version":"0","source":"aws.s3","detail-type":"Object Created","detail":{"bucket":7}}"#,
            NoOpReason::UnknownKind,
        ),
        (
            r#"{"version":"1","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning"}"#,
            NoOpReason::UnsupportedVersion,
        ),
        (
            r#"{"version":"0","source":"aws.ec2","detail-type":"ec2 spot instance interruption warning"}"#,
            NoOpReason::UnknownKind,
        ),
        ("", NoOpReason::EmptyBody),
        ("{}", NoOpReason::UnsupportedVersion),
    ];
    for (body, reason) in cases {
        let message = parse(body).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(message.detail, Detail::NoOp(reason), "{body}");
        assert_eq!(message.kind(), MessageKind::NoOp);
        assert_eq!(
            decide(&message, |_| panic!("no-ops look nothing up")),
            vec![]
        );
    }
}

#[test]
fn message_kinds_use_upstream_label_values() {
    let labels: Vec<&str> = MessageKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        labels,
        [
            "spot_interrupted",
            "capacity_reservation_interrupted",
            "rebalance_recommendation",
            "scheduled_change",
            "instance_stopped",
            "instance_terminated",
            "instance_status",
            "system_status",
            "event_status",
            "no_op"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Every documented fixture body.
fn fixtures() -> Vec<String> {
    [
        "spot_interruption.json",
        "rebalance_recommendation.json",
        "state_change_stopping.json",
        "state_change_terminated.json",
        "state_change_running.json",
        "health_scheduled_change.json",
        "health_issue_not_scheduled.json",
        "capacity_reservation_interruption.json",
    ]
    .iter()
    .map(|f| fixture(f))
    .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Delete(usize, usize),
    Insert(usize, String),
    Replace(usize, char),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1usize..40).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (
            any::<usize>(),
            prop_oneof![
                Just("null".to_owned()),
                Just("[]".to_owned()),
                Just("{}".to_owned()),
                Just("\"".to_owned()),
                Just(",".to_owned()),
                Just("-1e999".to_owned()),
                Just("\\u0000".to_owned()),
                "[ -~]{0,12}",
            ]
        )
            .prop_map(|(at, s)| Mutation::Insert(at, s)),
        (any::<usize>(), any::<char>()).prop_map(|(at, c)| Mutation::Replace(at, c)),
    ]
}

/// The nearest char boundary at or below `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut i = at % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(body: &str, m: &Mutation) -> String {
    let mut s = body.to_owned();
    match m {
        Mutation::Truncate(at) => s.truncate(boundary(&s, *at)),
        Mutation::Delete(at, n) => {
            let start = boundary(&s, *at);
            let end = boundary(&s, start.saturating_add(*n).min(s.len()));
            s.replace_range(start..end.max(start), "");
        }
        Mutation::Insert(at, text) => {
            let i = boundary(&s, *at);
            s.insert_str(i, text);
        }
        Mutation::Replace(at, c) => {
            let i = boundary(&s, *at);
            if let Some(old) = s[i..].chars().next() {
                s.replace_range(i..i + old.len_utf8(), &c.to_string());
            }
        }
    }
    s
}

/// The shell's side, simulated: each action succeeds or fails as `fail` says.
fn check_ends_in_a_disposition(body: &str, fail: &[bool]) -> Result<(), TestCaseError> {
    let c = cluster();
    let p = plan(body, lookup(&c));
    let outcomes: Vec<ActionOutcome> = (0..p.actions.len())
        .map(|i| {
            if fail.get(i).copied().unwrap_or(false) {
                ActionOutcome::Failed
            } else {
                ActionOutcome::Done
            }
        })
        .collect();
    let disposition = p.disposition(&outcomes);
    let failed_delete =
        p.actions.iter().zip(&outcomes).any(|(a, o)| {
            matches!(a, Action::DeleteNodeClaim { .. }) && *o == ActionOutcome::Failed
        });
    match &p.parsed {
        Err(_) => {
            prop_assert!(p.actions.is_empty());
            prop_assert_eq!(disposition, Disposition::Delete);
        }
        Ok(message) => {
            prop_assert_eq!(
                disposition,
                if failed_delete {
                    Disposition::Retry
                } else {
                    Disposition::Delete
                }
            );
            // Only our NodeClaims are ever acted on.
            for a in &p.actions {
                if let Action::DeleteNodeClaim { name, .. } = a {
                    prop_assert!(c.values().any(|claim| &claim.name == name));
                }
            }
            if message.kind() == MessageKind::NoOp {
                prop_assert!(p.actions.is_empty());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_strings_never_panic_and_end_deleted_or_retried(
        body in ".{0,300}",
        fail in proptest::collection::vec(any::<bool>(), 0..8),
    ) {
        check_ends_in_a_disposition(&body, &fail)?;
    }

    #[test]
    fn mutated_documented_bodies_never_panic_and_end_deleted_or_retried(
        which in 0usize..8,
        mutations in proptest::collection::vec(mutation(), 1..4),
        fail in proptest::collection::vec(any::<bool>(), 0..8),
    ) {
        let bodies = fixtures();
        let mut body = bodies[which % bodies.len()].clone();
        for m in &mutations {
            body = apply(&body, m);
        }
        check_ends_in_a_disposition(&body, &fail)?;
    }

    #[test]
    fn arbitrary_json_values_in_the_detail_never_panic(
        detail in arbitrary_json(),
        kind in 0usize..4,
    ) {
        let (source, detail_type) = [
            ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
            ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
            ("aws.ec2", "EC2 Instance State-change Notification"),
            ("aws.health", "AWS Health Event"),
        ][kind];
        let body = serde_json::json!({
            "version": "0", "id": "x", "source": source, "detail-type": detail_type,
            "time": "2024-05-14T09:41:07Z", "detail": detail,
        })
        .to_string();
        check_ends_in_a_disposition(&body, &[true; 8])?;
    }
}

/// JSON values shaped like the details karpenter reads, with wrong types mixed in.
fn arbitrary_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let key = prop_oneof![
        Just("instance-id"),
        Just("instance-action"),
        Just("state"),
        Just("service"),
        Just("eventTypeCategory"),
        Just("affectedEntities"),
        Just("entityValue"),
        Just("other"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just("EC2".to_owned()),
            Just("scheduledChange".to_owned()),
            Just("terminated".to_owned()),
            Just(SPOT_ID.to_owned()),
            Just(HEALTH_IDS[0].to_owned()),
            ".{0,8}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6).prop_map(|kvs| {
                Value::Object(kvs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}
