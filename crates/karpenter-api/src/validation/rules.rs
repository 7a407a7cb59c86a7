//! Rule primitives shared by the kinds: names, label values, requirements, taints, quantities.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use regex::Regex;

use super::{Path, Problems};
use crate::labels;
use crate::v1::{NodeSelectorRequirementWithMinValues, Operator, Taint};

fn regex(pattern: &str) -> Regex {
    // Patterns are literals in this file; a typo is a programming error caught by the tests
    // (every pattern is exercised), so falling back to a never-matching regex is unreachable.
    Regex::new(pattern).unwrap_or_else(|_| Regex::new("$^").unwrap_or_else(|_| unreachable!()))
}

static NAME_PART: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"));
static DNS_SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
    )
});
static HMS_DURATION: LazyLock<Regex> = LazyLock::new(|| regex(r"^([0-9]+(s|m|h))+$"));

/// Said of rules stricter than upstream's CRD that upstream's controller also enforces.
pub const RUNTIME_REFUSES: &str =
    "upstream's CRD admits this but its controller refuses the NodePool: ValidationSucceeded=False";

/// A lowercase RFC 1123 subdomain (object names, label prefixes): at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && DNS_SUBDOMAIN.is_match(s)
}

/// Kubernetes `IsQualifiedName`: `[prefix/]name`, prefix a DNS subdomain, name at most 63
/// alphanumeric characters with `-_.` inside.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if prefix.is_some_and(|p| p.is_empty() || !is_dns_subdomain(p)) {
        return false;
    }
    !name.is_empty() && name.len() <= 63 && NAME_PART.is_match(name)
}

/// Kubernetes `IsValidLabelValue`: empty, or at most 63 alphanumeric characters with `-_.` inside.
pub fn is_valid_label_value(s: &str) -> bool {
    s.is_empty() || (s.len() <= 63 && NAME_PART.is_match(s))
}

/// A Kubernetes quantity (`100m`, `2Gi`, `1e3`).
pub fn is_quantity(q: &Quantity) -> bool {
    QUANTITY.is_match(&q.0)
}

/// The CRD pattern for `terminationGracePeriod`-style durations: `1h30m`, `90s`.
pub fn is_hms_duration(s: &str) -> bool {
    HMS_DURATION.is_match(s)
}

/// The CRD pattern of a NillableDuration: an h/m/s duration or `Never`.
pub fn is_nillable_duration(s: &str) -> bool {
    s == crate::duration::NEVER || is_hms_duration(s)
}

/// Why a label key may not be set or required by users, if it may not.
pub fn restricted_label_reason(key: &str) -> Option<String> {
    let normalized = labels::normalize_label_key(key);
    if normalized == labels::NODEPOOL {
        return Some(format!("label {key:?} is restricted (Karpenter sets it)"));
    }
    if normalized == labels::HOSTNAME {
        return Some(format!("label {key:?} is restricted"));
    }
    if labels::is_restricted_label(normalized) {
        let domain = labels::label_domain(normalized);
        let owner = if domain.ends_with(labels::AWS_GROUP) {
            labels::AWS_GROUP
        } else {
            labels::GROUP
        };
        return Some(format!(
            "label domain {owner:?} is restricted: only its well-known labels may be used"
        ));
    }
    None
}

/// Validates labels users put on a template: keys, values and restricted domains.
pub fn validate_template_labels(
    labels: &BTreeMap<String, String>,
    path: &Path,
    problems: &mut Problems,
) {
    if labels.len() > 100 {
        problems.push(
            path,
            format!("at most 100 labels are allowed, found {}", labels.len()),
        );
    }
    for (key, value) in labels {
        let at = path.key(key);
        if !is_qualified_name(key) {
            problems.push(&at, format!("label key must be a qualified name ([prefix/]name, name at most 63 characters of [A-Za-z0-9-_.]) ({RUNTIME_REFUSES})"));
        }
        if !is_valid_label_value(value) {
            problems.push(&at, format!("label value {value:?} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"));
        }
        if let Some(reason) = restricted_label_reason(key) {
            problems.push(&at, reason);
        }
    }
}

/// Validates annotation keys (values are free text).
pub fn validate_annotations(
    annotations: &BTreeMap<String, String>,
    path: &Path,
    problems: &mut Problems,
) {
    for key in annotations.keys() {
        if !is_qualified_name(key) {
            problems.push(
                &path.key(key),
                "annotation key must be a qualified name ([prefix/]name)",
            );
        }
    }
}

/// Where a requirement list lives decides which keys are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequirementContext {
    /// A NodePool template: `karpenter.sh/nodepool` may not be required (Karpenter adds it).
    NodePool,
    /// A NodeClaim, which carries the `karpenter.sh/nodepool` requirement Karpenter wrote.
    NodeClaim,
}

/// Validates a requirement list (upstream CEL rules plus `ValidateRequirement`).
pub fn validate_requirements(
    requirements: &[NodeSelectorRequirementWithMinValues],
    context: RequirementContext,
    path: &Path,
    problems: &mut Problems,
) {
    if requirements.len() > 100 {
        problems.push(
            path,
            format!(
                "at most 100 requirements are allowed, found {}",
                requirements.len()
            ),
        );
    }
    for (i, requirement) in requirements.iter().enumerate() {
        let at = path.index(i);
        for (field, message) in validate_requirement(requirement) {
            problems.push(&at.field(field), message);
        }
        let key = labels::normalize_label_key(&requirement.key);
        if context == RequirementContext::NodePool && key == labels::NODEPOOL {
            problems.push(
                &at.field("key"),
                format!(
                    "label {:?} is restricted (Karpenter sets it)",
                    labels::NODEPOOL
                ),
            );
        }
    }
}

/// Checks one requirement; returns `(field, message)` pairs (field relative to the requirement).
pub fn validate_requirement(
    r: &NodeSelectorRequirementWithMinValues,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let key = labels::normalize_label_key(&r.key);
    if r.key.len() > 316 {
        out.push(("key", "must be at most 316 characters".to_owned()));
    }
    if !is_qualified_name(&r.key) {
        out.push((
            "key",
            format!("{:?} is not a qualified name ([prefix/]name)", r.key),
        ));
    }
    if key != labels::NODEPOOL
        && let Some(reason) = restricted_label_reason(&r.key)
    {
        out.push(("key", reason));
    }
    for (i, value) in r.values.iter().enumerate() {
        if !is_valid_label_value(value) {
            out.push((
                "values",
                format!("values[{i}] {value:?} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric ({RUNTIME_REFUSES})"),
            ));
        }
    }
    match r.operator {
        Operator::In if r.values.is_empty() => {
            out.push((
                "values",
                "requirements with operator 'In' must have a value defined".to_owned(),
            ));
        }
        op if op.is_numeric() => {
            let ok = r.values.len() == 1 && r.values[0].parse::<i64>().is_ok_and(|n| n >= 0);
            if !ok {
                out.push((
                    "values",
                    format!("requirements with operator '{op}' must have a single non-negative integer value, found {:?}", r.values),
                ));
            }
        }
        _ => {}
    }
    if let Some(min) = r.min_values {
        if !(1..=50).contains(&min) {
            out.push((
                "minValues",
                format!("must be between 1 and 50, found {min}"),
            ));
        }
        if r.operator == Operator::In && (r.values.len() as i64) < i64::from(min) {
            out.push((
                "minValues",
                format!(
                    "requirements with 'minValues' must have at least that many values specified in the 'values' field ({} < {min})",
                    r.values.len()
                ),
            ));
        }
    }
    // Upstream's WellKnownValuesForRequirements: capacity types (core) and tenancies (AWS).
    for (known_key, known_values) in [
        (labels::CAPACITY_TYPE, labels::CAPACITY_TYPES),
        (labels::INSTANCE_TENANCY, labels::INSTANCE_TENANCY_VALUES),
    ] {
        if key != known_key || r.operator != Operator::In {
            continue;
        }
        let known: HashSet<&str> = r
            .values
            .iter()
            .map(String::as_str)
            .filter(|v| known_values.contains(v))
            .collect();
        if known.is_empty() && !r.values.is_empty() {
            out.push((
                "values",
                format!("{known_key} must include at least one of {known_values:?}"),
            ));
        } else if let Some(min) = r.min_values
            && (known.len() as i64) < i64::from(min)
        {
            out.push((
                "minValues",
                format!(
                    "only {} known values of {known_key} are listed, fewer than minValues {min}",
                    known.len()
                ),
            ));
        }
    }
    out
}

/// Validates taints and startup taints together: keys, values, and no duplicate key/effect.
pub fn validate_taints(
    taints: &[Taint],
    startup_taints: &[Taint],
    spec: &Path,
    problems: &mut Problems,
) {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    for (field, list) in [("taints", taints), ("startupTaints", startup_taints)] {
        for (i, taint) in list.iter().enumerate() {
            let at = spec.field(field).index(i);
            if taint.key.is_empty() {
                problems.push(&at.field("key"), "must not be empty");
            } else if !is_qualified_name(&taint.key) {
                problems.push(
                    &at.field("key"),
                    format!("{:?} is not a qualified name ([prefix/]name)", taint.key),
                );
            }
            // The CRD pattern: a qualified name ([prefix/]name), so not empty.
            match taint.value.as_deref() {
                Some("") => problems.push(
                    &at.field("value"),
                    "must not be empty (leave 'value' out for a taint without a value)",
                ),
                Some(value) if !is_qualified_name(value) => problems.push(
                    &at.field("value"),
                    format!("{value:?} must be a qualified name ([prefix/]name, name at most 63 characters of [A-Za-z0-9-_.])"),
                ),
                _ => {}
            }
            if !seen.insert((taint.key.as_str(), taint.effect.as_str())) {
                problems.push(
                    &at,
                    format!("duplicate taint {}:{} (taints and startupTaints must have unique key/effect pairs; {RUNTIME_REFUSES})", taint.key, taint.effect.as_str()),
                );
            }
        }
    }
}

/// Validates a resource list (`limits`, `resources.requests`).
pub fn validate_resource_list(
    list: &BTreeMap<String, Quantity>,
    path: &Path,
    problems: &mut Problems,
) {
    for (name, quantity) in list {
        if !is_qualified_name(name) {
            problems.push(&path.key(name), "resource name must be a qualified name");
        }
        if !is_quantity(quantity) {
            problems.push(
                &path.key(name),
                format!("{:?} is not a quantity (e.g. 100m, 4, 16Gi)", quantity.0),
            );
        }
    }
}

/// A cron schedule as upstream parses it (robfig/cron standard: 5 fields or a macro, UTC).
pub fn validate_cron(schedule: &str) -> Result<(), String> {
    crate::schedule::parse_schedule(schedule).map(|_| ()).map_err(|message| {
        format!("{message} (upstream's CRD admits it, but its controller cannot parse it either and then blocks all disruption of the NodePool)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::Operator::*;

    fn req(
        key: &str,
        op: Operator,
        values: &[&str],
        min: Option<i32>,
    ) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues {
            min_values: min,
            ..NodeSelectorRequirementWithMinValues::new(key, op, values)
        }
    }

    #[test]
    fn qualified_names_follow_kubernetes_rules() {
        for (name, ok) in [
            ("team", true),
            ("example.com/team", true),
            ("a/b", true),
            ("Example.com/team", false),
            ("/team", false),
            ("example.com/", false),
            ("-team", false),
            ("team-", false),
            (&"x".repeat(64), false),
            ("a/b/c", false),
        ] {
            assert_eq!(is_qualified_name(name), ok, "{name}");
        }
    }

    #[test]
    fn label_values_allow_empty_and_short_alphanumerics() {
        for (value, ok) in [
            ("", true),
            ("on-demand", true),
            ("a_b.c", true),
            ("-a", false),
            ("a b", false),
            (&"v".repeat(64), false),
        ] {
            assert_eq!(is_valid_label_value(value), ok, "{value:?}");
        }
    }

    #[test]
    fn requirement_rules_match_upstream() {
        let cases: Vec<(NodeSelectorRequirementWithMinValues, Option<&str>)> = vec![
            (req("kubernetes.io/arch", In, &["amd64"], None), None),
            (
                req("kubernetes.io/arch", In, &[], None),
                Some("must have a value defined"),
            ),
            (req("kubernetes.io/arch", NotIn, &[], None), None),
            (req("kubernetes.io/arch", Exists, &[], None), None),
            (
                req("karpenter.k8s.aws/instance-cpu", Gt, &["4"], None),
                None,
            ),
            (
                req("karpenter.k8s.aws/instance-cpu", Gt, &["-1"], None),
                Some("single non-negative integer"),
            ),
            (
                req("karpenter.k8s.aws/instance-cpu", Lt, &["a"], None),
                Some("single non-negative integer"),
            ),
            (
                req("karpenter.k8s.aws/instance-cpu", Gte, &["1", "2"], None),
                Some("single non-negative integer"),
            ),
            (
                req("karpenter.k8s.aws/instance-cpu", Lte, &[], None),
                Some("single non-negative integer"),
            ),
            (
                req("node.kubernetes.io/instance-type", In, &["a", "b"], Some(2)),
                None,
            ),
            (
                req("node.kubernetes.io/instance-type", In, &["a"], Some(2)),
                Some("at least that many values"),
            ),
            (
                req("node.kubernetes.io/instance-type", Exists, &[], Some(0)),
                Some("between 1 and 50"),
            ),
            (
                req("node.kubernetes.io/instance-type", Exists, &[], Some(51)),
                Some("between 1 and 50"),
            ),
            (
                req("karpenter.sh/custom", In, &["x"], None),
                Some("label domain \"karpenter.sh\" is restricted"),
            ),
            (
                req("kubernetes.io/hostname", In, &["x"], None),
                Some("restricted"),
            ),
            (
                req("karpenter.k8s.aws/unknown", Exists, &[], None),
                Some("karpenter.k8s.aws"),
            ),
            (req("karpenter.sh/capacity-type", In, &["spot"], None), None),
            (
                req("karpenter.sh/capacity-type", In, &["cheap"], None),
                Some("must include at least one of"),
            ),
            (
                req(
                    "karpenter.sh/capacity-type",
                    In,
                    &["spot", "cheap"],
                    Some(2),
                ),
                Some("fewer than minValues"),
            ),
            (
                req(
                    "karpenter.k8s.aws/instance-tenancy",
                    In,
                    &["dedicated"],
                    None,
                ),
                None,
            ),
            (
                req("karpenter.k8s.aws/instance-tenancy", In, &["host"], None),
                Some("must include at least one of"),
            ),
            (
                req(
                    "karpenter.k8s.aws/placement-group-partition",
                    In,
                    &["2"],
                    None,
                ),
                None,
            ),
            (
                req("Bad Key", In, &["x"], None),
                Some("not a qualified name"),
            ),
            (
                req("example.com/team", In, &["bad value"], None),
                Some("values[0]"),
            ),
        ];
        for (requirement, expected) in cases {
            let errors = validate_requirement(&requirement);
            match expected {
                None => assert!(errors.is_empty(), "{requirement:?}: {errors:?}"),
                Some(text) => assert!(
                    errors.iter().any(|(_, m)| m.contains(text)),
                    "{requirement:?}: expected {text:?} in {errors:?}"
                ),
            }
        }
    }

    #[test]
    fn cron_schedules_accept_five_fields_and_macros_only() {
        for (schedule, ok) in [
            ("0 9 * * 1-5", true),
            ("@daily", true),
            ("@midnight", true),
            ("*/15 * * * *", true),
            ("0 0 9 * * *", false),
            ("61 * * * *", false),
            ("@sometimes", false),
            ("not a cron", false),
        ] {
            assert_eq!(
                validate_cron(schedule).is_ok(),
                ok,
                "{schedule}: {:?}",
                validate_cron(schedule)
            );
        }
    }

    #[test]
    fn quantities_follow_the_kubernetes_grammar() {
        for (q, ok) in [
            ("100m", true),
            ("4", true),
            ("16Gi", true),
            ("1e3", true),
            ("1.5", true),
            ("16GB", false),
            ("", false),
            ("abc", false),
        ] {
            assert_eq!(is_quantity(&Quantity(q.into())), ok, "{q}");
        }
    }
}
