//! `SCHEDULER_CONFIG` / `--scheduler-config` (upstream v1.15): an inline YAML or JSON document
//! mirroring the parts of the cluster's kube-scheduler configuration Karpenter's simulation must
//! follow; today only `podTopologySpread.defaultConstraints`
//! ([`karpenter_scheduling::default_spread`]). Empty: none. Unknown fields and invalid
//! constraints fail at start, naming the field.

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

/// The parsed document.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerConfig {
    #[serde(default)]
    pub pod_topology_spread: Option<PodTopologySpreadConfig>,
}

/// kube-scheduler's PodTopologySpread plugin arguments that are mirrored.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodTopologySpreadConfig {
    /// Applied to every pod without `topologySpreadConstraints` of its own, each with the
    /// selector deduced for the pod.
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

impl SchedulerConfig {
    /// The default constraints (empty: none).
    pub fn default_constraints(&self) -> &[TopologySpreadConstraint] {
        self.pod_topology_spread
            .as_ref()
            .map(|p| p.default_constraints.as_slice())
            .unwrap_or_default()
    }
}

/// Parses and validates the setting's value; `None` when empty.
pub fn parse_scheduler_config(input: &str) -> Result<Option<SchedulerConfig>, String> {
    if input.trim().is_empty() {
        return Ok(None);
    }
    let mut documents = karpenter_api::yaml::parse_documents(input)
        .map_err(|e| format!("not a YAML or JSON document: {}", e.describe()))?;
    if documents.len() != 1 {
        return Err(format!("expected one document, got {}", documents.len()));
    }
    let document = documents.remove(0);
    if !document.is_object() {
        return Err(format!(
            "expected a mapping such as `podTopologySpread: {{defaultConstraints: [...]}}`, got {document}; \
             SCHEDULER_CONFIG is the document itself, not a file path (as upstream v1.15)"
        ));
    }
    let config: SchedulerConfig = karpenter_api::yaml::from_value(&document)
        .map_err(|e| format!("decoding scheduler config: {e}"))?;
    karpenter_scheduling::default_spread::validate(config.default_constraints())
        .map_err(|e| format!("validating scheduler config, {e}"))?;
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inline_yaml_or_json_document_gives_the_default_constraints() {
        let yaml = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: ScheduleAnyway\n";
        let config = parse_scheduler_config(yaml).unwrap().unwrap();
        assert_eq!(config.default_constraints().len(), 1);
        assert_eq!(
            config.default_constraints()[0].topology_key,
            "topology.kubernetes.io/zone"
        );
        let json = r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule"}]}}"#;
        let config = parse_scheduler_config(json).unwrap().unwrap();
        assert_eq!(config.default_constraints()[0].max_skew, 2);
        assert_eq!(parse_scheduler_config("").unwrap(), None);
        assert_eq!(
            parse_scheduler_config("{}")
                .unwrap()
                .unwrap()
                .default_constraints(),
            []
        );
    }

    #[test]
    fn a_path_an_unknown_field_or_an_invalid_constraint_is_refused_naming_it() {
        let path = parse_scheduler_config("/etc/karpenter/scheduler.yaml").unwrap_err();
        assert!(path.contains("not a file path"), "{path}");
        let unknown =
            parse_scheduler_config("podTopologySpread: {defaultConstraint: []}").unwrap_err();
        assert!(unknown.contains("defaultConstraint"), "{unknown}");
        let invalid = parse_scheduler_config(
            "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}}]}",
        )
        .unwrap_err();
        assert!(
            invalid
                .contains("podTopologySpread.defaultConstraints[0].labelSelector must not be set"),
            "{invalid}"
        );
    }
}
