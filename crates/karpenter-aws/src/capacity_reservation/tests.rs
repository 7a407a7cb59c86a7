use std::collections::BTreeMap;

use super::*;
use chrono::Duration;

fn at() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a time")
        .with_timezone(&Utc)
}

fn term(value: serde_json::Value) -> CapacityReservationSelectorTerm {
    serde_json::from_value(value).expect("a selector term")
}

fn described(id: &str) -> Described {
    Described {
        id: id.into(),
        owner_id: "123456789012".into(),
        instance_type: "c5.large".into(),
        availability_zone: "us-west-2a".into(),
        available_instance_count: 2,
        instance_match_criteria: "targeted".into(),
        reservation_type: Some("default".into()),
        interruptible: false,
        end_date: None,
    }
}

fn names(query: &Query) -> BTreeMap<String, Vec<String>> {
    query
        .filters
        .iter()
        .map(|f| (f.name.clone(), f.values.clone()))
        .collect()
}

#[test]
fn an_id_term_asks_for_its_id_and_a_tag_term_by_active_state_owner_tags_and_match_criteria() {
    let queries = queries(&[
        term(serde_json::json!({"id": "cr-0123"})),
        term(
            serde_json::json!({"tags": {"team": "ml", "any": "*"}, "ownerID": "210987654321", "instanceMatchCriteria": "targeted"}),
        ),
        term(serde_json::json!({"instanceMatchCriteria": "open"})),
    ]);
    assert_eq!(queries.len(), 3);
    assert_eq!(queries[0].ids, ["cr-0123"]);
    assert_eq!(
        names(&queries[0]),
        BTreeMap::from([("state".into(), vec!["active".into()])])
    );
    assert!(queries[1].ids.is_empty());
    assert_eq!(
        names(&queries[1]),
        BTreeMap::from([
            ("state".into(), vec!["active".into()]),
            ("owner-id".into(), vec!["210987654321".into()]),
            ("tag:team".into(), vec!["ml".into()]),
            ("tag-key".into(), vec!["any".into()]),
            ("instance-match-criteria".into(), vec!["targeted".into()]),
        ])
    );
    assert_eq!(
        names(&queries[2]),
        BTreeMap::from([
            ("state".into(), vec!["active".into()]),
            ("instance-match-criteria".into(), vec!["open".into()]),
        ])
    );
}

#[test]
fn an_owner_alone_asks_nothing() {
    assert!(queries(&[term(serde_json::json!({"ownerID": "210987654321"}))]).is_empty());
}

#[test]
fn a_capacity_block_is_expiring_forty_minutes_before_its_end_and_an_odcr_never_is() {
    let now = at();
    let mut block = described("cr-b");
    block.reservation_type = Some("capacity-block".into());
    block.end_date = Some(now + Duration::minutes(41));
    assert_eq!(
        status_of(&block, now).unwrap().state.as_deref(),
        Some("active")
    );
    block.end_date = Some(now + Duration::minutes(40));
    let status = status_of(&block, now).unwrap();
    assert_eq!(status.state.as_deref(), Some("expiring"));
    assert_eq!(status.reservation_type.as_deref(), Some("capacity-block"));
    assert!(status.end_time.is_some());
    let mut odcr = described("cr-o");
    odcr.end_date = Some(now + Duration::minutes(1));
    assert_eq!(
        status_of(&odcr, now).unwrap().state.as_deref(),
        Some("active")
    );
}

#[test]
fn the_status_lists_each_reservation_once_sorted_without_ended_or_unreadable_ones() {
    let now = at();
    let mut ended = described("cr-ended");
    ended.end_date = Some(now - Duration::seconds(1));
    let mut odd = described("cr-odd");
    odd.instance_match_criteria = "somewhere".into();
    let mut unknown_kind = described("cr-kind");
    unknown_kind.reservation_type = Some("future-kind".into());
    let resolved = resolve(
        &[
            described("cr-b"),
            described("cr-a"),
            described("cr-b"),
            ended,
            odd,
            unknown_kind,
        ],
        now,
    );
    let ids: Vec<&str> = resolved
        .reservations
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(ids, ["cr-a", "cr-b"]);
    assert_eq!(resolved.errors.len(), 2);
    let first = &resolved.reservations[0];
    assert_eq!(first.owner_id, "123456789012");
    assert_eq!(first.instance_match_criteria.as_deref(), Some("targeted"));
    assert_eq!(first.interruptible, Some(false));
    assert_eq!(first.reservation_type.as_deref(), Some("default"));
}

#[test]
fn the_next_read_is_a_minute_away_or_at_the_nearest_end() {
    let now = at();
    assert_eq!(requeue_after(&[described("cr-a")], now), POLL_PERIOD);
    let mut soon = described("cr-s");
    soon.end_date = Some(now + Duration::seconds(20));
    assert_eq!(
        requeue_after(&[soon.clone()], now),
        std::time::Duration::from_secs(20)
    );
    soon.end_date = Some(now - Duration::seconds(20));
    assert_eq!(requeue_after(&[soon], now), std::time::Duration::ZERO);
}
