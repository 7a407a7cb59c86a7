//! CustomResourceDefinitions for the v1 kinds and `autoscaling.x-k8s.io/v1beta1`
//! CapacityBuffer, generated from the Rust types.
//!
//! The schemas carry the defaults, enums, patterns, bounds and `x-kubernetes-validations` (CEL)
//! rules declared on the types, so the API server enforces the same rules as
//! [`crate::validation`]. The YAML committed under `charts/karpenter/crds/` is this output;
//! CI fails when they drift.
//!
//! A few schema details cannot be said with schemars attributes (patterns of map values, a
//! field-level default to drop, CEL on a list item's field); `align_with_upstream` sets them
//! on the generated schema. The differential CRD test (`crates/karpenter-api/tests/differential`)
//! checks the result against upstream's own CRDs in a real API server.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::autoscaling::v1beta1::CapacityBuffer;
use crate::v1::{EC2NodeClass, NodeClaim, NodePool};
use crate::v1alpha1::NodeOverlay;
use crate::yaml::{WriteError, to_yaml};

/// One generated CRD and the file name it is committed under.
#[derive(Debug, Clone)]
pub struct GeneratedCrd {
    pub file_name: &'static str,
    pub crd: CustomResourceDefinition,
}

/// The three v1 CRDs, the v1alpha1 NodeOverlay and the CapacityBuffer CRD, in a stable order.
pub fn all() -> Vec<GeneratedCrd> {
    vec![
        GeneratedCrd {
            file_name: "karpenter.sh_nodepools.yaml",
            crd: align_with_upstream(NodePool::crd()),
        },
        GeneratedCrd {
            file_name: "karpenter.sh_nodeclaims.yaml",
            crd: align_with_upstream(NodeClaim::crd()),
        },
        GeneratedCrd {
            file_name: "karpenter.k8s.aws_ec2nodeclasses.yaml",
            crd: align_with_upstream(EC2NodeClass::crd()),
        },
        GeneratedCrd {
            file_name: "karpenter.sh_nodeoverlays.yaml",
            crd: align_with_upstream(NodeOverlay::crd()),
        },
        GeneratedCrd {
            file_name: "autoscaling.x-k8s.io_capacitybuffers.yaml",
            crd: align_with_upstream(CapacityBuffer::crd()),
        },
    ]
}

/// Upstream's pattern for label keys and taint keys and values: a qualified name whose optional
/// prefix is a lower-case DNS subdomain.
pub const UPSTREAM_QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// Upstream's pattern for label values.
const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// The Kubernetes quantity grammar, as upstream's CRDs spell it.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The CEL rule on a NodeOverlay requirement's key restricting the `karpenter.sh` domain.
const KARPENTER_DOMAIN_KEY_RULE: &str = r#"self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#;
/// The CEL rule on a NodeOverlay requirement's key restricting the `karpenter.k8s.aws` domain,
/// as the AWS provider v1.15.1 generates it (without the capacity-reservation, tenancy and
/// placement-group labels its NodePool rule has).
const OVERLAY_AWS_DOMAIN_KEY_RULE: &str = r#"self in ["karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex"] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")"#;

/// The CEL rule restricting requirement keys of the `karpenter.k8s.aws` domain to its
/// well-known labels.
fn aws_domain_rule(subject: &str) -> String {
    let known = crate::labels::AWS_WELL_KNOWN_LABELS
        .iter()
        .map(|l| format!("{l:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{subject} in [{known}] || !{subject}.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\")"
    )
}

fn property<'a>(
    schema: &'a mut serde_json::Value,
    path: &[&str],
) -> Option<&'a mut serde_json::Value> {
    let mut node = schema;
    for step in path {
        node = match *step {
            "[]" => node.get_mut("items")?,
            "{}" => node.get_mut("additionalProperties")?,
            name => node.get_mut("properties")?.get_mut(name)?,
        };
    }
    Some(node)
}

fn set(schema: &mut serde_json::Value, path: &[&str], key: &str, value: serde_json::Value) {
    if let Some(serde_json::Value::Object(map)) = property(schema, path) {
        map.insert(key.to_owned(), value);
    }
}

fn remove(schema: &mut serde_json::Value, path: &[&str], key: &str) {
    if let Some(serde_json::Value::Object(map)) = property(schema, path) {
        map.remove(key);
    }
}

fn align_requirements(schema: &mut serde_json::Value, list: &[&str], hostname_rule: bool) {
    let key: Vec<&str> = list.iter().copied().chain(["[]", "key"]).collect();
    let values: Vec<&str> = list.iter().copied().chain(["[]", "values", "[]"]).collect();
    set(
        schema,
        &key,
        "pattern",
        UPSTREAM_QUALIFIED_NAME_PATTERN.into(),
    );
    let mut rules = vec![serde_json::json!({
        "rule": aws_domain_rule("self"),
        "message": "label domain \"karpenter.k8s.aws\" is restricted",
    })];
    if hostname_rule {
        rules.push(serde_json::json!({
            "rule": "self != \"kubernetes.io/hostname\"",
            "message": "label \"kubernetes.io/hostname\" is restricted",
        }));
    }
    set(schema, &key, "x-kubernetes-validations", rules.into());
    // Upstream's value pattern sits on the list, where the API server ignores it: values are
    // checked by the controller at runtime (and by `karpenter validate`), not at admission.
    remove(schema, &values, "pattern");
    remove(schema, &values, "maxLength");
}

fn align_taints(schema: &mut serde_json::Value, spec: &[&str]) {
    for list in ["taints", "startupTaints"] {
        for field in ["key", "value"] {
            let path: Vec<&str> = spec.iter().copied().chain([list, "[]", field]).collect();
            set(
                schema,
                &path,
                "pattern",
                UPSTREAM_QUALIFIED_NAME_PATTERN.into(),
            );
        }
    }
}

fn align_quantities(schema: &mut serde_json::Value, map: &[&str]) {
    let values: Vec<&str> = map.iter().copied().chain(["{}"]).collect();
    set(schema, &values, "pattern", QUANTITY_PATTERN.into());
    set(schema, &values, "x-kubernetes-int-or-string", true.into());
}

/// Sets what the attributes cannot say (see the module docs).
fn align_with_upstream(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let kind = crd.spec.names.kind.clone();
    for version in &mut crd.spec.versions {
        let Some(props) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let Ok(mut schema) = serde_json::to_value(&*props) else {
            continue;
        };
        match kind.as_str() {
            "NodePool" => {
                let tspec = ["spec", "template", "spec"];
                align_requirements(
                    &mut schema,
                    &["spec", "template", "spec", "requirements"],
                    false,
                );
                align_taints(&mut schema, &tspec);
                align_quantities(&mut schema, &["spec", "limits"]);
                let labels = ["spec", "template", "metadata", "labels", "{}"];
                set(&mut schema, &labels, "pattern", LABEL_VALUE_PATTERN.into());
                set(&mut schema, &labels, "maxLength", 63.into());
            }
            "NodeClaim" => {
                align_requirements(&mut schema, &["spec", "requirements"], true);
                align_taints(&mut schema, &["spec"]);
                align_quantities(&mut schema, &["spec", "resources", "requests"]);
            }
            "NodeOverlay" => {
                let key = ["spec", "requirements", "[]", "key"];
                set(
                    &mut schema,
                    &key,
                    "pattern",
                    UPSTREAM_QUALIFIED_NAME_PATTERN.into(),
                );
                // The AWS provider's copy of the CRD: the karpenter.sh domain, the hostname and
                // the karpenter.k8s.aws domain (its older list of well-known labels) restricted.
                set(
                    &mut schema,
                    &key,
                    "x-kubernetes-validations",
                    serde_json::json!([
                        {"rule": KARPENTER_DOMAIN_KEY_RULE, "message": "label domain \"karpenter.sh\" is restricted"},
                        {"rule": "self != \"kubernetes.io/hostname\"", "message": "label \"kubernetes.io/hostname\" is restricted"},
                        {"rule": OVERLAY_AWS_DOMAIN_KEY_RULE, "message": "label domain \"karpenter.k8s.aws\" is restricted"},
                    ]),
                );
                align_quantities(&mut schema, &["spec", "capacity"]);
            }
            "CapacityBuffer" => align_quantities(&mut schema, &["spec", "limits"]),
            _ => {}
        }
        if let Ok(aligned) = serde_json::from_value(schema) {
            *props = aligned;
        }
    }
    crd
}

/// A generated CRD as the YAML committed in the chart.
pub fn render(crd: &GeneratedCrd) -> Result<String, WriteError> {
    let body = to_yaml(&crd.crd)?;
    Ok(format!(
        "# Generated by `karpenter crds`; do not edit. Regenerate with `karpenter crds --write charts/karpenter/crds`.\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(crd: &CustomResourceDefinition) -> serde_json::Value {
        serde_json::to_value(&crd.spec.versions[0].schema).expect("schema serializes")
    }

    #[test]
    fn crds_have_upstream_names_scope_and_subresources() {
        let crds = all();
        let names: Vec<_> = crds
            .iter()
            .map(|c| c.crd.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "nodepools.karpenter.sh",
                "nodeclaims.karpenter.sh",
                "ec2nodeclasses.karpenter.k8s.aws",
                "nodeoverlays.karpenter.sh",
                "capacitybuffers.autoscaling.x-k8s.io"
            ]
        );
        for c in &crds[..3] {
            assert_eq!(c.crd.spec.scope, "Cluster");
            assert_eq!(
                c.crd.spec.names.categories.as_deref(),
                Some(&["karpenter".to_owned()][..])
            );
            let version = &c.crd.spec.versions[0];
            assert!(version.served && version.storage);
            assert!(
                version
                    .subresources
                    .as_ref()
                    .is_some_and(|s| s.status.is_some())
            );
        }
        let nodepool = &crds[0].crd.spec.versions[0];
        let scale = nodepool
            .subresources
            .as_ref()
            .and_then(|s| s.scale.as_ref())
            .expect("nodepool scale");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.nodes");
        assert_eq!(
            crds[2].crd.spec.names.short_names.as_deref(),
            Some(&["ec2nc".to_owned(), "ec2ncs".to_owned()][..])
        );
    }

    #[test]
    fn nodepool_schema_carries_defaults_and_cel_rules() {
        let s = schema(&all()[0].crd);
        let spec = &s["openAPIV3Schema"]["properties"]["spec"];
        let template_spec = &spec["properties"]["template"]["properties"]["spec"];
        assert_eq!(
            template_spec["properties"]["expireAfter"]["default"],
            "720h"
        );
        assert_eq!(
            spec["properties"]["disruption"]["properties"]["consolidationPolicy"]["default"],
            "WhenEmptyOrUnderutilized"
        );
        assert_eq!(
            spec["properties"]["disruption"]["properties"]["budgets"]["default"][0]["nodes"],
            "10%"
        );
        let rules =
            template_spec["properties"]["requirements"]["x-kubernetes-validations"].to_string();
        assert!(rules.contains("must have a value defined"), "{rules}");
        let rules =
            template_spec["properties"]["nodeClassRef"]["x-kubernetes-validations"].to_string();
        assert!(rules.contains("nodeClassRef.group is immutable"), "{rules}");
        assert_eq!(
            spec["properties"]["weight"]["maximum"].as_f64(),
            Some(100.0)
        );
    }

    #[test]
    fn nodepool_consolidate_after_defaults_to_zero_and_is_optional() {
        let s = schema(&all()[0].crd);
        let disruption = &s["openAPIV3Schema"]["properties"]["spec"]["properties"]["disruption"];
        assert_eq!(
            disruption["properties"]["consolidateAfter"]["default"],
            "0s"
        );
        assert!(
            disruption.get("required").is_none(),
            "disruption requires {}",
            disruption["required"]
        );
    }

    #[test]
    fn nodepool_budget_reasons_include_unhealthy() {
        let s = schema(&all()[0].crd);
        let reasons = &s["openAPIV3Schema"]["properties"]["spec"]["properties"]["disruption"]["properties"]
            ["budgets"]["items"]["properties"]["reasons"]["items"]["enum"];
        assert_eq!(
            reasons,
            &serde_json::json!(["Underutilized", "Empty", "Drifted", "Unhealthy"])
        );
    }

    #[test]
    fn ec2nodeclass_schema_requires_exactly_one_of_role_and_instance_profile() {
        let s = schema(&all()[2].crd);
        let rules =
            s["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"].to_string();
        assert!(
            rules.contains("exactly one of ['role', 'instanceProfile']"),
            "{rules}"
        );
        let md =
            &s["openAPIV3Schema"]["properties"]["spec"]["properties"]["metadataOptions"]["default"];
        assert_eq!(md["httpPutResponseHopLimit"], 1);
        assert_eq!(md["httpTokens"], "required");
    }

    #[test]
    fn nodeoverlay_schema_carries_upstreams_rules() {
        let crd = &all()[3].crd;
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["overlays".to_owned()][..])
        );
        let s = schema(crd);
        let spec = &s["openAPIV3Schema"]["properties"]["spec"];
        let rules = spec["x-kubernetes-validations"].to_string();
        assert!(
            rules.contains("cannot set both 'price' and 'priceAdjustment'"),
            "{rules}"
        );
        let props = &spec["properties"];
        assert_eq!(props["weight"]["minimum"].as_f64(), Some(1.0));
        assert_eq!(props["weight"]["maximum"].as_f64(), Some(10000.0));
        assert_eq!(props["price"]["pattern"], r"^\d+(\.\d+)?$");
        let capacity = props["capacity"]["x-kubernetes-validations"].to_string();
        assert!(
            capacity.contains("invalid resource restricted"),
            "{capacity}"
        );
        assert_eq!(
            props["capacity"]["additionalProperties"]["x-kubernetes-int-or-string"],
            true
        );
        let requirements = props["requirements"]["x-kubernetes-validations"].to_string();
        assert!(
            requirements.contains("operator 'NotIn' must have a value"),
            "{requirements}"
        );
        let key = props["requirements"]["items"]["properties"]["key"]["x-kubernetes-validations"]
            .to_string();
        assert!(key.contains("kubernetes.io/hostname"), "{key}");
        assert_eq!(spec["required"], serde_json::json!(["requirements"]));
    }

    #[test]
    fn capacitybuffer_crd_is_namespaced_with_upstreams_cel_rules_and_default_strategy() {
        let c = &all()[4].crd;
        assert_eq!(c.spec.scope, "Namespaced");
        assert_eq!(
            c.spec.names.short_names.as_deref(),
            Some(&["cb".to_owned()][..])
        );
        assert_eq!(
            c.spec.names.categories.as_deref(),
            Some(&["autoscaling".to_owned()][..])
        );
        let s = schema(c);
        let spec = &s["openAPIV3Schema"]["properties"]["spec"];
        let rules = spec["x-kubernetes-validations"].to_string();
        assert!(
            rules.contains("!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)"),
            "{rules}"
        );
        assert!(
            rules.contains("!(has(self.podTemplateRef) && has(self.scalableRef))"),
            "{rules}"
        );
        assert_eq!(
            spec["properties"]["provisioningStrategy"]["default"],
            "buffer.x-k8s.io/active-capacity"
        );
        assert_eq!(
            spec["properties"]["replicas"]["minimum"].as_f64(),
            Some(0.0)
        );
        assert_eq!(
            spec["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"],
            true
        );
        let status = &s["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
    }

    #[test]
    fn rendered_crds_parse_back_as_yaml() {
        for c in all() {
            let text = render(&c).expect("renders");
            let docs = crate::yaml::parse_documents(&text).expect("parses");
            assert_eq!(docs.len(), 1);
            assert_eq!(docs[0]["kind"], "CustomResourceDefinition");
        }
    }
}
