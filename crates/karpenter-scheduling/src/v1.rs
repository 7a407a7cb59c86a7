//! Conversion from the `karpenter.sh/v1` API types users write to the solver's input.

use karpenter_api::v1 as api;

use crate::input::{NodePool, RequirementSpec};
use crate::resources::{ResourceList, ResourceParseError};

/// A v1 NodePool could not be turned into solver input. Validation rejects every such object
/// before it gets here; the conversion still says what is wrong rather than guessing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodePoolConversionError {
    #[error("nodepool {pool}: spec.limits: {source}")]
    Limits {
        pool: String,
        #[source]
        source: ResourceParseError,
    },
    #[error(
        "nodepool {pool}: spec.template.spec.requirements[{index}].minValues: {value} is not between 1 and 50"
    )]
    MinValues {
        pool: String,
        index: usize,
        value: i32,
    },
}

/// A v1 taint as the Kubernetes core type the solver works with.
pub fn taint(t: &api::Taint) -> k8s_openapi::api::core::v1::Taint {
    k8s_openapi::api::core::v1::Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.as_str().to_string(),
        time_added: t.time_added.clone(),
    }
}

/// The solver's view of a v1 NodePool (weight, requirements, template labels, taints, startup
/// taints, limits): the one conversion of the workspace, used by the simulator, disruption and
/// the controller. Static NodePools (`spec.replicas`) convert too; callers that provision
/// dynamically leave them out ([`is_static`]).
pub fn node_pool(pool: &api::NodePool) -> Result<NodePool, NodePoolConversionError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let limits = match &pool.spec.limits {
        Some(map) => {
            ResourceList::from_k8s(map).map_err(|source| NodePoolConversionError::Limits {
                pool: name.clone(),
                source,
            })?
        }
        None => ResourceList::new(),
    };
    let template = &pool.spec.template;
    let mut requirements = Vec::with_capacity(template.spec.requirements.len());
    for (index, r) in template.spec.requirements.iter().enumerate() {
        let min_values = match r.min_values {
            None => None,
            Some(value) => Some(
                u32::try_from(value)
                    .ok()
                    .filter(|m| (1..=50).contains(m))
                    .ok_or_else(|| NodePoolConversionError::MinValues {
                        pool: name.clone(),
                        index,
                        value,
                    })?,
            ),
        };
        requirements.push(RequirementSpec {
            key: r.key.clone(),
            operator: r.operator,
            values: r.values.clone(),
            min_values,
        });
    }
    Ok(NodePool {
        name,
        weight: pool.spec.weight.unwrap_or(0),
        requirements,
        labels: template.metadata.labels.clone().unwrap_or_default(),
        taints: template.spec.taints.iter().map(taint).collect(),
        startup_taints: template.spec.startup_taints.iter().map(taint).collect(),
        limits,
    })
}

/// A NodeClaim's requirements as a provider launching it reads them (which offerings and
/// instance types it allows); `minValues` are dropped: they shaped the solver's choice of
/// instance types, not the launch.
pub fn node_claim_requirements(claim: &api::NodeClaim) -> Vec<RequirementSpec> {
    claim
        .spec
        .requirements
        .iter()
        .map(|r| RequirementSpec {
            key: r.key.clone(),
            operator: r.operator,
            values: r.values.clone(),
            min_values: None,
        })
        .collect()
}

/// Static NodePools (`spec.replicas` set) take no part in dynamic provisioning.
pub fn is_static(pool: &api::NodePool) -> bool {
    pool.spec.replicas.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  weight: 10
  limits:
    cpu: "1000"
    nodes: "20"
  template:
    metadata:
      labels:
        team: a
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 2}
        - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["3"]}
"#;

    #[test]
    fn a_v1_nodepool_converts_with_requirements_limits_labels_and_taints() {
        let pool: api::NodePool = match serde_saphyr::from_str(POOL) {
            Ok(p) => p,
            Err(e) => panic!("fixture parses: {e}"),
        };
        let converted = node_pool(&pool);
        let Ok(np) = converted else {
            panic!("converted: {converted:?}");
        };
        assert_eq!(np.name, "general");
        assert_eq!(np.weight, 10);
        assert_eq!(np.requirements.len(), 2);
        assert_eq!(np.requirements[0].min_values, Some(2));
        assert_eq!(np.requirements[1].operator, crate::Operator::Gt);
        assert_eq!(np.labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(np.taints.len(), 1);
        assert_eq!(np.limits.get("nodes"), crate::Quantity::from_units(20));
    }

    #[test]
    fn static_nodepools_are_recognised_and_still_convert() {
        let yaml = POOL.replace("  weight: 10\n", "  replicas: 3\n");
        let pool: api::NodePool = match serde_saphyr::from_str(&yaml) {
            Ok(p) => p,
            Err(e) => panic!("fixture parses: {e}"),
        };
        assert!(is_static(&pool));
        assert!(node_pool(&pool).is_ok());
    }

    #[test]
    fn unparsable_limits_and_out_of_range_min_values_are_errors_not_silence() {
        let yaml = POOL.replace("cpu: \"1000\"", "cpu: \"lots\"");
        let pool: api::NodePool = match serde_saphyr::from_str(&yaml) {
            Ok(p) => p,
            Err(e) => panic!("fixture parses: {e}"),
        };
        let err = node_pool(&pool)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("nodepool general: spec.limits"), "{err}");
        let yaml = POOL.replace("minValues: 2", "minValues: 0");
        let pool: api::NodePool = match serde_saphyr::from_str(&yaml) {
            Ok(p) => p,
            Err(e) => panic!("fixture parses: {e}"),
        };
        assert_eq!(
            node_pool(&pool),
            Err(NodePoolConversionError::MinValues {
                pool: "general".into(),
                index: 0,
                value: 0
            })
        );
    }
}
