//! A probe: a request the controller never makes, that a least-privilege policy must deny, and
//! how serious it is when a policy allows it. The probes themselves are built in `probes.rs`
//! (derived from the contract) and `outside.rs` (actions outside it).

use serde::Serialize;

use crate::iam::eval::Request;

/// How serious it is when a policy allows a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// A grant broader than the contract needs that a compromised controller could abuse.
    OverBroad,
    /// Broader than needed, low risk (reads, or writes still fenced by another guard).
    Note,
}

/// A request the controller never makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Short machine name of the probe family, e.g. `foreign-resource`.
    pub kind: &'static str,
    pub severity: Severity,
    pub request: Request,
    /// Why allowing it is broader than the contract (shared by the probes of one family, so
    /// findings can be grouped).
    pub why: String,
    /// What this particular request would let the controller do, when the family text does not
    /// say it.
    pub detail: Option<String>,
}
