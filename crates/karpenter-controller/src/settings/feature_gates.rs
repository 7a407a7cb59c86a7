//! `FEATURE_GATES` / `--feature-gates`: `Name=bool,Name=bool`, typed.
//!
//! Owns the list of known gates and their defaults (upstream
//! `pkg/operator/options`). A gate not named in the input keeps its default;
//! an unknown gate or a value that is not a Go boolean is an error naming the
//! allowed gates or values. What a gate switches on is decided elsewhere.

use std::fmt;

use super::values::parse_go_bool;

/// The feature gates of Karpenter v1, with upstream's defaults.
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
    /// `CapacityBuffer` (default false): CapacityBuffer objects keep headroom.
    pub capacity_buffer: bool,
}

/// Gate names in upstream's order (the order `Display` writes them in).
pub const GATE_NAMES: [&str; 6] = [
    "NodeRepair",
    "ReservedCapacity",
    "SpotToSpotConsolidation",
    "NodeOverlay",
    "StaticCapacity",
    "CapacityBuffer",
];

/// Upstream's default value of `FEATURE_GATES`.
pub const DEFAULT_FEATURE_GATES: &str = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false";

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            node_repair: false,
            reserved_capacity: true,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
        }
    }
}

impl FeatureGates {
    fn gate_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "NodeRepair" => &mut self.node_repair,
            "ReservedCapacity" => &mut self.reserved_capacity,
            "SpotToSpotConsolidation" => &mut self.spot_to_spot_consolidation,
            "NodeOverlay" => &mut self.node_overlay,
            "StaticCapacity" => &mut self.static_capacity,
            "CapacityBuffer" => &mut self.capacity_buffer,
            _ => return None,
        })
    }

    fn values(&self) -> [bool; 6] {
        [
            self.node_repair,
            self.reserved_capacity,
            self.spot_to_spot_consolidation,
            self.node_overlay,
            self.static_capacity,
            self.capacity_buffer,
        ]
    }
}

/// Parses `Name=bool,...` over the defaults. Used as the clap value parser.
pub fn parse_feature_gates(input: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for entry in input.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(format!(
                "{entry:?} is not Name=true|false; known gates: {}",
                GATE_NAMES.join(", ")
            ));
        };
        let name = name.trim();
        let slot = gates.gate_mut(name).ok_or_else(|| {
            format!(
                "unknown feature gate {name:?}; known gates: {}",
                GATE_NAMES.join(", ")
            )
        })?;
        *slot = parse_go_bool(value.trim())
            .map_err(|reason| format!("feature gate {name}: {reason}"))?;
    }
    Ok(gates)
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, value)) in GATE_NAMES.iter().zip(self.values()).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_default_string_parses_to_the_defaults() {
        assert_eq!(
            parse_feature_gates(DEFAULT_FEATURE_GATES),
            Ok(FeatureGates::default())
        );
        assert_eq!(FeatureGates::default().to_string(), DEFAULT_FEATURE_GATES);
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
            (" NodeRepair = true , ", |g| g.node_repair, true),
            ("", |g| g.reserved_capacity, true),
        ];
        for (input, read, expected) in cases {
            let gates = parse_feature_gates(input).expect(input);
            assert_eq!(read(&gates), *expected, "{input}");
        }
        let gates = parse_feature_gates("NodeRepair=true").expect("valid");
        assert!(gates.reserved_capacity, "an unnamed gate keeps its default");
    }

    #[test]
    fn unknown_gates_and_non_boolean_values_are_refused_with_what_is_allowed() {
        let cases: &[(&str, &str)] = &[
            (
                "Drift=true",
                "unknown feature gate \"Drift\"; known gates: NodeRepair, ReservedCapacity",
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
    }
}
