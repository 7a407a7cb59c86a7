//! Summaries (`# TYPE <name> summary`), which prometheus-client does not have: [`Metrics`]
//! encodes the registered ones itself, after the registry's metrics.
//!
//! Upstream's summaries (`karpenter_nodes_termination_duration_seconds`,
//! `karpenter_pods_startup_duration_seconds`) are client_golang summaries with the objectives
//! 0, 0.5, 0.9, 0.99 and 1 over client_golang's default sliding window of 10 minutes, and
//! upstream's dashboards read exactly those quantiles (`{quantile="0.5"}`). Here the quantiles
//! are exact (nearest rank) over the observations of the last [`MAX_AGE`], at most
//! [`MAX_WINDOW_SAMPLES`] per series (the oldest go first); `_sum` and `_count` count every
//! observation since the start, as client_golang's do. A quantile of an empty window is `NaN`,
//! as client_golang reports it.
//!
//! [`Metrics`]: super::Metrics

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The quantiles every summary reports (upstream `metrics.SummaryObjectives()`).
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// How long an observation counts towards the quantiles (client_golang `DefMaxAge`).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// At most this many observations per series count towards the quantiles.
pub const MAX_WINDOW_SAMPLES: usize = 10_000;

/// The labels of one series, in the order they are written.
pub type SummaryLabels = Vec<(&'static str, String)>;

/// A family of summaries, one per label set; cheap to clone (clones share their series).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    series: Arc<Mutex<BTreeMap<SummaryLabels, Series>>>,
}

#[derive(Debug, Default)]
struct Series {
    window: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

impl Series {
    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.window.front() {
            if now.saturating_duration_since(*at) < MAX_AGE {
                break;
            }
            self.window.pop_front();
        }
    }
}

/// The value at quantile `q` of `sorted` (nearest rank: 0 is the least, 1 the greatest).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.saturating_sub(1).min(sorted.len() - 1)]
}

/// A sample value as OpenMetrics writes it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        v.to_string()
    }
}

/// A label value or help text with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_set(labels: &SummaryLabels, extra: Option<(&str, &str)>) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(extra)
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

impl Summary {
    /// Records `value` in the series of `labels`.
    pub fn observe(&self, labels: SummaryLabels, value: f64) {
        self.observe_at(labels, value, Instant::now());
    }

    /// [`Summary::observe`] at `now`.
    pub fn observe_at(&self, labels: SummaryLabels, value: f64, now: Instant) {
        let mut series = self.lock();
        let one = series.entry(labels).or_default();
        one.sum += value;
        one.count += 1;
        one.expire(now);
        if one.window.len() >= MAX_WINDOW_SAMPLES {
            one.window.pop_front();
        }
        one.window.push_back((now, value));
    }

    /// Appends the family as OpenMetrics text (`# HELP`, `# TYPE`, the quantiles, `_sum` and
    /// `_count` of every series) to `out`, the window as it stands at `now`.
    pub(crate) fn encode(&self, name: &str, help: &str, out: &mut String, now: Instant) {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {name} {}", escape(help));
        let _ = writeln!(out, "# TYPE {name} summary");
        let mut series = self.lock();
        for (labels, one) in series.iter_mut() {
            one.expire(now);
            let mut sorted: Vec<f64> = one.window.iter().map(|(_, v)| *v).collect();
            sorted.sort_by(f64::total_cmp);
            for q in QUANTILES {
                let q_label = q.to_string();
                let _ = writeln!(
                    out,
                    "{name}{} {}",
                    label_set(labels, Some(("quantile", &q_label))),
                    number(quantile(&sorted, q))
                );
            }
            let plain = label_set(labels, None);
            let _ = writeln!(out, "{name}_sum{plain} {}", number(one.sum));
            let _ = writeln!(out, "{name}_count{plain} {}", one.count);
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<SummaryLabels, Series>> {
        // A panic while holding the lock leaves the series usable: recover them.
        self.series
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(summary: &Summary, now: Instant) -> String {
        let mut out = String::new();
        summary.encode("x_seconds", "Help \"quoted\".", &mut out, now);
        out
    }

    #[test]
    fn a_summary_reports_the_five_upstream_quantiles_with_sum_and_count() {
        let summary = Summary::default();
        let now = Instant::now();
        for v in 1..=100 {
            summary.observe_at(vec![("nodepool", "a".into())], f64::from(v), now);
        }
        let text = encoded(&summary, now);
        assert!(
            text.starts_with("# HELP x_seconds Help \\\"quoted\\\".\n# TYPE x_seconds summary\n")
        );
        for line in [
            "x_seconds{nodepool=\"a\",quantile=\"0\"} 1",
            "x_seconds{nodepool=\"a\",quantile=\"0.5\"} 50",
            "x_seconds{nodepool=\"a\",quantile=\"0.9\"} 90",
            "x_seconds{nodepool=\"a\",quantile=\"0.99\"} 99",
            "x_seconds{nodepool=\"a\",quantile=\"1\"} 100",
            "x_seconds_sum{nodepool=\"a\"} 5050",
            "x_seconds_count{nodepool=\"a\"} 100",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn observations_older_than_ten_minutes_leave_the_quantiles_but_not_the_count() {
        let summary = Summary::default();
        let start = Instant::now();
        summary.observe_at(Vec::new(), 100.0, start);
        summary.observe_at(Vec::new(), 1.0, start + Duration::from_secs(300));
        let later = start + MAX_AGE + Duration::from_secs(1);
        let text = encoded(&summary, later);
        assert!(text.contains("x_seconds{quantile=\"1\"} 1\n"), "{text}");
        assert!(text.contains("x_seconds_count 2\n"), "{text}");
        assert!(text.contains("x_seconds_sum 101\n"), "{text}");
        let empty = encoded(&summary, later + MAX_AGE);
        assert!(
            empty.contains("x_seconds{quantile=\"0.5\"} NaN\n"),
            "{empty}"
        );
    }

    #[test]
    fn the_window_keeps_at_most_its_cap_of_the_newest_observations() {
        let summary = Summary::default();
        let now = Instant::now();
        for v in 0..(MAX_WINDOW_SAMPLES + 10) {
            summary.observe_at(Vec::new(), v as f64, now);
        }
        let text = encoded(&summary, now);
        assert!(text.contains("x_seconds{quantile=\"0\"} 10\n"), "{text}");
        assert!(
            text.contains(&format!("x_seconds_count {}\n", MAX_WINDOW_SAMPLES + 10)),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let summary = Summary::default();
        summary.observe(vec![("nodepool", "a\"b\\c".into())], 1.0);
        let text = encoded(&summary, Instant::now());
        assert!(
            text.contains("x_seconds_count{nodepool=\"a\\\"b\\\\c\"} 1"),
            "{text}"
        );
    }
}
