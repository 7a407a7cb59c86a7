//! The in-memory simulation of a cluster that drives the same decisions as the controller, with
//! no Kubernetes client and no AWS: `karpenter simulate`.
//!
//! # What this crate owns
//!
//! - **Loading** ordinary manifests ([`load`]): Deployments, StatefulSets, ReplicaSets, Jobs,
//!   CronJobs, bare Pods, DaemonSets, PVCs, PVs, StorageClasses, Namespaces, Nodes (optional),
//!   and `karpenter.sh/v1` NodePools and `karpenter.k8s.aws/v1` EC2NodeClasses, validated with
//!   the `karpenter validate` rules. Other kinds are listed as ignored.
//! - **The index** ([`index`]): the manifests applied to a `karpenter_state::Cluster` as the
//!   controller's watches apply objects, for `karpenter explain -f`.
//! - **Workload expansion** into pods ([`workload`]) and the **default NodePool** and
//!   EC2NodeClass ([`nodepool`]); each NodePool's instance types come from
//!   `karpenter_cloud::pool_types`.
//! - **Batches** ([`batches`]): pending pods solved batch after batch as the controller does,
//!   the NodeClaims of earlier batches launched (one zone, their real size against limits),
//!   each NodeClaim shaped as the controller shapes it (`karpenter_lifecycle::nodeclaim`).
//! - **The plan** ([`mod@plan`]): the batches' NodeClaims, each launched with its cheapest offering
//!   (`karpenter_cloud::launch`), utilisation, cost, unschedulable pods, the **lower bound**
//!   ([`lower_bound`]) and the **fixed node group comparison** ([`nodegroup`]).
//! - **Rendering** the plan and timeline reports as tables ([`render`]) and HTML ([`html`]).
//! - **Timeline mode** ([`timeline`]): provisioning over virtual time (the controller's batch
//!   window, `karpenter_lifecycle::Batcher`; node startup; events that scale workloads, delete
//!   pods, interrupt spot nodes and change NodePools), with disruption passes through `karpenter_disruption::decide` and the
//!   orchestration queue; cost over time, churn and pending-time percentiles. The simulated
//!   cluster's Nodes, NodeClaims and pods live in `karpenter_state::Cluster`, as plan mode's
//!   manifest Nodes do: node shapes have one producer.
//!
//! # What it must not do
//!
//! No Kubernetes client, no AWS SDK, no network, no async runtime, and no wall clock: time in
//! the timeline is virtual. It makes no decisions of its own: scheduling comes from
//! `karpenter-scheduling`, the batch window and NodeClaim shaping from `karpenter-lifecycle`,
//! disruption from `karpenter-disruption`; instance types and prices come from
//! `karpenter-cloud`. It reads only
//! the files it is given.

pub mod batches;
pub mod daemonsets;
pub mod error;
pub mod html;
pub mod index;
pub mod limits;
pub mod load;
pub mod lower_bound;
pub mod nodegroup;
pub mod nodepool;
pub mod overlays;
pub mod plan;
pub mod render;
pub mod resources;
pub mod scenario;
pub mod timeline;
pub mod workload;

pub use error::{LoadError, Problem, Problems, SimulateError, TimelineError};
pub use karpenter_cloud::pool_types::PricingOptions;
pub use load::{Ignored, Manifests};
pub use plan::{Plan, PlannedNode, UnschedulablePod, plan};
pub use scenario::Scenario;
pub use workload::Workload;
