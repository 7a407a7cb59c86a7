//! Taints and tolerations with Kubernetes matching rules. Karpenter treats every effect,
//! including `PreferNoSchedule`, as binding until preference relaxation adds a toleration.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// True when `toleration` tolerates `taint` (Kubernetes `ToleratesTaint`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        // An empty key with Exists matches every taint.
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The first taint none of `tolerations` tolerates.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Renders `key=value:Effect`.
pub fn describe(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={}:{}", taint.key, v, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

/// Key prefixes of taint families a controller sets and removes while a node starts (upstream
/// `KnownEphemeralTaintKeyPrefixes`: the Node Readiness Controller's `readiness.k8s.io/<rule>`).
pub const EPHEMERAL_TAINT_KEY_PREFIXES: &[&str] = &["readiness.k8s.io/"];

/// Taints present on new nodes only until they are initialized (upstream
/// `IsKnownEphemeralTaint`): a node is not initialized while it has one, and the solver ignores
/// them on an uninitialized managed node.
pub fn is_ephemeral(taint: &Taint) -> bool {
    use karpenter_api::labels as l;
    matches!(
        (taint.key.as_str(), taint.effect.as_str()),
        (l::NOT_READY_TAINT_KEY, "NoSchedule" | "NoExecute")
            | (l::UNREACHABLE_TAINT_KEY, "NoSchedule")
            | (l::UNINITIALIZED_TAINT_KEY, "NoSchedule")
            | (l::UNREGISTERED_TAINT_KEY, "NoExecute")
    ) || EPHEMERAL_TAINT_KEY_PREFIXES
        .iter()
        .any(|prefix| taint.key.starts_with(prefix))
}

/// A toleration for every `PreferNoSchedule` taint (the last preference relaxation step).
pub fn prefer_no_schedule_toleration() -> Toleration {
    Toleration {
        operator: Some("Exists".into()),
        effect: Some("PreferNoSchedule".into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_readiness_controller_taints_are_ephemeral_whatever_their_rule_and_effect() {
        let taint = |key: &str, effect: &str| Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            value: None,
            time_added: None,
        };
        assert!(is_ephemeral(&taint(
            "readiness.k8s.io/network-ready",
            "NoSchedule"
        )));
        assert!(is_ephemeral(&taint("readiness.k8s.io/gpu", "NoExecute")));
        assert!(is_ephemeral(&taint(
            "node.kubernetes.io/not-ready",
            "NoSchedule"
        )));
        assert!(!is_ephemeral(&taint(
            "example.com/readiness.k8s.io",
            "NoSchedule"
        )));
        assert!(!is_ephemeral(&taint(
            "node.kubernetes.io/unreachable",
            "NoExecute"
        )));
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: Option<&str>, op: &str, value: Option<&str>, effect: Option<&str>) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: Some(op.into()),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn tolerations_follow_kubernetes_matching_rules() {
        let t = taint("gpu", Some("true"), "NoSchedule");
        assert!(tolerates(
            &tol(Some("gpu"), "Equal", Some("true"), None),
            &t
        ));
        assert!(!tolerates(
            &tol(Some("gpu"), "Equal", Some("false"), None),
            &t
        ));
        assert!(tolerates(
            &tol(Some("gpu"), "Exists", None, Some("NoSchedule")),
            &t
        ));
        assert!(!tolerates(
            &tol(Some("gpu"), "Exists", None, Some("NoExecute")),
            &t
        ));
        assert!(tolerates(&tol(None, "Exists", None, None), &t));
        assert!(!tolerates(&tol(Some("other"), "Exists", None, None), &t));
    }

    #[test]
    fn prefer_no_schedule_taints_bind_until_tolerated() {
        let taints = [taint("a", None, "PreferNoSchedule")];
        assert!(first_untolerated(&taints, &[]).is_some());
        assert!(first_untolerated(&taints, &[prefer_no_schedule_toleration()]).is_none());
    }
}
