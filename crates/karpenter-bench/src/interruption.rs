//! `karpenter-bench interruption`: the interruption handler from SQS message body to decision
//! (`karpenter_aws::interruption::plan`: parse, look up, decide, disposition) over `--messages`
//! generated EventBridge bodies, at upstream's interruption benchmark sizes (100, 1,000 and
//! 15,000 messages). Bodies are a mix of every kind karpenter reads, about instances of which
//! half belong to the `N/2` generated NodeClaims; generation is not timed.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use karpenter_aws::interruption::{Action, ActionOutcome, ClaimRef, Disposition, plan};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct InterruptionArgs {
    /// Number of SQS messages.
    #[arg(long, default_value_t = 1000)]
    messages: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

const ZONES: [&str; 3] = ["us-west-2a", "us-west-2b", "us-west-2c"];
const TYPES: [&str; 4] = ["m5.large", "c6i.xlarge", "r6g.2xlarge", "m7i.4xlarge"];

fn instance_id(i: usize) -> String {
    format!("i-{:017x}", 0x0a00_0000_0000_0000_usize.wrapping_add(i))
}

/// `known` NodeClaims, owning the instances `0..known`.
fn nodeclaims(known: usize) -> HashMap<String, ClaimRef> {
    (0..known)
        .map(|i| {
            let claim = ClaimRef {
                name: format!("default-{i:06}"),
                node_name: (i % 4 != 0)
                    .then(|| format!("ip-10-0-{}-{}.internal", i / 250, i % 250)),
                instance_type: Some(TYPES[i % TYPES.len()].to_owned()),
                zone: Some(ZONES[i % ZONES.len()].to_owned()),
                capacity_type: Some(if i % 2 == 0 { "spot" } else { "on-demand" }.to_owned()),
                reservation_id: None,
            };
            (instance_id(i), claim)
        })
        .collect()
}

/// Message `i`: its kind cycles through spot interruption, rebalance recommendation, state
/// changes (stopping, terminated, running), AWS Health scheduled change (two instances) and an
/// event karpenter does not handle; its instance cycles through `0..n`, so half are not ours.
fn body(i: usize, n: usize) -> String {
    let id = instance_id(i % n.max(1));
    let envelope = |source: &str, detail_type: &str, detail: serde_json::Value| {
        json!({
            "version": "0",
            "id": format!("{:08x}-5c6a-4b7e-9d2e-{:012x}", i, i),
            "detail-type": detail_type,
            "source": source,
            "account": "111122223333",
            "time": "2024-05-14T09:41:07Z",
            "region": "us-west-2",
            "resources": [format!("arn:aws:ec2:us-west-2:111122223333:instance/{id}")],
            "detail": detail,
        })
        .to_string()
    };
    let state = |s: &str| {
        envelope(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": id, "state": s}),
        )
    };
    match i % 7 {
        0 => envelope(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
        ),
        1 => envelope(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": id}),
        ),
        2 => state("stopping"),
        3 => state("terminated"),
        4 => state("running"),
        5 => {
            let other = instance_id((i + n / 2) % n.max(1));
            let entity = |v: &str| json!({"entityValue": v, "lastUpdatedTime": "Tue, 14 May 2024 01:43:21 GMT", "status": "PENDING"});
            envelope(
                "aws.health",
                "AWS Health Event",
                json!({
                    "eventArn": format!("arn:aws:health:us-west-2::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED_{i}"),
                    "service": "EC2",
                    "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
                    "eventTypeCategory": "scheduledChange",
                    "startTime": "Tue, 28 May 2024 08:00:00 GMT",
                    "endTime": "Tue, 28 May 2024 10:00:00 GMT",
                    "statusCode": "upcoming",
                    "eventDescription": [{"language": "en_US", "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance(s) and they are scheduled for retirement."}],
                    "affectedEntities": [entity(&id), entity(&other)],
                }),
            )
        }
        _ => envelope(
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
        ),
    }
}

#[derive(Debug, Default)]
struct Tally {
    actions: usize,
    deletions: usize,
    marks: usize,
    parse_errors: usize,
    deleted_messages: usize,
}

pub fn run(a: InterruptionArgs, peak_rss_mb: fn() -> f64) -> anyhow::Result<ExitCode> {
    let known = a.messages / 2;
    let claims = nodeclaims(known);
    let bodies: Vec<String> = (0..a.messages).map(|i| body(i, a.messages)).collect();
    let lookup = |id: &str| claims.get(id).cloned();

    let mut tally = Tally::default();
    let start = Instant::now();
    for b in &bodies {
        let p = plan(b, lookup);
        tally.parse_errors += usize::from(p.parsed.is_err());
        tally.actions += p.actions.len();
        for action in &p.actions {
            match action {
                Action::DeleteNodeClaim { .. } => tally.deletions += 1,
                Action::MarkUnavailable { .. } | Action::MarkReservationUnavailable { .. } => {
                    tally.marks += 1
                }
                // Queue messages never expire a grace (instance status checks do).
                Action::Event(_) | Action::ExpireTerminationGrace { .. } => {}
            }
        }
        let outcomes = vec![ActionOutcome::Done; p.actions.len()];
        if p.disposition(&outcomes) == Disposition::Delete {
            tally.deleted_messages += 1;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let per_sec = if seconds > 0.0 {
        a.messages as f64 / seconds
    } else {
        0.0
    };
    let rss = peak_rss_mb();
    if a.json {
        let out = json!({
            "messages": a.messages,
            "nodeclaims": known,
            "seconds": seconds,
            "messages_per_sec": per_sec,
            "actions": tally.actions,
            "nodeclaims_deleted": tally.deletions,
            "offerings_marked_unavailable": tally.marks,
            "parse_errors": tally.parse_errors,
            "messages_deleted": tally.deleted_messages,
            "peak_rss_mb": rss,
        });
        println!("{out}");
    } else {
        println!("messages                  {}", a.messages);
        println!("nodeclaims                {known}");
        println!("seconds                   {seconds:.4}");
        println!("messages/s                {per_sec:.0}");
        println!("actions                   {}", tally.actions);
        println!("nodeclaims deleted        {}", tally.deletions);
        println!("offerings marked          {}", tally.marks);
        println!("parse errors              {}", tally.parse_errors);
        println!("messages deleted          {}", tally.deleted_messages);
        println!("peak RSS (MiB)            {rss:.1}");
    }
    Ok(ExitCode::SUCCESS)
}
