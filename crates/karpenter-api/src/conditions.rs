//! Status conditions as their owning controllers write them: a condition's
//! `lastTransitionTime` moves only when its status changes; reason, message and the observed
//! generation always follow the latest write. One writer for every object with
//! `metav1.Condition`s (NodeClaims, EC2NodeClasses).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Sets condition `type_` in `conditions` to `status` (`True`, `False`, `Unknown`).
pub fn set(
    conditions: &mut Vec<Condition>,
    generation: Option<i64>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    at: Time,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                status.clone_into(&mut existing.status);
                existing.last_transition_time = at;
            }
            reason.clone_into(&mut existing.reason);
            message.clone_into(&mut existing.message);
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: at,
            observed_generation: generation,
        }),
    }
}

/// Whether condition `type_` is `True`.
pub fn is_true(conditions: Option<&[Condition]>, type_: &str) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Condition `type_`, if present.
pub fn get<'a>(conditions: Option<&'a [Condition]>, type_: &str) -> Option<&'a Condition> {
    conditions.into_iter().flatten().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap_or_default())
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let mut conditions = Vec::new();
        set(&mut conditions, Some(1), "Ready", "False", "A", "a", t(10));
        set(&mut conditions, Some(2), "Ready", "False", "B", "b", t(20));
        assert_eq!(conditions[0].last_transition_time, t(10));
        assert_eq!(conditions[0].reason, "B");
        assert_eq!(conditions[0].observed_generation, Some(2));
        set(
            &mut conditions,
            Some(2),
            "Ready",
            "True",
            "Ready",
            "",
            t(30),
        );
        assert_eq!(conditions[0].last_transition_time, t(30));
        assert!(is_true(Some(&conditions), "Ready"));
        assert!(get(Some(&conditions), "Other").is_none());
    }
}
