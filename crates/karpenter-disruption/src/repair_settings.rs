//! Node repair's settings, as the snapshot carries them: the cloud's compiled policies and how
//! much of a NodePool may be unhealthy before repair stops for it. Their own file so the
//! snapshot and the repair method (`methods/repair.rs`) both use them without importing each
//! other.

use std::sync::Arc;

use karpenter_cloud::RepairMatcher;

use crate::budgets::budget::scaled_nodes;

/// The annotation that vetoes repair of a node (upstream `DoNotRepairAnnotationKey`).
pub const DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";

/// Upstream's fixed threshold (`repairUnhealthyThreshold`).
pub const DEFAULT_UNHEALTHY_THRESHOLD: &str = "20%";

/// How much of a NodePool may be unhealthy before repair stops for it: `"20%"` (rounded up)
/// or a node count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnhealthyThreshold(String);

impl UnhealthyThreshold {
    /// `"N%"` (0-100) or a count.
    pub fn parse(value: &str) -> Result<Self, String> {
        let value = value.trim();
        if let Some(pct) = value.strip_suffix('%') {
            match pct.parse::<u32>() {
                Ok(p) if p <= 100 => {}
                _ => return Err(format!("{value:?} is not a percentage from 0% to 100%")),
            }
        } else if value.parse::<u32>().is_err() {
            return Err(format!(
                "{value:?} is neither a percentage (\"20%\") nor a node count (\"3\")"
            ));
        }
        Ok(UnhealthyThreshold(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How many unhealthy nodes a pool of `total` tolerates (percentages rounded up).
    pub fn limit(&self, total: u32) -> u32 {
        scaled_nodes(&self.0, total).unwrap_or(0)
    }
}

impl Default for UnhealthyThreshold {
    fn default() -> Self {
        UnhealthyThreshold(DEFAULT_UNHEALTHY_THRESHOLD.to_owned())
    }
}

/// Node repair is on: the cloud's compiled policies and the threshold.
#[derive(Debug, Clone)]
pub struct RepairSettings {
    pub matcher: Arc<RepairMatcher>,
    pub unhealthy_threshold: UnhealthyThreshold,
}
