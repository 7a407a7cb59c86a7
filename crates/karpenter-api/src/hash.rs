//! The NodePool template hash (`karpenter.sh/nodepool-hash`): what static drift compares.
//!
//! Upstream hashes `spec.template` with Go's `hashstructure` (slices as sets, zero values
//! ignored, `requirements` and the raw text of durations excluded). That hash depends on Go's
//! reflection order and cannot be reproduced bit for bit, so karpenter-rs writes its own hash
//! under its own hash version, [`NODEPOOL_HASH_VERSION_VALUE`]. Upstream's rule for a version
//! change is what keeps a switch from upstream quiet: a NodeClaim whose hash *version* differs
//! from the NodePool's is re-stamped, never drifted (see [`restamp`]).
//!
//! The hash covers the same fields with the same semantics: template labels, annotations,
//! taints, startup taints, node class reference, `expireAfter` and `terminationGracePeriod` (by
//! value: `720h` and `30d` are one duration); lists are sets; empty values count as absent.
//! The digest is FNV-1a 64 over a canonical JSON rendering (keys sorted), printed in decimal
//! as upstream prints its own.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::labels::{
    EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION, EC2NODECLASS_HASH_VERSION_VALUE, NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION_VALUE,
};
use crate::v1::NodePool;

/// The hash of the NodePool's template, as `karpenter.sh/nodepool-hash` carries it.
pub fn node_pool_hash(pool: &NodePool) -> String {
    let template = &pool.spec.template;
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("requirements");
        spec.insert(
            "expireAfter".into(),
            match template.spec.expire_after.duration() {
                Some(d) => Value::from(d.as_nanos().to_string()),
                None => Value::from("Never"),
            },
        );
        match &template.spec.termination_grace_period {
            Some(d) => {
                spec.insert(
                    "terminationGracePeriod".into(),
                    Value::from(d.as_duration().as_nanos().to_string()),
                );
            }
            None => {
                spec.remove("terminationGracePeriod");
            }
        }
    }
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    fnv1a64(canonical.as_bytes()).to_string()
}

/// The annotations a NodePool should carry; `None` when it carries them already.
pub fn pool_annotations(pool: &NodePool) -> Option<BTreeMap<String, String>> {
    let hash = node_pool_hash(pool);
    let current = pool.metadata.annotations.as_ref();
    let has = |key: &str, value: &str| {
        current.and_then(|a| a.get(key)).map(String::as_str) == Some(value)
    };
    if has(NODEPOOL_HASH, &hash) && has(NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION_VALUE) {
        return None;
    }
    Some(BTreeMap::from([
        (NODEPOOL_HASH.to_owned(), hash),
        (
            NODEPOOL_HASH_VERSION.to_owned(),
            NODEPOOL_HASH_VERSION_VALUE.to_owned(),
        ),
    ]))
}

/// Upstream's re-stamp on a hash-version change: the annotations to write on a NodeClaim of
/// `pool` whose hash version is not ours (`None`: nothing to write). The version is always
/// brought current; the hash only when the NodeClaim is not drifted already (a drifted
/// NodeClaim stays drifted, an undrifted one does not become drifted by the switch).
pub fn restamp(
    pool_hash: &str,
    claim_annotations: Option<&BTreeMap<String, String>>,
    drifted: bool,
) -> Option<BTreeMap<String, String>> {
    restamp_keys(
        (
            NODEPOOL_HASH,
            NODEPOOL_HASH_VERSION,
            NODEPOOL_HASH_VERSION_VALUE,
        ),
        pool_hash,
        claim_annotations,
        drifted,
    )
}

/// [`restamp`] for the EC2NodeClass hash annotations of a NodeClaim of `class_hash`'s class.
pub fn restamp_node_class(
    class_hash: &str,
    claim_annotations: Option<&BTreeMap<String, String>>,
    drifted: bool,
) -> Option<BTreeMap<String, String>> {
    restamp_keys(
        (
            EC2NODECLASS_HASH,
            EC2NODECLASS_HASH_VERSION,
            EC2NODECLASS_HASH_VERSION_VALUE,
        ),
        class_hash,
        claim_annotations,
        drifted,
    )
}

/// The annotations an EC2NodeClass should carry; `None` when it carries them already.
pub fn node_class_annotations(
    class: &crate::v1::EC2NodeClass,
    ca_bundle: Option<&str>,
) -> Option<BTreeMap<String, String>> {
    let hash = node_class_hash(class, ca_bundle);
    let current = class.metadata.annotations.as_ref();
    let has = |key: &str, value: &str| {
        current.and_then(|a| a.get(key)).map(String::as_str) == Some(value)
    };
    if has(EC2NODECLASS_HASH, &hash)
        && has(EC2NODECLASS_HASH_VERSION, EC2NODECLASS_HASH_VERSION_VALUE)
    {
        return None;
    }
    Some(BTreeMap::from([
        (EC2NODECLASS_HASH.to_owned(), hash),
        (
            EC2NODECLASS_HASH_VERSION.to_owned(),
            EC2NODECLASS_HASH_VERSION_VALUE.to_owned(),
        ),
    ]))
}

fn restamp_keys(
    (hash_key, version_key, version): (&str, &str, &str),
    hash: &str,
    claim_annotations: Option<&BTreeMap<String, String>>,
    drifted: bool,
) -> Option<BTreeMap<String, String>> {
    let current = claim_annotations.and_then(|a| a.get(version_key));
    if current.map(String::as_str) == Some(version) {
        return None;
    }
    let mut out = BTreeMap::from([(version_key.to_owned(), version.to_owned())]);
    if !drifted {
        out.insert(hash_key.to_owned(), hash.to_owned());
    }
    Some(out)
}

/// The EC2NodeClass hash (`karpenter.k8s.aws/ec2nodeclass-hash`) over what upstream's static
/// hash covers: the spec without the selector terms (subnets, security groups, capacity
/// reservations, AMIs: their resolution drifts nodes through the provider instead),
/// `ipPrefixCount` and the written `amiFamily`; plus the resolved AMI family and the cluster's
/// CA bundle. Same canonical form as [`node_pool_hash`] (lists as sets, empty values absent).
pub fn node_class_hash(class: &crate::v1::EC2NodeClass, ca_bundle: Option<&str>) -> String {
    let mut spec = serde_json::to_value(&class.spec).unwrap_or(Value::Null);
    if let Some(spec) = spec.as_object_mut() {
        for key in [
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
            "capacityReservationSelectorTerms",
            "amiSelectorTerms",
            "amiFamily",
            "ipPrefixCount",
        ] {
            spec.remove(key);
        }
    }
    let value = serde_json::json!({
        "spec": spec,
        "amiFamily": class.spec.resolved_ami_family().map(|f| f.as_str()),
        "caBundle": ca_bundle,
    });
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    fnv1a64(canonical.as_bytes()).to_string()
}

/// Keys sorted, arrays as sets (elements sorted by their rendering, duplicates kept once),
/// empty values (null, "", 0, false, [], {}) dropped from objects.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> =
                map.iter().filter(|(_, v)| !is_zero(v)).collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            let mut rendered: Vec<String> = items
                .iter()
                .map(|item| {
                    let mut s = String::new();
                    write_canonical(item, &mut s);
                    s
                })
                .collect();
            rendered.sort();
            rendered.dedup();
            out.push('[');
            out.push_str(&rendered.join(","));
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// 64-bit FNV-1a: the workspace's one non-cryptographic content hash (names, cache keys).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(yaml: &str) -> NodePool {
        let docs = crate::yaml::parse_documents(yaml).unwrap_or_else(|e| panic!("{e}"));
        crate::yaml::from_value(&docs[0]).unwrap_or_else(|e| panic!("{e}"))
    }

    const BASE: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {team: a, tier: web}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      taints:
        - {key: a, effect: NoSchedule}
        - {key: b, effect: NoSchedule}
      expireAfter: 720h
"#;

    #[test]
    fn the_hash_ignores_requirements_order_of_lists_and_how_a_duration_is_written() {
        let base = node_pool_hash(&pool(BASE));
        let other_requirements = BASE.replace("values: [spot]", "values: [on-demand]");
        assert_eq!(node_pool_hash(&pool(&other_requirements)), base);
        let swapped = BASE
            .replace("{key: a, effect", "{key: x, effect")
            .replace("{key: b, effect", "{key: a, effect")
            .replace("{key: x, effect", "{key: b, effect");
        assert_eq!(node_pool_hash(&pool(&swapped)), base);
        let days = BASE.replace("expireAfter: 720h", "expireAfter: 720h0m0s");
        assert_eq!(node_pool_hash(&pool(&days)), base);
        // Labels written in another order are the same map.
        let reordered = BASE.replace("{team: a, tier: web}", "{tier: web, team: a}");
        assert_eq!(node_pool_hash(&pool(&reordered)), base);
    }

    #[test]
    fn the_hash_changes_with_labels_taints_node_class_and_expiry() {
        let base = node_pool_hash(&pool(BASE));
        for changed in [
            BASE.replace("team: a", "team: b"),
            BASE.replace(
                "{key: b, effect: NoSchedule}",
                "{key: b, effect: NoExecute}",
            ),
            BASE.replace("name: default}", "name: other}"),
            BASE.replace("expireAfter: 720h", "expireAfter: Never"),
            BASE.replace(
                "expireAfter: 720h",
                "expireAfter: 720h\n      terminationGracePeriod: 1h",
            ),
        ] {
            assert_ne!(node_pool_hash(&pool(&changed)), base, "{changed}");
        }
    }

    #[test]
    fn a_pool_is_stamped_once_with_our_hash_version() {
        let mut p = pool(BASE);
        let stamp = pool_annotations(&p).unwrap_or_default();
        assert_eq!(
            stamp.get(NODEPOOL_HASH_VERSION).map(String::as_str),
            Some(NODEPOOL_HASH_VERSION_VALUE)
        );
        assert_ne!(
            NODEPOOL_HASH_VERSION_VALUE, "v3",
            "must differ from upstream's"
        );
        p.metadata.annotations = Some(stamp);
        assert_eq!(pool_annotations(&p), None);
    }

    #[test]
    fn a_claim_stamped_by_upstream_is_restamped_not_drifted() {
        let upstream = BTreeMap::from([
            (NODEPOOL_HASH.to_owned(), "6391212960592000000".to_owned()),
            (NODEPOOL_HASH_VERSION.to_owned(), "v3".to_owned()),
        ]);
        let out = restamp("42", Some(&upstream), false).unwrap_or_default();
        assert_eq!(out.get(NODEPOOL_HASH).map(String::as_str), Some("42"));
        assert_eq!(
            out.get(NODEPOOL_HASH_VERSION).map(String::as_str),
            Some(NODEPOOL_HASH_VERSION_VALUE)
        );
        // Already drifted: the version moves, the hash stays (it stays drifted).
        let drifted = restamp("42", Some(&upstream), true).unwrap_or_default();
        assert_eq!(drifted.get(NODEPOOL_HASH), None);
        // Ours already: nothing to write.
        assert_eq!(restamp("42", Some(&out), false), None);
    }

    fn class(yaml: &str) -> crate::v1::EC2NodeClass {
        let docs = crate::yaml::parse_documents(yaml).unwrap_or_else(|e| panic!("{e}"));
        crate::yaml::from_value(&docs[0]).unwrap_or_else(|e| panic!("{e}"))
    }

    const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  tags: {team: a}
"#;

    #[test]
    fn the_node_class_hash_follows_launch_settings_not_selectors() {
        let base = node_class_hash(&class(CLASS), Some("Q0E="));
        let selectors = CLASS.replace(
            "{karpenter.sh/discovery: demo}}]\n  tags",
            "{karpenter.sh/discovery: other}}]\n  tags",
        );
        assert_ne!(selectors, CLASS);
        assert_eq!(node_class_hash(&class(&selectors), Some("Q0E=")), base);
        let pinned = CLASS.replace("al2023@latest", "al2023@v20260101");
        assert_eq!(node_class_hash(&class(&pinned), Some("Q0E=")), base);
        let bottlerocket = CLASS.replace("al2023@latest", "bottlerocket@latest");
        assert_ne!(
            node_class_hash(&class(&bottlerocket), Some("Q0E=")),
            base,
            "the AMI family is hashed"
        );
        let tagged = CLASS.replace("{team: a}", "{team: b}");
        assert_ne!(node_class_hash(&class(&tagged), Some("Q0E=")), base);
        assert_ne!(
            node_class_hash(&class(CLASS), Some("Q0I=")),
            base,
            "a CA rotation drifts"
        );
    }

    #[test]
    fn enabling_nitro_enclaves_changes_the_node_class_hash() {
        let base = node_class_hash(&class(CLASS), Some("Q0E="));
        let enclaves = format!("{CLASS}  enclaveOptions: {{enabled: true}}\n");
        assert_ne!(node_class_hash(&class(&enclaves), Some("Q0E=")), base);
    }

    #[test]
    fn a_passed_through_kubelet_field_changes_the_node_class_hash() {
        let with = |value: &str| {
            let yaml = format!("{CLASS}  kubelet: {{maxPods: 58, shutdownGracePeriod: {value}}}\n");
            node_class_hash(&class(&yaml), Some("Q0E="))
        };
        assert_ne!(with("30s"), with("45s"));
        let typed_only = format!("{CLASS}  kubelet: {{maxPods: 58}}\n");
        assert_ne!(
            with("30s"),
            node_class_hash(&class(&typed_only), Some("Q0E="))
        );
    }
}
