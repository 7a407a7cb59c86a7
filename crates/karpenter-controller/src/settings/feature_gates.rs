//! `FEATURE_GATES` / `--feature-gates` and `AWS_FEATURE_GATES` / `--aws-feature-gates`:
//! `Name=bool,Name=bool`, typed.
//!
//! Owns the lists of known gates and their defaults (upstream core's `pkg/operator/options`
//! v1.15.0 and the AWS provider's v1.15.1), in upstream's order. A gate not named in the input
//! keeps its default; an unknown gate or a value that is not a Go boolean is an error naming the
//! allowed gates or values (upstream ignores unknown gates; a typo here fails at start instead).
//! What a gate switches on is decided elsewhere; which values karpenter-rs refuses is
//! `super::refusals`.

use std::fmt;

use super::values::parse_go_bool;

/// The feature gates of Karpenter v1.15, with upstream's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `NodeRepair` (default false): replace nodes that stay unhealthy.
    pub node_repair: bool,
    /// `ReservedCapacity` (default true): launch into capacity reservations.
    pub reserved_capacity: bool,
    /// `SpotToSpotConsolidation` (default false): replace spot nodes by cheaper spot nodes.
    pub spot_to_spot_consolidation: bool,
    /// `NodeOverlay` (default false): NodeOverlay objects adjust instance types.
    pub node_overlay: bool,
    /// `StaticCapacity` (default false): NodePools with a fixed replica count.
    pub static_capacity: bool,
    /// `CapacityBuffer` (default false): CapacityBuffer objects keep headroom
    /// (`controllers/capacity_buffers.rs`).
    pub capacity_buffer: bool,
    /// `TerminateFirstDrift` (default false): a drifted node may go before its replacement
    /// launches when the replacement cannot launch first.
    pub terminate_first_drift: bool,
    /// `TerminateFirstRepair` (default false): the same for an unhealthy node (needs NodeRepair).
    pub terminate_first_repair: bool,
    /// `PodDeletionCostManagement` (default false): set `controller.kubernetes.io/pod-deletion-cost`
    /// on pods of nodes planned for consolidation.
    pub pod_deletion_cost_management: bool,
}

/// Gate names in upstream's order (the order `Display` writes them in).
pub const GATE_NAMES: [&str; 9] = [
    "NodeRepair",
    "ReservedCapacity",
    "SpotToSpotConsolidation",
    "NodeOverlay",
    "StaticCapacity",
    "CapacityBuffer",
    "TerminateFirstDrift",
    "TerminateFirstRepair",
    "PodDeletionCostManagement",
];

/// Upstream's default value of `FEATURE_GATES`.
pub const DEFAULT_FEATURE_GATES: &str = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false";

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            node_repair: false,
            reserved_capacity: true,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
            terminate_first_drift: false,
            terminate_first_repair: false,
            pod_deletion_cost_management: false,
        }
    }
}

impl FeatureGates {
    /// The gates the disruption decisions read.
    pub fn disruption_features(&self) -> karpenter_disruption::snapshot::Features {
        karpenter_disruption::snapshot::Features {
            spot_to_spot_consolidation: self.spot_to_spot_consolidation,
            pod_deletion_cost_management: self.pod_deletion_cost_management,
            terminate_first_drift: self.terminate_first_drift,
            terminate_first_repair: self.terminate_first_repair,
        }
    }
}

impl GateSet for FeatureGates {
    const KIND: &'static str = "feature gate";
    const NAMES: &'static [&'static str] = &GATE_NAMES;

    fn slots(&mut self) -> Vec<&mut bool> {
        vec![
            &mut self.node_repair,
            &mut self.reserved_capacity,
            &mut self.spot_to_spot_consolidation,
            &mut self.node_overlay,
            &mut self.static_capacity,
            &mut self.capacity_buffer,
            &mut self.terminate_first_drift,
            &mut self.terminate_first_repair,
            &mut self.pod_deletion_cost_management,
        ]
    }
}

/// The AWS provider's feature gates of v1.15.1, with upstream's defaults (all false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AwsFeatureGates {
    /// `NodeClassCEL`: CEL expressions in an EC2NodeClass's `spec.kubelet` (off: such a class
    /// fails validation).
    pub node_class_cel: bool,
    /// `DRANVIDIAGPU`: count the DRA devices the NVIDIA GPU driver publishes.
    pub dra_nvidia_gpu: bool,
    /// `DRAEFA`: count the DRA devices the dranet driver publishes for EFA interfaces.
    pub dra_efa: bool,
    /// `RebootForRepair`: node repair reboots a node for reboot-clearable GPU faults.
    pub reboot_for_repair: bool,
}

/// AWS gate names in upstream's order.
pub const AWS_GATE_NAMES: [&str; 4] = ["NodeClassCEL", "DRANVIDIAGPU", "DRAEFA", "RebootForRepair"];

/// The AWS provider's default value of `AWS_FEATURE_GATES`.
pub const DEFAULT_AWS_FEATURE_GATES: &str =
    "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false";

impl GateSet for AwsFeatureGates {
    const KIND: &'static str = "AWS feature gate";
    const NAMES: &'static [&'static str] = &AWS_GATE_NAMES;

    fn slots(&mut self) -> Vec<&mut bool> {
        vec![
            &mut self.node_class_cel,
            &mut self.dra_nvidia_gpu,
            &mut self.dra_efa,
            &mut self.reboot_for_repair,
        ]
    }
}

/// A set of named boolean gates: its names in order, and its values in the same order.
trait GateSet: Default + Copy {
    /// What an error calls one gate ("feature gate").
    const KIND: &'static str;
    /// The gates' names, in upstream's order.
    const NAMES: &'static [&'static str];
    /// The gates' values, in the order of [`GateSet::NAMES`].
    fn slots(&mut self) -> Vec<&mut bool>;
}

/// Parses `Name=bool,...` over the defaults of `G`.
fn parse_gates<G: GateSet>(input: &str) -> Result<G, String> {
    let mut gates = G::default();
    let known = || G::NAMES.join(", ");
    for entry in input.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(format!(
                "{entry:?} is not Name=true|false; known {}s: {}",
                G::KIND,
                known()
            ));
        };
        let name = name.trim();
        let index = G::NAMES.iter().position(|n| *n == name).ok_or_else(|| {
            format!(
                "unknown {} {name:?}; known {}s: {}",
                G::KIND,
                G::KIND,
                known()
            )
        })?;
        let value = parse_go_bool(value.trim())
            .map_err(|reason| format!("{} {name}: {reason}", G::KIND))?;
        if let Some(slot) = gates.slots().into_iter().nth(index) {
            *slot = value;
        }
    }
    Ok(gates)
}

/// Writes `Name=bool,...` in upstream's order.
fn write_gates<G: GateSet>(gates: &G, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut copy = *gates;
    for (i, (name, value)) in G::NAMES.iter().zip(copy.slots()).enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{name}={value}")?;
    }
    Ok(())
}

/// Parses `FEATURE_GATES` over the defaults. Used as the clap value parser.
pub fn parse_feature_gates(input: &str) -> Result<FeatureGates, String> {
    parse_gates(input)
}

/// Parses `AWS_FEATURE_GATES` over the defaults. Used as the clap value parser.
pub fn parse_aws_feature_gates(input: &str) -> Result<AwsFeatureGates, String> {
    parse_gates(input)
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_gates(self, f)
    }
}

impl fmt::Display for AwsFeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_gates(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_default_strings_parse_to_the_defaults() {
        assert_eq!(
            parse_feature_gates(DEFAULT_FEATURE_GATES),
            Ok(FeatureGates::default())
        );
        assert_eq!(FeatureGates::default().to_string(), DEFAULT_FEATURE_GATES);
        assert_eq!(
            parse_aws_feature_gates(DEFAULT_AWS_FEATURE_GATES),
            Ok(AwsFeatureGates::default())
        );
        assert_eq!(
            AwsFeatureGates::default().to_string(),
            DEFAULT_AWS_FEATURE_GATES
        );
    }

    #[test]
    fn named_gates_override_their_defaults_and_the_others_keep_theirs() {
        type Read = fn(&FeatureGates) -> bool;
        let cases: &[(&str, Read, bool)] = &[
            ("NodeRepair=true", |g| g.node_repair, true),
            ("ReservedCapacity=false", |g| g.reserved_capacity, false),
            (
                "SpotToSpotConsolidation=True",
                |g| g.spot_to_spot_consolidation,
                true,
            ),
            ("NodeOverlay=1", |g| g.node_overlay, true),
            ("StaticCapacity=t", |g| g.static_capacity, true),
            ("CapacityBuffer=TRUE", |g| g.capacity_buffer, true),
            (
                "TerminateFirstDrift=true",
                |g| g.terminate_first_drift,
                true,
            ),
            (
                "TerminateFirstRepair=true",
                |g| g.terminate_first_repair,
                true,
            ),
            (
                "PodDeletionCostManagement=true",
                |g| g.pod_deletion_cost_management,
                true,
            ),
            (" NodeRepair = true , ", |g| g.node_repair, true),
            ("", |g| g.reserved_capacity, true),
        ];
        for (input, read, expected) in cases {
            let gates = parse_feature_gates(input).expect(input);
            assert_eq!(read(&gates), *expected, "{input}");
        }
        let gates = parse_feature_gates("NodeRepair=true").expect("valid");
        assert!(gates.reserved_capacity, "an unnamed gate keeps its default");
        assert_eq!(
            gates.to_string(),
            DEFAULT_FEATURE_GATES.replace("NodeRepair=false", "NodeRepair=true")
        );
    }

    #[test]
    fn each_aws_gate_is_set_by_its_own_name() {
        type Read = fn(&AwsFeatureGates) -> bool;
        let cases: &[(&str, Read)] = &[
            ("NodeClassCEL=true", |g| g.node_class_cel),
            ("DRANVIDIAGPU=true", |g| g.dra_nvidia_gpu),
            ("DRAEFA=true", |g| g.dra_efa),
            ("RebootForRepair=true", |g| g.reboot_for_repair),
        ];
        for (input, read) in cases {
            let gates = parse_aws_feature_gates(input).expect(input);
            assert!(read(&gates), "{input}");
            let on = cases.iter().filter(|(_, r)| r(&gates)).count();
            assert_eq!(on, 1, "{input} switched only its own gate: {gates}");
        }
    }

    #[test]
    fn unknown_gates_and_non_boolean_values_are_refused_with_what_is_allowed() {
        let cases: &[(&str, &str)] = &[
            (
                "Drift=true",
                "unknown feature gate \"Drift\"; known feature gates: NodeRepair, ReservedCapacity",
            ),
            (
                "NodeRepair=yes",
                "feature gate NodeRepair: \"yes\" is not a boolean",
            ),
            ("NodeRepair", "is not Name=true|false"),
        ];
        for (input, expected) in cases {
            let err = parse_feature_gates(input).expect_err(input);
            assert!(err.contains(expected), "{input}: {err}");
        }
        let err = parse_aws_feature_gates("Turbo=true").expect_err("unknown");
        assert!(
            err.contains(
                "unknown AWS feature gate \"Turbo\"; known AWS feature gates: NodeClassCEL, DRANVIDIAGPU, DRAEFA, RebootForRepair"
            ),
            "{err}"
        );
    }
}
