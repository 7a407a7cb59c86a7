//! The `autoscaling.x-k8s.io` API group Karpenter reads: `v1beta1` CapacityBuffer.

#[allow(
    clippy::duplicated_attributes,
    reason = "kube derive takes repeated printcolumn(type_ = ...) arguments"
)]
pub mod v1beta1;
