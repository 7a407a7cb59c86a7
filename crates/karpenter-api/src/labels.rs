//! Well-known labels, annotations, taints, finalizers and resource names.
//!
//! These strings are the compatibility surface with upstream Karpenter: users select on them,
//! dashboards group by them and other controllers react to them. Never rename one.

// ---------------------------------------------------------------------------------------------
// API groups
// ---------------------------------------------------------------------------------------------

/// The core Karpenter API group (NodePool, NodeClaim).
pub const GROUP: &str = "karpenter.sh";
/// The AWS provider API group (EC2NodeClass).
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
/// The compatibility group used on provider annotations.
pub const COMPATIBILITY_GROUP: &str = "compatibility.karpenter.sh";

// ---------------------------------------------------------------------------------------------
// Kubernetes well-known labels
// ---------------------------------------------------------------------------------------------

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Set on nodes by termination so load balancers drain them first.
pub const EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

// Deprecated aliases, normalized to the keys above.
pub const ZONE_FAILURE_DOMAIN_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const REGION_FAILURE_DOMAIN_BETA: &str = "failure-domain.beta.kubernetes.io/region";
pub const ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const OS_BETA: &str = "beta.kubernetes.io/os";
pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";

/// Deprecated label keys and the key each one means today.
pub const NORMALIZED_LABELS: &[(&str, &str)] = &[
    (ZONE_FAILURE_DOMAIN_BETA, ZONE),
    (REGION_FAILURE_DOMAIN_BETA, REGION),
    (ARCH_BETA, ARCH),
    (OS_BETA, OS),
    (INSTANCE_TYPE_BETA, INSTANCE_TYPE),
];

/// Maps a deprecated alias to its current key; other keys are returned unchanged.
pub fn normalize_label_key(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(alias, _)| *alias == key)
        .map_or(key, |(_, current)| current)
}

// ---------------------------------------------------------------------------------------------
// karpenter.sh labels
// ---------------------------------------------------------------------------------------------

pub const NODEPOOL: &str = "karpenter.sh/nodepool";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const INITIALIZED: &str = "karpenter.sh/initialized";
pub const REGISTERED: &str = "karpenter.sh/registered";
pub const DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";

pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// Every capacity type, cheapest-to-interrupt last.
pub const CAPACITY_TYPES: &[&str] = &[
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    CAPACITY_TYPE_RESERVED,
];

/// Legacy (v1alpha5) label, renamed to [`NODEPOOL`] in v1beta1.
pub const PROVISIONER_NAME_V1ALPHA5: &str = "karpenter.sh/provisioner-name";

// ---------------------------------------------------------------------------------------------
// karpenter.k8s.aws labels (instance type facts and the node class)
// ---------------------------------------------------------------------------------------------

pub const EC2NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
/// Zone ID (e.g. `use1-az1`), a stable name for a zone across accounts.
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// `default` or `dedicated`: the tenancy an instance was launched with.
pub const INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
/// The values [`INSTANCE_TENANCY`] may take (upstream's `WellKnownValuesForRequirements`).
pub const INSTANCE_TENANCY_VALUES: &[&str] = &["default", "dedicated"];
/// The id (`pg-...`) of the placement group an instance was launched into.
pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
/// The partition (`1`..`7`) of a partition placement group an instance was launched into.
pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";

/// Labels every provider understands; requirements on them are never "undefined custom keys".
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODEPOOL,
    ZONE,
    REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    CAPACITY_TYPE,
    WINDOWS_BUILD,
];

/// Labels the AWS provider adds to the well-known set.
pub const AWS_WELL_KNOWN_LABELS: &[&str] = &[
    EC2NODECLASS,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_LOCAL_NVME,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_CAPABILITY_FLEX,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    ZONE_ID,
    INSTANCE_TENANCY,
    PLACEMENT_GROUP_ID,
    PLACEMENT_GROUP_PARTITION,
];

/// True when `key` is well known to core or to the AWS provider (after alias normalization).
pub fn is_well_known_label(key: &str) -> bool {
    let key = normalize_label_key(key);
    WELL_KNOWN_LABELS.contains(&key) || AWS_WELL_KNOWN_LABELS.contains(&key)
}

/// True for label keys users may not set on a NodePool template or require in a NodePool:
/// anything in the `karpenter.sh` domain (or a subdomain) other than the well-known
/// `karpenter.sh/capacity-type` and `karpenter.sh/nodepool`, any `karpenter.k8s.aws` key that
/// is not well known, and `kubernetes.io/hostname`.
pub fn is_restricted_label(key: &str) -> bool {
    let key = normalize_label_key(key);
    if key == HOSTNAME {
        return true;
    }
    if is_well_known_label(key) {
        return false;
    }
    let domain = label_domain(key);
    domain_is_or_under(domain, GROUP) || domain_is_or_under(domain, AWS_GROUP)
}

/// The prefix of a qualified name (`example.com/key` -> `example.com`), or "" when it has none.
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

fn domain_is_or_under(domain: &str, parent: &str) -> bool {
    domain == parent
        || domain
            .strip_suffix(parent)
            .is_some_and(|rest| rest.ends_with('.'))
}

// ---------------------------------------------------------------------------------------------
// Annotations
// ---------------------------------------------------------------------------------------------

/// On a pod: "true" or a positive Go duration (from pod start); on a node: "true" only.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
pub const PROVIDER_COMPATIBILITY: &str = "compatibility.karpenter.sh/provider";
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// karpenter-rs's NodePool hash version. Upstream writes `v3` ([`UPSTREAM_NODEPOOL_HASH_VERSION`])
/// with a hash computed by Go's `hashstructure`; ours is computed differently
/// ([`crate::hash`]), so it carries its own version: a NodeClaim stamped by the other
/// implementation is re-stamped on the switch, never drifted.
pub const NODEPOOL_HASH_VERSION_VALUE: &str = "rs1";
/// The hash version upstream Karpenter v1 writes.
pub const UPSTREAM_NODEPOOL_HASH_VERSION: &str = "v3";
pub const NODECLAIM_TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
pub const NODECLAIM_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
/// On a NodeClaim being rebooted: its Node's `status.nodeInfo.bootID` before the reboot was
/// issued (a different one means the reboot happened: it is not issued again). Removed when
/// the reboot ends.
pub const REBOOT_PRE_BOOT_ID: &str = "karpenter.sh/reboot-pre-boot-id";
/// On a NodeClaim being rebooted: a Go duration bounding the drain before the reboot (`0s`:
/// no drain); unset, the drain is unbounded.
pub const REBOOT_TERMINATION_GRACE_PERIOD: &str = "karpenter.sh/reboot-termination-grace-period";
pub const REQUESTED_DRA_DRIVERS: &str = "karpenter.sh/requested-dra-drivers";
pub const PRICE_OVERLAY_APPLIED: &str = "karpenter.sh/price-overlay-applied";
pub const CAPACITY_OVERLAY_APPLIED: &str = "karpenter.sh/capacity-overlay-applied";
pub const CAPACITY_BUFFER_FAKE_POD: &str = "karpenter.sh/capacity-buffer-fake-pod";
pub const CAPACITY_BUFFER_NAME: &str = "karpenter.sh/capacity-buffer-name";
pub const CAPACITY_BUFFER_NAMESPACE: &str = "karpenter.sh/capacity-buffer-namespace";
pub const EC2NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const EC2NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// karpenter-rs's EC2NodeClass hash version. Upstream writes `v6`
/// ([`UPSTREAM_EC2NODECLASS_HASH_VERSION`]) with a Go `hashstructure` hash; ours is computed
/// differently ([`crate::hash::node_class_hash`]) and carries its own version, so NodeClaims
/// stamped by the other implementation are re-stamped on a switch, never drifted.
pub const EC2NODECLASS_HASH_VERSION_VALUE: &str = "rs1";
/// The EC2NodeClass hash version upstream Karpenter writes (`EC2NodeClassHashVersion`).
pub const UPSTREAM_EC2NODECLASS_HASH_VERSION: &str = "v6";
pub const INSTANCE_PROFILE_NAME: &str = "karpenter.k8s.aws/instance-profile-name";
/// On a NodeClaim: its instance carries the `Name` and `karpenter.sh/nodeclaim` tags.
pub const TAGGED: &str = "karpenter.k8s.aws/tagged";
/// On a NodeClaim: its instance carries the `eks:eks-cluster-name` tag.
pub const CLUSTER_NAME_TAGGED: &str = "compatibility.karpenter.k8s.aws/cluster-name-tagged";
/// Legacy (v1alpha5) pod annotation, replaced by [`DO_NOT_DISRUPT`].
pub const DO_NOT_EVICT_V1ALPHA5: &str = "karpenter.sh/do-not-evict";
/// Legacy (v1alpha5) node annotation, replaced by [`DO_NOT_DISRUPT`].
pub const DO_NOT_CONSOLIDATE_V1ALPHA5: &str = "karpenter.sh/do-not-consolidate";
/// The annotation `kubectl apply` writes: a copy of the whole object.
pub const LAST_APPLIED_CONFIGURATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

// ---------------------------------------------------------------------------------------------
// Taints and finalizers
// ---------------------------------------------------------------------------------------------

/// `karpenter.sh/disrupted:NoSchedule`, put on nodes being disrupted or terminated.
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// `karpenter.sh/rebooting:NoSchedule`, fencing a Node from new pods from its reboot's drain
/// until it has booted again.
pub const REBOOTING_TAINT_KEY: &str = "karpenter.sh/rebooting";
/// `karpenter.sh/unregistered:NoExecute`, expected at kubelet start and removed at registration.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
pub const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE_TAINT_KEY: &str = "node.kubernetes.io/unreachable";
pub const UNINITIALIZED_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Finalizer on NodeClaims and Nodes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Finalizer on EC2NodeClasses.
pub const AWS_TERMINATION_FINALIZER: &str = "karpenter.k8s.aws/termination";

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

pub const RESOURCE_CPU: &str = "cpu";
pub const RESOURCE_MEMORY: &str = "memory";
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const RESOURCE_PODS: &str = "pods";
/// NodePool `limits` pseudo-resource counting nodes.
pub const RESOURCE_NODES: &str = "nodes";
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
pub const RESOURCE_AWS_POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";
pub const RESOURCE_PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

/// Resources every node reports.
pub const WELL_KNOWN_RESOURCES: &[&str] = &[
    RESOURCE_CPU,
    RESOURCE_MEMORY,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_PODS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deprecated_aliases_normalize_to_current_keys() {
        assert_eq!(
            normalize_label_key("failure-domain.beta.kubernetes.io/zone"),
            ZONE
        );
        assert_eq!(
            normalize_label_key("beta.kubernetes.io/instance-type"),
            INSTANCE_TYPE
        );
        assert_eq!(normalize_label_key("example.com/team"), "example.com/team");
    }

    #[test]
    fn karpenter_domain_is_restricted_except_well_known_keys() {
        for (key, restricted) in [
            ("karpenter.sh/capacity-type", false),
            ("karpenter.sh/nodepool", false),
            ("karpenter.sh/custom", true),
            ("sub.karpenter.sh/custom", true),
            ("notkarpenter.sh/custom", false),
            ("kubernetes.io/hostname", true),
            ("karpenter.k8s.aws/instance-family", false),
            ("karpenter.k8s.aws/made-up", true),
            // Upstream v1.15.1's well-known tenancy and placement group labels.
            ("karpenter.k8s.aws/instance-tenancy", false),
            ("karpenter.k8s.aws/placement-group-id", false),
            ("karpenter.k8s.aws/placement-group-partition", false),
            ("topology.kubernetes.io/zone", false),
            ("failure-domain.beta.kubernetes.io/zone", false),
            ("example.com/team", false),
            ("team", false),
        ] {
            assert_eq!(is_restricted_label(key), restricted, "{key}");
        }
    }
}
