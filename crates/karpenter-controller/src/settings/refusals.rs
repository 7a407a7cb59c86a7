//! The setting values karpenter-rs refuses to start with: upstream features it does not
//! implement (yet, or by design), each with why and what to do instead.
//!
//! One table, [`RULES`], checked once at start by [`Settings::validate`] (the binary calls it
//! before it builds its runtime or connects to anything; [`crate::run()`] calls it again).
//! Every refusal is reported at once. When a later change implements a feature, it deletes the
//! feature's row here (and a test of `tests.rs` that names it). Defaults never appear here: an
//! upstream chart's default values must start.

use std::fmt;

use super::Settings;

/// One refused value: the setting, the value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The environment variable (`FEATURE_GATES` for a gate).
    pub env: &'static str,
    /// The flag (`--feature-gates` for a gate).
    pub flag: &'static str,
    /// The gate, when the refused value is one gate of `env`.
    pub gate: Option<&'static str>,
    /// The refused value (`true` for all but `IGNORE_DRA_REQUESTS`).
    pub value: &'static str,
    /// Why karpenter-rs refuses it, and what to do instead.
    pub reason: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gate {
            Some(gate) => write!(
                f,
                "{gate}={} in {} ({}): {}",
                self.value, self.env, self.flag, self.reason
            ),
            None => write!(
                f,
                "{}={} ({}): {}",
                self.env, self.value, self.flag, self.reason
            ),
        }
    }
}

/// The settings ask for what karpenter-rs does not do; every such value is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refused(pub Vec<Refusal>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "refusing to start: {one}"),
            all => {
                write!(
                    f,
                    "refusing to start: {} settings ask for what karpenter-rs does not do:",
                    all.len()
                )?;
                for refusal in all {
                    write!(f, "\n  - {refusal}")?;
                }
                Ok(())
            }
        }
    }
}

/// One row: a boolean setting (or gate) that is refused when it has `value`.
struct Rule {
    env: &'static str,
    flag: &'static str,
    gate: Option<&'static str>,
    value: &'static str,
    /// Whether the settings set it to `value`.
    set: fn(&Settings) -> bool,
    reason: &'static str,
}

const fn aws_gate(name: &'static str, set: fn(&Settings) -> bool, reason: &'static str) -> Rule {
    Rule {
        env: "AWS_FEATURE_GATES",
        flag: "--aws-feature-gates",
        gate: Some(name),
        value: "true",
        set,
        reason,
    }
}

const fn setting(
    env: &'static str,
    flag: &'static str,
    set: fn(&Settings) -> bool,
    reason: &'static str,
) -> Rule {
    Rule {
        env,
        flag,
        gate: None,
        value: "true",
        set,
        reason,
    }
}

/// Every refused value. `SpotToSpotConsolidation`, `NodeRepair`, `StaticCapacity`, `NodeOverlay`, `CapacityBuffer`,
/// `TerminateFirstDrift` and `TerminateFirstRepair` are implemented and
/// `ReservedCapacity` is accepted both ways (on: the EC2 provider reads, offers and launches into the reservations
/// classes select; off: it ignores them, as upstream), so neither is here.
const RULES: &[Rule] = &[
    setting(
        "LEGACY_NODE_REPAIR",
        "--legacy-node-repair",
        |s| s.legacy_node_repair,
        "the legacy node repair controller is not implemented in karpenter-rs (node repair is the v1.15 disruption method); unset it",
    ),
    setting(
        "ENABLE_PROFILING",
        "--enable-profiling",
        |s| s.enable_profiling,
        "karpenter-rs serves no Go pprof endpoints; unset it",
    ),
    Rule {
        env: "IGNORE_DRA_REQUESTS",
        flag: "--ignore-dra-requests",
        gate: None,
        value: "false",
        set: |s| !s.ignore_dra_requests,
        reason: "simulating dynamic resource allocation (DRA) is not implemented yet in karpenter-rs: with true (upstream's default) pods with resource claims are told so and not provisioned for; unset it",
    },
    aws_gate(
        "NodeClassCEL",
        |s| s.aws_feature_gates.node_class_cel,
        "CEL expressions in an EC2NodeClass's kubelet are not implemented yet in karpenter-rs (with the gate off, a class using one is not Ready, as upstream); set NodeClassCEL=false",
    ),
    aws_gate(
        "DRANVIDIAGPU",
        |s| s.aws_feature_gates.dra_nvidia_gpu,
        "dynamic resource allocation (DRA) devices are not modelled yet in karpenter-rs; set DRANVIDIAGPU=false",
    ),
    aws_gate(
        "DRAEFA",
        |s| s.aws_feature_gates.dra_efa,
        "dynamic resource allocation (DRA) devices are not modelled yet in karpenter-rs; set DRAEFA=false",
    ),
];

impl Settings {
    /// Every value of these settings that karpenter-rs refuses, in table order.
    pub fn refusals(&self) -> Vec<Refusal> {
        RULES
            .iter()
            .filter(|rule| (rule.set)(self))
            .map(|rule| Refusal {
                env: rule.env,
                flag: rule.flag,
                gate: rule.gate,
                value: rule.value,
                reason: rule.reason,
            })
            .collect()
    }

    /// `Ok` when karpenter-rs can honour every setting; else every refused value at once.
    pub fn validate(&self) -> Result<(), Refused> {
        let refusals = self.refusals();
        if refusals.is_empty() {
            Ok(())
        } else {
            Err(Refused(refusals))
        }
    }
}
