//! NodeOverlay rules: the CRD's (requirements, price patterns, capacity names, weight bounds)
//! and upstream's runtime validation (`RuntimeValidate`: every requirement as a NodePool
//! requirement is checked, and capacity may not name a well-known resource).

use super::rules::{is_quantity, validate_requirement};
use super::{FieldError, Path, Problems};
use crate::v1::{NodeSelectorRequirementWithMinValues, Operator};
use crate::v1alpha1::NodeOverlay;
use crate::v1alpha1::nodeoverlay::{MAX_WEIGHT, PriceChange, RESTRICTED_CAPACITY};

/// Validates a NodeOverlay; empty when it may be applied.
pub fn validate_nodeoverlay(overlay: &NodeOverlay) -> Vec<FieldError> {
    let mut problems = Problems::default();
    let spec = &overlay.spec;
    let spec_path = Path::root().field("spec");
    let requirements = spec_path.field("requirements");
    if spec.requirements.len() > 100 {
        problems.push(
            &requirements,
            format!(
                "at most 100 requirements are allowed, found {}",
                spec.requirements.len()
            ),
        );
    }
    for (i, requirement) in spec.requirements.iter().enumerate() {
        let at = requirements.index(i);
        let as_nodepool = NodeSelectorRequirementWithMinValues {
            key: requirement.key.clone(),
            operator: requirement.operator,
            values: requirement.values.clone(),
            min_values: None,
        };
        for (field, message) in validate_requirement(&as_nodepool) {
            problems.push(&at.field(field), message);
        }
        if requirement.operator == Operator::NotIn && requirement.values.is_empty() {
            problems.push(
                &at.field("values"),
                "requirements with operator 'NotIn' must have a value defined",
            );
        }
    }
    if spec.price.is_some() && spec.price_adjustment.is_some() {
        problems.push(&spec_path, "cannot set both 'price' and 'priceAdjustment'");
    }
    if let Some(price) = &spec.price
        && let Err(e) = PriceChange::parse_price(price)
    {
        problems.push(&spec_path.field("price"), e.to_string());
    }
    if let Some(adjustment) = &spec.price_adjustment
        && let Err(e) = PriceChange::parse_adjustment(adjustment)
    {
        problems.push(&spec_path.field("priceAdjustment"), e.to_string());
    }
    let capacity = spec_path.field("capacity");
    for (name, quantity) in spec.capacity.iter().flatten() {
        if RESTRICTED_CAPACITY.contains(&name.as_str()) {
            problems.push(
                &capacity.key(name),
                format!("invalid capacity: {name} in resource, restricted (a NodeOverlay adds extended resources only)"),
            );
        }
        if !is_quantity(quantity) {
            problems.push(
                &capacity.key(name),
                format!("{:?} is not a quantity (e.g. 1, 100Mi)", quantity.0),
            );
        }
    }
    if let Some(weight) = spec.weight
        && !(1..=MAX_WEIGHT).contains(&weight)
    {
        problems.push(
            &spec_path.field("weight"),
            format!("must be between 1 and {MAX_WEIGHT}, found {weight}"),
        );
    }
    problems.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay(spec: serde_json::Value) -> NodeOverlay {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "o"}, "spec": spec
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn paths(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn an_overlay_with_price_adjustment_and_extended_capacity_is_valid() {
        let o = overlay(serde_json::json!({
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]}
            ],
            "priceAdjustment": "-10%",
            "capacity": {"smarter-devices/fuse": 1, "hugepages-2Mi": "100Mi"},
            "weight": 10
        }));
        assert_eq!(validate_nodeoverlay(&o), Vec::new());
    }

    #[test]
    fn well_known_resources_in_capacity_are_refused() {
        let o = overlay(serde_json::json!({
            "requirements": [], "capacity": {"memory": "10Mi", "example.com/fuse": 1, "pods": 3}
        }));
        assert_eq!(
            paths(&validate_nodeoverlay(&o)),
            ["spec.capacity[memory]", "spec.capacity[pods]"]
        );
    }

    #[test]
    fn restricted_keys_and_valueless_not_in_requirements_are_refused() {
        let o = overlay(serde_json::json!({
            "requirements": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]},
                {"key": "karpenter.sh/unknown", "operator": "Exists"},
                {"key": "team", "operator": "NotIn"},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["abc"]}
            ]
        }));
        assert_eq!(
            paths(&validate_nodeoverlay(&o)),
            [
                "spec.requirements[0].key",
                "spec.requirements[1].key",
                "spec.requirements[2].values",
                "spec.requirements[3].values"
            ]
        );
    }

    #[test]
    fn both_prices_bad_patterns_and_weights_out_of_range_are_refused() {
        let o = overlay(serde_json::json!({
            "requirements": [], "price": "-1", "priceAdjustment": "10%", "weight": 10001
        }));
        assert_eq!(
            paths(&validate_nodeoverlay(&o)),
            ["spec", "spec.price", "spec.priceAdjustment", "spec.weight"]
        );
    }
}
