//! The provisioning solver: where pending pods go and which NodeClaims to create for them
//! ([`solve`]), in upstream Karpenter's order. The files, in the order a solve runs:
//!
//! 1. **Setup** ([`scheduler`]): each pod compiled once ([`pod`]: requests, node affinity,
//!    tolerations, pod (anti-)affinity, spread, host ports; `volumes.rs`: where its volumes
//!    let it go); each NodePool's instance types indexed (`type_index.rs`, over `bitset.rs`
//!    and the dense resource vectors of `dims.rs`); DaemonSet overhead grouped per type
//!    (`daemons.rs`); the topology groups built (`topology.rs`, over the label selectors of
//!    `selector.rs`); existing nodes and NodePool templates made solver state (`state.rs`).
//! 2. **The loop** ([`scheduler`]): pods in upstream's queue order, each placed
//!    (`placement.rs`: an existing node, a NodeClaim of this solve, or a new NodeClaim from the
//!    first NodePool that can take it; host ports checked by `hostports.rs`), and relaxed one
//!    preference at a time when it fails (`preferences.rs`); a NodeClaim that can use
//!    capacity reservations holds their slots (`reservations.rs`).
//! 3. **The result** (`result.rs`): NodeClaims with their instance-type options by price,
//!    placements on existing nodes, and every unschedulable pod's reasons.
//!
//! The solver's input and output ([`crate::SolveInput`], [`crate::SolveResult`]) and the
//! algebra it computes with (quantities, requirements, taints) live beside this folder: they
//! are the crate's vocabulary, which disruption, the simulator and the controller read too.

pub(crate) mod bitset;
pub(crate) mod daemons;
pub(crate) mod dims;
pub mod effective_zone;
pub(crate) mod hostports;
pub(crate) mod placement;
pub mod pod;
pub(crate) mod preferences;
pub(crate) mod reservations;
pub(crate) mod result;
pub mod scheduler;
pub(crate) mod selector;
pub(crate) mod spread;
pub(crate) mod state;
pub(crate) mod topology;
pub(crate) mod type_index;
pub(crate) mod volumes;

pub use scheduler::{SolveCache, solve, solve_cached};
