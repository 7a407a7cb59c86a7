//! Decisions as answers: a disruption command, its reasons and a launch in the answer types
//! ([`super::model`]), and times as the answers write them. Shared by the record
//! ([`super::Explanations`]) and the removal simulation.

use chrono::{DateTime, Utc};
use karpenter_disruption::Command;
use karpenter_scheduling::NewNodeClaim;

use super::model::{CommandAnswer, LiftsAnswer, PricedType, ReasonAnswer, ReplacementAnswer};

/// `at` as the answers write it (RFC 3339, seconds, `Z`).
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(super) fn launch(claim: &NewNodeClaim) -> ReplacementAnswer {
    ReplacementAnswer {
        node_pool: claim.node_pool.clone(),
        instance_types: claim.instance_type_options.len(),
        cheapest: claim.instance_type_options.first().map(|o| PricedType {
            instance_type: o.name.to_string(),
            price: o.price,
        }),
    }
}

pub(super) fn reason_answers<'a>(
    reasons: impl IntoIterator<Item = &'a karpenter_disruption::Reason>,
) -> Vec<ReasonAnswer> {
    reasons
        .into_iter()
        .map(|r| ReasonAnswer {
            code: r.code.as_str().to_owned(),
            event: r.code.event_reason().to_owned(),
            text: r.text.clone(),
            lifts: r.lifts.map(|l| LiftsAnswer {
                at: rfc3339(l.at),
                remaining: karpenter_api::duration::format_go_duration(l.remaining),
            }),
        })
        .collect()
}

pub(super) fn command_answer(command: &Command) -> CommandAnswer {
    CommandAnswer {
        method: command.method.as_str().to_owned(),
        reason: command.reason.as_str().to_owned(),
        nodes: command.candidates.iter().map(|c| c.node.clone()).collect(),
        replacements: command.replacements.iter().map(launch).collect(),
        savings_per_hour: command.savings_per_hour,
        explanation: command.explanation.clone(),
        repair: command.repair.as_ref().map(|r| {
            let how = if r.reboot {
                ", by rebooting it in place"
            } else {
                ""
            };
            format!("{}={} ({}){how}", r.condition, r.status, r.reason)
        }),
    }
}
