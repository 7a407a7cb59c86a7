//! A view as text: a header (each resource's requests against allocatable with a bar, the cost
//! per hour and month, pod counts, the next consolidation's saving when the controller said), a
//! row per node (with the controller's verdict when it said), the NodePools (nodes, drifted,
//! limits used/allowed, budgets allowed now per reason), the pending pods. Columns fit `width`;
//! a pending pod's reason is cut to fit.

use std::fmt::Write as _;

use crate::view::{NodeRow, Usage, View, format_quantity};

const BAR: usize = 10;
/// Hours in a month, as eks-node-viewer counts them.
pub(crate) const HOURS_PER_MONTH: f64 = 730.0;

pub(crate) fn bar(share: f64) -> String {
    let filled = ((share.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR - filled))
}

pub(crate) fn percent(share: f64) -> String {
    format!("{:>3.0}%", share * 100.0)
}

/// `1d2h`, `3h4m`, `5m6s`, `7s`.
pub fn age(seconds: i64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

pub(crate) fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// kube-scheduler's `PodScheduled` message without the parts a narrow column cannot afford:
/// the `0/N nodes are available: ` lead and the `preemption: ...` tail, so that what keeps the
/// pod off each node comes first. `karpenter top -o json` keeps the whole message.
fn condensed(reason: &str) -> &str {
    let reason = reason.split(" preemption: ").next().unwrap_or(reason);
    let reason = match reason.split_once(" nodes are available: ") {
        Some((count, rest))
            if count.split_once('/').is_some_and(|(a, b)| {
                [a, b]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
            }) =>
        {
            rest
        }
        _ => reason,
    };
    reason.trim_end().trim_end_matches('.')
}

fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| format!("{cell:<width$}", width = widths[i]))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

fn usage_cell(u: &Usage) -> String {
    format!("{} {}", bar(u.share()), percent(u.share()))
}

/// What the next consolidation saves, as the header's summary line ends.
pub(crate) fn saving(per_hour: f64) -> String {
    format!(
        "  next consolidation saves ${per_hour:.3}/hour | ${:.2}/month",
        per_hour * HOURS_PER_MONTH
    )
}

/// The header: a line per resource (requests against allocatable, with a bar) and the summary
/// line (nodes, cost per hour and month, pod counts).
pub(crate) fn header(view: &View) -> Vec<String> {
    let mut lines: Vec<String> = view
        .totals
        .iter()
        .map(|total| {
            format!(
                "{:<8} {} {}  {}/{}",
                total.resource,
                bar(total.share()),
                percent(total.share()),
                format_quantity(&total.resource, total.requested),
                format_quantity(&total.resource, total.allocatable),
            )
        })
        .collect();
    let cost = view.cost_per_hour.map_or_else(
        || "cost unknown".to_owned(),
        |c| format!("${c:.3}/hour | ${:.2}/month", c * HOURS_PER_MONTH),
    );
    lines.push(format!(
        "{} nodes  {cost}  pods: {} pending, {} bound ({} running)",
        view.nodes.len(),
        view.pods.pending,
        view.pods.bound,
        view.pods.running
    ));
    if let Some(pricing) = &view.pricing {
        lines.push(format!("prices: {pricing}"));
    }
    lines
}

/// The node table's column titles.
pub(crate) fn node_header(view: &View) -> Vec<String> {
    let mut header = vec!["NODE".to_owned()];
    header.extend(view.totals.iter().map(|t| t.resource.to_uppercase()));
    header.extend(
        [
            "PODS", "TYPE", "CAPACITY", "PRICE", "NODEPOOL", "STATUS", "AGE",
        ]
        .map(String::from),
    );
    let extra_labels = view.nodes.first().map_or(0, |n| n.extra.len());
    header.extend((0..extra_labels).map(|i| format!("LABEL{}", i + 1)));
    header
}

/// One node's cells, in [`node_header`]'s order.
pub(crate) fn node_cells(node: &NodeRow) -> Vec<String> {
    let mut row = vec![node.name.clone()];
    row.extend(node.usage.iter().map(usage_cell));
    row.push(format!("{}/{}", node.pods, node.max_pods));
    row.push(node.instance_type.clone());
    row.push(node.capacity_type.clone());
    row.push(
        node.price
            .map_or_else(|| "-".to_owned(), |p| format!("${p:.4}/h")),
    );
    row.push(node.node_pool.clone());
    let mut status = vec![node.ready.clone()];
    status.extend(node.status.iter().cloned());
    row.push(status.join(","));
    row.push(age(node.age_seconds));
    row.extend(node.extra.iter().cloned());
    row
}

/// The NodePools as a table (empty when there are none).
pub(crate) fn node_pools(view: &View) -> String {
    if view.node_pools.is_empty() {
        return String::new();
    }
    let mut rows = vec![
        [
            "NODEPOOL",
            "READY",
            "NODES",
            "DRIFTED",
            "LIMITS",
            "BUDGETS NOW",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for pool in &view.node_pools {
        let limits = pool
            .limits
            .iter()
            .map(|(r, used, limit)| format!("{r} {used}/{limit}"))
            .collect::<Vec<_>>()
            .join(", ");
        let budgets = pool.budgets.as_ref().map_or_else(
            || "-".to_owned(),
            |budgets| {
                budgets
                    .iter()
                    .map(|b| format!("{} {}", b.reason, b.allowed))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        rows.push(vec![
            pool.name.clone(),
            pool.ready.clone(),
            pool.nodes.to_string(),
            pool.drifted.to_string(),
            if limits.is_empty() {
                "-".to_owned()
            } else {
                limits
            },
            budgets,
        ]);
    }
    table(&rows)
}

/// A line per pending pod: its name, age and reason, cut to `width`.
pub(crate) fn pending(view: &View, width: usize) -> Vec<String> {
    let pod_width = view
        .pending
        .iter()
        .map(|p| p.pod.chars().count())
        .max()
        .unwrap_or(0);
    view.pending
        .iter()
        .map(|p| {
            let prefix = format!("{:<pod_width$}  {:>6}  ", p.pod, age(p.age_seconds));
            let room = width.saturating_sub(prefix.chars().count()).max(20);
            format!("{prefix}{}", cut(condensed(&p.reason), room).trim_end())
        })
        .collect()
}

/// Karpenter's events as a table (a title row, then a row per event, newest first): age (and
/// `(xN)` when it happened N times), type, reason, object, and the note on one line cut to
/// `width`. Empty when there are none.
pub(crate) fn events(view: &View, width: usize) -> Vec<String> {
    if view.events.is_empty() {
        return Vec::new();
    }
    let mut rows: Vec<[String; 5]> =
        vec![["AGE", "TYPE", "REASON", "OBJECT", "NOTE"].map(String::from)];
    rows.extend(view.events.iter().map(|e| {
        let seen = if e.count > 1 {
            format!("{} (x{})", age(e.age_seconds), e.count)
        } else {
            age(e.age_seconds)
        };
        let note = e.note.split_whitespace().collect::<Vec<_>>().join(" ");
        [
            seen,
            e.type_.clone(),
            e.reason.clone(),
            e.object.clone(),
            note,
        ]
    }));
    let mut widths = [0usize; 4];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|[seen, type_, reason, object, note]| {
            let prefix = format!(
                "{seen:<w0$}  {type_:<w1$}  {reason:<w2$}  {object:<w3$}  ",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
            );
            let room = width.saturating_sub(prefix.chars().count()).max(20);
            format!("{prefix}{}", cut(note, room)).trim_end().to_owned()
        })
        .collect()
}

/// The view as text, `width` columns wide at most for the cut columns.
pub fn render(view: &View, width: usize) -> String {
    let mut out = String::new();
    let mut lines = header(view);
    if let (Some(summary), Some(per_hour)) = (lines.last_mut(), view.saving_per_hour) {
        summary.push_str(&saving(per_hour));
    }
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    // The controller's verdicts, when it was asked and said.
    let verdicts = view.nodes.iter().any(|n| n.verdict.is_some());
    let mut title = node_header(view);
    if verdicts {
        title.push("VERDICT".to_owned());
    }
    let mut rows = vec![title];
    rows.extend(view.nodes.iter().map(|n| {
        let mut cells = node_cells(n);
        if verdicts {
            cells.push(n.verdict.clone().unwrap_or_else(|| "-".to_owned()));
        }
        cells
    }));
    out.push_str(&table(&rows));
    if !view.node_pools.is_empty() {
        out.push('\n');
        out.push_str(&node_pools(view));
    }
    if !view.pending.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "PENDING");
        for line in pending(view, width) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::view::{Options, view};

    struct Flat;

    impl crate::view::Prices for Flat {
        fn price(&self, it: &str, _: &str, ct: &str) -> Option<f64> {
            match (it, ct) {
                ("c5.large", "on-demand") => Some(0.085),
                ("m5.large", "spot") => Some(0.04),
                _ => None,
            }
        }
    }

    #[test]
    fn the_table_at_a_fixed_width_is_what_people_read() {
        let at = crate::view::tests::at("2026-11-27T10:00:00Z");
        let text = render(
            &view(
                &crate::view::tests::listed(),
                &Flat,
                &Options::default(),
                at,
            ),
            80,
        );
        assert_eq!(
            text,
            "\
cpu      ████░░░░░░  44%  1.75/4
memory   ████░░░░░░  38%  3Gi/8Gi
3 nodes  $0.210/hour | $153.30/month  pods: 1 pending, 3 bound (2 running)

NODE        CPU              MEMORY           PODS  TYPE      CAPACITY   PRICE      NODEPOOL  STATUS            AGE
node-a      ████████░░  75%  █████░░░░░  50%  2/29  c5.large  on-demand  $0.0850/h  general   Ready             2h0m
node-b      █░░░░░░░░░  12%  ███░░░░░░░  25%  1/29  m5.large  spot       $0.0400/h  general   Ready,Disrupting  30m0s
general-x7  ░░░░░░░░░░   0%  ░░░░░░░░░░   0%  0/0   c5.large  on-demand  $0.0850/h  general   Launching         30s

NODEPOOL  READY  NODES  DRIFTED  LIMITS     BUDGETS NOW
general   True   3      0        cpu 0/100  -

PENDING
shop/huge    2m0s  2 Insufficient cpu
"
        );
    }

    #[test]
    fn with_the_controllers_answers_the_table_shows_verdicts_budgets_and_the_saving() {
        let at = crate::view::tests::at("2026-11-27T10:00:00Z");
        let mut view = view(
            &crate::view::tests::listed_with_a_drifted_node(),
            &Flat,
            &Options::default(),
            at,
        );
        let explained = crate::Explained {
            verdicts: [
                ("node-a".to_owned(), "Drift".to_owned()),
                ("node-b".to_owned(), "PodDoNotDisrupt".to_owned()),
            ]
            .into(),
            saving_per_hour: Some(0.045),
            budgets: [(
                "general".to_owned(),
                vec![
                    ("Empty".to_owned(), 1),
                    ("Drifted".to_owned(), 0),
                    ("Underutilized".to_owned(), 1),
                ],
            )]
            .into(),
            ..crate::Explained::default()
        };
        crate::view::explain(&mut view, &explained);
        assert_eq!(
            render(&view, 80),
            "\
cpu      ████░░░░░░  44%  1.75/4
memory   ████░░░░░░  38%  3Gi/8Gi
3 nodes  $0.210/hour | $153.30/month  pods: 1 pending, 3 bound (2 running)  next consolidation saves $0.045/hour | $32.85/month

NODE        CPU              MEMORY           PODS  TYPE      CAPACITY   PRICE      NODEPOOL  STATUS            AGE    VERDICT
node-a      ████████░░  75%  █████░░░░░  50%  2/29  c5.large  on-demand  $0.0850/h  general   Ready             2h0m   Drift
node-b      █░░░░░░░░░  12%  ███░░░░░░░  25%  1/29  m5.large  spot       $0.0400/h  general   Ready,Disrupting  30m0s  PodDoNotDisrupt
general-x7  ░░░░░░░░░░   0%  ░░░░░░░░░░   0%  0/0   c5.large  on-demand  $0.0850/h  general   Launching         30s    -

NODEPOOL  READY  NODES  DRIFTED  LIMITS     BUDGETS NOW
general   True   3      1        cpu 2/100  Empty 1, Drifted 0, Underutilized 1

PENDING
shop/huge    2m0s  2 Insufficient cpu
"
        );
    }

    #[test]
    fn a_pending_pods_reason_leads_with_what_keeps_it_off_the_nodes() {
        assert_eq!(
            condensed(
                "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
                 1 node(s) had untolerated taint {a: b}. preemption: 0/2 nodes are available: \
                 2 Preemption is not helpful for scheduling."
            ),
            "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated \
             taint {a: b}"
        );
        assert_eq!(
            condensed("no nodes available to schedule pods"),
            "no nodes available to schedule pods"
        );
        assert_eq!(
            condensed("some/thing nodes are available: x"),
            "some/thing nodes are available: x"
        );
        assert_eq!(condensed(""), "");
    }

    #[test]
    fn ages_read_in_their_two_largest_units() {
        assert_eq!(age(7), "7s");
        assert_eq!(age(61), "1m1s");
        assert_eq!(age(3_660), "1h1m");
        assert_eq!(age(90_000), "1d1h");
    }
}
