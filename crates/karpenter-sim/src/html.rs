//! `--report out.html`: a self-contained HTML page (inline SVG, no scripts, no external files)
//! with the timeline's summary, plots of cost, nodes and CPU utilisation over time, and the
//! event log.

use std::fmt::Write as _;

use crate::timeline::{Sample, TimelineReport};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 180.0;
const MARGIN: f64 = 40.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A step plot of one series over the timeline.
fn step_plot(
    title: &str,
    samples: &[Sample],
    end: u64,
    value: fn(&Sample) -> f64,
    unit: &str,
) -> String {
    let max = samples
        .iter()
        .map(value)
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let end = end.max(1) as f64;
    let x = |t: u64| MARGIN + (t as f64 / end) * (WIDTH - 2.0 * MARGIN);
    let y = |v: f64| HEIGHT - MARGIN / 2.0 - (v / max) * (HEIGHT - MARGIN);
    let mut points = String::new();
    let mut previous: Option<f64> = None;
    for sample in samples {
        let v = value(sample);
        if let Some(p) = previous {
            let _ = write!(points, "{:.1},{:.1} ", x(sample.at_seconds), y(p));
        }
        let _ = write!(points, "{:.1},{:.1} ", x(sample.at_seconds), y(v));
        previous = Some(v);
    }
    if let Some(p) = previous {
        let _ = write!(points, "{:.1},{:.1}", x(end as u64), y(p));
    }
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<figure><figcaption>{title}</figcaption><svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}">
<line x1="{MARGIN}" y1="{bottom:.1}" x2="{right:.1}" y2="{bottom:.1}" stroke="#888"/>
<line x1="{MARGIN}" y1="{top:.1}" x2="{MARGIN}" y2="{bottom:.1}" stroke="#888"/>
<text x="2" y="{top_label:.1}" font-size="11">{max_label}</text>
<text x="2" y="{bottom:.1}" font-size="11">0</text>
<text x="{right:.1}" y="{hours_y:.1}" font-size="11" text-anchor="end">{hours:.0} h</text>
<polyline fill="none" stroke="#2a6fdb" stroke-width="2" points="{points}"/>
</svg></figure>
"##,
        title = escape(title),
        bottom = y(0.0),
        top = y(max),
        top_label = y(max) + 4.0,
        right = x(end as u64),
        hours_y = HEIGHT - 2.0,
        hours = end / 3600.0,
        max_label = escape(&format!("{max:.2}{unit}")),
    );
    svg
}

/// The report page.
pub fn timeline_html(report: &TimelineReport) -> String {
    let p = &report.pending_seconds;
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>karpenter simulate: timeline report</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:800px}figure{margin:1em 0}figcaption{font-weight:600}td,th{padding:2px 8px;text-align:right}pre{background:#f4f4f4;padding:1em;overflow-x:auto}</style></head><body>\n<h1>Timeline report</h1>\n",
    );
    let _ = writeln!(
        out,
        "<table><tr><th>Total cost</th><td>${:.2}</td></tr><tr><th>Average</th><td>${:.4}/h</td></tr><tr><th>Peak</th><td>${:.4}/h, {} nodes</td></tr><tr><th>Launches</th><td>{}</td></tr><tr><th>Spot interruptions</th><td>{}</td></tr><tr><th>Nodes disrupted</th><td>{}</td></tr><tr><th>Evictions</th><td>{}</td></tr><tr><th>Pending time p50 / p90 / p99 / max</th><td>{:.0} / {:.0} / {:.0} / {:.0} s</td></tr></table>",
        report.total_cost,
        report.average_cost_per_hour,
        report.peak_cost_per_hour,
        report.peak_nodes,
        report.launches,
        report.interruptions,
        report.disruptions,
        report.evictions,
        p.p50,
        p.p90,
        p.p99,
        p.max
    );
    let end = report.duration_seconds;
    out.push_str(&step_plot(
        "Cost ($/hour)",
        &report.samples,
        end,
        |s| s.cost_per_hour,
        " $/h",
    ));
    out.push_str(&step_plot(
        "Nodes",
        &report.samples,
        end,
        |s| s.nodes as f64,
        "",
    ));
    out.push_str(&step_plot(
        "CPU utilisation (requests / allocatable)",
        &report.samples,
        end,
        |s| s.cpu_utilisation * 100.0,
        "%",
    ));
    out.push_str("<h2>Events</h2>\n<pre>");
    for line in &report.log {
        let _ = writeln!(out, "{}", escape(line));
    }
    out.push_str("</pre>\n");
    if !report.notes.is_empty() {
        out.push_str("<h2>Notes</h2>\n<ul>");
        for note in &report.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Percentiles;

    #[test]
    fn the_report_is_one_self_contained_page_with_three_plots() {
        let sample = |at_seconds, nodes| Sample {
            at_seconds,
            nodes,
            pods_running: 1,
            pods_pending: 0,
            cost_per_hour: 0.1 * nodes as f64,
            cpu_utilisation: 0.5,
        };
        let report = TimelineReport {
            duration_seconds: 7200,
            total_cost: 0.3,
            average_cost_per_hour: 0.15,
            peak_cost_per_hour: 0.2,
            peak_nodes: 2,
            launches: 2,
            interruptions: 0,
            disruptions: 0,
            evictions: 0,
            pods_started: 1,
            pods_still_pending: 0,
            pending_seconds: Percentiles::default(),
            samples: vec![sample(1, 1), sample(3600, 2)],
            log: vec!["00:00:01 <launch>".into()],
            notes: vec![],
        };
        let html = timeline_html(&report);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(html.contains("&lt;launch&gt;"));
        assert!(!html.contains("<script") && !html.contains("http"));
    }
}
