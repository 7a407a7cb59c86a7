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
