//! Bottlerocket user data: TOML settings (upstream `bottlerocket.go`,
//! `bottlerocketsettings.go`).
//!
//! Owns: reading the user's TOML, keeping the `settings` table (other top-level keys are
//! dropped, as upstream's typed config drops them) and within `settings.kubernetes` only the keys
//! Bottlerocket's Kubernetes settings model knows (unknown ones are dropped, as upstream does on
//! re-marshal), then writing the Karpenter-owned keys over it: `cluster-name`, `api-server`,
//! `cluster-certificate`, `node-labels` (merged, Karpenter wins), `max-pods`, `cluster-dns-ip`,
//! the reserved/eviction/image-GC/CFS settings from `spec.kubelet`, `node-taints` (replaced
//! wholesale) and, with RAID0, the `000-mount-instance-storage` bootstrap command.
//!
//! Must not: keep a user value for a key Karpenter owns, or accept a known key of the wrong
//! TOML type (upstream's typed decode fails on those too).

use toml::{Table, Value};

use karpenter_api::v1::ec2nodeclass::{AmiStatus, EC2NodeClassSpec};

use super::{BootstrapInput, UserDataError};

const FAMILY: &str = "Bottlerocket";

/// The TOML type a known `settings.kubernetes` key must have.
#[derive(Debug, Clone, Copy)]
enum Kind {
    String,
    Integer,
    Bool,
    StringMap,
    StringList,
    /// A nested table (credential providers, static pods, ...), kept as written.
    Table,
    /// `node-taints`: key -> list of `value:Effect` strings.
    TaintMap,
}

/// The `settings.kubernetes` keys upstream's `BottlerocketKubernetes` struct models.
const KNOWN_KUBERNETES_KEYS: &[(&str, Kind)] = &[
    ("api-server", Kind::String),
    ("cloud-provider", Kind::String),
    ("cluster-certificate", Kind::String),
    ("cluster-name", Kind::String),
    ("cluster-dns-ip", Kind::String),
    ("credential-providers", Kind::Table),
    ("node-labels", Kind::StringMap),
    ("node-taints", Kind::TaintMap),
    ("max-pods", Kind::Integer),
    ("static-pods", Kind::Table),
    ("eviction-hard", Kind::StringMap),
    ("eviction-soft", Kind::StringMap),
    ("eviction-soft-grace-period", Kind::StringMap),
    ("eviction-max-pod-grace-period", Kind::Integer),
    ("kube-reserved", Kind::StringMap),
    ("system-reserved", Kind::StringMap),
    ("allowed-unsafe-sysctls", Kind::StringList),
    ("server-tls-bootstrap", Kind::Bool),
    ("registry-qps", Kind::Integer),
    ("registry-burst", Kind::Integer),
    ("event-qps", Kind::Integer),
    ("event-burst", Kind::Integer),
    ("kube-api-qps", Kind::Integer),
    ("kube-api-burst", Kind::Integer),
    ("container-log-max-size", Kind::String),
    ("container-log-max-files", Kind::Integer),
    ("cpu-manager-policy", Kind::String),
    ("cpu-manager-policy-options", Kind::StringList),
    ("cpu-manager-reconcile-period", Kind::String),
    ("memory-manager-policy", Kind::String),
    ("memory-manager-reserved-memory", Kind::Table),
    ("topology-manager-scope", Kind::String),
    ("topology-manager-policy", Kind::String),
    ("topology-manager-policy-options", Kind::Table),
    ("image-gc-high-threshold-percent", Kind::String),
    ("image-gc-low-threshold-percent", Kind::String),
    ("ids-per-pod", Kind::Integer),
    ("cpu-cfs-quota-enforced", Kind::Bool),
    ("shutdown-grace-period", Kind::String),
    ("shutdown-grace-period-for-critical-pods", Kind::String),
    ("cluster-domain", Kind::String),
    ("seccomp-default", Kind::Bool),
    ("pod-pids-limit", Kind::Integer),
    ("device-ownership-from-security-context", Kind::Bool),
    ("single-process-oom-kill", Kind::Bool),
    ("container-log-max-workers", Kind::Integer),
    ("container-log-monitor-interval", Kind::String),
    ("hostname-override-source", Kind::String),
    ("log-level", Kind::Integer),
];

fn invalid(reason: String) -> UserDataError {
    UserDataError::InvalidUserData {
        family: FAMILY,
        reason,
    }
}

/// The merged TOML.
pub fn render(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut user: Table = match input.custom_user_data.as_deref() {
        None => Table::new(),
        Some(text) => text
            .parse::<Table>()
            .map_err(|error| invalid(format!("invalid TOML: {}", error.message())))?,
    };
    let mut settings = match user.remove("settings") {
        None => Table::new(),
        Some(Value::Table(table)) => table,
        Some(_) => return Err(invalid("`settings` must be a table".to_string())),
    };
    let user_kubernetes = match settings.remove("kubernetes") {
        None => Table::new(),
        Some(Value::Table(table)) => table,
        Some(_) => {
            return Err(invalid("`settings.kubernetes` must be a table".to_string()));
        }
    };
    let mut kubernetes = Table::new();
    for (key, value) in user_kubernetes {
        let Some((_, kind)) = KNOWN_KUBERNETES_KEYS.iter().find(|(k, _)| *k == key) else {
            // Unknown to Bottlerocket's model: dropped, as upstream does.
            continue;
        };
        check_kind(&key, &value, *kind)?;
        kubernetes.insert(key, value);
    }
    if let Some(commands) = settings.get("bootstrap-commands")
        && !commands.is_table()
    {
        return Err(invalid(
            "`settings.bootstrap-commands` must be a table".to_string(),
        ));
    }

    write_owned(input, &mut kubernetes);
    if input.raid0() {
        let bind: Vec<&str> = if input.bottlerocket_default_mount_paths {
            vec!["apiclient", "ephemeral-storage", "bind"]
        } else {
            vec![
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ]
        };
        let mut command = Table::new();
        command.insert(
            "commands".into(),
            Value::Array(vec![
                string_array(&["apiclient", "ephemeral-storage", "init"]),
                string_array(&bind),
            ]),
        );
        command.insert("mode".into(), Value::String("always".into()));
        command.insert("essential".into(), Value::Boolean(true));
        let commands = settings
            .entry("bootstrap-commands")
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(commands) = commands {
            commands.insert("000-mount-instance-storage".into(), Value::Table(command));
        }
    }
    settings.insert("kubernetes".into(), Value::Table(kubernetes));
    let mut root = Table::new();
    root.insert("settings".into(), Value::Table(settings));
    toml::to_string(&root).map_err(|error| invalid(format!("writing TOML: {error}")))
}

fn write_owned(input: &BootstrapInput, kubernetes: &mut Table) {
    let cluster = &input.cluster;
    let kubelet = &input.kubelet;
    kubernetes.insert("cluster-name".into(), Value::String(cluster.name.clone()));
    kubernetes.insert("api-server".into(), Value::String(cluster.endpoint.clone()));
    match &cluster.ca_bundle {
        Some(ca) => {
            kubernetes.insert("cluster-certificate".into(), Value::String(ca.clone()));
        }
        None => {
            kubernetes.remove("cluster-certificate");
        }
    }
    let labels = kubernetes
        .entry("node-labels")
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(labels) = labels {
        for (key, value) in &input.labels {
            labels.insert(key.clone(), Value::String(value.clone()));
        }
    }
    if kubernetes
        .get("node-labels")
        .and_then(Value::as_table)
        .is_some_and(Table::is_empty)
    {
        kubernetes.remove("node-labels");
    }
    if let Some(max_pods) = kubelet.max_pods {
        kubernetes.insert("max-pods".into(), Value::Integer(max_pods));
    }
    if let Some(dns) = kubelet.cluster_dns.first() {
        kubernetes.insert("cluster-dns-ip".into(), Value::String(dns.clone()));
    }
    let maps = [
        ("system-reserved", &kubelet.system_reserved),
        ("kube-reserved", &kubelet.kube_reserved),
        ("eviction-hard", &kubelet.eviction_hard),
        ("eviction-soft", &kubelet.eviction_soft),
        (
            "eviction-soft-grace-period",
            &kubelet.eviction_soft_grace_period,
        ),
    ];
    for (key, map) in maps {
        if let Some(map) = map {
            let table: Table = map
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            kubernetes.insert(key.into(), Value::Table(table));
        }
    }
    if let Some(n) = kubelet.eviction_max_pod_grace_period {
        kubernetes.insert("eviction-max-pod-grace-period".into(), Value::Integer(n));
    }
    if let Some(n) = kubelet.image_gc_high_threshold_percent {
        kubernetes.insert(
            "image-gc-high-threshold-percent".into(),
            Value::String(n.to_string()),
        );
    }
    if let Some(n) = kubelet.image_gc_low_threshold_percent {
        kubernetes.insert(
            "image-gc-low-threshold-percent".into(),
            Value::String(n.to_string()),
        );
    }
    if let Some(b) = kubelet.cpu_cfs_quota {
        kubernetes.insert("cpu-cfs-quota-enforced".into(), Value::Boolean(b));
    }
    // Taints are Karpenter's alone: the user's are replaced.
    let mut taints = Table::new();
    for taint in &input.taints {
        let entry = taints
            .entry(taint.key.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = entry {
            let value = taint.value.as_deref().unwrap_or_default();
            values.push(Value::String(format!("{value}:{}", taint.effect.as_str())));
        }
    }
    if taints.is_empty() {
        kubernetes.remove("node-taints");
    } else {
        kubernetes.insert("node-taints".into(), Value::Table(taints));
    }
}

fn string_array(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| Value::String((*s).into())).collect())
}

fn check_kind(key: &str, value: &Value, kind: Kind) -> Result<(), UserDataError> {
    let all_strings = |values: &[Value]| values.iter().all(Value::is_str);
    let ok = match kind {
        Kind::String => value.is_str(),
        Kind::Integer => value.is_integer(),
        Kind::Bool => value.is_bool(),
        Kind::Table => value.is_table(),
        Kind::StringList => value.as_array().is_some_and(|a| all_strings(a)),
        Kind::StringMap => value
            .as_table()
            .is_some_and(|t| t.values().all(Value::is_str)),
        Kind::TaintMap => value.as_table().is_some_and(|t| {
            t.values()
                .all(|v| v.as_array().is_some_and(|a| all_strings(a)))
        }),
    };
    if ok {
        Ok(())
    } else {
        let expected = match kind {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Bool => "a boolean",
            Kind::Table => "a table",
            Kind::StringList => "a list of strings",
            Kind::StringMap => "a table of strings",
            Kind::TaintMap => "a table of string lists",
        };
        Err(invalid(format!(
            "`settings.kubernetes.{key}` must be {expected}"
        )))
    }
}

/// Whether the Bottlerocket version the EC2NodeClass selects binds ephemeral storage to the
/// default paths (1.46.0 and later), inferred as upstream does: from the alias version
/// (`latest` counts as new), else a `v1.x.y` part of a name term, else of the name of a status
/// AMI selected by id, else of any resolved Bottlerocket AMI. Unknown means old.
pub fn uses_default_mount_paths(spec: &EC2NodeClassSpec, amis: Option<&[AmiStatus]>) -> bool {
    let amis = amis.unwrap_or_default();
    let from_alias = spec
        .ami_selector_terms
        .iter()
        .filter_map(|term| term.alias.as_deref())
        .find_map(|alias| {
            let mut parts = alias.split('@');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(_), Some(version), None) => Some(version.to_string()),
                _ => None,
            }
        });
    let from_name = || {
        spec.ami_selector_terms
            .iter()
            .filter_map(|term| term.name.as_deref())
            .find_map(version_in_name)
    };
    let from_id = || {
        spec.ami_selector_terms
            .iter()
            .filter_map(|term| term.id.as_deref())
            .find_map(|id| {
                amis.iter()
                    .filter(|ami| ami.id == id)
                    .filter_map(|ami| ami.name.as_deref())
                    .filter(|name| name.contains("bottlerocket"))
                    .find_map(version_in_name)
            })
    };
    let from_resolved = || {
        amis.iter()
            .filter_map(|ami| ami.name.as_deref())
            .filter(|name| name.contains("bottlerocket"))
            .find_map(version_in_name)
    };
    let version = from_alias
        .or_else(from_name)
        .or_else(from_id)
        .or_else(from_resolved);
    version.is_some_and(|v| supports_default_bind(&v))
}

/// `bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a` -> `v1.46.0`.
fn version_in_name(name: &str) -> Option<String> {
    name.split('-')
        .find(|part| part.starts_with('v') && part.contains('.'))
        .map(str::to_string)
}

fn supports_default_bind(version: &str) -> bool {
    if version == "latest" {
        return true;
    }
    let parts: Vec<&str> = version.trim_start_matches('v').split('.').collect();
    if parts.len() < 3 {
        return false;
    }
    let number = |index: usize| parts.get(index).and_then(|p| p.parse::<u64>().ok());
    match (number(0), number(1)) {
        (Some(major), Some(minor)) => major > 1 || (major == 1 && minor >= 46),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bottlerocket_versions_from_146_bind_default_paths() {
        for (version, expected) in [
            ("latest", true),
            ("v1.46.0", true),
            ("1.47.2", true),
            ("v2.0.0", true),
            ("v1.45.9", false),
            ("v1.46", false),
            ("vX.Y.Z", false),
        ] {
            assert_eq!(supports_default_bind(version), expected, "{version}");
        }
    }

    #[test]
    fn the_version_is_read_from_an_ami_name() {
        assert_eq!(
            version_in_name("bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a").as_deref(),
            Some("v1.46.0")
        );
        assert_eq!(version_in_name("my-ami"), None);
    }
}
