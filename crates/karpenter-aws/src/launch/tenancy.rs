//! Tenancy (upstream's `karpenter.k8s.aws/instance-tenancy`, a well-known label with the values
//! `default` and `dedicated`): every EC2 instance type can be launched either way, so each one
//! carries the label choice `In [default, dedicated]` ([`offer`]); a NodeClaim launches with
//! the tenancy its requirements allow, `default` when both are (upstream's `getTenancyType`,
//! [`for_claim`]); the launch template says it (`Placement.Tenancy`) and the node is labelled
//! with it.
//!
//! Prices are upstream's: a dedicated instance is priced as the shared one (the on-demand
//! price list Karpenter reads is the `Shared` tenancy's; EC2's per-region dedicated fee is not
//! modelled by upstream either).

use karpenter_api::labels::{INSTANCE_TENANCY, INSTANCE_TENANCY_VALUES};
use karpenter_api::v1::NodeClaim;
use karpenter_cloud::InstanceTypeInfo;

/// EC2's `default` tenancy (shared hardware).
pub const DEFAULT: &str = "default";
/// EC2's `dedicated` tenancy.
pub const DEDICATED: &str = "dedicated";

/// Every type may launch with either tenancy (upstream's instance-type requirement
/// `instance-tenancy In [default, dedicated]`).
pub fn offer(infos: &mut [InstanceTypeInfo]) {
    for info in infos {
        info.label_choices.insert(
            INSTANCE_TENANCY.to_owned(),
            INSTANCE_TENANCY_VALUES
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
        );
    }
}

/// The tenancy a NodeClaim launches with: `default` unless its requirements rule it out and
/// allow `dedicated`.
pub fn for_claim(claim: &NodeClaim) -> &'static str {
    let requirements: Vec<_> = karpenter_scheduling::v1::node_claim_requirements(claim)
        .into_iter()
        .filter(|r| r.key == INSTANCE_TENANCY)
        .collect();
    [DEFAULT, DEDICATED]
        .into_iter()
        .find(|tenancy| requirements.iter().all(|r| r.matches(Some(tenancy))))
        .unwrap_or(DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(requirements: serde_json::Value) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": requirements}
        }))
        .unwrap()
    }

    #[test]
    fn a_claim_launches_dedicated_only_when_its_requirements_rule_default_out() {
        assert_eq!(for_claim(&claim(serde_json::json!([]))), DEFAULT);
        let dedicated = serde_json::json!([
            {"key": INSTANCE_TENANCY, "operator": "In", "values": ["dedicated"]}
        ]);
        assert_eq!(for_claim(&claim(dedicated)), DEDICATED);
        let both = serde_json::json!([
            {"key": INSTANCE_TENANCY, "operator": "In", "values": ["dedicated", "default"]}
        ]);
        assert_eq!(for_claim(&claim(both)), DEFAULT);
        let not_default = serde_json::json!([
            {"key": INSTANCE_TENANCY, "operator": "NotIn", "values": ["default"]}
        ]);
        assert_eq!(for_claim(&claim(not_default)), DEDICATED);
    }

    #[test]
    fn every_type_may_launch_with_either_tenancy() {
        let mut infos = vec![InstanceTypeInfo {
            name: "m5.large".into(),
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: Vec::new(),
            label_choices: Default::default(),
        }];
        offer(&mut infos);
        assert_eq!(
            infos[0].label_choices.get(INSTANCE_TENANCY),
            Some(&vec![DEFAULT.to_owned(), DEDICATED.to_owned()])
        );
    }
}
