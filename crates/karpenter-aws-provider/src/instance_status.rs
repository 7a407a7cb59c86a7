//! `ec2:DescribeInstanceStatus`: the three paginated queries of one poll
//! ([`karpenter_aws::interruption::instance_status::QUERIES`]) and their answers as
//! [`StatusReport`]s, for the instance status loop of the controller to judge with
//! [`karpenter_aws::interruption::instance_status::unhealthy`].

use aws_sdk_ec2::types::{Filter, InstanceStatus, InstanceStatusSummary};
use chrono::{DateTime, Utc};
use karpenter_aws::interruption::instance_status::{Category, Check, QUERIES, StatusReport};

use crate::clients::AwsClients;
use crate::error::AwsError;

const OPERATION: &str = "ec2:DescribeInstanceStatus";

/// Every instance each query answers, in query order (an instance may come twice).
pub async fn describe(clients: &AwsClients) -> Result<Vec<StatusReport>, AwsError> {
    let mut out = Vec::new();
    for query in QUERIES {
        let filter = Filter::builder()
            .name(query.filter)
            .set_values(Some(query.values.iter().map(|v| (*v).to_owned()).collect()))
            .build();
        let mut pages = clients
            .ec2
            .describe_instance_status()
            .filters(filter)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk(OPERATION, &e))?;
            out.extend(page.instance_statuses().iter().filter_map(report));
        }
    }
    Ok(out)
}

fn time(t: Option<&aws_smithy_types::DateTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
}

fn summary(category: Category, s: Option<&InstanceStatusSummary>) -> Vec<Check> {
    s.map(|s| s.details())
        .unwrap_or_default()
        .iter()
        .map(|d| Check {
            category,
            name: d.name().map(|n| n.as_str().to_owned()).unwrap_or_default(),
            status: d
                .status()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            impaired_since: time(d.impaired_since()),
        })
        .collect()
}

/// One instance of an answer; `None` without an instance id.
fn report(status: &InstanceStatus) -> Option<StatusReport> {
    let mut checks = summary(Category::InstanceStatus, status.instance_status());
    checks.extend(summary(Category::SystemStatus, status.system_status()));
    if let Some(ebs) = status.attached_ebs_status() {
        checks.extend(ebs.details().iter().map(|d| {
            Check {
                category: Category::EbsStatus,
                name: d.name().map(|n| n.as_str().to_owned()).unwrap_or_default(),
                status: d
                    .status()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                impaired_since: time(d.impaired_since()),
            }
        }));
    }
    checks.extend(
        status
            .events()
            .iter()
            .map(|e| Check::event(e.code().map(|c| c.as_str()).unwrap_or_default())),
    );
    Some(StatusReport {
        instance_id: status.instance_id()?.to_owned(),
        checks,
    })
}
