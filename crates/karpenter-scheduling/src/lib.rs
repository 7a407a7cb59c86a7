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
//! One deliberate departure from upstream, on by default
//! ([`SolveOptions::pin_anti_affinity_domains`]): a NodeClaim taking a pod that a required
//! anti-affinity group over the zone (or any key but the hostname) selects is pinned to one
//! value of that key, so the group's other pods see the other zones free in the same solve.
//! Upstream leaves the NodeClaim free to land in any zone and records the pod in all of them,
//! placing one pod per such group per batch; the pinned NodeClaim carries
//! `topology.kubernetes.io/zone In [one zone]` and the provider launches it there.
//!
//! Design for speed: label keys and values are interned to integers, instance-type sets are
//! bitsets, fits are answered by per-resource sorted indexes, and topology counts are kept
//! incrementally; the catalog is never cloned per pod.
//!
//! # Layout
//!
//! - The vocabulary every decision shares: [`quantity`] and [`resources`] (quantities and
//!   resource lists), [`requirement`] and `requirements.rs` (the requirements algebra, and the
//!   one compiler of node-selector expressions), [`taints`], [`intern`], and [`pod_record`]
//!   ([`PodRecord`]: a pod as decisions read it, its key and predicates).
//! - The solver's contract: [`input`] ([`SolveInput`]) and [`output`] ([`SolveResult`]);
//!   [`v1`] turns the API's NodePools into solver input; [`template`] asks the solver for the
//!   NodeClaim a NodePool's template alone makes (static NodePools launch it).
//! - [`closest`]: for requests no instance type holds, the closest type and what it lacks.
//! - [`overlay`]: NodeOverlays applied to the instance types (prices, capacity, conflicts).
//! - [`solver`]: the solver itself, its files in the order a solve runs.
//! - `builders` and `fixtures` (feature `test-support`): test objects and upstream's
//!   benchmark workloads.

pub mod capacity_buffer;
pub mod closest;
pub mod default_spread;
pub mod input;
pub mod output;
pub mod overlay;
pub mod quantity;
pub mod resources;

pub use input::{
    ExistingNode, InstanceType, MinValuesPolicy, NodePool, Offering, Operator, Overhead,
    PoolInstanceTypes, PreferencePolicy, RequirementSpec, ReservedOfferingMode, SolveInput,
    SolveOptions,
};
pub use output::{
    ExistingPlacement, InstanceTypeOption, NewNodeClaim, PodRef, SolveResult, SolveStats,
    Unschedulable,
};
pub use pod_record::PodRecord;
pub use quantity::{Quantity, QuantityError};
pub use resources::ResourceList;

pub(crate) mod hash;
pub mod intern;
pub mod pod_record;
pub mod requirement;
pub(crate) mod requirements;
pub mod solver;
pub mod taints;
pub mod template;

// The solver's public modules under their old names: `karpenter_scheduling::pod::pod_requests`,
// `karpenter_scheduling::scheduler::Solver`.
pub use solver::{SolveCache, pod, scheduler, solve, solve_cached};
/// Builders for test objects (pods, instance types); with the `test-support` feature.
#[cfg(feature = "test-support")]
pub mod builders;
/// NodeOverlays and capacity reservations added to the benchmark input; with the
/// `test-support` feature.
#[cfg(feature = "test-support")]
pub mod capacity_fixtures;
/// Upstream's scheduling benchmark catalog and workloads (`karpenter-bench`, criterion); with
/// the `test-support` feature.
#[cfg(feature = "test-support")]
pub mod fixtures;
pub mod v1;
