//! The auditor against the generated policy, mutations of it, and the seed policies.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::collections::BTreeSet;

use karpenter_aws::iam::audit::{AuditOptions, Report, audit};
use karpenter_aws::iam::contract::{self, Feature};
use karpenter_aws::iam::eval::CompiledPolicy;
use karpenter_aws::iam::generate::{controller_policies, controller_policy};
use karpenter_aws::iam::policy::{ConditionScalar, OneOrMany};
use karpenter_aws::iam::{Partition, PolicyDocument, Scope};
use serde_json::Value;

const ACCOUNT: &str = "111122223333";

fn fixture(name: &str) -> PolicyDocument {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    PolicyDocument::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn scope(cluster: &str) -> Scope {
    Scope::new(cluster, "us-west-2", None)
        .unwrap()
        .with_account(ACCOUNT)
        .unwrap()
}

fn run(doc: &PolicyDocument, scope: &Scope) -> Report {
    let policy = CompiledPolicy::compile("policy.json", doc).unwrap();
    audit(&policy, scope, &AuditOptions::default())
}

fn kinds(findings: &[karpenter_aws::iam::audit::Finding]) -> BTreeSet<&'static str> {
    findings.iter().map(|f| f.kind).collect()
}

#[test]
fn the_generated_policy_passes_its_own_audit_in_every_partition() {
    let cases: Vec<(&str, Scope, Scope)> = {
        let plain = Scope::new("demo", "us-west-2", None).unwrap();
        let pinned = scope("demo");
        let china = Scope::new("demo", "cn-north-1", Some(Partition::AwsCn)).unwrap();
        let gov = Scope::new("demo", "us-gov-west-1", None).unwrap();
        let custom = pinned
            .clone()
            .with_interruption_queue_arn("arn:aws:sqs:us-west-2:111122223333:karpenter-events")
            .unwrap()
            .with_node_role_arn("arn:aws:iam::111122223333:role/nodes/EKSNode")
            .unwrap();
        vec![
            (
                "any account",
                plain.clone(),
                plain.with_account(ACCOUNT).unwrap(),
            ),
            ("pinned account", pinned.clone(), pinned),
            (
                "aws-cn",
                china.clone(),
                china.with_account(ACCOUNT).unwrap(),
            ),
            (
                "aws-us-gov",
                gov.clone(),
                gov.with_account(ACCOUNT).unwrap(),
            ),
            ("custom queue and role", custom.clone(), custom),
        ]
    };
    for (name, generate_for, audit_as) in cases {
        let report = run(&controller_policy(&generate_for), &audit_as);
        assert!(
            report.missing.is_empty() && report.over_broad.is_empty() && report.notes.is_empty(),
            "{name}:\n{}",
            report.to_text()
        );
        assert_eq!(report.exit_code(true), 0);
        assert_eq!(report.calls_checked, contract::calls().len());
    }
}

#[test]
fn the_split_policies_together_pass_the_audit() {
    let mut policy = CompiledPolicy::default();
    for (group, doc) in controller_policies(&scope("demo")) {
        policy.add(group.policy_name(), &doc).unwrap();
    }
    let report = audit(&policy, &scope("demo"), &AuditOptions::default());
    assert_eq!(
        report.summary.split(',').next(),
        Some("0 missing"),
        "{}",
        report.to_text()
    );
    assert!(report.over_broad.is_empty());
    assert_eq!(report.sources.len(), 6);
}

/// The generated policy with one statement changed.
fn mutate(
    sid: &str,
    change: impl FnOnce(&mut karpenter_aws::iam::policy::Statement),
) -> PolicyDocument {
    let mut doc = controller_policy(&scope("demo"));
    if let OneOrMany::Many(statements) = &mut doc.statement {
        let st = statements
            .iter_mut()
            .find(|s| s.sid.as_deref() == Some(sid))
            .unwrap();
        change(st);
    }
    doc
}

#[test]
fn weakening_a_guard_is_reported_as_over_broad_naming_the_statement() {
    let cases: Vec<(&str, PolicyDocument, &str)> = vec![
        (
            "deletion without ownership-tag conditions",
            mutate("AllowScopedDeletion", |s| s.condition = None),
            "foreign-resource",
        ),
        (
            "CreateTags without an ec2:CreateAction condition",
            mutate("AllowScopedResourceCreationTagging", |s| {
                if let Some(c) = &mut s.condition {
                    for keys in c.values_mut() {
                        keys.remove("ec2:CreateAction");
                    }
                }
            }),
            "create-tags-outside-create",
        ),
        (
            "post-launch tagging without the tag-key restriction",
            mutate("AllowScopedResourceTagging", |s| {
                if let Some(c) = &mut s.condition {
                    c.remove("ForAllValues:StringEquals");
                }
            }),
            "retag-ownership",
        ),
        (
            "iam:PassRole on every role",
            mutate("AllowPassingInstanceRole", |s| {
                s.resource = Some(OneOrMany::One("*".into()));
            }),
            "pass-other-role",
        ),
        (
            "creation without request-tag conditions",
            mutate("AllowScopedEC2InstanceActionsWithTags", |s| {
                s.condition = None
            }),
            "create-untagged",
        ),
        (
            "instance profile actions on every profile",
            mutate("AllowScopedInstanceProfileActions", |s| s.condition = None),
            "foreign-resource",
        ),
        (
            "every SSM parameter",
            mutate("AllowSSMReadActions", |s| {
                s.resource = Some(OneOrMany::One("*".into()));
            }),
            "ssm-private-parameter",
        ),
        (
            "any queue",
            mutate("AllowInterruptionQueueActions", |s| {
                s.resource = Some(OneOrMany::One("*".into()));
            }),
            "other-queue",
        ),
        (
            "a wildcard action",
            mutate("AllowScopedDeletion", |s| {
                s.action = Some(OneOrMany::One("ec2:*".into()));
            }),
            "action-outside-contract",
        ),
        (
            "a tag condition for the wrong cluster is also caught as missing, not over-broad",
            mutate("AllowScopedDeletion", |s| {
                if let Some(c) = &mut s.condition {
                    let eq = c.get_mut("StringEquals").unwrap();
                    eq.clear();
                    eq.insert(
                        "aws:ResourceTag/kubernetes.io/cluster/prod".into(),
                        OneOrMany::One(ConditionScalar::from("owned")),
                    );
                }
            }),
            "",
        ),
    ];
    for (name, doc, kind) in cases {
        let report = run(&doc, &scope("demo"));
        if kind.is_empty() {
            assert!(
                report.over_broad.is_empty(),
                "{name}:\n{}",
                report.to_text()
            );
            assert!(!report.missing.is_empty(), "{name}");
            continue;
        }
        assert!(report.missing.is_empty(), "{name}:\n{}", report.to_text());
        let finding = report
            .over_broad
            .iter()
            .find(|f| f.kind == kind)
            .unwrap_or_else(|| panic!("{name}: no {kind} finding:\n{}", report.to_text()));
        assert!(
            finding.statements.iter().all(|s| s.contains("Sid")),
            "{name}: {:?}",
            finding.statements
        );
        assert_eq!(report.exit_code(false), 0, "{name}");
        assert_eq!(report.exit_code(true), 1, "{name}");
    }
}

#[test]
fn an_explicit_deny_makes_calls_missing_and_is_named() {
    let mut doc = controller_policy(&scope("demo"));
    let deny: PolicyDocument = PolicyDocument::parse(
        r#"{"Version":"2012-10-17","Statement":[{"Sid":"NoTermination","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*"}]}"#,
    )
    .unwrap();
    if let OneOrMany::Many(st) = &mut doc.statement {
        st.extend(deny.statements().iter().cloned());
    }
    let report = run(&doc, &scope("demo"));
    assert_eq!(report.missing.len(), 1, "{}", report.to_text());
    let m = &report.missing[0];
    assert_eq!(m.id, "ec2:TerminateInstances/instance");
    assert_eq!(m.denied_by.len(), 1);
    assert!(m.denied_by[0].contains("NoTermination"));
    assert_eq!(report.exit_code(false), 1);
}

#[test]
fn features_turned_off_are_not_required() {
    let doc = mutate("AllowInterruptionQueueActions", |s| {
        s.resource = Some(OneOrMany::One(
            "arn:aws:sqs:us-west-2:111122223333:nope".into(),
        ));
    });
    let policy = CompiledPolicy::compile("p.json", &doc).unwrap();
    let all = audit(&policy, &scope("demo"), &AuditOptions::default());
    assert_eq!(all.missing.len(), 3);
    let features: BTreeSet<Feature> = [Feature::Core, Feature::ZonalShift].into();
    let without = audit(&policy, &scope("demo"), &AuditOptions { features });
    assert!(without.missing.is_empty(), "{}", without.to_text());
    assert_eq!(without.calls_skipped, 3);
}

#[test]
fn seed_000_alphav5_ec2_star_is_over_broad_and_misses_every_non_ec2_call() {
    let report = run(&fixture("seed000_alphav5.json"), &scope("karpenter-demo"));
    let want: BTreeSet<&str> = [
        "create-for-other-cluster",
        "create-untagged",
        "foreign-resource",
        "untagged-resource",
        "create-tags-outside-create",
        "retag-ownership",
        "action-outside-contract",
    ]
    .into();
    assert_eq!(kinds(&report.over_broad), want, "{}", report.to_text());
    assert!(
        report
            .over_broad
            .iter()
            .all(|f| f.statements == ["Statement[0]"])
    );
    let non_ec2: BTreeSet<String> = contract::calls()
        .iter()
        .filter(|c| !c.action.starts_with("ec2:"))
        .map(|c| c.id())
        .collect();
    let missing: BTreeSet<String> = report.missing.iter().map(|m| m.id.clone()).collect();
    assert_eq!(missing, non_ec2);
    assert_eq!(report.exit_code(false), 1);
}

#[test]
fn seed_000_betav1_example_misses_most_calls() {
    let report = run(&fixture("seed000_betav1.json"), &scope("karpenter-demo"));
    let total = contract::calls().len();
    assert!(report.missing.len() * 10 >= total * 9, "{}", report.summary);
    assert!(report.over_broad.is_empty());
    assert_eq!(kinds(&report.notes), ["placeholder-arn"].into());
    assert_eq!(report.exit_code(false), 1);
}

#[test]
fn seed_000_betav1_with_real_arns_is_flagged_for_deletion_without_ownership_tags() {
    let report = run(
        &fixture("seed000_betav1_filled.json"),
        &scope("karpenter-demo"),
    );
    let deletion = report
        .over_broad
        .iter()
        .find(|f| f.kind == "foreign-resource")
        .unwrap_or_else(|| panic!("{}", report.to_text()));
    assert!(
        deletion
            .targets
            .iter()
            .any(|t| t.action.as_deref() == Some("ec2:TerminateInstances"))
    );
    assert!(kinds(&report.over_broad).contains("create-untagged"));
    assert!(report.missing.len() > 50);
}

/// The calls the current contract makes that seed 001's (v0.32) policy does not grant.
const SEED_001_GAPS: &[&str] = &[
    "ec2:DescribeCapacityReservations/regional",
    "ec2:DescribeInstanceStatus/regional",
    "ec2:DescribePlacementGroups/regional",
    "ec2:RunInstances/capacity-reservation",
    "ec2:RunInstances/placement-group",
    "ec2:CreateFleet/capacity-reservation",
    "ec2:CreateFleet/placement-group",
    "ec2:CreateTags/on-create:CreateFleet:spot-instances-request",
    "ec2:CreateTags/after-launch:eks-cluster-name",
    "ec2:RebootInstances/instance",
    "iam:ListInstanceProfiles/default",
    "arc-zonal-shift:GetManagedResource/default",
];

#[test]
fn seed_001_v032_policy_has_no_over_broad_grant_and_only_the_gaps_of_later_calls() {
    let report = run(&fixture("seed001_v0.32.json"), &scope("karpenter-demo"));
    assert!(report.over_broad.is_empty(), "{}", report.to_text());
    let missing: Vec<&str> = report.missing.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(missing, SEED_001_GAPS, "{}", report.to_text());
    // The one extra grant: DescribeAvailabilityZones, which the controller no longer calls.
    assert_eq!(report.notes.len(), 1);
    assert_eq!(
        report.notes[0].targets[0].action.as_deref(),
        Some("ec2:DescribeAvailabilityZones")
    );
}

#[test]
fn the_report_serializes_to_json_with_its_summary() {
    let report = run(&fixture("seed001_v0.32.json"), &scope("karpenter-demo"));
    let json: Value = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["missing"].as_array().map(Vec::len),
        Some(SEED_001_GAPS.len())
    );
    assert_eq!(json["account"], ACCOUNT);
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .starts_with("12 missing, 0 over-broad")
    );
    assert_eq!(json["missing"][0]["granted_by"], "AllowRegionalReadActions");
}
