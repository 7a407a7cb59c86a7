//! Parsing one SQS message body (an EventBridge event) into a typed [`Message`].
//!
//! Owns: the size guard, the envelope (`version`, `id`, `detail-type`, `source`, `account`,
//! `time`, `region`, `resources`), the choice of kind by (`version`, `source`, `detail-type`) as
//! upstream does, and the `detail` of the five kinds karpenter acts on. Unknown kinds, other
//! versions, Health events that are not EC2 scheduled changes and an empty body are `Ok` no-ops
//! (upstream deletes them without acting); a body that is not what its kind promises is a
//! [`ParseError`] naming the field (`detail.instance-id: missing`).
//!
//! Must not: decide what to do (that is [`super::decide()`]), read the clock, or panic on any
//! input. Fields karpenter does not use are not read, so their types are never checked; a
//! missing `instance-action` does not stop a spot interruption from being acted on.

use std::fmt;
use std::marker::PhantomData;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};

/// SQS's maximum message size (256 KiB). A larger body cannot have come from SQS; it is rejected
/// before any parsing.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The EventBridge envelope version upstream parses; other versions are no-ops.
pub const ENVELOPE_VERSION: &str = "0";

pub const SOURCE_EC2: &str = "aws.ec2";
pub const SOURCE_HEALTH: &str = "aws.health";
pub const SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
pub const REBALANCE_RECOMMENDATION: &str = "EC2 Instance Rebalance Recommendation";
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
pub const HEALTH_EVENT: &str = "AWS Health Event";
/// EventBridge schema `aws.ec2@EC2CapacityReservationInstanceInterruptionWarning` v0: EC2
/// reclaims an instance of an interruptible capacity reservation.
pub const CAPACITY_RESERVATION_INTERRUPTION: &str =
    "EC2 Capacity Reservation Instance Interruption Warning";

/// Why a body could not be parsed. Each names the field (a dotted path into the JSON; `body` for
/// the whole message) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("body: {bytes} bytes, above the SQS maximum of {MAX_BODY_BYTES} bytes (not parsed)")]
    TooLarge { bytes: usize },
    /// Not JSON, truncated JSON, or a value of the wrong type.
    #[error("{field}: {message}")]
    Json { field: String, message: String },
    #[error("{field}: missing")]
    Missing { field: String },
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

impl ParseError {
    /// The field the error is about (`body` for the whole message).
    pub fn field(&self) -> &str {
        match self {
            Self::TooLarge { .. } => "body",
            Self::Json { field, .. } | Self::Missing { field } | Self::Invalid { field, .. } => {
                field
            }
        }
    }
}

/// One parsed message: the envelope and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub envelope: Envelope,
    pub detail: Detail,
}

/// The EventBridge envelope. Absent strings are empty, as upstream reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    pub version: String,
    pub id: String,
    pub detail_type: String,
    pub source: String,
    pub account: String,
    /// When the event was emitted; the queue-duration metric is measured from it.
    pub time: Option<DateTime<Utc>>,
    pub region: String,
    pub resources: Vec<String>,
}

/// What a message says, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// `aws.ec2` / `EC2 Spot Instance Interruption Warning`: the instance goes in two minutes.
    SpotInterruption {
        instance_id: String,
        /// `instance-action` (`terminate`, `stop` or `hibernate`), when present.
        action: Option<String>,
    },
    /// `aws.ec2` / `EC2 Capacity Reservation Instance Interruption Warning`: EC2 takes the
    /// instance back from its interruptible capacity reservation.
    CapacityReservationInterruption {
        instance_id: String,
        /// `instance-action` (`terminate`), when present.
        action: Option<String>,
    },
    /// `aws.ec2` / `EC2 Instance Rebalance Recommendation`: elevated risk of interruption.
    Rebalance { instance_id: String },
    /// `aws.ec2` / `EC2 Instance State-change Notification`.
    StateChange {
        instance_id: String,
        state: InstanceState,
    },
    /// `aws.health` / `AWS Health Event` with service `EC2` and category `scheduledChange`.
    ScheduledChange(ScheduledChange),
    /// Parsed, and nothing to act on.
    NoOp(NoOpReason),
}

/// An EC2 instance state from a state-change notification (matched case-insensitively, as
/// upstream does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceState {
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
    /// `pending`, `running` and anything else: no action.
    Other(String),
}

impl InstanceState {
    fn parse(state: &str) -> Self {
        match state.to_ascii_lowercase().as_str() {
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "shutting-down" => Self::ShuttingDown,
            "terminated" => Self::Terminated,
            _ => Self::Other(state.to_owned()),
        }
    }
}

/// An AWS Health scheduled change for EC2 instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduledChange {
    /// `affectedEntities[].entityValue`, in order, duplicates removed.
    pub instance_ids: Vec<String>,
    /// e.g. `AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED`.
    pub event_type_code: Option<String>,
    pub event_arn: Option<String>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
}

/// Why a well-formed message needs no action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoOpReason {
    /// An empty body (upstream treats it as a no-op).
    EmptyBody,
    /// An envelope `version` other than `"0"`.
    UnsupportedVersion,
    /// A (source, detail-type) karpenter does not handle.
    UnknownKind,
    /// An AWS Health event that is not an EC2 scheduled change.
    UnwatchedHealthEvent { service: String, category: String },
}

/// Parses one SQS message body.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ParseError::TooLarge { bytes: body.len() });
    }
    if body.is_empty() {
        return Ok(Message {
            envelope: Envelope::default(),
            detail: Detail::NoOp(NoOpReason::EmptyBody),
        });
    }
    let envelope = envelope(body)?;
    let detail = if envelope.version != ENVELOPE_VERSION {
        Detail::NoOp(NoOpReason::UnsupportedVersion)
    } else {
        match (envelope.source.as_str(), envelope.detail_type.as_str()) {
            (SOURCE_EC2, SPOT_INTERRUPTION) => {
                let d: InstanceActionDetail = detail(body)?;
                Detail::SpotInterruption {
                    instance_id: instance_id(d.instance_id)?,
                    action: d.instance_action,
                }
            }
            (SOURCE_EC2, CAPACITY_RESERVATION_INTERRUPTION) => {
                let d: InstanceActionDetail = detail(body)?;
                Detail::CapacityReservationInterruption {
                    instance_id: instance_id(d.instance_id)?,
                    action: d.instance_action,
                }
            }
            (SOURCE_EC2, REBALANCE_RECOMMENDATION) => {
                let d: RebalanceDetail = detail(body)?;
                Detail::Rebalance {
                    instance_id: instance_id(d.instance_id)?,
                }
            }
            (SOURCE_EC2, STATE_CHANGE) => {
                let d: StateDetail = detail(body)?;
                let instance_id = instance_id(d.instance_id)?;
                let state = d.state.ok_or_else(|| missing("detail.state"))?;
                Detail::StateChange {
                    instance_id,
                    state: InstanceState::parse(&state),
                }
            }
            (SOURCE_HEALTH, HEALTH_EVENT) => health(detail(body)?)?,
            _ => Detail::NoOp(NoOpReason::UnknownKind),
        }
    };
    Ok(Message { envelope, detail })
}

#[derive(Deserialize)]
struct RawEnvelope {
    version: Option<String>,
    id: Option<String>,
    #[serde(rename = "detail-type")]
    detail_type: Option<String>,
    source: Option<String>,
    account: Option<String>,
    time: Option<String>,
    region: Option<String>,
    resources: Option<Vec<String>>,
}

/// The body again, reading only `detail` (typed per kind), so a kind karpenter ignores never has
/// its detail type-checked.
#[derive(Deserialize)]
struct WithDetail<D> {
    detail: Option<Object<D>>,
}

/// A struct that must be a JSON object: serde's derive also accepts an array, field by
/// position, which no EventBridge event is.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(ObjectVisitor(PhantomData))
            .map(Object)
    }
}

/// The `detail` of a spot or capacity reservation interruption warning.
#[derive(Deserialize)]
struct InstanceActionDetail {
    #[serde(rename = "instance-id")]
    instance_id: Option<String>,
    #[serde(rename = "instance-action")]
    instance_action: Option<String>,
}

#[derive(Deserialize)]
struct RebalanceDetail {
    #[serde(rename = "instance-id")]
    instance_id: Option<String>,
}

#[derive(Deserialize)]
struct StateDetail {
    #[serde(rename = "instance-id")]
    instance_id: Option<String>,
    state: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    service: Option<String>,
    event_type_category: Option<String>,
    event_type_code: Option<String>,
    event_arn: Option<String>,
    start_time: Option<String>,
    end_time: Option<String>,
    affected_entities: Option<Vec<Object<AffectedEntity>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffectedEntity {
    entity_value: Option<String>,
}

/// Deserializes `T` from the body (a JSON object), naming the JSON path of the first error.
fn from_body<T: DeserializeOwned>(body: &str) -> Result<T, ParseError> {
    let mut de = serde_json::Deserializer::from_str(body);
    let Object(value) = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        ParseError::Json {
            field,
            message: e.into_inner().to_string(),
        }
    })?;
    // Trailing characters after the object are malformed too.
    de.end().map_err(|e| ParseError::Json {
        field: "body".to_owned(),
        message: e.to_string(),
    })?;
    Ok(value)
}

fn envelope(body: &str) -> Result<Envelope, ParseError> {
    let raw: RawEnvelope = from_body(body)?;
    let time = match raw.time {
        None => None,
        Some(t) => Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|e| ParseError::Invalid {
                    field: "time".to_owned(),
                    reason: format!("not an RFC 3339 timestamp ({e})"),
                })?
                .with_timezone(&Utc),
        ),
    };
    Ok(Envelope {
        version: raw.version.unwrap_or_default(),
        id: raw.id.unwrap_or_default(),
        detail_type: raw.detail_type.unwrap_or_default(),
        source: raw.source.unwrap_or_default(),
        account: raw.account.unwrap_or_default(),
        time,
        region: raw.region.unwrap_or_default(),
        resources: raw.resources.unwrap_or_default(),
    })
}

fn detail<D: DeserializeOwned>(body: &str) -> Result<D, ParseError> {
    let with: WithDetail<D> = from_body(body)?;
    with.detail
        .map(|Object(d)| d)
        .ok_or_else(|| missing("detail"))
}

fn missing(field: &str) -> ParseError {
    ParseError::Missing {
        field: field.to_owned(),
    }
}

fn instance_id(id: Option<String>) -> Result<String, ParseError> {
    non_empty(id, "detail.instance-id")
}

fn non_empty(value: Option<String>, field: &str) -> Result<String, ParseError> {
    match value {
        None => Err(missing(field)),
        Some(v) if v.trim().is_empty() => Err(ParseError::Invalid {
            field: field.to_owned(),
            reason: "empty".to_owned(),
        }),
        Some(v) => Ok(v),
    }
}

fn health(d: HealthDetail) -> Result<Detail, ParseError> {
    let service = d.service.unwrap_or_default();
    let category = d.event_type_category.unwrap_or_default();
    if service != "EC2" || category != "scheduledChange" {
        return Ok(Detail::NoOp(NoOpReason::UnwatchedHealthEvent {
            service,
            category,
        }));
    }
    let entities = d
        .affected_entities
        .ok_or_else(|| missing("detail.affectedEntities"))?;
    let mut instance_ids: Vec<String> = Vec::with_capacity(entities.len());
    for (i, Object(entity)) in entities.into_iter().enumerate() {
        let id = non_empty(
            entity.entity_value,
            &format!("detail.affectedEntities[{i}].entityValue"),
        )?;
        if !instance_ids.contains(&id) {
            instance_ids.push(id);
        }
    }
    Ok(Detail::ScheduledChange(ScheduledChange {
        instance_ids,
        event_type_code: d.event_type_code,
        event_arn: d.event_arn,
        start_time: d.start_time,
        end_time: d.end_time,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_of_exactly_the_sqs_maximum_is_parsed_and_one_byte_more_is_not() {
        let pad = |n: usize| {
            let head = r#"{"version":"0","source":"x","detail-type":"y","pad":""#;
            let tail = r#""}"#;
            format!("{head}{}{tail}", "a".repeat(n - head.len() - tail.len()))
        };
        assert!(parse(&pad(MAX_BODY_BYTES)).is_ok());
        assert_eq!(
            parse(&pad(MAX_BODY_BYTES + 1)),
            Err(ParseError::TooLarge {
                bytes: MAX_BODY_BYTES + 1
            })
        );
    }

    #[test]
    fn state_names_match_regardless_of_case() {
        assert_eq!(
            InstanceState::parse("Shutting-Down"),
            InstanceState::ShuttingDown
        );
        assert_eq!(
            InstanceState::parse("running"),
            InstanceState::Other("running".into())
        );
    }
}
