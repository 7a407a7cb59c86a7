//! The `NoSchedule` fences Karpenter puts on a Node it is about to drain
//! (`karpenter.sh/disrupted` before a termination, `karpenter.sh/rebooting` before a reboot):
//! how one is built and whether a Node carries it. The one home of both, so the two fences
//! cannot drift apart.

use k8s_openapi::api::core::v1::{Node, Taint};

/// `<key>:NoSchedule`, without a value.
pub fn no_schedule(key: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    }
}

/// The Node carries `<key>:NoSchedule`.
pub fn has_no_schedule(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|t| t.key == key && t.effect == "NoSchedule")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_found_by_its_key_and_effect_only() {
        let mut node = Node::default();
        assert!(!has_no_schedule(&node, "karpenter.sh/disrupted"));
        let mut other = no_schedule("karpenter.sh/disrupted");
        other.effect = "NoExecute".into();
        node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(vec![other, no_schedule("karpenter.sh/rebooting")]),
            ..Default::default()
        });
        assert!(!has_no_schedule(&node, "karpenter.sh/disrupted"));
        assert!(has_no_schedule(&node, "karpenter.sh/rebooting"));
    }
}
