//! NodePool limits at launch time (upstream `Limits.ExceededBy`): the solver already keeps
//! each batch within what is left, but launches from concurrent batches, or a limit lowered
//! meanwhile, are caught here before the NodeClaim is created.

use karpenter_scheduling::ResourceList;

/// The first limited resource the pool's current usage exceeds, as `cpu: 1002 in use, limit
/// 1000`; `None` when every limit holds. `usage` includes the `nodes` pseudo-resource.
pub fn exceeded(limits: &ResourceList, usage: &ResourceList) -> Option<String> {
    limits.iter().find_map(|(name, limit)| {
        let used = usage.get(name);
        (used.millis() > limit.millis()).then(|| format!("{name}: {used} in use, limit {limit}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::Quantity;

    #[test]
    fn usage_above_a_limit_names_the_resource_and_usage_at_the_limit_is_allowed() {
        let limits = ResourceList::new()
            .with("cpu", Quantity::from_units(10))
            .with("nodes", Quantity::from_units(2));
        let at = ResourceList::new()
            .with("cpu", Quantity::from_units(10))
            .with("nodes", Quantity::from_units(2));
        assert_eq!(exceeded(&limits, &at), None);
        let over = at.clone().with("nodes", Quantity::from_units(3));
        assert_eq!(
            exceeded(&limits, &over).as_deref(),
            Some("nodes: 3 in use, limit 2")
        );
        assert_eq!(
            exceeded(&ResourceList::new(), &over),
            None,
            "no limits, nothing exceeded"
        );
    }
}
