//! The answers to "why" the controller serves (`/explain/...` on the metrics port, read by
//! `karpenter explain --controller-url`): what its last provisioning batch decided for each
//! pod, and what its last disruption pass decided for each node, in the sentences its events
//! use.
//!
//! Owns the answer types ([`model`], shared with the CLI, which only reads them) and the record
//! the loops keep current ([`Explanations`]). The record decides nothing: the provisioner and
//! the disruption loop hand it their results; it never calls the API server. [`mod@recompute`]
//! runs the same decisions over an index without acting (`karpenter explain -f`).

pub mod client;
mod convert;
pub mod model;
mod pools;
pub mod recompute;
mod removal;
mod store;
pub mod unavailable;

pub use convert::rfc3339;
pub use pools::node_pools;
pub use recompute::{Recomputed, recompute};
pub use removal::removal;
pub use store::{Explanations, NotKnown};
