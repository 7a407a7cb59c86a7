//! The kubelet settings a bootstrap carries, read from the EC2NodeClass `spec.kubelet` open map.
//!
//! Owns: resolving the map for one launch (default `clusterDNS` to the kube-dns IP, write the
//! resolved `maxPods`, as upstream's resolver does before bootstrap) and reading the twelve
//! Karpenter-managed keys into typed values for the families that map them to flags or
//! settings (AL2, Bottlerocket, Windows). AL2023 passes the raw map through instead.
//!
//! Must not: validate the whole map (that is `karpenter_api::validation::kubelet`, run when the
//! EC2NodeClass is validated); here a managed key of the wrong shape is an error, other keys
//! are left alone.

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_api::duration::parse_go_duration;
use serde_json::Value;

use super::UserDataError;

/// `spec.kubelet` resolved for one launch, with the managed keys read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletConfig {
    /// The map as the node receives it (AL2023 inline config).
    pub raw: BTreeMap<String, Value>,
    pub cluster_dns: Vec<String>,
    /// `maxPods` when it is a concrete integer (an unresolved CEL expression is skipped).
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub system_reserved: Option<BTreeMap<String, String>>,
    pub kube_reserved: Option<BTreeMap<String, String>>,
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Values printed as Go prints a `time.Duration` (`1m0s`), as upstream passes them on.
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub eviction_max_pod_grace_period: Option<i64>,
    pub image_gc_high_threshold_percent: Option<i64>,
    pub image_gc_low_threshold_percent: Option<i64>,
    pub cpu_cfs_quota: Option<bool>,
}

impl KubeletConfig {
    /// Resolves `spec.kubelet` for one launch: `clusterDNS` defaults to `[dns_ip]` when unset or
    /// empty, and `maxPods` is replaced by `max_pods` when given.
    pub fn resolve(
        spec: Option<&BTreeMap<String, Value>>,
        dns_ip: Option<&str>,
        max_pods: Option<u32>,
    ) -> Result<Self, UserDataError> {
        let mut raw = spec.cloned().unwrap_or_default();
        let has_dns = raw
            .get("clusterDNS")
            .and_then(Value::as_array)
            .is_some_and(|entries| !entries.is_empty());
        if !has_dns && let Some(ip) = dns_ip {
            raw.insert(
                "clusterDNS".to_string(),
                Value::Array(vec![Value::String(ip.to_string())]),
            );
        }
        if let Some(max_pods) = max_pods {
            raw.insert("maxPods".to_string(), Value::from(max_pods));
        }
        Self::parse(raw)
    }

    /// Reads the managed keys of an already resolved map.
    pub fn parse(raw: BTreeMap<String, Value>) -> Result<Self, UserDataError> {
        let cluster_dns = match raw.get("clusterDNS") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(entries)) => entries
                .iter()
                .map(|entry| {
                    entry
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| invalid("clusterDNS", "must be a list of IP addresses"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid("clusterDNS", "must be a list of IP addresses")),
        };
        let max_pods = match raw.get("maxPods") {
            // A CEL expression (NodeClassCEL) is resolved per instance type by the caller.
            Some(Value::String(_)) => None,
            _ => integer(&raw, "maxPods")?,
        };
        Ok(Self {
            cluster_dns,
            max_pods,
            pods_per_core: integer(&raw, "podsPerCore")?,
            system_reserved: string_map(&raw, "systemReserved")?,
            kube_reserved: string_map(&raw, "kubeReserved")?,
            eviction_hard: string_map(&raw, "evictionHard")?,
            eviction_soft: string_map(&raw, "evictionSoft")?,
            eviction_soft_grace_period: grace_periods(&raw)?,
            eviction_max_pod_grace_period: integer(&raw, "evictionMaxPodGracePeriod")?,
            image_gc_high_threshold_percent: integer(&raw, "imageGCHighThresholdPercent")?,
            image_gc_low_threshold_percent: integer(&raw, "imageGCLowThresholdPercent")?,
            cpu_cfs_quota: match raw.get("cpuCFSQuota") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => return Err(invalid("cpuCFSQuota", "must be true or false")),
            },
            raw,
        })
    }

    /// The kubelet flags AL2 and Windows pass through `--kubelet-extra-args`, after the label
    /// and taint flags, in upstream's order. Map-valued flags list their keys sorted (upstream
    /// iterates a Go map, so its order varies from run to run).
    pub fn extra_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(n) = self.max_pods {
            args.push(format!("--max-pods={n}"));
        }
        if let Some(n) = self.pods_per_core {
            args.push(format!("--pods-per-core={n}"));
        }
        let maps = [
            ("--system-reserved", &self.system_reserved, "="),
            ("--kube-reserved", &self.kube_reserved, "="),
            ("--eviction-hard", &self.eviction_hard, "<"),
            ("--eviction-soft", &self.eviction_soft, "<"),
            (
                "--eviction-soft-grace-period",
                &self.eviction_soft_grace_period,
                "=",
            ),
        ];
        for (name, map, separator) in maps {
            if let Some(map) = map
                && !map.is_empty()
            {
                let joined: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{k}{separator}{v}"))
                    .collect();
                args.push(format!("{name}={}", super::go_quote(&joined.join(","))));
            }
        }
        if let Some(n) = self.eviction_max_pod_grace_period {
            args.push(format!("--eviction-max-pod-grace-period={n}"));
        }
        if let Some(n) = self.image_gc_high_threshold_percent {
            args.push(format!("--image-gc-high-threshold={n}"));
        }
        if let Some(n) = self.image_gc_low_threshold_percent {
            args.push(format!("--image-gc-low-threshold={n}"));
        }
        if let Some(b) = self.cpu_cfs_quota {
            args.push(format!("--cpu-cfs-quota={b}"));
        }
        args
    }
}

fn invalid(key: &str, reason: &str) -> UserDataError {
    UserDataError::InvalidKubelet {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

fn integer(raw: &BTreeMap<String, Value>, key: &str) -> Result<Option<i64>, UserDataError> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .map(Some)
            .ok_or_else(|| invalid(key, "must be a 32-bit integer")),
    }
}

fn string_map(
    raw: &BTreeMap<String, Value>,
    key: &str,
) -> Result<Option<BTreeMap<String, String>>, UserDataError> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(
                    &format!("{key}.{k}"),
                    "must be a string (a quantity or percentage)",
                )),
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(invalid(key, "must be a map of strings")),
    }
}

fn grace_periods(
    raw: &BTreeMap<String, Value>,
) -> Result<Option<BTreeMap<String, String>>, UserDataError> {
    let key = "evictionSoftGracePeriod";
    let Some(map) = string_map(raw, key)? else {
        return Ok(None);
    };
    map.into_iter()
        .map(|(signal, text)| {
            let duration = parse_go_duration(&text)
                .map_err(|error| invalid(&format!("{key}.{signal}"), &error.to_string()))?;
            Ok((signal, format_go_duration(duration)))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A duration as Go's `time.Duration.String` prints it (`0s`, `1.5s`, `1m30s`, `1h0m0s`, `500ms`).
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let seconds = nanos / 1_000_000_000;
    let fraction = nanos % 1_000_000_000;
    let s = decimal((seconds % 60) * 1_000_000_000 + fraction, 9);
    let minutes = (seconds / 60) % 60;
    let hours = seconds / 3600;
    if hours > 0 {
        format!("{hours}h{minutes}m{s}s")
    } else if minutes > 0 {
        format!("{minutes}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// `value / 10^places` with the fraction's trailing zeros removed.
fn decimal(value: u128, places: u32) -> String {
    let scale = 10u128.pow(places);
    let whole = value / scale;
    let fraction = value % scale;
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:0width$}", width = places as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(value).unwrap_or_default()
    }

    #[test]
    fn go_durations_print_as_go_prints_them() {
        for (input, expected) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(12), "12ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(7_200_500), "2h0m0.5s"),
        ] {
            assert_eq!(format_go_duration(input), expected);
        }
    }

    #[test]
    fn resolving_defaults_cluster_dns_and_writes_the_resolved_max_pods() {
        let spec = map(json!({"maxPods": 20, "podsPerCore": 4}));
        let config = KubeletConfig::resolve(Some(&spec), Some("10.100.0.10"), Some(58));
        let config = config.unwrap_or_default();
        assert_eq!(config.cluster_dns, ["10.100.0.10"]);
        assert_eq!(config.max_pods, Some(58));
        assert_eq!(config.raw.get("maxPods"), Some(&json!(58)));
        assert_eq!(config.pods_per_core, Some(4));
    }

    #[test]
    fn a_user_cluster_dns_is_kept() {
        let spec = map(json!({"clusterDNS": ["169.254.20.10"]}));
        let config = KubeletConfig::resolve(Some(&spec), Some("10.100.0.10"), None);
        assert_eq!(
            config.map(|c| c.cluster_dns),
            Ok(vec!["169.254.20.10".to_string()])
        );
    }

    #[test]
    fn extra_args_follow_upstreams_order_with_sorted_map_keys() {
        let spec = map(json!({
            "maxPods": 110,
            "systemReserved": {"memory": "100Mi", "cpu": "100m"},
            "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"memory.available": "10%"},
            "evictionSoftGracePeriod": {"memory.available": "1m"},
            "evictionMaxPodGracePeriod": 30,
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": false
        }));
        let args = KubeletConfig::parse(spec).map(|c| c.extra_args());
        assert_eq!(
            args,
            Ok(vec![
                "--max-pods=110".to_string(),
                r#"--system-reserved="cpu=100m,memory=100Mi""#.to_string(),
                r#"--eviction-hard="memory.available<5%""#.to_string(),
                r#"--eviction-soft="memory.available<10%""#.to_string(),
                r#"--eviction-soft-grace-period="memory.available=1m0s""#.to_string(),
                "--eviction-max-pod-grace-period=30".to_string(),
                "--image-gc-high-threshold=85".to_string(),
                "--image-gc-low-threshold=80".to_string(),
                "--cpu-cfs-quota=false".to_string(),
            ])
        );
    }

    #[test]
    fn managed_keys_of_the_wrong_shape_name_the_key() {
        for (spec, key) in [
            (json!({"maxPods": "many"}), None),
            (json!({"maxPods": 1.5}), Some("maxPods")),
            (
                json!({"kubeReserved": {"cpu": 1}}),
                Some("kubeReserved.cpu"),
            ),
            (json!({"evictionHard": []}), Some("evictionHard")),
            (
                json!({"evictionSoftGracePeriod": {"memory.available": "soon"}}),
                Some("evictionSoftGracePeriod.memory.available"),
            ),
            (json!({"clusterDNS": "10.0.0.10"}), Some("clusterDNS")),
            (json!({"cpuCFSQuota": "yes"}), Some("cpuCFSQuota")),
        ] {
            let failed_key = match KubeletConfig::parse(map(spec)) {
                Err(UserDataError::InvalidKubelet { key, .. }) => Some(key),
                _ => None,
            };
            assert_eq!(failed_key.as_deref(), key);
        }
    }
}
