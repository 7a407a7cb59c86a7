//! A NodePool's status conditions as upstream's `nodepool.validation`, `nodepool.readiness`
//! and `nodepool.registrationhealth` controllers write them, decided in one pass:
//!
//! - `ValidationSucceeded`: the pool's runtime validation (labels, taints, requirements);
//!   False `NodePoolValidationFailed` with the problems.
//! - `NodeClassReady`: False `NodeClassNotFound` / `NodeClassTerminating` /
//!   `NodeClassReadinessUnknown`, else the class's own `Ready` (its reason and message when
//!   false).
//! - `Ready` (the root): True when both are; False `UnhealthyDependents` as soon as one is
//!   False at the pool's generation; else Unknown `ReconcilingDependents`. The message names
//!   the unhealthy ones (`NodeClassReady=False`), latest transition first.
//! - `NodeRegistrationHealthy`: Unknown again (and the pool's outcomes forgotten) when the
//!   pool's generation or its class's changed; else follows [`RegistrationHealth`]. And
//!   `status.nodeClassObservedGeneration`.
//!
//! A NodePool that is not `Ready` gets no new NodeClaims (the provisioner's rule).
//!
//! [`RegistrationHealth`]: crate::registration_health::RegistrationHealth

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_api::conditions::{get, set};
use karpenter_api::v1::NodePool;
use karpenter_api::v1::nodepool::conditions::{
    NODE_CLASS_READY, NODE_REGISTRATION_HEALTHY, READY, READY_DEPENDENTS, VALIDATION_SUCCEEDED,
};

use crate::registration_health::Health;

/// The node class a NodePool names, as the pass sees it.
#[derive(Debug, Clone, Copy)]
pub enum NodeClassView<'a> {
    /// No such class in the cluster.
    NotFound,
    /// The class exists. `deleting`: it has a deletion timestamp. `ready`: its `Ready`
    /// condition (`None`: not reported yet).
    Found {
        generation: Option<i64>,
        deleting: bool,
        ready: Option<&'a Condition>,
    },
    /// A cloud that launches without resolving its class (the simulated one): the class is
    /// optional (`generation` when it exists) and always ready.
    Simulated { generation: Option<i64> },
}

impl NodeClassView<'_> {
    fn generation(&self) -> Option<i64> {
        match self {
            NodeClassView::NotFound => None,
            NodeClassView::Found { generation, .. } | NodeClassView::Simulated { generation } => {
                *generation
            }
        }
    }
}

/// What the pass changes.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// The whole condition list to write.
    pub conditions: Vec<Condition>,
    /// `status.nodeClassObservedGeneration` to write.
    pub node_class_observed_generation: Option<i64>,
    /// What the pool's registration outcomes are to become, when they change: `Unknown` after
    /// the pool or its class changed, or the condition's health after a restart.
    pub health: Option<Health>,
}

/// What upstream would write for `pool` whose class is `class`, given its runtime validation
/// problems (`validation`, empty: valid) and its pool's registration `health`; `None` when
/// the status already says so.
pub fn decide(
    pool: &NodePool,
    class: NodeClassView<'_>,
    validation: &[String],
    health: &Health,
    now: &Time,
) -> Option<StatusUpdate> {
    let status = pool.status.clone().unwrap_or_default();
    let stored = status.conditions.clone().unwrap_or_default();
    let generation = pool.metadata.generation;
    let mut conditions = stored.clone();
    let put = |conditions: &mut Vec<Condition>,
               type_: &str,
               status: &str,
               reason: &str,
               message: &str| {
        set(
            conditions,
            generation,
            type_,
            status,
            reason,
            message,
            now.clone(),
        );
    };
    // Known conditions start Unknown (upstream `ConditionSet.For`).
    for type_ in [READY, VALIDATION_SUCCEEDED, NODE_CLASS_READY] {
        if get(Some(&conditions), type_).is_none() {
            put(
                &mut conditions,
                type_,
                "Unknown",
                "AwaitingReconciliation",
                "object is awaiting reconciliation",
            );
        }
    }

    if validation.is_empty() {
        put(
            &mut conditions,
            VALIDATION_SUCCEEDED,
            "True",
            VALIDATION_SUCCEEDED,
            "",
        );
    } else {
        put(
            &mut conditions,
            VALIDATION_SUCCEEDED,
            "False",
            "NodePoolValidationFailed",
            &validation.join("; "),
        );
    }

    match class {
        NodeClassView::NotFound => put(
            &mut conditions,
            NODE_CLASS_READY,
            "False",
            "NodeClassNotFound",
            "NodeClass not found on cluster",
        ),
        NodeClassView::Found { deleting: true, .. } => put(
            &mut conditions,
            NODE_CLASS_READY,
            "False",
            "NodeClassTerminating",
            "NodeClass is Terminating",
        ),
        NodeClassView::Found { ready, .. } => match ready.map(|c| c.status.as_str()) {
            Some("True") => put(
                &mut conditions,
                NODE_CLASS_READY,
                "True",
                NODE_CLASS_READY,
                "",
            ),
            Some("False") => {
                let (reason, message) = ready
                    .map(|c| (c.reason.clone(), c.message.clone()))
                    .unwrap_or_default();
                put(
                    &mut conditions,
                    NODE_CLASS_READY,
                    "False",
                    &reason,
                    &message,
                );
            }
            _ => put(
                &mut conditions,
                NODE_CLASS_READY,
                "False",
                "NodeClassReadinessUnknown",
                "Node Class Readiness Unknown",
            ),
        },
        NodeClassView::Simulated { .. } => put(
            &mut conditions,
            NODE_CLASS_READY,
            "True",
            NODE_CLASS_READY,
            "",
        ),
    }

    // Registration health (upstream skips a pool whose class is missing).
    let mut health_change = None;
    let mut observed = status.node_class_observed_generation;
    if !matches!(class, NodeClassView::NotFound) {
        let condition = get(Some(&stored), NODE_REGISTRATION_HEALTHY);
        let mut health = health.clone();
        if health == Health::Unknown && condition.is_some_and(|c| c.status != "Unknown") {
            health = Health::of(condition);
            health_change = Some(health.clone());
        }
        let class_generation = class.generation();
        let changed = condition.is_none()
            || status.node_class_observed_generation != class_generation
            || condition.and_then(|c| c.observed_generation) != generation;
        if changed {
            put(
                &mut conditions,
                NODE_REGISTRATION_HEALTHY,
                "Unknown",
                "AwaitingReconciliation",
                "object is awaiting reconciliation",
            );
            health = Health::Unknown;
            health_change = Some(Health::Unknown);
        }
        let now_status =
            get(Some(&conditions), NODE_REGISTRATION_HEALTHY).map(|c| c.status.clone());
        match &health {
            Health::Healthy if now_status.as_deref() != Some("True") => {
                put(
                    &mut conditions,
                    NODE_REGISTRATION_HEALTHY,
                    "True",
                    NODE_REGISTRATION_HEALTHY,
                    "",
                );
            }
            Health::Unhealthy { reason, message } if now_status.as_deref() != Some("False") => {
                put(
                    &mut conditions,
                    NODE_REGISTRATION_HEALTHY,
                    "False",
                    reason,
                    message,
                );
            }
            _ => {}
        }
        observed = class_generation;
    }

    // The root follows its dependents (upstream `recomputeRootCondition`).
    let mut unhealthy: Vec<&Condition> = READY_DEPENDENTS
        .iter()
        .filter_map(|t| get(Some(&conditions), t))
        .filter(|c| c.status != "True" || c.observed_generation != generation)
        .collect();
    unhealthy.sort_by_key(|c| std::cmp::Reverse(c.last_transition_time.0));
    let (status_, reason, message) = if unhealthy.is_empty() {
        ("True", READY.to_owned(), String::new())
    } else {
        let failed = unhealthy
            .iter()
            .any(|c| c.status == "False" && c.observed_generation == generation);
        let message = unhealthy
            .iter()
            .map(|c| format!("{}={}", c.type_, c.status))
            .collect::<Vec<_>>()
            .join(", ");
        if failed {
            ("False", "UnhealthyDependents".to_owned(), message)
        } else {
            ("Unknown", "ReconcilingDependents".to_owned(), message)
        }
    };
    put(&mut conditions, READY, status_, &reason, &message);

    let health_change = health_change.filter(|h| h != health);
    (conditions != stored
        || observed != status.node_class_observed_generation
        || health_change.is_some())
    .then_some(StatusUpdate {
        conditions,
        node_class_observed_generation: observed,
        health: health_change,
    })
}

/// Why `pool` is not `Ready`, for the pods it could have held (`None`: it is Ready). Names
/// the root's reason and each dependent that is not true with its reason and message.
pub fn not_ready_reason(pool: &NodePool) -> Option<String> {
    let conditions = pool.status.as_ref().and_then(|s| s.conditions.as_deref());
    let ready = get(conditions, READY);
    if ready.is_some_and(|c| c.status == "True") {
        return None;
    }
    let details: Vec<String> = READY_DEPENDENTS
        .iter()
        .filter_map(|t| get(conditions, t))
        .filter(|c| c.status != "True")
        .map(|c| {
            if c.message.is_empty() {
                format!("{}={} ({})", c.type_, c.status, c.reason)
            } else {
                format!("{}={} ({}: {})", c.type_, c.status, c.reason, c.message)
            }
        })
        .collect();
    Some(if details.is_empty() {
        "not ready: its status is not reconciled yet".to_owned()
    } else {
        format!("not ready: {}", details.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn t(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap_or_default())
    }

    fn pool(generation: i64) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "uid": "u1", "generation": generation},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
        }))
        .unwrap()
    }

    fn ready(status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: "Ready".to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: t(1),
            observed_generation: Some(1),
        }
    }

    fn found(ready: Option<&Condition>) -> NodeClassView<'_> {
        NodeClassView::Found {
            generation: Some(3),
            deleting: false,
            ready,
        }
    }

    fn apply(pool: &mut NodePool, update: &StatusUpdate) {
        let status = pool.status.get_or_insert_with(Default::default);
        status.conditions = Some(update.conditions.clone());
        status.node_class_observed_generation = update.node_class_observed_generation;
    }

    fn step(
        p: &mut NodePool,
        class: NodeClassView<'_>,
        validation: &[String],
        health: &Health,
        at: &Time,
    ) -> StatusUpdate {
        let update = decide(p, class, validation, health, at).unwrap();
        apply(p, &update);
        update
    }

    fn condition<'a>(pool: &'a NodePool, type_: &str) -> &'a Condition {
        get(
            pool.status.as_ref().and_then(|s| s.conditions.as_deref()),
            type_,
        )
        .unwrap()
    }

    #[test]
    fn a_valid_pool_whose_class_is_ready_goes_ready_and_is_then_left_alone() {
        let mut p = pool(1);
        let class_ready = ready("True", "Ready", "");
        let update = decide(&p, found(Some(&class_ready)), &[], &Health::Unknown, &t(10)).unwrap();
        apply(&mut p, &update);
        assert_eq!(condition(&p, READY).status, "True");
        assert_eq!(condition(&p, READY).reason, "Ready");
        assert_eq!(condition(&p, VALIDATION_SUCCEEDED).status, "True");
        assert_eq!(condition(&p, NODE_CLASS_READY).status, "True");
        assert_eq!(condition(&p, NODE_REGISTRATION_HEALTHY).status, "Unknown");
        assert_eq!(update.node_class_observed_generation, Some(3));
        assert_eq!(not_ready_reason(&p), None);
        assert_eq!(
            decide(&p, found(Some(&class_ready)), &[], &Health::Unknown, &t(20)),
            None,
            "nothing changed: no write"
        );
    }

    #[test]
    fn a_missing_class_makes_the_pool_not_ready_with_upstreams_reason() {
        let mut p = pool(1);
        let update = decide(&p, NodeClassView::NotFound, &[], &Health::Unknown, &t(10)).unwrap();
        apply(&mut p, &update);
        let c = condition(&p, NODE_CLASS_READY);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "False",
                "NodeClassNotFound",
                "NodeClass not found on cluster"
            )
        );
        let r = condition(&p, READY);
        assert_eq!(
            (r.status.as_str(), r.reason.as_str(), r.message.as_str()),
            ("False", "UnhealthyDependents", "NodeClassReady=False")
        );
        assert!(
            get(
                p.status.as_ref().and_then(|s| s.conditions.as_deref()),
                NODE_REGISTRATION_HEALTHY
            )
            .is_none(),
            "upstream leaves registration health alone without a class"
        );
        assert_eq!(
            not_ready_reason(&p).unwrap(),
            "not ready: NodeClassReady=False (NodeClassNotFound: NodeClass not found on cluster)"
        );
    }

    #[test]
    fn the_class_readiness_is_mirrored_terminating_and_unknown_included() {
        let p = pool(1);
        let not_ready = ready("False", "SubnetsNotFound", "no subnets matched");
        let update = decide(&p, found(Some(&not_ready)), &[], &Health::Unknown, &t(10)).unwrap();
        let c = get(Some(&update.conditions), NODE_CLASS_READY).unwrap();
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("SubnetsNotFound", "no subnets matched")
        );
        let unknown = ready("Unknown", "AwaitingReconciliation", "");
        for (class, reason) in [
            (found(Some(&unknown)), "NodeClassReadinessUnknown"),
            (found(None), "NodeClassReadinessUnknown"),
            (
                NodeClassView::Found {
                    generation: Some(3),
                    deleting: true,
                    ready: Some(&not_ready),
                },
                "NodeClassTerminating",
            ),
        ] {
            let update = decide(&p, class, &[], &Health::Unknown, &t(10)).unwrap();
            let c = get(Some(&update.conditions), NODE_CLASS_READY).unwrap();
            assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", reason));
        }
        let update = decide(
            &p,
            NodeClassView::Simulated { generation: None },
            &[],
            &Health::Unknown,
            &t(10),
        )
        .unwrap();
        assert_eq!(get(Some(&update.conditions), READY).unwrap().status, "True");
    }

    #[test]
    fn validation_problems_fail_validation_and_readiness() {
        let p = pool(1);
        let class_ready = ready("True", "Ready", "");
        let problems = vec![
            "spec.template.metadata.labels: label \"karpenter.sh/nodepool\" is restricted"
                .to_owned(),
        ];
        let update = decide(
            &p,
            found(Some(&class_ready)),
            &problems,
            &Health::Unknown,
            &t(10),
        )
        .unwrap();
        let v = get(Some(&update.conditions), VALIDATION_SUCCEEDED).unwrap();
        assert_eq!(
            (v.status.as_str(), v.reason.as_str()),
            ("False", "NodePoolValidationFailed")
        );
        assert!(v.message.contains("restricted"));
        let r = get(Some(&update.conditions), READY).unwrap();
        assert_eq!(
            (r.status.as_str(), r.message.as_str()),
            ("False", "ValidationSucceeded=False")
        );
    }

    #[test]
    fn registration_health_follows_the_outcomes_and_resets_when_the_pool_or_class_changes() {
        let mut p = pool(1);
        let class_ready = ready("True", "Ready", "");
        step(
            &mut p,
            found(Some(&class_ready)),
            &[],
            &Health::Unknown,
            &t(10),
        );
        let update = decide(&p, found(Some(&class_ready)), &[], &Health::Healthy, &t(20)).unwrap();
        assert_eq!(update.health, None);
        apply(&mut p, &update);
        assert_eq!(condition(&p, NODE_REGISTRATION_HEALTHY).status, "True");
        let unhealthy = Health::Unhealthy {
            reason: "RegistrationFailed".to_owned(),
            message: "Failed to register node".to_owned(),
        };
        step(&mut p, found(Some(&class_ready)), &[], &unhealthy, &t(30));
        let c = condition(&p, NODE_REGISTRATION_HEALTHY);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "RegistrationFailed")
        );
        assert_eq!(
            condition(&p, READY).status,
            "True",
            "registration health is not part of Ready"
        );

        // The class's generation moves: Unknown again, and the outcomes are forgotten.
        let newer = NodeClassView::Found {
            generation: Some(4),
            deleting: false,
            ready: Some(&class_ready),
        };
        let update = decide(&p, newer, &[], &unhealthy, &t(40)).unwrap();
        assert_eq!(update.health, Some(Health::Unknown));
        assert_eq!(update.node_class_observed_generation, Some(4));
        assert_eq!(
            get(Some(&update.conditions), NODE_REGISTRATION_HEALTHY)
                .unwrap()
                .status,
            "Unknown"
        );

        // The pool's generation moves: the same.
        apply(&mut p, &update);
        p.metadata.generation = Some(2);
        let update = decide(&p, newer, &[], &Health::Unknown, &t(50)).unwrap();
        assert_eq!(
            get(Some(&update.conditions), NODE_REGISTRATION_HEALTHY)
                .unwrap()
                .observed_generation,
            Some(2)
        );
    }

    #[test]
    fn after_a_restart_the_condition_seeds_the_outcomes() {
        let mut p = pool(1);
        let class_ready = ready("True", "Ready", "");
        step(
            &mut p,
            found(Some(&class_ready)),
            &[],
            &Health::Unknown,
            &t(10),
        );
        step(
            &mut p,
            found(Some(&class_ready)),
            &[],
            &Health::Healthy,
            &t(20),
        );
        // A restarted controller knows no outcomes: the condition stays True and seeds them.
        let update = decide(&p, found(Some(&class_ready)), &[], &Health::Unknown, &t(30)).unwrap();
        assert_eq!(update.health, Some(Health::Healthy));
        assert_eq!(
            update.conditions,
            p.status.as_ref().unwrap().conditions.clone().unwrap()
        );
    }

    #[test]
    fn a_changed_pool_is_reconciled_at_its_new_generation() {
        let mut p = pool(1);
        let class_ready = ready("True", "Ready", "");
        step(
            &mut p,
            NodeClassView::NotFound,
            &[],
            &Health::Unknown,
            &t(10),
        );
        // Generation 2 and a class: all dependents get re-set at generation 2 and Ready follows.
        p.metadata.generation = Some(2);
        let update = decide(&p, found(Some(&class_ready)), &[], &Health::Unknown, &t(20)).unwrap();
        let r = get(Some(&update.conditions), READY).unwrap();
        assert_eq!(
            (r.status.as_str(), r.observed_generation),
            ("True", Some(2))
        );
        assert_eq!(r.last_transition_time, t(20));
    }
}
