//! Output metadata: only `name`, `labels`, `annotations` and `finalizers` are kept.
//! Server-set fields (uid, resourceVersion, creationTimestamp, managedFields, generation, ...),
//! `status`, and the stale `kubectl.kubernetes.io/last-applied-configuration` annotation
//! (it holds the old object) are dropped.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::labels::LAST_APPLIED_CONFIGURATION as LAST_APPLIED;

/// The metadata a converted object keeps.
pub(crate) fn clean(meta: &ObjectMeta) -> ObjectMeta {
    let annotations = meta.annotations.clone().and_then(|mut a| {
        a.remove(LAST_APPLIED);
        (!a.is_empty()).then_some(a)
    });
    ObjectMeta {
        name: meta.name.clone(),
        labels: meta.labels.clone().filter(|l| !l.is_empty()),
        annotations,
        finalizers: meta.finalizers.clone().filter(|f| !f.is_empty()),
        ..ObjectMeta::default()
    }
}

/// A passed-through object with cleaned metadata and no status.
pub(crate) fn clean_value(value: &Value) -> Value {
    let mut out = value.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("status");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.retain(|k, _| {
                matches!(k.as_str(), "name" | "labels" | "annotations" | "finalizers")
            });
            if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
                annotations.remove(LAST_APPLIED);
                if annotations.is_empty() {
                    meta.remove("annotations");
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_set_fields_and_status_are_dropped_from_passed_through_objects() {
        let input = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "1", "creationTimestamp": "t",
                          "managedFields": [], "labels": {"x": "y"},
                          "annotations": {LAST_APPLIED: "{}"}},
            "status": {"x": 1}
        });
        assert_eq!(
            clean_value(&input),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
    }
}
