//! Probes: requests the controller never makes, that a least-privilege policy must deny.
//!
//! Most probes are derived from the contract by changing one thing a guard protects:
//! the ownership tags on the target (another cluster's resource, an untagged one), the tags a
//! create writes, the region, the `ec2:CreateAction` of a CreateTags, the role passed. The rest
//! (in `outside.rs`) are actions outside the contract: writes that would let the controller
//! escalate or destroy (over-broad), and reads it does not need (notes).

use std::collections::BTreeSet;

use super::probe::{Probe, Severity};
use crate::iam::contract::{Access, Call, LAUNCH_TAGS, Sid, ambient};
use crate::iam::eval::Request;
use crate::iam::scope::Scope;

/// The cluster name probes use for "another cluster".
pub const OTHER_CLUSTER: &str = "other-cluster";

/// A scope identical to `scope` but for another cluster.
fn other_scope(scope: &Scope) -> Scope {
    let mut s = scope.clone();
    s.cluster = OTHER_CLUSTER.to_string();
    s
}

/// A resource type name from a sample ARN (`instance`, `launch-template`, `instance-profile`).
fn kind_of(arn: &str) -> &str {
    let resource = arn.splitn(6, ':').nth(5).unwrap_or(arn);
    resource.split('/').next().unwrap_or(resource)
}

fn is_ownership_tag(key: &str) -> bool {
    key.starts_with("kubernetes.io/cluster/")
}

/// A call's request with tags replaced.
fn with_tags(
    call: &Call,
    scope: &Scope,
    request_tags: &Scope,
    resource_tags: &Scope,
    keep_request: bool,
    keep_resource: bool,
) -> Request {
    let mut req = ambient(
        Request::new(call.action, scope.render(call.resource_sample)),
        scope,
    );
    if keep_request {
        for (k, v) in call.request_tags {
            req = req.with_request_tag(&request_tags.render(k), &request_tags.render(v));
        }
    } else if !call.request_tags.is_empty() {
        // A create that still writes a tag, just not the ownership ones.
        req = req.with_request_tag("Name", "unowned");
    }
    if keep_resource {
        for (k, v) in call.resource_tags {
            req = req.with_resource_tag(&resource_tags.render(k), &resource_tags.render(v));
        }
    }
    for (k, v) in call.context {
        req = req.with(scope.render(k), scope.render(v));
    }
    req
}

/// Probes derived from the contract's calls.
fn derived(scope: &Scope, calls: &[Call]) -> Vec<Probe> {
    let other = other_scope(scope);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for call in calls.iter().filter(|c| c.access == Access::Write) {
        // Not probed: using a launch template (the launch is still fenced by the instance's own
        // request tags and by iam:PassRole) and spot requests (TagSpecifications are
        // request-wide, so an untagged spot request means an untagged instance, probed already).
        if call.sid == Sid::AllowScopedEC2LaunchTemplateAccessActions {
            continue;
        }
        let kind = kind_of(call.resource_sample).to_string();
        if kind == "spot-instances-request" {
            continue;
        }
        let owned_target = call.resource_tags.iter().any(|(k, _)| is_ownership_tag(k));
        let owned_create =
            call.creates && call.request_tags.iter().any(|(k, _)| is_ownership_tag(k));
        let severity = Severity::OverBroad;
        let key = (call.action, call.resource_pattern, call.context);
        if !(owned_target || owned_create) || !seen.insert(key) {
            continue;
        }
        let owned_why = format!(
            "the contract only acts on resources tagged kubernetes.io/cluster/{}=owned",
            scope.cluster
        );
        if owned_target {
            out.push(Probe {
                kind: "foreign-resource",
                severity,
                request: with_tags(call, scope, scope, &other, true, true),
                why: format!(
                    "acts on resources owned by another cluster ({OTHER_CLUSTER}); {owned_why}"
                ),
                detail: None,
            });
            out.push(Probe {
                kind: "untagged-resource",
                severity,
                request: with_tags(call, scope, scope, scope, true, false),
                why: format!("acts on resources without Karpenter's ownership tags; {owned_why}"),
                detail: None,
            });
        }
        if owned_create {
            out.push(Probe {
                kind: "create-for-other-cluster",
                severity,
                request: with_tags(call, scope, &other, scope, true, true),
                why: format!("creates resources tagged for another cluster ({OTHER_CLUSTER})"),
                detail: None,
            });
            out.push(Probe {
                kind: "create-untagged",
                severity,
                request: with_tags(call, scope, scope, scope, false, true),
                why: "creates resources without the cluster's ownership tags, which Karpenter could never attribute or clean up".into(),
                detail: None,
            });
        }
    }
    // Outside the region: one representative call per statement.
    let region = scope.partition_kind.other_region(&scope.region);
    let mut away = scope.clone();
    away.region = region.to_string();
    let mut sids = BTreeSet::new();
    for call in calls {
        let regional = call.resource_pattern.contains("{region}")
            || call
                .context
                .iter()
                .any(|(k, _)| *k == "aws:RequestedRegion");
        if !regional || !sids.insert(call.sid) {
            continue;
        }
        out.push(Probe {
            kind: "other-region",
            severity: Severity::Note,
            request: call.request(&away),
            why: format!(
                "works outside {}, the only region the controller uses",
                scope.region
            ),
            detail: None,
        });
    }
    out
}

/// Probes about tagging, roles, parameters, queues and clusters.
fn targeted(scope: &Scope) -> Vec<Probe> {
    let r = |t: &str| scope.render(t);
    let probe = |kind, severity, request, why: &str, detail: Option<&str>| Probe {
        kind,
        severity,
        request,
        why: why.to_string(),
        detail: detail.map(str::to_string),
    };
    let instance = r("arn:{partition}:ec2:{region}:{account}:instance/i-0fedcba9876543210");
    let mut out = Vec::new();

    let outside_create =
        "CreateTags without ec2:CreateAction on resources Karpenter did not create";
    let mut hijack = ambient(Request::new("ec2:CreateTags", &instance), scope);
    for (k, v) in LAUNCH_TAGS {
        hijack = hijack.with_request_tag(&r(k), &r(v));
    }
    out.push(probe(
        "create-tags-outside-create",
        Severity::OverBroad,
        hijack,
        outside_create,
        Some("adds the ownership tags to a foreign instance; the deletion grant then lets Karpenter terminate it"),
    ));
    let sg = r("arn:{partition}:ec2:{region}:{account}:security-group/sg-0fedcba9876543210");
    out.push(probe(
        "create-tags-outside-create",
        Severity::OverBroad,
        ambient(Request::new("ec2:CreateTags", sg), scope)
            .with_request_tag("karpenter.sh/discovery", &r("{cluster}")),
        outside_create,
        Some("retags a security group, which changes the groups EC2NodeClass selector terms pick for nodes"),
    ));

    let mut retag = ambient(Request::new("ec2:CreateTags", &instance), scope);
    for (k, v) in LAUNCH_TAGS {
        retag = retag.with_resource_tag(&r(k), &r(v));
    }
    retag = retag
        .with_request_tag("karpenter.sh/nodepool", "another-nodepool")
        .with_request_tag(&format!("kubernetes.io/cluster/{OTHER_CLUSTER}"), "owned");
    out.push(probe(
        "retag-ownership",
        Severity::OverBroad,
        retag,
        "CreateTags rewriting the ownership tags (karpenter.sh/nodepool, kubernetes.io/cluster/*) of its own instances; after launch the contract only writes Name, karpenter.sh/nodeclaim and eks:eks-cluster-name",
        None,
    ));

    out.push(probe(
        "pass-other-role",
        Severity::OverBroad,
        ambient(
            Request::new("iam:PassRole", r("arn:{partition}:iam::{account}:role/AdministratorAccess")),
            scope,
        )
        .with("iam:PassedToService", r("{ec2_principal}")),
        "iam:PassRole on a role other than the node role: instances Karpenter launches could run with any role",
        None,
    ));
    out.push(probe(
        "pass-role-to-other-service",
        Severity::Note,
        ambient(Request::new("iam:PassRole", r("{node_role_arn}")), scope)
            .with("iam:PassedToService", "lambda.amazonaws.com"),
        "iam:PassRole of the node role to a service other than EC2",
        None,
    ));
    out.push(probe(
        "ssm-private-parameter",
        Severity::OverBroad,
        ambient(
            Request::new(
                "ssm:GetParameter",
                r("arn:{partition}:ssm:{region}:{account}:parameter/prod/database/password"),
            ),
            scope,
        ),
        "ssm:GetParameter outside /aws/service/: private parameters can hold secrets",
        None,
    ));
    for action in ["sqs:ReceiveMessage", "sqs:DeleteMessage"] {
        out.push(probe(
            "other-queue",
            Severity::OverBroad,
            ambient(
                Request::new(
                    action,
                    r("arn:{partition}:sqs:{region}:{account}:payments-orders"),
                ),
                scope,
            ),
            "reads or deletes messages of queues other than the interruption queue",
            None,
        ));
    }
    let other_cluster_arn = r(&format!(
        "arn:{{partition}}:eks:{{region}}:{{account}}:cluster/{OTHER_CLUSTER}"
    ));
    out.push(probe(
        "other-cluster",
        Severity::Note,
        ambient(
            Request::new("eks:DescribeCluster", &other_cluster_arn),
            scope,
        ),
        "reads another cluster's endpoint or zonal-shift state",
        None,
    ));
    out.push(probe(
        "other-cluster",
        Severity::Note,
        ambient(
            Request::new("arc-zonal-shift:GetManagedResource", "*"),
            scope,
        )
        .with(
            "arc-zonal-shift:ResourceIdentifier",
            other_cluster_arn.clone(),
        ),
        "reads another cluster's endpoint or zonal-shift state",
        None,
    ));
    out
}

/// Every probe for a scope, in a stable order.
pub fn probes(scope: &Scope, calls: &[Call]) -> Vec<Probe> {
    let mut out = derived(scope, calls);
    out.extend(targeted(scope));
    out.extend(super::outside::probes(scope));
    out
}
