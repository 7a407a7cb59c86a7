//! Conversion from the `karpenter.sh/v1` API types users write to the solver's input.

use karpenter_api::v1 as api;

use crate::input::{NodePool, Operator, RequirementSpec};
use crate::resources::{ResourceList, ResourceParseError};

/// A v1 NodePool could not be turned into solver input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodePoolConversionError {
    #[error("nodepool {pool}: spec.limits: {source}")]
    Limits {
        pool: String,
        #[source]
        source: ResourceParseError,
    },
    #[error(
        "nodepool {pool}: spec.template.spec.requirements: operator {operator:?} is not supported"
    )]
    Operator { pool: String, operator: String },
}

fn taint(t: &api::Taint) -> k8s_openapi::api::core::v1::Taint {
    k8s_openapi::api::core::v1::Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.as_str().to_string(),
        time_added: t.time_added.clone(),
    }
}

/// Converts a v1 NodePool. Static NodePools (`spec.replicas` set) take no part in dynamic
/// provisioning and yield `None`.
pub fn node_pool_from_v1(
    pool: &api::NodePool,
) -> Result<Option<NodePool>, NodePoolConversionError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    if pool.spec.replicas.is_some() {
        return Ok(None);
    }
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
    for r in &template.spec.requirements {
        let operator = Operator::parse(r.operator.as_str()).ok_or_else(|| {
            NodePoolConversionError::Operator {
                pool: name.clone(),
                operator: r.operator.as_str().to_string(),
            }
        })?;
        requirements.push(RequirementSpec {
            key: r.key.clone(),
            operator,
            values: r.values.clone(),
            min_values: r.min_values.and_then(|m| u32::try_from(m).ok()),
        });
    }
    Ok(Some(NodePool {
        name,
        weight: pool.spec.weight.unwrap_or(0),
        requirements,
        labels: template.metadata.labels.clone().unwrap_or_default(),
        taints: template.spec.taints.iter().map(taint).collect(),
        startup_taints: template.spec.startup_taints.iter().map(taint).collect(),
        limits,
    }))
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
        let converted = node_pool_from_v1(&pool);
        let Ok(Some(np)) = converted else {
            panic!("converted: {converted:?}");
        };
        assert_eq!(np.name, "general");
        assert_eq!(np.weight, 10);
        assert_eq!(np.requirements.len(), 2);
        assert_eq!(np.requirements[0].min_values, Some(2));
        assert_eq!(np.requirements[1].operator, Operator::Gt);
        assert_eq!(np.labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(np.taints.len(), 1);
        assert_eq!(np.limits.get("nodes"), crate::Quantity::from_units(20));
    }

    #[test]
    fn static_nodepools_are_left_out_of_dynamic_provisioning() {
        let yaml = POOL.replace("  weight: 10\n", "  replicas: 3\n");
        let pool: api::NodePool = match serde_saphyr::from_str(&yaml) {
            Ok(p) => p,
            Err(e) => panic!("fixture parses: {e}"),
        };
        assert_eq!(node_pool_from_v1(&pool), Ok(None));
    }
}
