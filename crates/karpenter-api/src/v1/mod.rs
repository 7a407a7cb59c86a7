//! The current API: `karpenter.sh/v1` NodePool and NodeClaim, `karpenter.k8s.aws/v1` EC2NodeClass.

pub mod common;
#[allow(
    clippy::duplicated_attributes,
    reason = "kube derive takes repeated printcolumn(type_ = ...) arguments"
)]
pub mod ec2nodeclass;
#[allow(
    clippy::duplicated_attributes,
    reason = "kube derive takes repeated printcolumn(type_ = ...) arguments"
)]
pub mod nodeclaim;
#[allow(
    clippy::duplicated_attributes,
    reason = "kube derive takes repeated printcolumn(type_ = ...) arguments"
)]
pub mod nodepool;

pub use common::{
    NodeClassReference, NodeSelectorRequirementWithMinValues, Operator, Taint, TaintEffect,
    TemplateMetadata,
};
pub use ec2nodeclass::{
    AmiFamily, AmiSelectorTerm, EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus,
};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodepool::{
    Budget, ConsolidationPolicy, Disruption, DisruptionReason, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodePool, NodePoolSpec, NodePoolStatus,
};
