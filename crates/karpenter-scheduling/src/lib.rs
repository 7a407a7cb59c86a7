//! Scheduling simulation for karpenter-rs: Kubernetes quantities, the node requirements algebra,
//! taints and tolerations, topology (spread, affinity, anti-affinity), volume topology,
//! DaemonSet overhead, and the provisioning solver that decides where pending pods go and which
//! NodeClaims to create.
//!
//! This crate owns *decisions only*. It is pure and synchronous: it links no Kubernetes client
//! and no async runtime, reads no clock and does no I/O. Cluster state, NodePools and the
//! instance-type catalog come in as plain values ([`SolveInput`]); decisions go out as plain
//! values ([`SolveResult`]) with human-readable reasons.
//!
//! Design for speed: label keys and values are interned to integers, instance-type sets are
//! bitsets, fits are answered by per-resource sorted indexes, and topology counts are kept
//! incrementally; the catalog is never cloned per pod.

pub mod input;
pub mod output;
pub mod quantity;
pub mod resources;

pub use input::{
    ExistingNode, InstanceType, MinValuesPolicy, NodePool, Offering, Operator, Overhead,
    PreferencePolicy, RequirementSpec, SolveInput, SolveOptions,
};
pub use output::{
    ExistingPlacement, InstanceTypeOption, NewNodeClaim, PodRef, SolveResult, Unschedulable,
};
pub use quantity::{Quantity, QuantityError};
pub use resources::ResourceList;

pub mod bitset;
pub mod catalog;
pub mod daemons;
pub mod dims;
pub mod hash;
pub mod hostports;
pub mod intern;
mod placement;
pub mod pod;
pub mod preferences;
pub mod requirement;
pub mod requirements;
mod result;
pub mod scheduler;
pub mod selector;
pub mod state;
pub mod taints;
pub mod topology;
pub mod volumes;

pub use scheduler::solve;
pub mod builders;
pub mod fixtures;
pub mod v1;
