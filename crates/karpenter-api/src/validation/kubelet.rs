//! `spec.kubelet` of an EC2NodeClass: an open map validated by the controller (not the API
//! server). The twelve keys Karpenter itself reads ("managed" keys) are type- and range-checked;
//! families other than AL2023 and Custom accept only managed keys.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::rules::is_quantity;
use super::{Path, Problems};
use crate::duration::parse_go_duration;
use crate::v1::AmiFamily;

/// Kubelet keys Karpenter reads to compute capacity and bootstrap nodes.
pub const MANAGED_KUBELET_KEYS: &[&str] = &[
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
];

const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];

pub(super) fn validate_kubelet(
    kubelet: &BTreeMap<String, Value>,
    family: Option<AmiFamily>,
    path: &Path,
    p: &mut Problems,
) {
    let arbitrary_allowed = matches!(
        family,
        Some(AmiFamily::AL2023) | Some(AmiFamily::Custom) | None
    );
    for (key, value) in kubelet {
        let at = path.field(key);
        match key.as_str() {
            "registerWithTaints" => p.push(&at, "registerWithTaints is managed by Karpenter: use the NodePool's taints and startupTaints"),
            "clusterDNS" => match value.as_array() {
                Some(items) if items.iter().all(Value::is_string) => {
                    if items.len() > 1 && !arbitrary_allowed {
                        p.push(&at, "only one clusterDNS entry is supported by this AMI family");
                    }
                }
                _ => p.push(&at, "must be a list of IP addresses"),
            },
            "maxPods" | "podsPerCore" | "evictionMaxPodGracePeriod" => match value {
                Value::Number(n) if n.as_i64().is_some_and(|v| v >= 0) => {
                    if key == "podsPerCore" && family == Some(AmiFamily::Bottlerocket) {
                        p.push(&at, "podsPerCore is not supported by the Bottlerocket AMI family");
                    }
                }
                Value::String(_) if key == "maxPods" => p.push(
                    &at,
                    "CEL expressions in maxPods need the NodeClassCEL feature gate (AWS_FEATURE_GATES=NodeClassCEL=true); use an integer",
                ),
                _ => p.push(&at, "must be a non-negative integer"),
            },
            "systemReserved" | "kubeReserved" => validate_reserved(value, &at, p),
            "evictionHard" | "evictionSoft" => validate_thresholds(value, &at, p),
            "evictionSoftGracePeriod" => validate_grace_periods(value, &at, p),
            "imageGCHighThresholdPercent" | "imageGCLowThresholdPercent"
                if !value.as_i64().is_some_and(|v| (0..=100).contains(&v)) =>
            {
                p.push(&at, "must be an integer percentage between 0 and 100");
            }
            "cpuCFSQuota" if !value.is_boolean() => p.push(&at, "must be true or false"),
            "imageGCHighThresholdPercent" | "imageGCLowThresholdPercent" | "cpuCFSQuota" => {}
            _ if let Some(close) = super::schema::did_you_mean(key, MANAGED_KUBELET_KEYS) => p.push(
                &at,
                format!("unknown kubelet setting {key:?} (did you mean {close:?}?)"),
            ),
            _ if !arbitrary_allowed => p.push(
                &at,
                format!(
                    "{key} is not supported by the {} AMI family (only {} are); arbitrary kubelet settings need AL2023 or Custom",
                    family.map_or("selected", AmiFamily::as_str),
                    MANAGED_KUBELET_KEYS.join(", ")
                ),
            ),
            _ => {}
        }
    }
    if let (Some(high), Some(low)) = (
        kubelet
            .get("imageGCHighThresholdPercent")
            .and_then(Value::as_i64),
        kubelet
            .get("imageGCLowThresholdPercent")
            .and_then(Value::as_i64),
    ) && high <= low
    {
        p.push(
            &path.field("imageGCHighThresholdPercent"),
            format!("must be greater than imageGCLowThresholdPercent ({high} <= {low})"),
        );
    }
    let keys_of = |k: &str| -> Option<BTreeSet<String>> {
        kubelet
            .get(k)
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
    };
    let soft = keys_of("evictionSoft");
    let grace = keys_of("evictionSoftGracePeriod");
    if (soft.is_some() || grace.is_some())
        && soft.clone().unwrap_or_default() != grace.clone().unwrap_or_default()
    {
        p.push(
            &path.field("evictionSoft"),
            "evictionSoft and evictionSoftGracePeriod must have the same keys (each soft threshold needs a grace period)",
        );
    }
}

fn validate_reserved(value: &Value, at: &Path, p: &mut Problems) {
    let Some(map) = value.as_object() else {
        p.push(at, "must be a map of resource to quantity");
        return;
    };
    for (resource, quantity) in map {
        let here = at.key(resource);
        if resource.starts_with('-') || !RESERVED_RESOURCES.contains(&resource.as_str()) {
            p.push(
                &here,
                format!("{resource:?} is not one of {RESERVED_RESOURCES:?}"),
            );
        }
        let text = quantity_text(quantity);
        if !text.as_deref().is_some_and(is_non_negative_quantity) {
            p.push(
                &here,
                "must be a non-negative quantity (expressions need the NodeClassCEL feature gate)",
            );
        }
    }
}

fn quantity_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Walks a map keyed by eviction signal, checking each key and handing each value to `check`,
/// which returns the problem with the value, if any.
fn validate_signal_map(
    value: &Value,
    what: &str,
    at: &Path,
    p: &mut Problems,
    check: impl Fn(&Value) -> Option<&'static str>,
) {
    let Some(map) = value.as_object() else {
        p.push(at, format!("must be a map of eviction signal to {what}"));
        return;
    };
    for (signal, entry) in map {
        let here = at.key(signal);
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            p.push(
                &here,
                format!(
                    "{signal:?} is not an eviction signal ({})",
                    EVICTION_SIGNALS.join(", ")
                ),
            );
        }
        if let Some(problem) = check(entry) {
            p.push(&here, problem);
        }
    }
}

fn validate_thresholds(value: &Value, at: &Path, p: &mut Problems) {
    validate_signal_map(value, "threshold", at, p, |threshold| {
        let ok = quantity_text(threshold).is_some_and(|t| match t.strip_suffix('%') {
            Some(pct) => pct.parse::<f64>().is_ok_and(|v| (0.0..=100.0).contains(&v)),
            None => is_non_negative_quantity(&t),
        });
        (!ok).then_some("must be a percentage between 0% and 100% or a non-negative quantity")
    });
}

fn validate_grace_periods(value: &Value, at: &Path, p: &mut Problems) {
    validate_signal_map(value, "duration", at, p, |period| {
        period
            .as_str()
            .is_none_or(|d| parse_go_duration(d).is_err())
            .then_some("must be a non-negative duration such as 1m30s")
    });
}

fn is_non_negative_quantity(text: &str) -> bool {
    is_quantity(&k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        text.to_owned(),
    )) && !text.starts_with('-')
}
