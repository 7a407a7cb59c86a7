//! The plan as a table for humans. (JSON and YAML are the [`crate::Plan`] serialized.)

use std::fmt::Write as _;

use crate::plan::Plan;

/// Left- or right-aligned columns with widths fitted to the content.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            if i > 0 {
                out.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                let _ = write!(out, "{cell:>width$}");
            } else {
                let _ = write!(out, "{cell:<width$}");
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

fn percent(ratio: f64) -> String {
    format!("{:.0}%", ratio * 100.0)
}

pub(crate) fn dollars(amount: f64) -> String {
    format!("${amount:.4}")
}

/// Renders the plan.
pub fn plan_table(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan for {} pending pod(s) in {}; NodePools: {}{}",
        plan.pods_pending,
        plan.region,
        plan.nodepools.join(", "),
        if plan.default_nodepool {
            " (built-in default)"
        } else {
            ""
        }
    );
    out.push('\n');
    let rows: Vec<Vec<String>> = plan
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.batch.to_string(),
                n.nodepool.clone(),
                n.instance_type.clone(),
                n.capacity_type.clone(),
                n.zone.clone(),
                n.pods.to_string(),
                n.daemonset_pods.to_string(),
                percent(n.cpu_utilisation),
                percent(n.memory_utilisation),
                format!(
                    "{}{}",
                    dollars(n.price_per_hour),
                    if n.price_is_estimate { "*" } else { " " }
                ),
            ]
        })
        .collect();
    if rows.is_empty() {
        out.push_str("No nodes to launch.\n");
    } else {
        out.push_str(&table(
            &[
                "BATCH",
                "NODEPOOL",
                "INSTANCE TYPE",
                "CAPACITY",
                "ZONE",
                "PODS",
                "DS PODS",
                "CPU",
                "MEMORY",
                "$/HOUR",
            ],
            &rows,
            &[
                true, false, false, false, false, true, true, true, true, true,
            ],
        ));
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "Total: {} node(s) in {} batch{}, {} pod(s) on new nodes{}, {}/hour, {}/month{}",
        plan.nodes.len(),
        plan.batches,
        if plan.batches == 1 { "" } else { "es" },
        plan.pods_on_new_nodes,
        if plan.pods_on_existing_nodes > 0 {
            format!(", {} on existing nodes", plan.pods_on_existing_nodes)
        } else {
            String::new()
        },
        dollars(plan.total_per_hour),
        format_args!("${:.2}", plan.total_per_month),
        if plan.total_includes_estimates {
            " (includes spot estimates)"
        } else {
            ""
        }
    );
    if plan.total_includes_estimates {
        let _ = writeln!(
            out,
            "* spot price is an estimate: on-demand x (1 - {}), not a market price",
            plan.spot_discount
        );
    }
    if !plan.zone_pinning {
        let _ = writeln!(
            out,
            "Zone pinning off (--no-zone-pinning): one pod per zone-level anti-affinity group per batch, as upstream"
        );
    }
    let bound = &plan.lower_bound;
    let unit = |u: &Option<crate::lower_bound::UnitPrice>, what: &str| {
        u.as_ref().map_or(String::new(), |u| {
            format!(
                "{} per {what}-hour ({} {})",
                dollars(u.price),
                u.instance_type,
                u.capacity_type
            )
        })
    };
    if bound.cheapest_per_vcpu_hour.is_none() || bound.cheapest_per_gib_hour.is_none() {
        let _ = writeln!(
            out,
            "Lower bound: none (no NodePool allows an instance type with a price)"
        );
    } else if bound.cpu_requests == 0.0 && bound.memory_requests_gib == 0.0 {
        let _ = writeln!(
            out,
            "Lower bound: {}/hour (no pod is placed on a new node)",
            dollars(0.0)
        );
    } else {
        let _ = writeln!(
            out,
            "Lower bound: {}/hour = max({:.2} vCPU x {}, {:.2} GiB x {}), bound by {}",
            dollars(plan.lower_bound_per_hour),
            bound.cpu_requests,
            unit(&bound.cheapest_per_vcpu_hour, "vCPU"),
            bound.memory_requests_gib,
            unit(&bound.cheapest_per_gib_hour, "GiB"),
            bound.bound_by
        );
    }
    if let Some(ratio) = plan.ratio_to_lower_bound {
        let _ = writeln!(out, "Plan / lower bound: {ratio:.2}x");
    }
    if let Some(group) = &plan.compare_nodegroup {
        out.push('\n');
        let _ = writeln!(
            out,
            "Fixed node group of {}: {} node(s) x {}/hour (on-demand) = {}/hour, ${:.2}/month; CPU {}, memory {} used{}",
            group.instance_type,
            group.nodes,
            dollars(group.price_per_node_per_hour),
            dollars(group.total_per_hour),
            group.total_per_month,
            percent(group.cpu_utilisation),
            percent(group.memory_utilisation),
            if group.pods_not_fitting.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} pod(s) do not fit on a {}: {}",
                    group.pods_not_fitting.len(),
                    group.instance_type,
                    group.pods_not_fitting.join(", ")
                )
            }
        );
        if plan.total_per_hour > 0.0 {
            let _ = writeln!(
                out,
                "Karpenter plan vs node group: {}/hour vs {}/hour ({:+.0}%)",
                dollars(plan.total_per_hour),
                dollars(group.total_per_hour),
                (plan.total_per_hour / group.total_per_hour.max(f64::MIN_POSITIVE) - 1.0) * 100.0
            );
        }
    }
    if !plan.unschedulable.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Unschedulable pods ({}):", plan.unschedulable.len());
        for pod in &plan.unschedulable {
            let _ = writeln!(out, "  {}", pod.pod);
            for reason in &pod.reasons {
                let _ = writeln!(out, "    {reason}");
            }
        }
    }
    if !plan.ignored.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Ignored objects ({}):", plan.ignored.len());
        for ignored in &plan.ignored {
            let at = match ignored.position {
                Some(position) => format!("{}:{position}", ignored.file),
                None => format!("{}: document {}", ignored.file, ignored.document),
            };
            let _ = writeln!(out, "  {at}: {}: {}", ignored.object, ignored.reason);
        }
    }
    if !plan.notes.is_empty() {
        out.push('\n');
        out.push_str("Notes:\n");
        for note in &plan.notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

fn clock(seconds: u64) -> String {
    format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60
    )
}

/// Renders a timeline report: summary, cost over time (one row per change), the event log.
pub fn timeline_table(report: &crate::timeline::TimelineReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Timeline of {}: total cost ${:.2}, average {}/hour, peak {}/hour with {} node(s)",
        clock(report.duration_seconds),
        report.total_cost,
        dollars(report.average_cost_per_hour),
        dollars(report.peak_cost_per_hour),
        report.peak_nodes
    );
    let p = &report.pending_seconds;
    let _ = writeln!(
        out,
        "Launches: {}, spot interruptions: {}, nodes disrupted: {}, evictions: {}; pods started: {}, still pending: {}",
        report.launches,
        report.interruptions,
        report.disruptions,
        report.evictions,
        report.pods_started,
        report.pods_still_pending
    );
    let _ = writeln!(
        out,
        "Pending time: p50 {:.0}s, p90 {:.0}s, p99 {:.0}s, max {:.0}s",
        p.p50, p.p90, p.p99, p.max
    );
    out.push('\n');
    out.push_str("Cost over time:\n");
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut last: Option<(usize, usize, usize, u64)> = None;
    // The last sample of each second, and only when something changed.
    let latest = report.samples.iter().enumerate().filter(|(i, s)| {
        report
            .samples
            .get(i + 1)
            .is_none_or(|next| next.at_seconds != s.at_seconds)
    });
    for (_, s) in latest {
        let key = (
            s.nodes,
            s.pods_running,
            s.pods_pending,
            (s.cost_per_hour * 1e6) as u64,
        );
        if last == Some(key) {
            continue;
        }
        last = Some(key);
        rows.push(vec![
            clock(s.at_seconds),
            s.nodes.to_string(),
            s.pods_running.to_string(),
            s.pods_pending.to_string(),
            percent(s.cpu_utilisation),
            dollars(s.cost_per_hour),
        ]);
    }
    out.push_str(&table(
        &["TIME", "NODES", "RUNNING", "PENDING", "CPU", "$/HOUR"],
        &rows,
        &[false, true, true, true, true, true],
    ));
    out.push('\n');
    out.push_str("Events:\n");
    for line in &report.log {
        let _ = writeln!(out, "  {line}");
    }
    if !report.notes.is_empty() {
        out.push('\n');
        out.push_str("Notes:\n");
        for note in &report.notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}
