//! EC2 instance status checks, the pure half of upstream's `interruption.instancestatus`
//! controller (`pkg/providers/instancestatus`, `instancestatus_controller.go`, v1.15.1): what to
//! ask `DescribeInstanceStatus` and which of its answers make an instance unhealthy.
//!
//! Upstream polls every [`POLL_INTERVAL`], whether or not an interruption queue is set, with
//! one paginated `DescribeInstanceStatus` per query of [`QUERIES`] (the filters of one call are
//! ANDed, so impaired instance status, impaired system status and scheduled events are three
//! calls; each answers only the matching running instances of the account and region, so the
//! cost does not grow with the cluster). An instance is unhealthy ([`unhealthy`]) when
//!
//! * an instance-status or system-status check detail has status `failed` and has been impaired
//!   for at least [`UNHEALTHY_THRESHOLD`] (a detail without `ImpairedSince` counts as impaired
//!   for long);
//! * it has a scheduled event of any code (`instance-reboot`, `system-reboot`,
//!   `system-maintenance`, `instance-retirement`, `instance-stop`): at once, whatever its
//!   schedule, as upstream treats the EventBridge scheduled change;
//! * attached EBS status checks never count (upstream cannot yet tell a node's volume from a
//!   pod's).
//!
//! Each unhealthy category becomes a message of its kind ([`MessageKind::InstanceStatus`],
//! [`MessageKind::SystemStatus`], [`MessageKind::EventStatus`]) for the instance, decided by
//! [`super::decide::decide_for`] like a queue message: instance and system status failures
//! expire the NodeClaim's termination grace at once (drain and volume detachment are not
//! waited for: the instance is broken) and delete it; an event deletes it (a normal drain).
//!
//! Must not: call EC2, read the clock (`now` is a value) or keep state; the shell keeps the
//! set of (instance, category) already counted in
//! `karpenter_interruption_instance_status_unhealthy_total`.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::kind::MessageKind;

/// How often upstream polls (`InstanceStatusInterval`).
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// How long an instance or system check must have been failing (`UnhealthyThreshold`).
pub const UNHEALTHY_THRESHOLD: chrono::TimeDelta = chrono::TimeDelta::seconds(120);

/// `karpenter_interruption_instance_status_unhealthy_total{category}`: one per (instance,
/// category) first seen unhealthy while it belongs to one of our NodeClaims; seen again after it
/// was once reported healthy, it counts again.
pub const INSTANCE_STATUS_UNHEALTHY_TOTAL: &str =
    "karpenter_interruption_instance_status_unhealthy_total";

/// One `DescribeInstanceStatus` filter: name and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub filter: &'static str,
    pub values: &'static [&'static str],
}

/// The three calls of a poll, in upstream's order (one filter each: filters of one call AND).
pub const QUERIES: [Query; 3] = [
    Query {
        filter: "instance-status.status",
        values: &["impaired"],
    },
    Query {
        filter: "system-status.status",
        values: &["impaired"],
    },
    Query {
        filter: "event.code",
        values: &[
            "instance-reboot",
            "system-reboot",
            "system-maintenance",
            "instance-retirement",
            "instance-stop",
        ],
    },
];

/// What a status check is about (upstream's `Category`, its names the metric's label values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    InstanceStatus,
    SystemStatus,
    /// A scheduled event.
    EventStatus,
    /// Attached EBS volumes: reported, never acted on.
    EbsStatus,
}

impl Category {
    /// The `category` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::InstanceStatus => "InstanceStatus",
            Category::SystemStatus => "SystemStatus",
            Category::EventStatus => "EventStatus",
            Category::EbsStatus => "EBSStatus",
        }
    }

    /// The message kind a failure of this category becomes; `None` for EBS.
    pub fn kind(self) -> Option<MessageKind> {
        match self {
            Category::InstanceStatus => Some(MessageKind::InstanceStatus),
            Category::SystemStatus => Some(MessageKind::SystemStatus),
            Category::EventStatus => Some(MessageKind::EventStatus),
            Category::EbsStatus => None,
        }
    }
}

/// One check detail (or scheduled event) of an instance, as EC2 reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub category: Category,
    /// The detail's name (`reachability`) or the event's code.
    pub name: String,
    /// `passed`, `failed`, `insufficient-data`, `initializing`; events are reported `failed`.
    pub status: String,
    /// Since when the check has failed; `None` when EC2 did not say (and for events).
    pub impaired_since: Option<DateTime<Utc>>,
}

impl Check {
    /// A scheduled event with `code`.
    pub fn event(code: &str) -> Self {
        Check {
            category: Category::EventStatus,
            name: code.to_owned(),
            status: "failed".to_owned(),
            impaired_since: None,
        }
    }
}

/// One instance of a `DescribeInstanceStatus` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    pub instance_id: String,
    pub checks: Vec<Check>,
}

/// An unhealthy instance: the categories that count, and since when it has been impaired (the
/// earliest of its counting checks; `now` for an event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    pub instance_id: String,
    pub categories: BTreeSet<Category>,
    pub impaired_since: Option<DateTime<Utc>>,
}

/// Whether `check` makes its instance unhealthy at `now`.
pub fn counts(check: &Check, now: DateTime<Utc>) -> bool {
    if check.status != "failed" {
        return false;
    }
    match check.category {
        Category::EbsStatus => false,
        // A scheduled event vacates the host at once, whatever its schedule says.
        Category::EventStatus => true,
        Category::InstanceStatus | Category::SystemStatus => check
            .impaired_since
            .is_none_or(|since| now - since >= UNHEALTHY_THRESHOLD),
    }
}

/// The unhealthy instances of the answers of one poll (the [`QUERIES`] in order), each once:
/// an instance two queries returned is taken from the first.
pub fn unhealthy(reports: &[StatusReport], now: DateTime<Utc>) -> Vec<Unhealthy> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for report in reports {
        if !seen.insert(report.instance_id.as_str()) {
            continue;
        }
        let counting: Vec<&Check> = report.checks.iter().filter(|c| counts(c, now)).collect();
        if counting.is_empty() {
            continue;
        }
        let impaired_since = counting
            .iter()
            .map(|c| match c.category {
                Category::EventStatus => now,
                _ => c.impaired_since.unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
            })
            .min();
        out.push(Unhealthy {
            instance_id: report.instance_id.clone(),
            categories: counting.iter().map(|c| c.category).collect(),
            impaired_since,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::TimeDelta::seconds(seconds)
    }

    fn check(category: Category, status: &str, since: Option<i64>) -> Check {
        Check {
            category,
            name: "reachability".into(),
            status: status.into(),
            impaired_since: since.map(at),
        }
    }

    fn report(id: &str, checks: Vec<Check>) -> StatusReport {
        StatusReport {
            instance_id: id.into(),
            checks,
        }
    }

    #[test]
    fn a_failed_instance_check_counts_only_after_two_minutes() {
        let now = at(1_000);
        let young = report(
            "i-young",
            vec![check(Category::InstanceStatus, "failed", Some(1_000 - 119))],
        );
        let old = report(
            "i-old",
            vec![check(Category::SystemStatus, "failed", Some(1_000 - 120))],
        );
        let found = unhealthy(&[young, old], now);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].instance_id, "i-old");
        assert_eq!(
            found[0].categories,
            BTreeSet::from([Category::SystemStatus])
        );
        assert_eq!(found[0].impaired_since, Some(at(880)));
    }

    #[test]
    fn a_check_that_did_not_fail_never_counts() {
        let now = at(10_000);
        for status in ["passed", "insufficient-data", "initializing"] {
            let r = report(
                "i-1",
                vec![check(Category::InstanceStatus, status, Some(0))],
            );
            assert_eq!(unhealthy(&[r], now), vec![], "{status}");
        }
    }

    #[test]
    fn a_failed_check_without_a_start_counts_at_once() {
        let r = report("i-1", vec![check(Category::InstanceStatus, "failed", None)]);
        assert_eq!(unhealthy(&[r], at(5)).len(), 1);
    }

    #[test]
    fn a_scheduled_event_counts_at_once_and_is_impaired_since_now() {
        let r = report("i-1", vec![Check::event("system-maintenance")]);
        let found = unhealthy(&[r], at(42));
        assert_eq!(
            found,
            vec![Unhealthy {
                instance_id: "i-1".into(),
                categories: BTreeSet::from([Category::EventStatus]),
                impaired_since: Some(at(42)),
            }]
        );
    }

    #[test]
    fn ebs_failures_are_ignored() {
        let r = report("i-1", vec![check(Category::EbsStatus, "failed", Some(0))]);
        assert_eq!(unhealthy(&[r], at(10_000)), vec![]);
    }

    #[test]
    fn an_instance_two_queries_returned_is_reported_once_with_every_category() {
        let both = report(
            "i-1",
            vec![
                check(Category::InstanceStatus, "failed", Some(0)),
                check(Category::SystemStatus, "failed", Some(10)),
                Check::event("instance-retirement"),
            ],
        );
        let found = unhealthy(&[both.clone(), both], at(1_000));
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].categories,
            BTreeSet::from([
                Category::InstanceStatus,
                Category::SystemStatus,
                Category::EventStatus
            ])
        );
        assert_eq!(found[0].impaired_since, Some(at(0)), "the earliest");
    }

    #[test]
    fn a_poll_is_three_calls_one_filter_each_in_upstreams_order() {
        let filters: Vec<&str> = QUERIES.iter().map(|q| q.filter).collect();
        assert_eq!(
            filters,
            [
                "instance-status.status",
                "system-status.status",
                "event.code"
            ]
        );
        assert_eq!(QUERIES[0].values, ["impaired"]);
        assert_eq!(QUERIES[1].values, ["impaired"]);
        assert_eq!(QUERIES[2].values.len(), 5);
    }

    #[test]
    fn categories_use_upstreams_label_values_and_ebs_has_no_message() {
        let labels: Vec<&str> = [
            Category::InstanceStatus,
            Category::SystemStatus,
            Category::EventStatus,
            Category::EbsStatus,
        ]
        .iter()
        .map(|c| c.as_str())
        .collect();
        assert_eq!(
            labels,
            ["InstanceStatus", "SystemStatus", "EventStatus", "EBSStatus"]
        );
        assert_eq!(Category::EbsStatus.kind(), None);
        assert_eq!(
            Category::SystemStatus.kind(),
            Some(MessageKind::SystemStatus)
        );
    }
}
