//! The `karpenter.sh/do-not-disrupt` annotation.
//!
//! On a pod it is `"true"` (always) or a positive Go duration measured from the pod's start
//! time (protected until then); on a node only `"true"` counts. Anything else does not protect,
//! and is reported so users can fix it.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Whether a pod's annotation protects it at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodProtection {
    /// No annotation.
    None,
    /// Protected (the reason says until when).
    Protected(String),
    /// The annotation's duration has passed.
    Expired(String),
    /// The value is neither "true" nor a positive duration: ignored.
    Invalid(String),
}

/// Evaluates a pod's `karpenter.sh/do-not-disrupt` value.
pub fn pod_protection(
    value: Option<&str>,
    started: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> PodProtection {
    let Some(value) = value else {
        return PodProtection::None;
    };
    if value == "true" {
        return PodProtection::Protected("pod has karpenter.sh/do-not-disrupt=true".to_owned());
    }
    let duration: Duration = match karpenter_api::duration::parse_go_duration(value) {
        Ok(d) if !d.is_zero() => d,
        _ => {
            return PodProtection::Invalid(format!(
                "karpenter.sh/do-not-disrupt={value:?} is neither \"true\" nor a positive duration; ignored"
            ));
        }
    };
    let Some(started) = started else {
        // Not started yet: the window has not begun, so the pod is protected.
        return PodProtection::Protected(format!(
            "pod has karpenter.sh/do-not-disrupt={value} and has not started"
        ));
    };
    let until = chrono::Duration::from_std(duration)
        .ok()
        .and_then(|d| started.checked_add_signed(d));
    match until {
        Some(until) if now < until => PodProtection::Protected(format!(
            "pod has karpenter.sh/do-not-disrupt={value} until {}",
            until.format("%Y-%m-%dT%H:%M:%SZ")
        )),
        Some(_) => PodProtection::Expired(format!("karpenter.sh/do-not-disrupt={value} expired")),
        None => PodProtection::Protected(format!("pod has karpenter.sh/do-not-disrupt={value}")),
    }
}

/// An event upstream publishes about a pod's annotation when it looks at it (in a disruption
/// or a drain): `DoNotDisruptUntil` while a duration protects the pod,
/// `DoNotDisruptGracePeriodElapsed` once it has passed, `InvalidDoNotDisruptAnnotation` (a
/// warning) for a value that is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectionEvent {
    pub reason: &'static str,
    pub warning: bool,
    pub message: String,
}

/// The event for a pod whose annotation is `value`, started at `started`, looked at `now`;
/// `None` for no annotation, `"true"`, or a pod not started yet (as upstream).
pub fn protection_event(
    value: Option<&str>,
    started: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<ProtectionEvent> {
    let value = value?;
    if value == "true" {
        return None;
    }
    let duration = match karpenter_api::duration::parse_go_duration(value) {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => {
            return Some(invalid(&format!("duration {value:?} must be positive")));
        }
        Err(_) => {
            return Some(invalid(&format!("failed to parse {value:?} as a duration")));
        }
    };
    let until = started?.checked_add_signed(chrono::Duration::from_std(duration).ok()?)?;
    Some(if now < until {
        ProtectionEvent {
            reason: "DoNotDisruptUntil",
            warning: false,
            message: format!(
                "The karpenter.sh/do-not-disrupt grace period will elapse at {}",
                until.format("%Y-%m-%dT%H:%M:%SZ")
            ),
        }
    } else {
        ProtectionEvent {
            reason: "DoNotDisruptGracePeriodElapsed",
            warning: false,
            message:
                "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"
                    .to_owned(),
        }
    })
}

fn invalid(why: &str) -> ProtectionEvent {
    ProtectionEvent {
        reason: "InvalidDoNotDisruptAnnotation",
        warning: true,
        message: format!(
            "Invalid karpenter.sh/do-not-disrupt annotation: {why}, ignoring annotation"
        ),
    }
}

/// A node is protected only by the exact value "true".
pub fn node_protected(value: Option<&str>) -> bool {
    value == Some("true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, h, 0, 0)
            .single()
            .expect("valid time")
    }

    #[test]
    fn a_duration_is_told_until_when_it_protects_then_that_it_elapsed() {
        let until = protection_event(Some("2h"), Some(t(1)), t(2)).unwrap();
        assert_eq!(until.reason, "DoNotDisruptUntil");
        assert_eq!(
            until.message,
            "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-11-23T03:00:00Z"
        );
        let elapsed = protection_event(Some("2h"), Some(t(1)), t(3)).unwrap();
        assert_eq!(elapsed.reason, "DoNotDisruptGracePeriodElapsed");
        assert!(!elapsed.warning);
        let invalid = protection_event(Some("soon"), Some(t(1)), t(2)).unwrap();
        assert_eq!(invalid.reason, "InvalidDoNotDisruptAnnotation");
        assert!(invalid.warning);
        assert!(invalid.message.contains("\"soon\""), "{}", invalid.message);
        assert_eq!(
            protection_event(Some("0s"), Some(t(1)), t(2))
                .unwrap()
                .reason,
            "InvalidDoNotDisruptAnnotation"
        );
        assert_eq!(protection_event(Some("true"), Some(t(1)), t(2)), None);
        assert_eq!(protection_event(None, Some(t(1)), t(2)), None);
        assert_eq!(
            protection_event(Some("2h"), None, t(2)),
            None,
            "not started: no event"
        );
    }

    #[test]
    fn a_duration_protects_the_pod_from_its_start_until_it_passes() {
        assert!(matches!(
            pod_protection(Some("2h"), Some(t(8)), t(9)),
            PodProtection::Protected(_)
        ));
        assert!(matches!(
            pod_protection(Some("2h"), Some(t(8)), t(10)),
            PodProtection::Expired(_)
        ));
        assert!(matches!(
            pod_protection(Some("true"), Some(t(8)), t(23)),
            PodProtection::Protected(_)
        ));
        assert!(matches!(
            pod_protection(None, Some(t(8)), t(9)),
            PodProtection::None
        ));
    }

    #[test]
    fn malformed_values_do_not_protect_and_say_why() {
        for value in ["yes", "0s", "-1h", "True"] {
            assert!(
                matches!(
                    pod_protection(Some(value), Some(t(8)), t(9)),
                    PodProtection::Invalid(_)
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn nodes_are_protected_only_by_true() {
        assert!(node_protected(Some("true")));
        assert!(!node_protected(Some("1h")));
        assert!(!node_protected(None));
    }
}
