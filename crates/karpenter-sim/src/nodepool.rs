//! NodePools: the default one used when the manifests have none, and the simulator's error
//! for a `karpenter.sh/v1` NodePool the solver cannot take.

use karpenter_api::v1::{EC2NodeClass, NodePool};

use crate::error::SimulateError;

/// The NodePool used when the manifests contain none: on-demand and spot, amd64, Linux, instance
/// categories c, m and r of generation 3 or later, like upstream's getting-started NodePool.
pub const DEFAULT_NODEPOOL_YAML: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand", "spot"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["2"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
"#;

/// The EC2NodeClass assumed for a NodePool whose `nodeClassRef` names none of the manifests'
/// EC2NodeClasses: AL2023, the default root volume.
pub const DEFAULT_NODECLASS_YAML: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
"#;

fn parse_default<T: serde::de::DeserializeOwned>(
    what: &'static str,
    text: &str,
) -> Result<T, SimulateError> {
    let docs = karpenter_api::yaml::parse_documents(text).map_err(|e| SimulateError::Default {
        what,
        message: e.describe(),
    })?;
    let doc = docs.first().ok_or(SimulateError::Default {
        what,
        message: "empty".to_string(),
    })?;
    karpenter_api::yaml::from_value(doc).map_err(|e| SimulateError::Default {
        what,
        message: e.to_string(),
    })
}

/// The default NodePool ([`DEFAULT_NODEPOOL_YAML`]).
pub fn default_nodepool() -> Result<NodePool, SimulateError> {
    parse_default("NodePool", DEFAULT_NODEPOOL_YAML)
}

/// The default EC2NodeClass ([`DEFAULT_NODECLASS_YAML`]).
pub fn default_nodeclass() -> Result<EC2NodeClass, SimulateError> {
    parse_default("EC2NodeClass", DEFAULT_NODECLASS_YAML)
}

/// The NodePool's name.
pub fn name_of(pool: &NodePool) -> String {
    pool.metadata.name.clone().unwrap_or_default()
}

/// Converts a v1 NodePool into the solver's NodePool through the workspace's one conversion
/// ([`karpenter_scheduling::v1::node_pool`]).
pub fn to_scheduling(pool: &NodePool) -> Result<karpenter_scheduling::NodePool, SimulateError> {
    Ok(karpenter_scheduling::v1::node_pool(pool)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::validation::{Outcome, validate_document};

    fn validates(text: &str) -> Outcome {
        let docs = karpenter_api::yaml::parse_documents(text).unwrap_or_default();
        docs.first().map_or(
            Outcome::Skipped {
                reason: "no document".into(),
            },
            validate_document,
        )
    }

    #[test]
    fn the_default_nodepool_and_nodeclass_are_valid_v1_objects() {
        assert_eq!(validates(DEFAULT_NODEPOOL_YAML), Outcome::Valid);
        assert_eq!(validates(DEFAULT_NODECLASS_YAML), Outcome::Valid);
    }

    use karpenter_scheduling::Operator;

    #[test]
    fn the_default_nodepool_allows_spot_and_on_demand_c_m_r_amd64_linux() {
        let pool = default_nodepool().and_then(|p| to_scheduling(&p));
        let Ok(pool) = pool else {
            panic!("default nodepool converts: {pool:?}");
        };
        assert_eq!(pool.name, "default");
        let values = |key: &str| {
            pool.requirements
                .iter()
                .find(|r| r.key == key)
                .map(|r| (r.operator, r.values.clone()))
        };
        assert_eq!(
            values("karpenter.sh/capacity-type"),
            Some((Operator::In, vec!["on-demand".into(), "spot".into()]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-category"),
            Some((Operator::In, vec!["c".into(), "m".into(), "r".into()]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-generation"),
            Some((Operator::Gt, vec!["2".into()]))
        );
        assert_eq!(
            values("kubernetes.io/arch"),
            Some((Operator::In, vec!["amd64".into()]))
        );
    }
}
