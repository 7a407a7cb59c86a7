//! A NodeOverlay's status conditions as upstream's `nodeoverlay.controller` writes them, from
//! what applying the overlays made of it ([`karpenter_scheduling::overlay::Verdict`]):
//!
//! - `ValidationSucceeded`: True when the overlay applied; False `RuntimeValidation` with the
//!   problems, or False `Conflict`. Upstream's conflict message is "conflict with another
//!   overlay"; ours names the other overlay, the NodePool, the instance type and the offering
//!   or resource.
//! - `Ready` (the root): True with `ValidationSucceeded`; else False `UnhealthyDependents`,
//!   message `ValidationSucceeded=False` (operatorpkg's root condition).
//!
//! Every condition carries the overlay's generation. `None` when nothing changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_api::conditions::set;
use karpenter_api::v1alpha1::NodeOverlay;
use karpenter_api::v1alpha1::nodeoverlay::conditions::{
    READY, REASON_CONFLICT, REASON_RUNTIME_VALIDATION, VALIDATION_SUCCEEDED,
};
use karpenter_scheduling::overlay::Verdict;

/// The conditions `overlay` should have after `verdict`, at `now`; `None` when it has them.
pub fn decide(overlay: &NodeOverlay, verdict: &Verdict, now: &Time) -> Option<Vec<Condition>> {
    let stored: Vec<Condition> = overlay
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut conditions = stored.clone();
    let generation = overlay.metadata.generation;
    let (status, reason, message) = match verdict {
        Verdict::Applied { .. } => ("True", VALIDATION_SUCCEEDED.to_owned(), String::new()),
        Verdict::Invalid(errors) => (
            "False",
            REASON_RUNTIME_VALIDATION.to_owned(),
            errors.join("; "),
        ),
        Verdict::Conflict(conflict) => ("False", REASON_CONFLICT.to_owned(), conflict.to_string()),
    };
    set(
        &mut conditions,
        generation,
        VALIDATION_SUCCEEDED,
        status,
        &reason,
        &message,
        now.clone(),
    );
    let (status, reason, message) = if verdict.is_applied() {
        ("True", READY, String::new())
    } else {
        (
            "False",
            "UnhealthyDependents",
            format!("{VALIDATION_SUCCEEDED}=False"),
        )
    };
    set(
        &mut conditions,
        generation,
        READY,
        status,
        reason,
        &message,
        now.clone(),
    );
    (conditions != stored).then_some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::conditions::get;
    use karpenter_scheduling::overlay::{Conflict, ConflictOn};

    fn overlay() -> NodeOverlay {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "o", "generation": 3}, "spec": {"requirements": []}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap_or_default())
    }

    #[test]
    fn an_applied_overlay_is_ready_and_is_not_written_twice() {
        let mut o = overlay();
        let conditions = decide(&o, &Verdict::Applied { instance_types: 2 }, &at(10))
            .unwrap_or_else(|| panic!("first write"));
        let ready = get(Some(&conditions), READY).unwrap_or_else(|| panic!("Ready"));
        assert_eq!(
            (ready.status.as_str(), ready.observed_generation),
            ("True", Some(3))
        );
        o.status = Some(karpenter_api::v1alpha1::NodeOverlayStatus {
            conditions: Some(conditions),
        });
        assert_eq!(
            decide(&o, &Verdict::Applied { instance_types: 5 }, &at(20)),
            None
        );
    }

    #[test]
    fn a_conflicting_overlay_is_not_ready_and_names_the_conflict() {
        let verdict = Verdict::Conflict(Conflict {
            with: "b".to_owned(),
            weight: 0,
            node_pool: "default".to_owned(),
            instance_type: "m5.large".to_owned(),
            on: ConflictOn::Capacity {
                resource: "example.com/fuse".to_owned(),
            },
        });
        let conditions = decide(&overlay(), &verdict, &at(10)).unwrap_or_default();
        let validation =
            get(Some(&conditions), VALIDATION_SUCCEEDED).unwrap_or_else(|| panic!("condition"));
        assert_eq!(validation.status, "False");
        assert_eq!(validation.reason, "Conflict");
        assert!(
            validation.message.contains("\"b\""),
            "{}",
            validation.message
        );
        let ready = get(Some(&conditions), READY).unwrap_or_else(|| panic!("Ready"));
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            ("False", "UnhealthyDependents", "ValidationSucceeded=False")
        );
    }

    #[test]
    fn an_invalid_overlay_says_runtime_validation_with_the_problems() {
        let verdict = Verdict::Invalid(vec!["spec.capacity[memory]: restricted".to_owned()]);
        let conditions = decide(&overlay(), &verdict, &at(10)).unwrap_or_default();
        let validation =
            get(Some(&conditions), VALIDATION_SUCCEEDED).unwrap_or_else(|| panic!("condition"));
        assert_eq!(validation.reason, "RuntimeValidation");
        assert_eq!(validation.message, "spec.capacity[memory]: restricted");
    }
}
