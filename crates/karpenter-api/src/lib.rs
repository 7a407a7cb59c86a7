//! Karpenter's API: the `karpenter.sh/v1` NodePool and NodeClaim, the `karpenter.k8s.aws/v1`
//! EC2NodeClass, the legacy versions users migrate from (read-only), the well-known labels,
//! annotations, taints and finalizers, validation equal to upstream's CRD rules, and CRD
//! generation.
//!
//! This crate is pure: it links no Kubernetes client, no async runtime and no AWS SDK, reads no
//! clock and does no I/O. `kube` is used with default features off, for the `CustomResource`
//! derive only.
//!
//! YAML is read and written with `serde-saphyr` (see [`yaml`] for why: `serde_yaml` is
//! deprecated; serde-saphyr is maintained, never panics on input and reports line and column).

pub mod autoscaling;
pub mod conditions;
pub mod convert;
pub mod crds;
pub mod duration;
pub mod hash;
pub mod labels;
pub mod legacy;
pub mod schedule;
pub mod v1;
pub mod v1alpha1;
pub mod validation;
pub mod yaml;
