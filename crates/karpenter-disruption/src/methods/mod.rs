//! The disruption methods. Each reads the pass ([`crate::pass`]: snapshot, `now`, candidates,
//! the simulator) and returns the commands it would run; [`crate::decide`] runs them in
//! upstream's order and the first that returns a command wins:
//!
//! 0. `repair.rs` (gate `NodeRepair`): replace the unhealthiest node past its policy's
//!    toleration, never while too much of its pool is unhealthy.
//! 1. `emptiness.rs`: delete every empty, consolidatable node within budget, in one command.
//! 2. `static_drift.rs`: replace drifted nodes of a static NodePool one for one.
//! 3. `drift.rs`: replace the node that drifted first, when its pods fit.
//! 4. `multi_node.rs`: delete several nodes, or replace them by one cheaper node.
//! 5. `single_node.rs`: delete one node, or replace it by one cheaper node.
//!
//! The two consolidations share `consolidation.rs` (which candidates qualify; simulate their
//! removal, then delete or replace), `replacement.rs` (the price rules a replacement must pass)
//! and `balanced.rs` (the Balanced policy's approval). `expiration.rs` is the forceful,
//! budget-free expiry of NodeClaims past `expireAfter`; it runs outside the pass.

pub mod balanced;
pub(crate) mod consolidation;
pub(crate) mod drift;
pub(crate) mod emptiness;
pub(crate) mod expiration;
pub(crate) mod multi_node;
pub(crate) mod repair;
pub(crate) mod replacement;
pub(crate) mod single_node;
pub(crate) mod static_drift;
