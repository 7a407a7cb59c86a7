//! NodePool facts disruption needs: the scheduling view of a v1 NodePool (for simulations),
//! whether it is static, and its consolidation settings.

use std::time::Duration;

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use karpenter_api::v1::{ConsolidationPolicy, NodePool};
use karpenter_scheduling::{Operator, RequirementSpec, ResourceList};

pub fn name(pool: &NodePool) -> &str {
    pool.metadata.name.as_deref().unwrap_or_default()
}

/// Static pools (`spec.replicas` set) are never consolidated.
pub fn is_static(pool: &NodePool) -> bool {
    pool.spec.replicas.is_some()
}

/// `consolidateAfter` (`None` = Never).
pub fn consolidate_after(pool: &NodePool) -> Option<Duration> {
    pool.spec.disruption.consolidate_after.duration()
}

pub fn policy(pool: &NodePool) -> ConsolidationPolicy {
    pool.spec.disruption.consolidation_policy
}

fn taint(t: &karpenter_api::v1::common::Taint) -> K8sTaint {
    K8sTaint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.as_str().to_owned(),
        time_added: t.time_added.clone(),
    }
}

/// The scheduling view of a v1 NodePool. Requirements with an operator the solver does not
/// know are dropped (validation rejects them before they get here).
pub fn to_scheduling(pool: &NodePool) -> karpenter_scheduling::NodePool {
    let spec = &pool.spec.template.spec;
    karpenter_scheduling::NodePool {
        name: name(pool).to_owned(),
        weight: pool.spec.weight.unwrap_or(0),
        requirements: spec
            .requirements
            .iter()
            .filter_map(|r| {
                Some(RequirementSpec {
                    key: r.key.clone(),
                    operator: Operator::parse(r.operator.as_str())?,
                    values: r.values.clone(),
                    min_values: r.min_values.and_then(|m| u32::try_from(m).ok()),
                })
            })
            .collect(),
        labels: pool
            .spec
            .template
            .metadata
            .labels
            .clone()
            .unwrap_or_default(),
        taints: spec.taints.iter().map(taint).collect(),
        startup_taints: spec.startup_taints.iter().map(taint).collect(),
        limits: pool
            .spec
            .limits
            .as_ref()
            .and_then(|l| ResourceList::from_k8s(l).ok())
            .unwrap_or_default(),
    }
}
