//! The answers as people read them (`-o text`), the same for the controller's answers and
//! the offline ones.

use karpenter_controller::explain::model::{
    CommandAnswer, DestinationAnswer, DisruptionAnswer, LaunchAnswer, NodeAnswer, NodePoolAnswer,
    NodeVerdict, PodAnswer, PodOutcome, ReasonAnswer, RemovalAnswer, ReplacementAnswer,
    UnavailableAnswer,
};

fn launch_text(launch: &ReplacementAnswer) -> String {
    let types = match launch.instance_types {
        1 => "1 instance type".to_owned(),
        n => format!("{n} instance types"),
    };
    match &launch.cheapest {
        Some(c) => format!(
            "nodepool {}, {types}, cheapest {} at ${:.4}/h",
            launch.node_pool, c.instance_type, c.price
        ),
        None => format!("nodepool {}, {types}", launch.node_pool),
    }
}

/// One line per offering: `c5.large on-demand us-east-1a ($0.0850/h) until T (2m remaining)`.
fn unavailable_text(out: &mut String, lead: &str, offerings: &[UnavailableAnswer]) {
    for u in offerings {
        out.push_str(&format!(
            "{lead}{} {} {} (${:.4}/h) until {} ({} remaining)\n",
            u.instance_type, u.capacity_type, u.zone, u.price, u.until, u.remaining
        ));
    }
}

pub fn pod_text(answer: &PodAnswer) -> String {
    let mut out = format!("pod {} (batch of {})\n", answer.pod, answer.decided_at);
    match &answer.outcome {
        PodOutcome::NewNodeClaim {
            node_claim,
            launch,
            pods,
            unavailable,
        } => {
            let claim = node_claim.as_deref().map_or_else(
                || "a new NodeClaim (not created yet)".to_owned(),
                |n| format!("new NodeClaim {n}"),
            );
            out.push_str(&format!(
                "  goes to {claim}: {}; {pods} pod(s) share it\n",
                launch_text(launch)
            ));
            if !unavailable.is_empty() {
                out.push_str(
                    "  cheaper offerings not picked, marked unavailable after insufficient capacity:\n",
                );
                unavailable_text(&mut out, "  - ", unavailable);
            }
        }
        PodOutcome::ExistingNode { node } => {
            out.push_str(&format!("  fits on existing node {node}\n"));
        }
        PodOutcome::Unschedulable { reasons } | PodOutcome::WaitingForReservation { reasons } => {
            out.push_str(
                if matches!(answer.outcome, PodOutcome::Unschedulable { .. }) {
                    "  fits nowhere:\n"
                } else {
                    "  waits for a capacity reservation slot (deferred to the next batch):\n"
                },
            );
            for r in reasons {
                if r.place.is_empty() {
                    out.push_str(&format!("  - {}\n", r.reason));
                } else {
                    out.push_str(&format!("  - {}: {}\n", r.place, r.reason));
                }
                if let Some(closest) = &r.closest {
                    out.push_str(&format!("    closest instance type {closest}\n"));
                }
                if !r.unavailable.is_empty() {
                    out.push_str(
                        "    offerings that would hold it, marked unavailable after insufficient capacity:\n",
                    );
                    unavailable_text(&mut out, "    - ", &r.unavailable);
                }
            }
        }
    }
    out
}

fn reasons_text(out: &mut String, reasons: &[ReasonAnswer]) {
    for r in reasons {
        out.push_str(&format!(
            "  - {} ({}, told as {})\n",
            r.text, r.code, r.event
        ));
        if let Some(lifts) = &r.lifts {
            out.push_str(&format!(
                "    {} remaining, until {}\n",
                lifts.remaining, lifts.at
            ));
        }
    }
}

fn command_text(out: &mut String, c: &CommandAnswer) {
    out.push_str(&format!(
        "  {} ({} budget): {}\n",
        c.method, c.reason, c.explanation
    ));
    if let Some(repair) = &c.repair {
        out.push_str(&format!("  repairs {repair}\n"));
    }
    if c.replacements.is_empty() {
        out.push_str(&format!(
            "  removes {} (no replacement)\n",
            c.nodes.join(", ")
        ));
    } else {
        out.push_str(&format!("  removes {}, replaced by:\n", c.nodes.join(", ")));
        for r in &c.replacements {
            out.push_str(&format!("  - {}\n", launch_text(r)));
        }
    }
    if c.savings_per_hour != 0.0 {
        out.push_str(&format!("  saves ${:.4}/h\n", c.savings_per_hour));
    }
}

fn launch_record_text(out: &mut String, launch: Option<&LaunchAnswer>) {
    let Some(l) = launch else {
        out.push_str(
            "  why it was launched is not known (the controller that launched it records it, while it runs)\n",
        );
        return;
    };
    let named = l.pods.join(", ");
    let more = l.pod_count.saturating_sub(l.pods.len());
    let pods = match (l.pod_count, more) {
        (0, _) => "no pod".to_owned(),
        (_, 0) => format!("{} pod(s): {named}", l.pod_count),
        _ => format!("{} pod(s): {named} and {more} more", l.pod_count),
    };
    out.push_str(&format!(
        "  launched as NodeClaim {} of nodepool {} by the batch of {} for {pods}\n",
        l.node_claim, l.node_pool, l.batch
    ));
    let types = match l.instance_types {
        1 => "1 compatible instance type".to_owned(),
        n => format!("{n} compatible instance types"),
    };
    let mut line = format!("    {types}");
    if let Some(c) = &l.cheapest {
        line.push_str(&format!(
            ", cheapest {} at ${:.4}/h",
            c.instance_type, c.price
        ));
    }
    if let Some(n) = &l.next_cheapest {
        line.push_str(&format!(
            ", next-cheapest {} at ${:.4}/h",
            n.instance_type, n.price
        ));
    }
    if let Some(t) = &l.launched_as {
        line.push_str(&format!("; the cloud launched {t}"));
    }
    out.push_str(&line);
    out.push('\n');
}

pub fn node_text(answer: &NodeAnswer) -> String {
    let mut out = format!("node {} (pass of {})\n", answer.node, answer.decided_at);
    launch_record_text(&mut out, answer.launch.as_ref());
    match &answer.verdict {
        NodeVerdict::Disrupting { command } => {
            out.push_str("  is being disrupted:\n");
            command_text(&mut out, command);
        }
        NodeVerdict::Kept { reasons } => {
            out.push_str("  stays:\n");
            reasons_text(&mut out, reasons);
        }
        NodeVerdict::NotConsidered => out.push_str(
            "  was not considered (not a node of Karpenter's when the pass ran, or newer)\n",
        ),
    }
    out
}

pub fn node_pool_text(answer: &NodePoolAnswer) -> String {
    let mut out = format!(
        "nodepool {} (pass of {})\n",
        answer.node_pool, answer.decided_at
    );
    for c in &answer.conditions {
        let why = [c.reason.as_str(), c.message.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        if why.is_empty() {
            out.push_str(&format!("  {}={}\n", c.type_, c.status));
        } else {
            out.push_str(&format!("  {}={} ({why})\n", c.type_, c.status));
        }
    }
    let n = &answer.nodes;
    out.push_str(&format!(
        "  nodes: {} ({} initialized, {} not ready, {} deleting, {} drifted)\n",
        n.total, n.initialized, n.not_ready, n.deleting, n.drifted
    ));
    for l in &answer.limits {
        let used = if l.used.is_empty() {
            "?"
        } else {
            l.used.as_str()
        };
        out.push_str(&format!(
            "  limit {}: {used} used of {}\n",
            l.resource, l.limit
        ));
    }
    for b in &answer.budgets {
        out.push_str(&format!(
            "  budget {}: {} more may be disrupted now ({} allowed, {} disrupting): {}\n",
            b.reason, b.allowed, b.budget, b.disrupting, b.explanation
        ));
        if let Some(at) = &b.opens_at {
            out.push_str(&format!("    next window opens at {at}\n"));
        }
    }
    out
}

pub fn disruption_text(answer: &DisruptionAnswer) -> String {
    let mut out = format!("disruption pass of {}\n", answer.decided_at);
    if answer.commands.is_empty() {
        out.push_str("no command: every node stays\n");
    }
    for c in &answer.commands {
        out.push_str("command:\n");
        command_text(&mut out, c);
    }
    for kept in &answer.kept {
        out.push_str(&format!("node {} stays:\n", kept.node));
        reasons_text(&mut out, &kept.reasons);
    }
    out
}

pub fn removal_text(answer: &RemovalAnswer) -> String {
    let price = if answer.price > 0.0 {
        format!(", ${:.4}/h", answer.price)
    } else {
        String::new()
    };
    let mut out = format!(
        "removing node {} (nodepool {}{price}; pass of {})\n",
        answer.node, answer.node_pool, answer.decided_at
    );
    if !answer.moves.is_empty() {
        out.push_str("  its pods would go:\n");
        for m in &answer.moves {
            let to = match &m.to {
                DestinationAnswer::Node { node } => format!("node {node}"),
                DestinationAnswer::NewNodeClaim { node_pool } => {
                    format!("a new NodeClaim of nodepool {node_pool}")
                }
                DestinationAnswer::Nowhere { reason } => format!("nowhere: {reason}"),
            };
            out.push_str(&format!("  - {} -> {to}\n", m.pod));
        }
    }
    match &answer.command {
        Some(command) => {
            out.push_str("  consolidation would remove it:\n");
            command_text(&mut out, command);
        }
        None => {
            out.push_str("  cannot be removed:\n");
            reasons_text(&mut out, &answer.reasons);
        }
    }
    if !answer.held_by.is_empty() {
        out.push_str("  and a pass would not take it now:\n");
        reasons_text(&mut out, &answer.held_by);
    }
    out
}
