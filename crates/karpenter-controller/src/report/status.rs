//! operatorpkg's status-condition metrics, as its `status` controller computes them for each
//! object of a kind (upstream runs one for NodeClaims, NodePools and EC2NodeClasses):
//! `operator_<kind>_status_condition_count` and `_current_status_seconds` (per object and
//! condition: 1, and the time since its last transition), `_transitions_total` and
//! `_transition_seconds` (per condition type and status: a status change seen, and how long the
//! previous status lasted), `operator_<kind>_termination_current_time_seconds` (per object being
//! deleted: since when) and `_termination_duration_seconds` (when it is gone). Each is also
//! written, as upstream's `EmitDeprecatedMetrics` does, under the deprecated kind-less name
//! (`operator_status_condition_count`, ...) with `group` and `kind` labels instead of the kind's
//! extra labels.
//!
//! Semantics are operatorpkg's `reconcileFound`/`cleanupNotFound`: a condition first seen with a
//! status other than `Unknown` counts a transition (from the `Unknown` it was assumed to be, with
//! no duration); a condition whose status, reason or extra labels changed loses its old series;
//! an object that is gone loses its series, and its termination is observed if it was seen
//! being deleted. The loop that feeds [`Conditions::observe`] and [`Conditions::forget_all_but`] is
//! `crate::controllers::status_metrics`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::series::{DEFAULT_BUCKETS, FloatGauge, Labels};
use crate::http::Metrics;

/// `prometheus.ExponentialBuckets(0.5, 2, 15)`: 0.5 s to 8192 s (upstream's for NodeClaims and
/// NodePools).
fn long_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 15))
}

/// client_golang's default buckets (EC2NodeClasses and the deprecated metrics).
fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

/// The six metrics of one kind (or the deprecated kind-less ones).
#[derive(Debug, Clone)]
pub struct ConditionFamilies {
    count: Family<Labels, FloatGauge>,
    current_status_seconds: Family<Labels, FloatGauge>,
    transitions: Family<Labels, Counter>,
    transition_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    termination_current_time_seconds: Family<Labels, FloatGauge>,
    termination_duration_seconds: Family<Labels, Histogram, fn() -> Histogram>,
}

impl ConditionFamilies {
    /// Registers them as `<prefix>_status_condition_*` and `<prefix>_termination_*`.
    fn register(registry: &Metrics, prefix: &str, histogram: fn() -> Histogram) -> Self {
        let families = ConditionFamilies {
            count: Family::default(),
            current_status_seconds: Family::default(),
            transitions: Family::default(),
            transition_seconds: Family::new_with_constructor(histogram),
            termination_current_time_seconds: Family::default(),
            termination_duration_seconds: Family::new_with_constructor(histogram),
        };
        registry.register(
            &format!("{prefix}_status_condition_count"),
            "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0",
            families.count.clone(),
        );
        registry.register(
            &format!("{prefix}_status_condition_current_status_seconds"),
            "The current amount of time in seconds that a status condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes",
            families.current_status_seconds.clone(),
        );
        registry.register(
            &format!("{prefix}_status_condition_transitions"),
            "The count of transitions of a given object, type and status.",
            families.transitions.clone(),
        );
        registry.register(
            &format!("{prefix}_status_condition_transition_seconds"),
            "The amount of time a condition was in a given state (status) before transitioning to another state (to_status). e.g. Alarm := P99(Updated=False) > 5 minutes",
            families.transition_seconds.clone(),
        );
        registry.register(
            &format!("{prefix}_termination_current_time_seconds"),
            "The current amount of time in seconds that an object has been in terminating state.",
            families.termination_current_time_seconds.clone(),
        );
        registry.register(
            &format!("{prefix}_termination_duration_seconds"),
            "The amount of time taken by an object to terminate completely.",
            families.termination_duration_seconds.clone(),
        );
        families
    }
}

/// The kinds whose conditions are measured, each with its metric prefix, API group and kind, and
/// histogram buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionKind {
    NodeClaim,
    NodePool,
    EC2NodeClass,
}

impl ConditionKind {
    pub fn group(self) -> &'static str {
        match self {
            ConditionKind::NodeClaim | ConditionKind::NodePool => "karpenter.sh",
            ConditionKind::EC2NodeClass => "karpenter.k8s.aws",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            ConditionKind::NodeClaim => "NodeClaim",
            ConditionKind::NodePool => "NodePool",
            ConditionKind::EC2NodeClass => "EC2NodeClass",
        }
    }
}

/// Every kind's metrics and the deprecated ones (cheap to clone: clones share their series).
#[derive(Debug, Clone)]
pub struct ConditionMetrics {
    node_claim: ConditionFamilies,
    node_pool: ConditionFamilies,
    node_class: ConditionFamilies,
    deprecated: ConditionFamilies,
}

impl ConditionMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Metrics) -> Self {
        ConditionMetrics {
            node_claim: ConditionFamilies::register(registry, "operator_nodeclaim", long_histogram),
            node_pool: ConditionFamilies::register(registry, "operator_nodepool", long_histogram),
            node_class: ConditionFamilies::register(
                registry,
                "operator_ec2nodeclass",
                default_histogram,
            ),
            deprecated: ConditionFamilies::register(registry, "operator", default_histogram),
        }
    }

    fn of(&self, kind: ConditionKind) -> &ConditionFamilies {
        match kind {
            ConditionKind::NodeClaim => &self.node_claim,
            ConditionKind::NodePool => &self.node_pool,
            ConditionKind::EC2NodeClass => &self.node_class,
        }
    }
}

/// One condition as operatorpkg reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    pub status: String,
    pub reason: String,
    pub last_transition: Option<DateTime<Utc>>,
}

/// One object as its status controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub namespace: String,
    pub name: String,
    pub deleted: Option<DateTime<Utc>>,
    pub conditions: Vec<Condition>,
    /// The kind's extra labels (upstream's `WithLabels`: for a NodeClaim its node class and
    /// NodePool labels), already named as Prometheus labels.
    pub labels: Labels,
}

/// What one kind's metrics remember of each object: its last observation.
#[derive(Debug)]
pub struct Conditions {
    kind: ConditionKind,
    metrics: ConditionMetrics,
    seen: HashMap<(String, String), Observed>,
}

fn seconds_between(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> f64 {
    match (from, to) {
        (Some(from), Some(to)) => (to - from).as_seconds_f64(),
        _ => 0.0,
    }
}

impl Conditions {
    pub fn new(kind: ConditionKind, metrics: ConditionMetrics) -> Self {
        Conditions {
            kind,
            metrics,
            seen: HashMap::new(),
        }
    }

    fn group_kind(&self) -> Labels {
        vec![
            ("group", self.kind.group().to_owned()),
            ("kind", self.kind.kind().to_owned()),
        ]
    }

    /// The object's per-condition labels: `(current, deprecated)`.
    fn condition_labels(&self, object: &Observed, condition: &Condition) -> (Labels, Labels) {
        let base: Labels = vec![
            ("namespace", object.namespace.clone()),
            ("name", object.name.clone()),
            ("type", condition.kind.clone()),
            ("status", condition.status.clone()),
            ("reason", condition.reason.clone()),
        ];
        let mut current = base.clone();
        current.extend(object.labels.iter().cloned());
        let mut deprecated = base;
        deprecated.extend(self.group_kind());
        (current, deprecated)
    }

    fn object_labels(&self, object: &Observed) -> (Labels, Labels) {
        let base: Labels = vec![
            ("namespace", object.namespace.clone()),
            ("name", object.name.clone()),
        ];
        let mut current = base.clone();
        current.extend(object.labels.iter().cloned());
        let mut deprecated = base;
        deprecated.extend(self.group_kind());
        (current, deprecated)
    }

    /// An object as it is at `now`.
    pub fn observe(&mut self, object: Observed, now: DateTime<Utc>) {
        let families = self.metrics.of(self.kind).clone();
        let old = &self.metrics.deprecated;
        let key = (object.namespace.clone(), object.name.clone());
        let previous = self.seen.remove(&key);
        let labels_changed = previous.as_ref().is_some_and(|p| p.labels != object.labels);
        if let Some(deleted) = object.deleted {
            if let Some(previous) = previous.as_ref().filter(|_| labels_changed) {
                let (current, _) = self.object_labels(previous);
                families.termination_current_time_seconds.remove(&current);
            }
            let (current, deprecated) = self.object_labels(&object);
            let seconds = (now - deleted).as_seconds_f64();
            families
                .termination_current_time_seconds
                .get_or_create(&current)
                .set(seconds);
            old.termination_current_time_seconds
                .get_or_create(&deprecated)
                .set(seconds);
        }
        for condition in &object.conditions {
            let (current, deprecated) = self.condition_labels(&object, condition);
            let age = seconds_between(condition.last_transition, Some(now));
            families.count.get_or_create(&current).set(1.0);
            families
                .current_status_seconds
                .get_or_create(&current)
                .set(age);
            old.count.get_or_create(&deprecated).set(1.0);
            old.current_status_seconds
                .get_or_create(&deprecated)
                .set(age);
        }
        let before: &[Condition] = previous.as_ref().map_or(&[], |p| &p.conditions);
        for seen in before {
            let now_condition = object.conditions.iter().find(|c| c.kind == seen.kind);
            let stale = now_condition
                .is_none_or(|c| c.status != seen.status || c.reason != seen.reason)
                || labels_changed;
            if stale && let Some(previous) = previous.as_ref() {
                let (current, deprecated) = self.condition_labels(previous, seen);
                families.count.remove(&current);
                families.current_status_seconds.remove(&current);
                old.count.remove(&deprecated);
                old.current_status_seconds.remove(&deprecated);
            }
        }
        for condition in &object.conditions {
            let seen = before.iter().find(|c| c.kind == condition.kind);
            let was = seen.map_or("Unknown", |c| c.status.as_str());
            if was == condition.status {
                continue;
            }
            let mut transition: Labels = vec![
                ("type", condition.kind.clone()),
                ("status", condition.status.clone()),
                ("reason", condition.reason.clone()),
            ];
            let mut deprecated = transition.clone();
            transition.extend(object.labels.iter().cloned());
            deprecated.extend(self.group_kind());
            families.transitions.get_or_create(&transition).inc();
            old.transitions.get_or_create(&deprecated).inc();
            let Some(seen) = seen else { continue };
            let lasted = seconds_between(seen.last_transition, condition.last_transition);
            let mut duration: Labels = vec![
                ("type", seen.kind.clone()),
                ("status", seen.status.clone()),
                ("to_status", condition.status.clone()),
            ];
            let mut deprecated = duration.clone();
            duration.extend(object.labels.iter().cloned());
            deprecated.extend(self.group_kind());
            families
                .transition_seconds
                .get_or_create(&duration)
                .observe(lasted);
            old.transition_seconds
                .get_or_create(&deprecated)
                .observe(lasted);
        }
        self.seen.insert(key, object);
    }

    /// Forgets every object not in `present` (namespace, name): its series go, and its
    /// termination is observed if it was seen being deleted.
    pub fn forget_all_but(
        &mut self,
        present: &std::collections::HashSet<(String, String)>,
        now: DateTime<Utc>,
    ) {
        let gone: Vec<(String, String)> = self
            .seen
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.forget(&key, now);
        }
    }

    /// The object `key` is gone.
    fn forget(&mut self, key: &(String, String), now: DateTime<Utc>) {
        let Some(object) = self.seen.remove(key) else {
            return;
        };
        let families = self.metrics.of(self.kind).clone();
        let old = &self.metrics.deprecated;
        for condition in &object.conditions {
            let (current, deprecated) = self.condition_labels(&object, condition);
            families.count.remove(&current);
            families.current_status_seconds.remove(&current);
            old.count.remove(&deprecated);
            old.current_status_seconds.remove(&deprecated);
        }
        let (current, deprecated) = self.object_labels(&object);
        families.termination_current_time_seconds.remove(&current);
        old.termination_current_time_seconds.remove(&deprecated);
        if let Some(deleted) = object.deleted {
            let seconds = (now - deleted).as_seconds_f64();
            families
                .termination_duration_seconds
                .get_or_create(&object.labels)
                .observe(seconds);
            old.termination_duration_seconds
                .get_or_create(&self.group_kind())
                .observe(seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("a time")
            .with_timezone(&Utc)
    }

    fn claim(conditions: &[(&str, &str, &str, &str)], deleted: Option<&str>) -> Observed {
        Observed {
            namespace: String::new(),
            name: "general-x".into(),
            deleted: deleted.map(at),
            conditions: conditions
                .iter()
                .map(|(kind, status, reason, since)| Condition {
                    kind: (*kind).into(),
                    status: (*status).into(),
                    reason: (*reason).into(),
                    last_transition: Some(at(since)),
                })
                .collect(),
            labels: vec![
                ("karpenter_k8s_aws_ec2nodeclass", "default".into()),
                ("karpenter_sh_nodepool", "general".into()),
            ],
        }
    }

    fn series(text: &str, prefix: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_conditions_transitions_are_counted_and_timed_and_its_old_series_go() {
        let registry = Metrics::new();
        let mut conditions = Conditions::new(
            ConditionKind::NodeClaim,
            ConditionMetrics::register(&registry),
        );
        conditions.observe(
            claim(
                &[
                    ("Launched", "True", "Launched", "2026-01-01T00:00:00Z"),
                    (
                        "Initialized",
                        "Unknown",
                        "AwaitingRegistration",
                        "2026-01-01T00:00:00Z",
                    ),
                ],
                None,
            ),
            at("2026-01-01T00:00:30Z"),
        );
        conditions.observe(
            claim(
                &[
                    ("Launched", "True", "Launched", "2026-01-01T00:00:00Z"),
                    ("Initialized", "True", "Initialized", "2026-01-01T00:01:00Z"),
                ],
                None,
            ),
            at("2026-01-01T00:01:30Z"),
        );
        let text = registry.encode().expect("encodes");
        let count = series(&text, "operator_nodeclaim_status_condition_count{");
        assert_eq!(count.len(), 2, "{count:?}");
        assert!(
            count
                .iter()
                .any(|l| l.contains("type=\"Initialized\",status=\"True\"")),
            "{count:?}"
        );
        assert!(
            text.contains("operator_nodeclaim_status_condition_current_status_seconds{namespace=\"\",name=\"general-x\",type=\"Launched\",status=\"True\",reason=\"Launched\",karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"general\"} 90.0"),
            "{text}"
        );
        // Launched=True first seen: a transition from Unknown, without a duration; Initialized
        // first seen Unknown: none; then Unknown -> True after 60 s.
        assert!(text.contains("operator_nodeclaim_status_condition_transitions_total{type=\"Launched\",status=\"True\",reason=\"Launched\",karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"general\"} 1"), "{text}");
        assert!(text.contains("operator_nodeclaim_status_condition_transition_seconds_sum{type=\"Initialized\",status=\"Unknown\",to_status=\"True\",karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"general\"} 60.0"), "{text}");
        assert!(text.contains("operator_status_condition_transitions_total{type=\"Initialized\",status=\"True\",reason=\"Initialized\",group=\"karpenter.sh\",kind=\"NodeClaim\"} 1"), "{text}");
        assert_eq!(
            series(&text, "operator_status_condition_count{").len(),
            2,
            "the deprecated series follow"
        );
    }

    #[test]
    fn a_deleted_object_reports_its_termination_until_it_is_gone() {
        let registry = Metrics::new();
        let mut conditions = Conditions::new(
            ConditionKind::NodeClaim,
            ConditionMetrics::register(&registry),
        );
        let deleting = claim(
            &[("Launched", "True", "Launched", "2026-01-01T00:00:00Z")],
            Some("2026-01-01T00:10:00Z"),
        );
        conditions.observe(deleting, at("2026-01-01T00:10:20Z"));
        let text = registry.encode().expect("encodes");
        assert!(text.contains("operator_nodeclaim_termination_current_time_seconds{namespace=\"\",name=\"general-x\",karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"general\"} 20.0"), "{text}");
        conditions.forget_all_but(&Default::default(), at("2026-01-01T00:10:45Z"));
        let text = registry.encode().expect("encodes");
        assert!(!text.contains("name=\"general-x\""), "{text}");
        assert!(text.contains("operator_nodeclaim_termination_duration_seconds_sum{karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"general\"} 45.0"), "{text}");
        assert!(text.contains("operator_termination_duration_seconds_sum{group=\"karpenter.sh\",kind=\"NodeClaim\"} 45.0"), "{text}");
    }
}
