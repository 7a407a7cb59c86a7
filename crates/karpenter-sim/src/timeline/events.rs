//! The timeline file: events over virtual time.
//!
//! ```yaml
//! duration: 24h            # optional; default: the last event + 1h
//! events:
//!   - at: 8h               # Go-style duration from the start: 90s, 10m, 1h30m
//!     scale: {workload: Deployment/frontend, namespace: shop, replicas: 12}
//!   - at: 12h
//!     interruptSpot: {zone: us-east-1a}      # the oldest spot node (in the zone, if given)
//!   - at: 13h
//!     deletePods: {workload: Job/catalog-import, namespace: shop}   # all its pods, or `count`
//!   - at: 20h
//!     nodePool: {apiVersion: karpenter.sh/v1, kind: NodePool, ...}  # add or replace
//! ```
//!
//! `namespace` defaults to `default`. At time 0 every workload of the manifests is created.

use std::time::Duration;

use karpenter_api::duration::parse_go_duration;
use karpenter_api::v1::NodePool;
use karpenter_api::validation::{Outcome, validate_document};
use serde::Deserialize;

use crate::error::TimelineError;

/// One thing that happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set a workload's replicas (parallelism for Jobs).
    Scale {
        workload: String,
        namespace: String,
        replicas: usize,
    },
    /// Delete a workload's pods (the highest-numbered first); all of them when `count` is unset.
    /// Deleted pods are not recreated: this models pods finishing or being removed.
    DeletePods {
        workload: String,
        namespace: String,
        count: Option<usize>,
    },
    /// A spot interruption: the node goes away and its pods are pending again.
    InterruptSpot {
        node: Option<String>,
        zone: Option<String>,
    },
    /// Add a NodePool, or replace the one with the same name.
    NodePool(Box<NodePool>),
}

/// An action at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at: Duration,
    pub action: Action,
}

/// A parsed timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub duration: Duration,
    /// Sorted by time (stable: same-time events keep file order).
    pub events: Vec<Event>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeline {
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    events: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEvent {
    at: String,
    #[serde(default)]
    scale: Option<RawScale>,
    #[serde(default)]
    delete_pods: Option<RawDelete>,
    #[serde(default)]
    interrupt_spot: Option<RawInterrupt>,
    #[serde(default)]
    node_pool: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScale {
    workload: String,
    #[serde(default)]
    namespace: Option<String>,
    replicas: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelete {
    workload: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    count: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterrupt {
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    zone: Option<String>,
}

/// Parses a timeline file's text; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Timeline, TimelineError> {
    let parse_error = |message: String| TimelineError::Parse {
        file: file.to_string(),
        message,
    };
    let docs = karpenter_api::yaml::parse_documents(text).map_err(|e| parse_error(e.describe()))?;
    let doc = docs
        .first()
        .ok_or_else(|| parse_error("the file is empty".to_string()))?;
    let raw: RawTimeline =
        karpenter_api::yaml::from_value(doc).map_err(|e| parse_error(e.to_string()))?;
    let mut events = Vec::new();
    for (index, value) in raw.events.iter().enumerate() {
        let event_error = |message: String| TimelineError::Event {
            file: file.to_string(),
            index,
            message,
        };
        let event: RawEvent =
            karpenter_api::yaml::from_value(value).map_err(|e| event_error(e.to_string()))?;
        let at = parse_go_duration(&event.at).map_err(|e| event_error(format!("at: {e}")))?;
        let namespace = |ns: Option<String>| ns.unwrap_or_else(|| "default".to_string());
        let mut actions = Vec::new();
        if let Some(s) = event.scale {
            if s.replicas > crate::limits::MAX_PODS {
                return Err(event_error(format!(
                    "scale: replicas: {} is more than simulate's ceiling of {} pods",
                    s.replicas,
                    crate::limits::MAX_PODS
                )));
            }
            actions.push(Action::Scale {
                workload: s.workload,
                namespace: namespace(s.namespace),
                replicas: s.replicas,
            });
        }
        if let Some(d) = event.delete_pods {
            actions.push(Action::DeletePods {
                workload: d.workload,
                namespace: namespace(d.namespace),
                count: d.count,
            });
        }
        if let Some(i) = event.interrupt_spot {
            actions.push(Action::InterruptSpot {
                node: i.node,
                zone: i.zone,
            });
        }
        if let Some(value) = event.node_pool {
            if let Outcome::Invalid(errors) = validate_document(&value) {
                let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
                return Err(event_error(format!("nodePool: {}", list.join("; "))));
            }
            let pool: NodePool = karpenter_api::yaml::from_value(&value)
                .map_err(|e| event_error(format!("nodePool: {e}")))?;
            actions.push(Action::NodePool(Box::new(pool)));
        }
        let action = match actions.len() {
            1 => actions.remove(0),
            0 => {
                return Err(event_error(
                    "expected one of scale, deletePods, interruptSpot, nodePool".to_string(),
                ));
            }
            _ => return Err(event_error("one action per event".to_string())),
        };
        events.push(Event { at, action });
    }
    events.sort_by_key(|e| e.at);
    let last = events.last().map_or(Duration::ZERO, |e| e.at);
    let duration = match raw.duration {
        Some(d) => parse_go_duration(&d).map_err(|e| parse_error(format!("duration: {e}")))?,
        None => last + Duration::from_secs(3600),
    };
    Ok(Timeline { duration, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_and_sorted_by_time() {
        let timeline = parse(
            "t.yaml",
            "duration: 2h\nevents:\n  - at: 1h\n    interruptSpot: {}\n  - at: 90s\n    scale: {workload: Deployment/web, replicas: 3}\n",
        );
        let Ok(timeline) = timeline else {
            panic!("parses: {timeline:?}")
        };
        assert_eq!(timeline.duration, Duration::from_secs(7200));
        assert_eq!(timeline.events[0].at, Duration::from_secs(90));
        assert_eq!(
            timeline.events[0].action,
            Action::Scale {
                workload: "Deployment/web".into(),
                namespace: "default".into(),
                replicas: 3
            }
        );
    }

    #[test]
    fn an_event_without_an_action_names_its_index() {
        let err = parse("t.yaml", "events:\n  - at: 1m\n")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("t.yaml: events[0]: expected one of scale, deletePods, interruptSpot, nodePool")
        );
    }
}
