//! What happens between a pod that cannot be scheduled and a node that runs it, as pure
//! decisions the controller executes (and `simulate --timeline` runs on a virtual clock: the
//! batch window and the NodeClaim shaping).
//!
//! # What this crate owns
//!
//! - **The batch window** ([`Batcher`]): upstream's `BATCH_IDLE_DURATION` /
//!   `BATCH_MAX_DURATION` rule and defaults, over any clock, and how long a node stays
//!   nominated after a batch placed pods on it ([`batcher::nomination_window`]); which
//!   provisionable pods trigger it at a look ([`pod_triggers::PodTriggers`]: first seen,
//!   changed, every 10 s, as upstream's pod trigger controller).
//! - **NodeClaims as upstream shapes them** ([`nodeclaim::node_claim`]): from the solver's
//!   [`karpenter_scheduling::NewNodeClaim`] and its NodePool: generated name, labels,
//!   annotations, owner reference, requirements (instance types kept with minValues),
//!   resources, node class, taints, startup taints, expiry and termination grace period; and
//!   the NodePool limit check before a launch ([`limits`]).
//! - **The NodeClaim lifecycle** ([`lifecycle::decide`]): finalizer, launch, registration,
//!   initialization and liveness as a step computed from the NodeClaim, its Node and `now`;
//!   the objects each step writes ([`lifecycle::launched`], [`lifecycle::registered_node`],
//!   [`lifecycle::set_condition`]).
//! - **Node termination** ([`termination::plan_drain`]): which pods a terminating Node still
//!   waits for, the drain order (workloads, DaemonSet pods, then critical ones), which pods the
//!   Eviction API is asked for and which are deleted because the termination grace period
//!   runs out.
//! - **The order of evictions across nodes draining together**
//!   ([`eviction_order::EvictionOrder`]): larger pods first, so kube-scheduler places the
//!   replacements in the order consolidation's plan was checked in.
//! - **The pods evicted already** ([`evicted::Evicted`]): not asked for again while the
//!   controller's copy does not yet show them terminating.
//! - **A Node's termination** ([`node_termination::decide_termination`]): the steps of one
//!   pass over a Node being deleted (its NodeClaim deleted, taint, drain, `Drained`,
//!   `MinDrainTime`, `VolumesDetached`, `InstanceTerminating`, the instance, the finalizer).
//! - **NodePool status conditions** ([`nodepool_status::decide`]): `Ready`,
//!   `ValidationSucceeded`, `NodeClassReady` and `NodeRegistrationHealthy` as upstream writes
//!   them, from the pool, its class and its recent registrations
//!   ([`registration_health::RegistrationHealth`]).
//! - **A node's in-place reboot** ([`reboot::decide_reboot`]): fence, drain, pre-boot id,
//!   issue, observe the new boot, succeed or fail (replace) on upstream's deadlines.
//! - **Garbage collection** ([`garbage::collect`]): NodeClaims whose instance is gone, instances
//!   and Nodes of ours that nothing claims.
//!
//! # What it must not do
//!
//! No Kubernetes client, no async runtime, no clock, no I/O: `now` and objects come in,
//! steps and objects go out. It launches nothing (the cloud provider does) and writes
//! nothing (the controller does).

pub mod batcher;
pub mod evicted;
pub mod eviction_order;
pub mod garbage;
pub mod lifecycle;
pub mod limits;
pub mod node_termination;
pub mod nodeclaim;
pub mod nodeoverlay_status;
pub mod nodepool_status;
pub mod pod_triggers;
pub mod reboot;
pub mod registration_health;
pub mod taint;
pub mod termination;

pub use batcher::Batcher;
pub use lifecycle::{LifecycleConfig, Step, decide};
pub use pod_triggers::PodTriggers;
