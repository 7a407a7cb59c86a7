//! The getting-started CloudFormation template: plain YAML, the expected resources, resolvable
//! substitutions, and controller policies that pass the audit once CloudFormation fills them in.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_aws::iam::audit::{AuditOptions, audit};
use karpenter_aws::iam::cloudformation::template_yaml;
use karpenter_aws::iam::eval::CompiledPolicy;
use karpenter_aws::iam::{PolicyDocument, Scope};
use serde_json::Value;

fn template() -> Value {
    let yaml = template_yaml(Some("demo")).unwrap();
    serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("not plain YAML: {e}\n{yaml}"))
}

fn sub(v: &Value) -> &str {
    v["Fn::Sub"]
        .as_str()
        .unwrap_or_else(|| panic!("not a Fn::Sub: {v}"))
}

#[test]
fn the_template_is_plain_yaml_with_the_cluster_name_parameter() {
    let t = template();
    assert_eq!(t["AWSTemplateFormatVersion"], "2010-09-09");
    assert_eq!(t["Parameters"]["ClusterName"]["Type"], "String");
    assert_eq!(t["Parameters"]["ClusterName"]["Default"], "demo");
    let yaml = template_yaml(None).unwrap();
    assert!(!yaml.contains('!'), "no short-form tags");
    assert!(!yaml.contains("Default:"));
}

#[test]
fn the_node_role_has_the_four_managed_policies() {
    let t = template();
    let role = &t["Resources"]["KarpenterNodeRole"];
    assert_eq!(role["Type"], "AWS::IAM::Role");
    assert_eq!(
        sub(&role["Properties"]["RoleName"]),
        "KarpenterNodeRole-${ClusterName}"
    );
    let trust = &role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0];
    assert_eq!(sub(&trust["Principal"]["Service"]), "ec2.${AWS::URLSuffix}");
    let arns: Vec<&str> = role["Properties"]["ManagedPolicyArns"]
        .as_array()
        .unwrap()
        .iter()
        .map(sub)
        .collect();
    assert_eq!(
        arns,
        [
            "arn:${AWS::Partition}:iam::aws:policy/AmazonEKS_CNI_Policy",
            "arn:${AWS::Partition}:iam::aws:policy/AmazonEKSWorkerNodePolicy",
            "arn:${AWS::Partition}:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
            "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore",
        ]
    );
}

#[test]
fn the_interruption_queue_keeps_messages_five_minutes_encrypted_and_accepts_only_tls() {
    let t = template();
    let q = &t["Resources"]["KarpenterInterruptionQueue"];
    assert_eq!(q["Type"], "AWS::SQS::Queue");
    assert_eq!(sub(&q["Properties"]["QueueName"]), "${ClusterName}");
    assert_eq!(q["Properties"]["MessageRetentionPeriod"], 300);
    assert_eq!(q["Properties"]["SqsManagedSseEnabled"], true);
    let p = &t["Resources"]["KarpenterInterruptionQueuePolicy"];
    assert_eq!(p["Type"], "AWS::SQS::QueuePolicy");
    assert_eq!(
        p["Properties"]["Queues"][0]["Ref"],
        "KarpenterInterruptionQueue"
    );
    let doc = &p["Properties"]["PolicyDocument"];
    let allow = &doc["Statement"][0];
    assert_eq!(allow["Action"], "sqs:SendMessage");
    assert_eq!(
        allow["Principal"]["Service"],
        serde_json::json!(["events.amazonaws.com", "sqs.amazonaws.com"])
    );
    assert_eq!(
        allow["Resource"]["Fn::GetAtt"],
        serde_json::json!(["KarpenterInterruptionQueue", "Arn"])
    );
    let deny = &doc["Statement"][1];
    assert_eq!(deny["Effect"], "Deny");
    assert_eq!(deny["Condition"]["Bool"]["aws:SecureTransport"], false);
}

#[test]
fn eventbridge_rules_send_the_interruption_events_to_the_queue() {
    let t = template();
    let rules = [
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
    for (id, source, detail_type) in rules {
        let r = &t["Resources"][id];
        assert_eq!(r["Type"], "AWS::Events::Rule", "{id}");
        assert_eq!(r["Properties"]["EventPattern"]["source"][0], source, "{id}");
        assert_eq!(
            r["Properties"]["EventPattern"]["detail-type"][0], detail_type,
            "{id}"
        );
        let target = &r["Properties"]["Targets"][0];
        assert_eq!(
            target["Arn"]["Fn::GetAtt"],
            serde_json::json!(["KarpenterInterruptionQueue", "Arn"]),
            "{id}"
        );
    }
}

/// Every `${X}` in the template's Fn::Sub strings, as CloudFormation resolves them.
fn resolve(text: &str, t: &Value) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').map(|e| start + e).unwrap();
        let name = &rest[start + 2..end];
        let value = match name {
            "AWS::Partition" => "aws".to_string(),
            "AWS::Region" => "us-west-2".to_string(),
            "AWS::AccountId" => "111122223333".to_string(),
            "AWS::URLSuffix" => "amazonaws.com".to_string(),
            "KarpenterInterruptionQueue.Arn" => {
                "arn:aws:sqs:us-west-2:111122223333:demo".to_string()
            }
            "KarpenterNodeRole.Arn" => {
                "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo".to_string()
            }
            other if t["Parameters"].get(other).is_some() => "demo".to_string(),
            other => panic!("${{{other}}} does not resolve"),
        };
        if let Some((resource, _)) = name.split_once('.') {
            assert!(
                t["Resources"].get(resource).is_some(),
                "{resource} is not a resource"
            );
        }
        out.push_str(&value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn the_controller_policies_resolve_and_pass_the_audit() {
    let t = template();
    let mut policy = CompiledPolicy::default();
    let mut names = Vec::new();
    for (name, resource) in t["Resources"].as_object().unwrap() {
        if resource["Type"] != "AWS::IAM::ManagedPolicy" {
            continue;
        }
        let policy_name = resolve(sub(&resource["Properties"]["ManagedPolicyName"]), &t);
        assert_eq!(policy_name, format!("{name}-demo"));
        let json = resolve(sub(&resource["Properties"]["PolicyDocument"]), &t);
        let doc = PolicyDocument::parse(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        policy.add(name, &doc).unwrap();
        names.push(name.clone());
    }
    assert_eq!(names.len(), 6, "{names:?}");
    let scope = Scope::new("demo", "us-west-2", None)
        .unwrap()
        .with_account("111122223333")
        .unwrap();
    let report = audit(&policy, &scope, &AuditOptions::default());
    assert!(
        report.missing.is_empty() && report.over_broad.is_empty() && report.notes.is_empty(),
        "{}",
        report.to_text()
    );
}
