//! User data: what an instance runs at boot to join the cluster, per AMI family.
//!
//! # What this module owns
//!
//! Rendering the final user data string (the caller base64-encodes it) from
//! [`BootstrapInput`]: the cluster facts ([`ClusterFacts`]), the EC2NodeClass (`spec.userData`,
//! `spec.kubelet`, `spec.instanceStorePolicy`, the AMI family), the NodeClaim's taints and labels
//! and the max pods resolved for the instance types the launch template serves. Formats follow
//! upstream's `pkg/providers/amifamily/bootstrap/*` (reference `karpenter-aws.md` 1.5):
//!
//! * AL2 ([`al2`]): a MIME multipart archive, the user's parts first, then a shell part calling
//!   `/etc/eks/bootstrap.sh` with `--kubelet-extra-args`;
//! * AL2023 ([`al2023`]): a MIME multipart archive, the user's parts first, then Karpenter's
//!   `node.eks.aws/v1alpha1` `NodeConfig` (nodeadm merges later documents over earlier ones);
//! * Bottlerocket ([`bottlerocket`]): the user's TOML with the Karpenter-owned
//!   `settings.kubernetes` keys written over it;
//! * Windows ([`windows`]): a `<powershell>` block calling `Start-EKSBootstrap.ps1`;
//! * Custom: the user's user data as is.
//!
//! # What it must not do
//!
//! No I/O, no clock, no AWS calls: the cluster facts (endpoint, CA bundle, service CIDR, kube-dns
//! IP) are inputs the caller discovered. It never panics on user input: bad `spec.userData`
//! (malformed MIME, invalid TOML) and bad `spec.kubelet` values come back as [`UserDataError`]
//! naming the field.

pub mod al2;
pub mod al2023;
pub mod bottlerocket;
pub mod kubelet;
pub mod mime;
pub mod windows;
mod yaml;

use std::collections::BTreeMap;

use karpenter_api::labels;
use karpenter_api::v1::common::{Taint, TaintEffect};
use karpenter_api::v1::ec2nodeclass::InstanceStorePolicy;
use karpenter_api::v1::{AmiFamily, EC2NodeClass, NodeClaim};

pub use kubelet::KubeletConfig;

/// The EC2NodeClass field that carries the user's user data, named in errors.
pub const USER_DATA_FIELD: &str = "spec.userData";

/// Facts about the cluster the node joins, discovered by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The EKS cluster name (`CLUSTER_NAME`).
    pub name: String,
    /// The API server endpoint (`CLUSTER_ENDPOINT` or `eks:DescribeCluster`).
    pub endpoint: String,
    /// The cluster CA bundle, base64 (as EKS and the kubeconfig carry it).
    pub ca_bundle: Option<String>,
    /// The service CIDR (`eks:DescribeCluster` ServiceIpv4Cidr/ServiceIpv6Cidr); AL2023 needs it.
    pub service_cidr: Option<String>,
    /// The `kube-system/kube-dns` Service ClusterIP, the default `clusterDNS`.
    pub dns_ip: Option<String>,
}

/// Everything one user data rendering needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapInput {
    pub family: AmiFamily,
    pub cluster: ClusterFacts,
    /// `spec.userData`.
    pub custom_user_data: Option<String>,
    /// `spec.kubelet`, with `clusterDNS` defaulted and `maxPods` resolved ([`KubeletConfig`]).
    pub kubelet: KubeletConfig,
    /// Taints to register with (always including `karpenter.sh/unregistered:NoExecute`).
    pub taints: Vec<Taint>,
    /// Labels to register with (restricted domains already removed).
    pub labels: BTreeMap<String, String>,
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Bottlerocket only: whether `apiclient ephemeral-storage bind` mounts the default paths
    /// (Bottlerocket 1.46.0 and later); see [`bottlerocket::uses_default_mount_paths`].
    pub bottlerocket_default_mount_paths: bool,
}

impl BootstrapInput {
    /// The input for a NodeClaim launched with `class` as `capacity_type`, as upstream's
    /// `CreateAMIOptions` and resolver assemble it: taints are `spec.taints` + `spec.startupTaints`
    /// + `karpenter.sh/unregistered:NoExecute` (unless present); labels are the NodeClaim's labels
    /// + `karpenter.sh/capacity-type` + `karpenter.sh/do-not-sync-taints=true` (not for Custom),
    ///   minus labels in the `kubernetes.io`, `k8s.io` and `node-restriction.kubernetes.io`
    ///   domains; the kubelet config is `spec.kubelet` with `clusterDNS` defaulted to the kube-dns IP
    ///   and `maxPods` set to `max_pods` (the value resolved for the instance types) when given.
    pub fn for_node_claim(
        cluster: ClusterFacts,
        node_class: &EC2NodeClass,
        node_claim: &NodeClaim,
        capacity_type: &str,
        max_pods: Option<u32>,
    ) -> Result<Self, UserDataError> {
        let class = &node_class.spec;
        let family = class
            .resolved_ami_family()
            .ok_or(UserDataError::NoAmiFamily)?;
        let kubelet =
            KubeletConfig::resolve(class.kubelet.as_ref(), cluster.dns_ip.as_deref(), max_pods)?;
        let mut labels_in: BTreeMap<String, String> =
            node_claim.metadata.labels.clone().unwrap_or_default();
        labels_in.insert(labels::CAPACITY_TYPE.to_string(), capacity_type.to_string());
        if family != AmiFamily::Custom {
            labels_in.insert(labels::DO_NOT_SYNC_TAINTS.to_string(), "true".to_string());
        }
        let labels = labels_in
            .into_iter()
            .filter(|(key, _)| !is_restricted_label(key))
            .collect();
        let mut taints: Vec<Taint> = node_claim
            .spec
            .taints
            .iter()
            .chain(node_claim.spec.startup_taints.iter())
            .cloned()
            .collect();
        let unregistered = taints.iter().any(|taint| {
            taint.key == labels::UNREGISTERED_TAINT_KEY && taint.effect == TaintEffect::NoExecute
        });
        if !unregistered {
            taints.push(Taint::new(
                labels::UNREGISTERED_TAINT_KEY,
                None,
                TaintEffect::NoExecute,
            ));
        }
        let bottlerocket_default_mount_paths = bottlerocket::uses_default_mount_paths(
            class,
            node_class
                .status
                .as_ref()
                .and_then(|status| status.amis.as_deref()),
        );
        Ok(Self {
            family,
            cluster,
            custom_user_data: class.user_data.clone(),
            kubelet,
            taints,
            labels,
            instance_store_policy: class.instance_store_policy,
            bottlerocket_default_mount_paths,
        })
    }

    /// Whether `instanceStorePolicy: RAID0` is set.
    pub fn raid0(&self) -> bool {
        self.instance_store_policy == Some(InstanceStorePolicy::RAID0)
    }
}

/// Renders the final user data (not base64-encoded) for `input.family`.
pub fn render(input: &BootstrapInput) -> Result<String, UserDataError> {
    match input.family {
        AmiFamily::AL2 => al2::render(input),
        AmiFamily::AL2023 => al2023::render(input),
        AmiFamily::Bottlerocket => bottlerocket::render(input),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            windows::render(input)
        }
        AmiFamily::Custom => Ok(input.custom_user_data.clone().unwrap_or_default()),
    }
}

/// Labels the NodeRestriction admission plugin would refuse from a kubelet: domains that are or
/// end in `kubernetes.io`, `k8s.io` (which covers `node-restriction.kubernetes.io`).
pub fn is_restricted_label(key: &str) -> bool {
    let domain = labels::label_domain(key);
    ["node-restriction.kubernetes.io", "kubernetes.io", "k8s.io"]
        .iter()
        .any(|restricted| {
            domain == *restricted
                || domain
                    .strip_suffix(restricted)
                    .is_some_and(|rest| rest.ends_with('.'))
        })
}

/// `key=value:Effect` (or `key:Effect` without a value), as Kubernetes `Taint.ToString` prints.
pub(crate) fn taint_string(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => {
            format!("{}={value}:{}", taint.key, taint.effect.as_str())
        }
        _ => format!("{}:{}", taint.key, taint.effect.as_str()),
    }
}

/// Why user data could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// `spec.userData` is not in the form the AMI family needs (MIME, TOML).
    #[error("{field}: {family} user data: {reason}", field = USER_DATA_FIELD)]
    InvalidUserData {
        family: &'static str,
        reason: String,
    },
    /// A `spec.kubelet` value Karpenter maps to a bootstrap flag or setting has the wrong shape.
    #[error("spec.kubelet.{key}: {reason}")]
    InvalidKubelet { key: String, reason: String },
    /// A cluster fact cannot be used (AL2023 without a service CIDR, a CA bundle that is not
    /// base64, a value that would break the script's quoting).
    #[error("cluster {fact}: {reason}")]
    InvalidClusterFact { fact: &'static str, reason: String },
    /// A value would break out of the script's single quotes.
    #[error(
        "{field}: {value:?} contains a single quote, which the {family} bootstrap script cannot quote"
    )]
    Unquotable {
        family: &'static str,
        field: String,
        value: String,
    },
    /// Neither `spec.amiFamily` nor an alias names the family.
    #[error("spec.amiFamily: not set and no amiSelectorTerms alias names the family")]
    NoAmiFamily,
}

/// Rejects values that would end a single-quoted shell or PowerShell string.
pub(crate) fn single_quotable(
    family: &'static str,
    field: &str,
    value: &str,
) -> Result<(), UserDataError> {
    if value.contains('\'') {
        Err(UserDataError::Unquotable {
            family,
            field: field.to_string(),
            value: value.to_string(),
        })
    } else {
        Ok(())
    }
}

/// Go's `%q` (`strconv.Quote`) for the strings Karpenter quotes inside kubelet arguments.
pub(crate) fn go_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_label_domains_are_the_kubernetes_ones_and_their_subdomains() {
        assert!(is_restricted_label("kubernetes.io/arch"));
        assert!(is_restricted_label("node.kubernetes.io/instance-type"));
        assert!(is_restricted_label("node-restriction.kubernetes.io/team"));
        assert!(is_restricted_label("x.k8s.io/y"));
        assert!(!is_restricted_label("karpenter.sh/capacity-type"));
        assert!(!is_restricted_label("mykubernetes.io/team"));
        assert!(!is_restricted_label("team"));
    }

    #[test]
    fn taints_print_as_kubernetes_prints_them() {
        let with_value = Taint::new("dedicated", Some("gpu"), TaintEffect::NoSchedule);
        let without = Taint::new("karpenter.sh/unregistered", None, TaintEffect::NoExecute);
        assert_eq!(taint_string(&with_value), "dedicated=gpu:NoSchedule");
        assert_eq!(
            taint_string(&without),
            "karpenter.sh/unregistered:NoExecute"
        );
    }

    #[test]
    fn go_quoting_escapes_quotes_backslashes_and_control_characters() {
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(go_quote("x\ny\u{1}"), r#""x\ny\x01""#);
    }
}
