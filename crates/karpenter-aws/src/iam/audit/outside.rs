//! Actions outside the contract: writes a compromised controller could abuse (over-broad when
//! allowed) and reads it does not need (notes when allowed).

use super::probe::{Probe, Severity};
use crate::iam::contract::{LAUNCH_TAGS, ambient};
use crate::iam::eval::Request;
use crate::iam::scope::Scope;

/// Write actions the controller never performs: (action, resource template, own tags on target).
const OUTSIDE_WRITES: &[(&str, &str, bool, &str)] = &[
    (
        "ec2:StopInstances",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
        true,
        "stop instances",
    ),
    (
        "ec2:ModifyInstanceAttribute",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
        true,
        "change user data, instance type or security groups of running instances",
    ),
    (
        "ec2:AssociateIamInstanceProfile",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
        true,
        "attach another instance profile to running instances",
    ),
    (
        "ec2:DeleteTags",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
        true,
        "remove tags",
    ),
    (
        "ec2:CreateLaunchTemplateVersion",
        "arn:{partition}:ec2:{region}:{account}:launch-template/lt-0123456789abcdef0",
        true,
        "rewrite launch templates in place",
    ),
    (
        "ec2:DeleteVolume",
        "arn:{partition}:ec2:{region}:{account}:volume/vol-0123456789abcdef0",
        true,
        "delete volumes",
    ),
    (
        "ec2:CreateSnapshot",
        "arn:{partition}:ec2:{region}:{account}:volume/vol-0123456789abcdef0",
        false,
        "snapshot (copy) volumes",
    ),
    (
        "ec2:AuthorizeSecurityGroupIngress",
        "arn:{partition}:ec2:{region}:{account}:security-group/sg-0123456789abcdef0",
        false,
        "open security groups",
    ),
    (
        "ec2:DeleteSecurityGroup",
        "arn:{partition}:ec2:{region}:{account}:security-group/sg-0123456789abcdef0",
        false,
        "delete security groups",
    ),
    (
        "ec2:DeleteSubnet",
        "arn:{partition}:ec2:{region}:{account}:subnet/subnet-0123456789abcdef0",
        false,
        "delete subnets",
    ),
    (
        "ec2:CreateKeyPair",
        "arn:{partition}:ec2:{region}:{account}:key-pair/probe",
        false,
        "create SSH key pairs",
    ),
    (
        "iam:CreateRole",
        "arn:{partition}:iam::{account}:role/probe-role",
        false,
        "create roles",
    ),
    (
        "iam:AttachRolePolicy",
        "{node_role_arn}",
        false,
        "attach policies to roles",
    ),
    (
        "iam:PutRolePolicy",
        "{node_role_arn}",
        false,
        "write inline role policies",
    ),
    (
        "iam:UpdateAssumeRolePolicy",
        "{node_role_arn}",
        false,
        "change who can assume roles",
    ),
    (
        "iam:CreateAccessKey",
        "arn:{partition}:iam::{account}:user/probe-user",
        false,
        "create access keys",
    ),
    (
        "ssm:SendCommand",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
        true,
        "run commands on nodes",
    ),
    (
        "ssm:PutParameter",
        "arn:{partition}:ssm:{region}:{account}:parameter/probe",
        false,
        "write SSM parameters",
    ),
    (
        "sqs:SendMessage",
        "{queue_arn}",
        false,
        "inject fake interruption events (they make Karpenter delete nodes)",
    ),
    (
        "sqs:PurgeQueue",
        "{queue_arn}",
        false,
        "drop pending interruption events",
    ),
    (
        "sqs:SetQueueAttributes",
        "{queue_arn}",
        false,
        "change the interruption queue's policy",
    ),
    (
        "eks:DeleteCluster",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        false,
        "delete the cluster",
    ),
    (
        "eks:CreateAccessEntry",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        false,
        "grant Kubernetes access",
    ),
    (
        "arc-zonal-shift:StartZonalShift",
        "arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        false,
        "shift traffic away from zones",
    ),
    (
        "sts:AssumeRole",
        "arn:{partition}:iam::{account}:role/probe-role",
        false,
        "assume other roles",
    ),
    (
        "s3:GetObject",
        "arn:{partition}:s3:::probe-bucket/secrets.txt",
        false,
        "read S3 objects",
    ),
    (
        "kms:Decrypt",
        "arn:{partition}:kms:{region}:{account}:key/11111111-2222-3333-4444-555555555555",
        false,
        "decrypt with KMS keys",
    ),
];

/// Read actions the controller does not need.
pub const OUTSIDE_READS: &[(&str, &str)] = &[
    ("ec2:DescribeAvailabilityZones", "*"),
    ("ec2:DescribeVpcs", "*"),
    ("ec2:DescribeVolumes", "*"),
    (
        "ec2:GetConsoleOutput",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
    ),
    (
        "ec2:GetPasswordData",
        "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0",
    ),
    ("iam:GetRole", "{node_role_arn}"),
    ("iam:ListRoles", "*"),
    (
        "ssm:GetParametersByPath",
        "arn:{partition}:ssm:{region}::parameter/aws/service/*",
    ),
    ("sqs:GetQueueAttributes", "{queue_arn}"),
    ("eks:ListClusters", "*"),
    ("pricing:DescribeServices", "*"),
];

/// Probes for actions outside the contract.
pub(super) fn probes(scope: &Scope) -> Vec<Probe> {
    let mut out = Vec::new();
    for (action, resource, owned, what) in OUTSIDE_WRITES {
        let mut req = ambient(Request::new(*action, scope.render(resource)), scope);
        if *owned {
            for (k, v) in LAUNCH_TAGS {
                req = req.with_resource_tag(&scope.render(k), &scope.render(v));
            }
        }
        out.push(Probe {
            kind: "action-outside-contract",
            severity: Severity::OverBroad,
            request: req,
            why: "grants write actions the controller never performs".into(),
            detail: Some(format!("would let the controller {what}")),
        });
    }
    for (action, resource) in OUTSIDE_READS {
        out.push(Probe {
            kind: "read-outside-contract",
            severity: Severity::Note,
            request: ambient(Request::new(*action, scope.render(resource)), scope),
            why: "grants read-only actions the controller never calls".into(),
            detail: None,
        });
    }
    out
}
