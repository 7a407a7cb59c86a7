//! The getting-started CloudFormation template: node role, controller policies, interruption
//! queue, its policy and the EventBridge rules feeding it.
//!
//! Output is plain YAML: CloudFormation's short-form tags (`!Sub`, `!GetAtt`) are written in
//! their long form (`Fn::Sub`, `Fn::GetAtt`, `Ref` maps) so any YAML parser accepts the file.
//! The controller policy is the generated one ([`super::generate`]) rendered with CloudFormation
//! references and split into upstream's managed policies (each under IAM's 6,144-character
//! limit); its document is a JSON string under `Fn::Sub` because condition keys contain
//! `${ClusterName}`, which CloudFormation cannot substitute inside map keys.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::generate::controller_policies;
use super::scope::Scope;

/// A YAML node that keeps map keys in insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Str(v) => s.serialize_str(v),
            Node::Int(v) => s.serialize_i64(*v),
            Node::Bool(v) => s.serialize_bool(*v),
            Node::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

fn s(v: &str) -> Node {
    Node::Str(v.to_string())
}

fn map<const N: usize>(entries: [(&str, Node); N]) -> Node {
    Node::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn sub(v: &str) -> Node {
    map([("Fn::Sub", s(v))])
}

fn queue_arn() -> Node {
    map([(
        "Fn::GetAtt",
        Node::List(vec![s("KarpenterInterruptionQueue"), s("Arn")]),
    )])
}

/// The four node-role managed policies.
pub const NODE_ROLE_MANAGED_POLICIES: &[&str] = &[
    "AmazonEKS_CNI_Policy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
];

/// The EventBridge rules: (logical id, source, detail-type).
pub const EVENT_RULES: &[(&str, &str, &str)] = &[
    ("ScheduledChangeRule", "aws.health", "AWS Health Event"),
    (
        "SpotInterruptionRule",
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
    ),
    (
        "RebalanceRule",
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
    ),
    (
        "InstanceStateChangeRule",
        "aws.ec2",
        "EC2 Instance State-change Notification",
    ),
    (
        "CapacityReservationInterruptionRule",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
];

/// A template that could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("serializing the controller policy to JSON")]
    PolicyJson(#[source] serde_json::Error),
    #[error("serializing the template to YAML")]
    Yaml(#[source] serde_saphyr::SerializeError),
}

/// The template as a tree; `cluster_name` becomes the ClusterName parameter's default.
pub fn template(cluster_name: Option<&str>) -> Result<Node, TemplateError> {
    let scope = Scope::cloudformation();
    let mut resources: Vec<(String, Node)> = Vec::new();

    resources.push((
        "KarpenterNodeRole".into(),
        map([
            ("Type", s("AWS::IAM::Role")),
            (
                "Properties",
                map([
                    ("RoleName", sub("KarpenterNodeRole-${ClusterName}")),
                    ("Path", s("/")),
                    (
                        "AssumeRolePolicyDocument",
                        map([
                            ("Version", s("2012-10-17")),
                            (
                                "Statement",
                                Node::List(vec![map([
                                    ("Effect", s("Allow")),
                                    (
                                        "Principal",
                                        map([("Service", sub("ec2.${AWS::URLSuffix}"))]),
                                    ),
                                    ("Action", Node::List(vec![s("sts:AssumeRole")])),
                                ])]),
                            ),
                        ]),
                    ),
                    (
                        "ManagedPolicyArns",
                        Node::List(
                            NODE_ROLE_MANAGED_POLICIES
                                .iter()
                                .map(|p| {
                                    sub(&format!("arn:${{AWS::Partition}}:iam::aws:policy/{p}"))
                                })
                                .collect(),
                        ),
                    ),
                ]),
            ),
        ]),
    ));

    for (group, doc) in controller_policies(&scope) {
        let json = serde_json::to_string_pretty(&doc).map_err(TemplateError::PolicyJson)?;
        resources.push((
            group.policy_name().to_string(),
            map([
                ("Type", s("AWS::IAM::ManagedPolicy")),
                (
                    "Properties",
                    map([
                        (
                            "ManagedPolicyName",
                            sub(&format!("{}-${{ClusterName}}", group.policy_name())),
                        ),
                        ("PolicyDocument", sub(&json)),
                    ]),
                ),
            ]),
        ));
    }

    resources.push((
        "KarpenterInterruptionQueue".into(),
        map([
            ("Type", s("AWS::SQS::Queue")),
            (
                "Properties",
                map([
                    ("QueueName", sub("${ClusterName}")),
                    ("MessageRetentionPeriod", Node::Int(300)),
                    ("SqsManagedSseEnabled", Node::Bool(true)),
                ]),
            ),
        ]),
    ));
    resources.push((
        "KarpenterInterruptionQueuePolicy".into(),
        map([
            ("Type", s("AWS::SQS::QueuePolicy")),
            (
                "Properties",
                map([
                    (
                        "Queues",
                        Node::List(vec![map([("Ref", s("KarpenterInterruptionQueue"))])]),
                    ),
                    (
                        "PolicyDocument",
                        map([
                            ("Id", s("EC2InterruptionPolicy")),
                            (
                                "Statement",
                                Node::List(vec![
                                    map([
                                        ("Effect", s("Allow")),
                                        (
                                            "Principal",
                                            map([(
                                                "Service",
                                                Node::List(vec![
                                                    s("events.amazonaws.com"),
                                                    s("sqs.amazonaws.com"),
                                                ]),
                                            )]),
                                        ),
                                        ("Action", s("sqs:SendMessage")),
                                        ("Resource", queue_arn()),
                                    ]),
                                    map([
                                        ("Sid", s("DenyHTTP")),
                                        ("Effect", s("Deny")),
                                        ("Action", s("sqs:*")),
                                        ("Resource", queue_arn()),
                                        (
                                            "Condition",
                                            map([(
                                                "Bool",
                                                map([("aws:SecureTransport", Node::Bool(false))]),
                                            )]),
                                        ),
                                        ("Principal", s("*")),
                                    ]),
                                ]),
                            ),
                        ]),
                    ),
                ]),
            ),
        ]),
    ));

    for (id, source, detail_type) in EVENT_RULES {
        resources.push((
            (*id).to_string(),
            map([
                ("Type", s("AWS::Events::Rule")),
                (
                    "Properties",
                    map([
                        (
                            "EventPattern",
                            map([
                                ("source", Node::List(vec![s(source)])),
                                ("detail-type", Node::List(vec![s(detail_type)])),
                            ]),
                        ),
                        (
                            "Targets",
                            Node::List(vec![map([
                                ("Id", s("KarpenterInterruptionQueueTarget")),
                                ("Arn", queue_arn()),
                            ])]),
                        ),
                    ]),
                ),
            ]),
        ));
    }

    Ok(map([
        ("AWSTemplateFormatVersion", s("2010-09-09")),
        (
            "Description",
            s(
                "Resources used by karpenter-rs: node role, controller policies, interruption queue and its EventBridge rules",
            ),
        ),
        (
            "Parameters",
            map([("ClusterName", {
                let mut p = vec![
                    ("Type".to_string(), s("String")),
                    ("Description".to_string(), s("EKS cluster name")),
                ];
                if let Some(name) = cluster_name {
                    p.push(("Default".to_string(), s(name)));
                }
                Node::Map(p)
            })]),
        ),
        ("Resources", Node::Map(resources)),
    ]))
}

/// The template as YAML text.
pub fn template_yaml(cluster_name: Option<&str>) -> Result<String, TemplateError> {
    serde_saphyr::to_string(&template(cluster_name)?).map_err(TemplateError::Yaml)
}
