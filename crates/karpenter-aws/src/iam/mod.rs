//! Karpenter's IAM: the call contract, the generated policy and template, the evaluator and the
//! auditor. See the crate docs for the boundaries.

pub mod audit;
pub mod cloudformation;
pub mod contract;
pub mod eval;
pub mod generate;
pub mod policy;
// Recorded AWS calls checked against the contract: for the test environment, not the
// product (feature `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod recorded;
pub mod scope;
pub mod terraform;

pub use policy::PolicyDocument;
pub use scope::{Partition, Scope, ScopeError};
