//! The instance profile Karpenter manages for an EC2NodeClass with `spec.role` (reference
//! `karpenter-aws.md` 1.9): its name, path and tags. A class with `spec.instanceProfile` uses
//! that profile as is and Karpenter never changes or deletes it.

use std::collections::BTreeMap;

use karpenter_api::v1::EC2NodeClass;

/// Instance profile names are at most this long (IAM).
pub const MAX_NAME_LENGTH: usize = 128;

/// `/karpenter/<region>/<cluster>/`: every profile of the cluster lives under it.
pub fn cluster_path(region: &str, cluster: &str) -> String {
    format!("/karpenter/{region}/{cluster}/")
}

/// `/karpenter/<region>/<cluster>/<class uid>/`: the class's own profiles.
pub fn path(region: &str, cluster: &str, class_uid: &str) -> String {
    format!("{}{class_uid}/", cluster_path(region, cluster))
}

/// `<cluster>_<hash of region, class name and uid>` (upstream's shape), cut to IAM's limit.
pub fn name(region: &str, cluster: &str, class: &EC2NodeClass) -> String {
    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let uid = class.metadata.uid.as_deref().unwrap_or_default();
    let hash = karpenter_api::hash::fnv1a64(format!("{region}/{class_name}/{uid}").as_bytes());
    let suffix = format!("_{hash}");
    let room = MAX_NAME_LENGTH - suffix.len();
    let prefix: String = cluster.chars().take(room).collect();
    format!("{prefix}{suffix}")
}

/// The profile's tags: `spec.tags` plus the Karpenter-owned ones, which win.
pub fn tags(region: &str, cluster: &str, class: &EC2NodeClass) -> BTreeMap<String, String> {
    let mut tags = class.spec.tags.clone().unwrap_or_default();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    tags.insert("eks:eks-cluster-name".into(), cluster.into());
    tags.insert(
        "karpenter.k8s.aws/ec2nodeclass".into(),
        class.metadata.name.clone().unwrap_or_default(),
    );
    tags.insert("topology.kubernetes.io/region".into(), region.into());
    tags
}

/// The role name IAM expects in `AddRoleToInstanceProfile`: the last segment of a role with
/// a path (`path/to/Role` or an ARN), as upstream strips it.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, uid: &str) -> EC2NodeClass {
        let mut class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "uid": uid},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}],
                     "tags": {"team": "a", "eks:eks-cluster-name": "spoofed"}}
        }))
        .unwrap();
        class.metadata.uid = Some(uid.into());
        class
    }

    #[test]
    fn names_are_stable_per_class_and_differ_between_classes() {
        let a = name("us-west-2", "demo", &class("default", "u1"));
        assert_eq!(a, name("us-west-2", "demo", &class("default", "u1")));
        assert!(a.starts_with("demo_"), "{a}");
        assert_ne!(a, name("us-west-2", "demo", &class("default", "u2")));
        assert_ne!(a, name("us-east-1", "demo", &class("default", "u1")));
        let long = name("us-west-2", &"c".repeat(200), &class("default", "u1"));
        assert_eq!(long.len(), MAX_NAME_LENGTH);
    }

    #[test]
    fn profiles_carry_the_tags_the_policy_conditions_on() {
        let tags = tags("us-west-2", "demo", &class("default", "u1"));
        assert_eq!(tags["kubernetes.io/cluster/demo"], "owned");
        assert_eq!(
            tags["eks:eks-cluster-name"], "demo",
            "ours win over spec.tags"
        );
        assert_eq!(tags["karpenter.k8s.aws/ec2nodeclass"], "default");
        assert_eq!(tags["topology.kubernetes.io/region"], "us-west-2");
        assert_eq!(tags["team"], "a");
        assert_eq!(
            path("us-west-2", "demo", "u1"),
            "/karpenter/us-west-2/demo/u1/"
        );
        assert_eq!(
            role_name("arn:aws:iam::1:role/nodes/KarpenterNodeRole"),
            "KarpenterNodeRole"
        );
        assert_eq!(role_name("KarpenterNodeRole"), "KarpenterNodeRole");
    }
}
