//! The cluster-state index: the one place where API objects become the values the decisions
//! take.
//!
//! # What this crate owns
//!
//! - **The index** ([`Cluster`]): Nodes, NodeClaims, Pods, NodePools, DaemonSets,
//!   PodDisruptionBudgets, PVCs, PVs, StorageClasses and Namespaces, fed by
//!   [`Cluster::apply`], [`Cluster::delete`] and [`Cluster::reset`] (a relist). The controller
//!   feeds it from watches; `simulate` feeds it from manifests.
//! - **Node shapes** ([`StateNode`]): a Node joined with its NodeClaim by provider id (or a
//!   NodeClaim still in flight, or a Node Karpenter does not manage), with its pods; labels,
//!   taints and resources come from the NodeClaim until the Node is registered and
//!   initialized, as upstream's state nodes do. It is the single producer of the solver's
//!   [`karpenter_scheduling::ExistingNode`] and disruption's [`karpenter_disruption::NodeState`].
//!   [`Cluster::state_nodes`] lists them by name, [`Cluster::state_nodes_in`] in an order the
//!   caller keeps (the timeline's launch order: the decisions may break ties by input order).
//! - **Conditions** ([`conditions`]): setting a NodeClaim's or Node's condition as its owning
//!   controller does (the transition time moves only with the status), for writers that build
//!   objects in memory (the simulator's timeline, tests).
//! - **What is kept** ([`slim`]): the fields some decision reads; the controller slims every
//!   object before it is stored, so a large cluster's index stays small.
//! - **Shared pod specs** ([`spec_pool`]): pods are held as
//!   [`karpenter_scheduling::PodRecord`]s (the node name beside the spec, not in it), and
//!   pods with the same controller and spec share one copy of the spec on every node.
//! - **Derived views**: the pods waiting for capacity ([`provisionable::is_provisionable`]),
//!   each NodePool's usage against its limits ([`Cluster::node_pool_usage`]), the solver
//!   input ([`Cluster::solve_input`]) and the disruption snapshot
//!   ([`Cluster::disruption_snapshot`]).
//!
//! # What it must not do
//!
//! It is pure: no Kubernetes client, no async runtime, no clock (`now` comes in as a value),
//! no I/O. It makes no decisions: scheduling and disruption do. Objects it cannot read (a
//! quantity that does not parse, a pod without a name) are kept and reported by the derived
//! views, never a panic.

pub mod cluster;
pub mod conditions;
pub mod node;
pub mod object;
pub mod provisionable;
pub mod slim;
pub mod spec_pool;

pub use cluster::{Cluster, NodePoolUsage};
pub use node::StateNode;
pub use object::{Kind, Object, ObjectRef};
