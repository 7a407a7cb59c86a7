//! A NodeClaim from a NodePool's template alone (upstream `NewNodeClaimTemplate`), with no pod
//! to place: what a static NodePool (`spec.replicas`) launches, both to reach its replica count
//! and to replace a drifted node.
//!
//! The claim carries the pool's requirements, labels and taints and every instance type of the
//! pool that fits its template and carries its DaemonSets, cheapest first (the cloud provider
//! picks the cheapest offering it can launch at create time). It is found by asking the solver
//! to place one pod that requests nothing and tolerates everything on this pool only; the pod
//! is then dropped, so the claim's requests are the DaemonSets' overhead.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::v1 as api;

use crate::input::{InstanceType, SolveInput, SolveOptions};
use crate::output::NewNodeClaim;
use crate::v1::NodePoolConversionError;

/// No NodeClaim can be made from the pool's template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateClaimError {
    #[error(transparent)]
    Invalid(#[from] NodePoolConversionError),
    #[error("no instance type of nodepool {pool} fits its template")]
    NoInstanceType { pool: String },
}

/// The NodeClaim `pool`'s template alone asks for, from the instance types offered to it
/// (`catalog`), with the cluster's `daemonsets` counted on it.
pub fn template_claim(
    pool: &api::NodePool,
    catalog: &[InstanceType],
    daemonsets: &[DaemonSet],
    options: &SolveOptions,
) -> Result<NewNodeClaim, TemplateClaimError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let converted = crate::v1::node_pool(pool)?;
    let probe_name = format!("nodepool-template-{name}");
    let probe = Pod {
        metadata: ObjectMeta {
            name: Some(probe_name.clone()),
            namespace: Some("default".to_owned()),
            uid: Some(probe_name),
            ..Default::default()
        },
        spec: Some(PodSpec {
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    let input = SolveInput {
        node_pools: vec![converted],
        instance_types: BTreeMap::from([(name.clone(), catalog.to_vec())]).into(),
        daemonsets: daemonsets.to_vec(),
        pods: vec![Arc::new(probe.into())],
        options: options.clone(),
        ..Default::default()
    };
    let mut claim = crate::solve(&input)
        .new_node_claims
        .into_iter()
        .next()
        .ok_or(TemplateClaimError::NoInstanceType { pool: name })?;
    claim.pods.clear();
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::InstanceTypeBuilder;

    fn instance_type(name: &str, cpu: &str, price: f64) -> InstanceType {
        InstanceTypeBuilder::new(name)
            .resource("cpu", cpu)
            .resource("memory", "16Gi")
            .resource("pods", "110")
            .offering("zone-a", "on-demand", price, true)
            .build()
    }

    fn pool(json: serde_json::Value) -> api::NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "static"},
            "spec": {"replicas": 2, "template": {"spec": json}}
        }))
        .unwrap_or_else(|e| panic!("test NodePool parses: {e}"))
    }

    #[test]
    fn a_template_claim_offers_every_fitting_instance_type_cheapest_first_and_holds_no_pod() {
        let pool = pool(serde_json::json!({
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [],
            "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        }));
        let catalog = vec![
            instance_type("big", "8", 0.4),
            instance_type("small", "2", 0.1),
        ];
        let claim = template_claim(&pool, &catalog, &[], &SolveOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(claim.node_pool, "static");
        assert!(claim.pods.is_empty());
        let names: Vec<&str> = claim
            .instance_type_options
            .iter()
            .map(|o| &*o.name)
            .collect();
        assert_eq!(names, ["small", "big"]);
    }

    #[test]
    fn a_template_no_instance_type_satisfies_is_an_error_naming_the_pool() {
        let pool = pool(serde_json::json!({
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["absent"]}]
        }));
        let catalog = vec![instance_type("small", "2", 0.1)];
        assert_eq!(
            template_claim(&pool, &catalog, &[], &SolveOptions::default()),
            Err(TemplateClaimError::NoInstanceType {
                pool: "static".to_owned()
            })
        );
    }
}
