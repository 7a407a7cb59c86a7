//! `apiVersion` and `kind` of objects in Karpenter's API groups: what was expected, what was
//! found, and whether `karpenter convert` can help.
//!
//! The API server refuses a version or kind its CRDs do not serve (`no matches for kind`), so
//! an unknown version of `karpenter.sh` or `karpenter.k8s.aws` is an error, not a skip.

use crate::legacy::LegacyKind;

/// The Karpenter API groups.
pub const GROUPS: &[&str] = &["karpenter.sh", "karpenter.k8s.aws"];

/// The kinds of each group at v1 (list kinds included: `kubectl get -o yaml` prints them).
const V1_KINDS: &[(&str, &str)] = &[
    ("karpenter.sh", "NodePool"),
    ("karpenter.sh", "NodeClaim"),
    ("karpenter.sh", "NodePoolList"),
    ("karpenter.sh", "NodeClaimList"),
    ("karpenter.k8s.aws", "EC2NodeClass"),
    ("karpenter.k8s.aws", "EC2NodeClassList"),
];

/// What to do with an object of a Karpenter group that is not a v1 object this crate knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeMeta {
    /// Not a Karpenter group, or a v1 kind: nothing to say.
    Fine,
    /// A pre-v1 object `karpenter convert` migrates.
    Legacy(String),
    /// An error on `apiVersion` or `kind` (the field), with the message.
    Wrong {
        field: &'static str,
        message: String,
    },
}

/// Checks `apiVersion` and `kind` of a document in a Karpenter group.
pub fn check_type_meta(api_version: &str, kind: &str) -> TypeMeta {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if !GROUPS.contains(&group) || kind.is_empty() {
        return TypeMeta::Fine;
    }
    if V1_KINDS.contains(&(group, kind)) && version == "v1" {
        return TypeMeta::Fine;
    }
    // The one alpha kind served: `karpenter.sh/v1alpha1` NodeOverlay (gate `NodeOverlay`).
    if api_version == "karpenter.sh/v1alpha1" && matches!(kind, "NodeOverlay" | "NodeOverlayList") {
        return TypeMeta::Fine;
    }
    if LegacyKind::from_type_meta(api_version, kind).is_some() {
        return TypeMeta::Legacy(format!(
            "{api_version} {kind} is a pre-v1 object (Karpenter v1 serves {}/v1): convert it \
             with `karpenter convert`",
            group
        ));
    }
    // The kind belongs to the other group: the apiVersion is wrong.
    if let Some((right_group, _)) = V1_KINDS.iter().find(|(_, k)| *k == kind)
        && (*right_group != group || version != "v1")
    {
        return TypeMeta::Wrong {
            field: "apiVersion",
            message: format!("{kind} needs apiVersion {right_group}/v1, found {api_version:?}"),
        };
    }
    let known: Vec<&str> = V1_KINDS
        .iter()
        .filter(|(g, k)| *g == group && !k.ends_with("List"))
        .map(|(_, k)| *k)
        .collect();
    let hint = super::did_you_mean(kind, &known)
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default();
    TypeMeta::Wrong {
        field: "kind",
        message: format!(
            "{group} has no kind {kind:?}{hint}: its v1 kinds are {}",
            known.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_kinds_of_karpenter_groups_say_what_was_expected_and_found() {
        for (api_version, kind, expected) in [
            ("karpenter.sh/v1", "NodePool", None),
            ("karpenter.k8s.aws/v1", "EC2NodeClass", None),
            ("karpenter.sh/v1", "NodePoolList", None),
            ("apps/v1", "Deployment", None),
            ("v1", "ConfigMap", None),
            (
                "karpenter.sh/v2",
                "NodePool",
                Some(
                    "apiVersion: NodePool needs apiVersion karpenter.sh/v1, found \"karpenter.sh/v2\"",
                ),
            ),
            (
                "karpenter.k8s.aws/v1",
                "NodePool",
                Some(
                    "apiVersion: NodePool needs apiVersion karpenter.sh/v1, found \"karpenter.k8s.aws/v1\"",
                ),
            ),
            (
                "karpenter.sh/v1",
                "NodePol",
                Some(
                    "kind: karpenter.sh has no kind \"NodePol\" (did you mean \"NodePool\"?): its v1 kinds are NodePool, NodeClaim",
                ),
            ),
            (
                "karpenter.sh/v1",
                "Provisioner",
                Some(
                    "kind: karpenter.sh has no kind \"Provisioner\": its v1 kinds are NodePool, NodeClaim",
                ),
            ),
            (
                "karpenter.sh/v1beta1",
                "NodePool",
                Some(
                    "legacy: karpenter.sh/v1beta1 NodePool is a pre-v1 object (Karpenter v1 serves karpenter.sh/v1): convert it with `karpenter convert`",
                ),
            ),
        ] {
            let got = match check_type_meta(api_version, kind) {
                TypeMeta::Fine => None,
                TypeMeta::Legacy(message) => Some(format!("legacy: {message}")),
                TypeMeta::Wrong { field, message } => Some(format!("{field}: {message}")),
            };
            assert_eq!(got.as_deref(), expected, "{api_version} {kind}");
        }
    }
}
