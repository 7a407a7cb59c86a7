//! Karpenter's disruption decisions, as pure functions of values.
//!
//! This crate owns *deciding* what to disrupt and why: disruption budgets, candidate eligibility
//! (node- and pod-level blocks), the eviction- and disruption-cost formulas, and (as they land)
//! the methods: emptiness, drift, multi- and single-node consolidation. Every decision carries a
//! reason a human can read; `karpenter explain` and events are built from those reasons.
//!
//! It must not do I/O, read a clock, or link an async runtime, a Kubernetes client or an AWS SDK:
//! `now` and the cluster snapshot come in as values, and commands go out as values for the
//! controller (or the simulator) to execute.

pub mod budgets;
pub mod cost;
pub mod do_not_disrupt;
