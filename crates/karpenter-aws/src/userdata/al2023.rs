//! AL2023 user data: a nodeadm `NodeConfig` (`node.eks.aws/v1alpha1`) in a MIME multipart
//! archive (upstream `nodeadm.go`, `mime/mime.go`).
//!
//! Owns: Karpenter's `NodeConfig` (cluster name, endpoint, CA, service CIDR, RAID0 local
//! storage, the raw `spec.kubelet` map plus the Karpenter-owned `registerWithTaints`, and the
//! `--node-labels` flag) and the merge: the user's entries first (MIME parts keep only their
//! `Content-Type`, as upstream's archive does; YAML becomes an `application/node.eks.aws`
//! part, anything else a shell script), Karpenter's `NodeConfig` last so nodeadm lets it win.
//! Must not: change the user's entries.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::mime::{self, CONTENT_TYPE_NODE_CONFIG, CONTENT_TYPE_SHELL, Part};
use super::yaml::to_yaml;
use super::{BootstrapInput, UserDataError, go_quote};

const FAMILY: &str = "AL2023";

/// The merged archive.
pub fn render(input: &BootstrapInput) -> Result<String, UserDataError> {
    let node_config = node_config(input)?;
    let mut parts = user_entries(input.custom_user_data.as_deref())?;
    parts.push(Part::new(CONTENT_TYPE_NODE_CONFIG, node_config));
    mime::serialize(&parts).map_err(|error| invalid(error.to_string()))
}

fn invalid(reason: String) -> UserDataError {
    UserDataError::InvalidUserData {
        family: FAMILY,
        reason,
    }
}

/// The user's entries, as upstream's `parseUserData` reads them.
fn user_entries(user_data: Option<&str>) -> Result<Vec<Part>, UserDataError> {
    let Some(user_data) = user_data.filter(|u| !u.is_empty()) else {
        return Ok(Vec::new());
    };
    if mime::looks_like_mime(user_data) {
        let parts = mime::parse(user_data).map_err(|error| invalid(error.to_string()))?;
        return Ok(parts
            .into_iter()
            .map(|part| Part::new(part.content_type(), part.body.clone()))
            .collect());
    }
    let is_yaml_mapping =
        serde_saphyr::from_str::<BTreeMap<String, serde::de::IgnoredAny>>(user_data).is_ok();
    let content_type = if is_yaml_mapping {
        CONTENT_TYPE_NODE_CONFIG
    } else {
        CONTENT_TYPE_SHELL
    };
    Ok(vec![Part::new(content_type, user_data)])
}

/// `# Karpenter Generated NodeConfig` and the YAML document.
pub fn node_config(input: &BootstrapInput) -> Result<String, UserDataError> {
    let cluster = &input.cluster;
    let cidr = cluster
        .service_cidr
        .as_deref()
        .filter(|cidr| !cidr.is_empty())
        .ok_or(UserDataError::InvalidClusterFact {
            fact: "service CIDR",
            reason: "AL2023 nodes need it (eks:DescribeCluster ServiceIpv4Cidr/ServiceIpv6Cidr); the EC2NodeClass is not ready".to_string(),
        })?;
    let mut cluster_details = serde_json::Map::new();
    cluster_details.insert("apiServerEndpoint".into(), json!(cluster.endpoint));
    if let Some(ca) = cluster.ca_bundle.as_deref().filter(|ca| !ca.is_empty()) {
        // NodeConfig carries the CA as bytes: decoded here, encoded again by the YAML rendering.
        let bytes =
            STANDARD
                .decode(ca.trim())
                .map_err(|error| UserDataError::InvalidClusterFact {
                    fact: "CA bundle",
                    reason: format!("not base64: {error}"),
                })?;
        cluster_details.insert("certificateAuthority".into(), json!(STANDARD.encode(bytes)));
    }
    cluster_details.insert("cidr".into(), json!(cidr));
    cluster_details.insert("name".into(), json!(cluster.name));

    let mut kubelet_config: serde_json::Map<String, Value> = input
        .kubelet
        .raw
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let taints: Vec<Value> = input
        .taints
        .iter()
        .map(|taint| {
            let mut object = serde_json::Map::new();
            object.insert("effect".into(), json!(taint.effect.as_str()));
            object.insert("key".into(), json!(taint.key));
            if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty()) {
                object.insert("value".into(), json!(value));
            }
            Value::Object(object)
        })
        .collect();
    kubelet_config.insert("registerWithTaints".into(), Value::Array(taints));
    let mut kubelet = serde_json::Map::new();
    kubelet.insert("config".into(), Value::Object(kubelet_config));
    if !input.labels.is_empty() {
        let labels: Vec<String> = input
            .labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        kubelet.insert(
            "flags".into(),
            json!([format!("--node-labels={}", go_quote(&labels.join(",")))]),
        );
    }
    let local_storage = if input.raid0() {
        json!({"strategy": "RAID0"})
    } else {
        json!({})
    };
    let document = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {},
        "spec": {
            "cluster": Value::Object(cluster_details),
            "containerd": {},
            "instance": {"localStorage": local_storage},
            "kubelet": Value::Object(kubelet),
        }
    });
    Ok(format!(
        "# Karpenter Generated NodeConfig\n{}",
        to_yaml(&document)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_user_data_becomes_a_node_config_part_and_anything_else_a_shell_part() {
        let yaml = user_entries(Some(
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n",
        ));
        let shell = user_entries(Some("#!/bin/bash\necho hello\n"));
        let types = |parts: Result<Vec<Part>, UserDataError>| {
            parts.map(|p| {
                p.iter()
                    .map(|p| p.content_type().to_string())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(types(yaml), Ok(vec![CONTENT_TYPE_NODE_CONFIG.to_string()]));
        assert_eq!(types(shell), Ok(vec![CONTENT_TYPE_SHELL.to_string()]));
    }

    #[test]
    fn mime_user_data_parts_keep_only_their_content_type() {
        let text = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/x-shellscript\nX-Extra: 1\n\necho\n--b--\n";
        assert_eq!(
            user_entries(Some(text)),
            Ok(vec![Part::new("text/x-shellscript", "echo")])
        );
    }
}
