//! `simulate` with NodeOverlays: the plan with the manifests' overlays and the plan without
//! them, side by side, and what became of each overlay (applied to how many instance types,
//! invalid, or conflicting with which one), so a user sees what an overlay changes before
//! applying it to a cluster. Upstream has no such preview (its design proposes one as future
//! tooling).

use std::fmt::Write as _;

use karpenter_cloud::Catalog;
use karpenter_scheduling::overlay::Verdict;
use serde::Serialize;

use crate::error::SimulateError;
use crate::load::Manifests;
use crate::plan::{Plan, plan};
use crate::render::{dollars, plan_table, table};
use crate::scenario::Scenario;
use karpenter_cloud::pool_types::PricingOptions;

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverlayVerdict {
    pub name: String,
    /// Applied (valid and conflict-free).
    pub applied: bool,
    /// Instance types (over all NodePools) it applied to.
    pub instance_types: usize,
    /// Why it was not applied.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The two plans and the overlays' verdicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverlayComparison {
    pub overlays: Vec<OverlayVerdict>,
    pub without_overlays: Plan,
    pub with_overlays: Plan,
}

/// Plans the manifests with and without their NodeOverlays. `configure` sets the solver's
/// options of both scenarios alike.
pub fn compare(
    manifests: &Manifests,
    catalog: &Catalog,
    pricing: &PricingOptions,
    configure: impl Fn(&mut Scenario),
) -> Result<OverlayComparison, SimulateError> {
    let mut with = Scenario::prepare(manifests, catalog, pricing)?;
    configure(&mut with);
    let bare = Manifests {
        node_overlays: Vec::new(),
        ..manifests.clone()
    };
    let mut without = Scenario::prepare(&bare, catalog, pricing)?;
    configure(&mut without);
    let overlays = with
        .overlays
        .verdicts
        .iter()
        .map(|(name, verdict)| OverlayVerdict {
            name: name.clone(),
            applied: verdict.is_applied(),
            instance_types: match verdict {
                Verdict::Applied { instance_types } => *instance_types,
                _ => 0,
            },
            message: match verdict {
                Verdict::Applied { .. } => String::new(),
                Verdict::Invalid(errors) => format!("invalid: {}", errors.join("; ")),
                Verdict::Conflict(conflict) => conflict.to_string(),
            },
        })
        .collect();
    Ok(OverlayComparison {
        overlays,
        without_overlays: plan(&mut without),
        with_overlays: plan(&mut with),
    })
}

/// The comparison as text: the overlays, both plans, and the difference in cost.
pub fn comparison_table(comparison: &OverlayComparison) -> String {
    let mut out = String::new();
    let rows: Vec<Vec<String>> = comparison
        .overlays
        .iter()
        .map(|o| {
            vec![
                o.name.clone(),
                if o.applied { "applied" } else { "NOT applied" }.to_owned(),
                o.instance_types.to_string(),
                o.message.clone(),
            ]
        })
        .collect();
    out.push_str("NodeOverlays\n");
    out.push_str(&table(
        &["NAME", "STATUS", "INSTANCE TYPES", "WHY"],
        &rows,
        &[false, false, true, false],
    ));
    let _ = writeln!(out, "\n=== Without NodeOverlays ===");
    out.push_str(&plan_table(&comparison.without_overlays));
    let _ = writeln!(out, "\n=== With NodeOverlays ===");
    out.push_str(&plan_table(&comparison.with_overlays));
    let (before, after) = (&comparison.without_overlays, &comparison.with_overlays);
    let _ = writeln!(
        out,
        "\nNodeOverlays change the plan from {} node(s), {}/hour to {} node(s), {}/hour ({:+.4}/hour, as the overlays price it); unschedulable pods {} -> {}",
        before.nodes.len(),
        dollars(before.total_per_hour),
        after.nodes.len(),
        dollars(after.total_per_hour),
        after.total_per_hour - before.total_per_hour,
        before.unschedulable.len(),
        after.unschedulable.len(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large]}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: cheap-m5}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  price: "0.01"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  capacity: {example.com/fuse: 4}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: also-m5}
spec:
  requirements: []
  price: "3"
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: app
      image: app
      resources: {requests: {cpu: 500m}}
---
apiVersion: v1
kind: Pod
metadata: {name: fuse, namespace: default}
spec:
  containers:
    - name: app
      image: app
      resources: {requests: {cpu: 500m, example.com/fuse: 1}, limits: {example.com/fuse: 1}}
"#;

    #[test]
    fn the_plan_with_overlays_uses_their_prices_and_capacity_and_the_plan_without_does_not() {
        let manifests =
            Manifests::load_text("overlays.yaml", MANIFESTS).unwrap_or_else(|e| panic!("{e}"));
        let catalog = Catalog::embedded().unwrap_or_else(|e| panic!("{e}"));
        let comparison = compare(&manifests, &catalog, &PricingOptions::default(), |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        let without = &comparison.without_overlays;
        assert_eq!(
            without.unschedulable.len(),
            1,
            "nothing has example.com/fuse"
        );
        assert!(without.nodes.iter().all(|n| n.instance_type == "c5.large"));
        let with = &comparison.with_overlays;
        assert!(with.unschedulable.is_empty(), "{:?}", with.unschedulable);
        assert!(!with.nodes.is_empty());
        for node in &with.nodes {
            assert_eq!(node.instance_type, "m5.large");
            assert!((node.price_per_hour - 0.01).abs() < 1e-9, "{node:?}");
        }
        let also = comparison
            .overlays
            .iter()
            .find(|o| o.name == "also-m5")
            .unwrap_or_else(|| panic!("{:?}", comparison.overlays));
        assert!(
            !also.applied && also.message.contains("cheap-m5"),
            "{also:?}"
        );
        let text = comparison_table(&comparison);
        assert!(text.contains("=== Without NodeOverlays ==="), "{text}");
        assert!(text.contains("NOT applied"), "{text}");
    }
}
