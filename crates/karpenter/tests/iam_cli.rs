//! `karpenter iam policy|cloudformation|audit`, run as the built binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use common::{aws_fixture, karpenter, stderr, stdout};

use serde_json::Value;

const DEMO: [&str; 4] = ["--cluster-name", "karpenter-demo", "--region", "us-west-2"];

fn policy_json(extra: &[&str]) -> String {
    let mut args = vec!["iam", "policy"];
    args.extend(DEMO);
    args.extend(extra);
    let out = karpenter(&args, None);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn iam_policy_prints_a_policy_document_with_the_template_sids() {
    let json: Value = serde_json::from_str(&policy_json(&[])).expect("policy is JSON");
    assert_eq!(json["Version"], "2012-10-17");
    let sids: Vec<&str> = json["Statement"]
        .as_array()
        .expect("a statement list")
        .iter()
        .filter_map(|s| s["Sid"].as_str())
        .collect();
    for sid in [
        "AllowScopedEC2InstanceAccessActions",
        "AllowScopedEC2LaunchTemplateAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
        "AllowScopedDeletion",
        "AllowRegionalReadActions",
        "AllowSSMReadActions",
        "AllowPricingReadActions",
        "AllowInterruptionQueueActions",
        "AllowPassingInstanceRole",
        "AllowScopedInstanceProfileCreationActions",
        "AllowScopedInstanceProfileTagActions",
        "AllowScopedInstanceProfileActions",
        "AllowInstanceProfileReadActions",
        "AllowUnscopedInstanceProfileListAction",
        "AllowAPIServerEndpointDiscovery",
    ] {
        assert!(sids.contains(&sid), "{sid} missing from {sids:?}");
    }
}

#[test]
fn iam_policy_flags_fill_in_account_partition_queue_and_role() {
    let text = policy_json(&[
        "--account-id",
        "123456789012",
        "--interruption-queue-arn",
        "arn:aws:sqs:us-west-2:123456789012:events",
        "--node-role-arn",
        "arn:aws:iam::123456789012:role/nodes",
    ]);
    assert!(text.contains("arn:aws:eks:us-west-2:123456789012:cluster/karpenter-demo"));
    assert!(text.contains("\"arn:aws:sqs:us-west-2:123456789012:events\""));
    assert!(text.contains("\"arn:aws:iam::123456789012:role/nodes\""));
    let out = karpenter(
        &[
            "iam",
            "policy",
            "--cluster-name",
            "c",
            "--region",
            "cn-north-1",
        ],
        None,
    );
    assert!(out.status.success());
    assert!(stdout(&out).contains("arn:aws-cn:ec2:cn-north-1:"));
}

#[test]
fn iam_policy_rejects_bad_flags_with_exit_code_2() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--cluster-name", "c", "--region", "nowhere"],
            "invalid region",
        ),
        (
            &[
                "--cluster-name",
                "c",
                "--region",
                "us-gov-west-1",
                "--partition",
                "aws",
            ],
            "is in partition aws-us-gov",
        ),
        (
            &[
                "--cluster-name",
                "c",
                "--region",
                "us-west-2",
                "--account-id",
                "12",
            ],
            "invalid account id",
        ),
        (
            &["--cluster-name", "bad name", "--region", "us-west-2"],
            "invalid cluster name",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["iam", "policy"];
        args.extend(flags);
        let out = karpenter(&args, None);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(stderr(&out).contains(want), "{flags:?}: {}", stderr(&out));
    }
}

#[test]
fn iam_cloudformation_prints_a_yaml_template_with_the_queue_rules_and_policies() {
    let out = karpenter(&["iam", "cloudformation", "--cluster-name", "demo"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let t: Value = serde_saphyr::from_str(&stdout(&out)).expect("plain YAML");
    assert_eq!(t["Parameters"]["ClusterName"]["Default"], "demo");
    for name in [
        "KarpenterNodeRole",
        "KarpenterControllerNodeLifecyclePolicy",
        "KarpenterControllerIAMIntegrationPolicy",
        "KarpenterInterruptionQueue",
        "KarpenterInterruptionQueuePolicy",
        "ScheduledChangeRule",
        "SpotInterruptionRule",
        "RebalanceRule",
        "InstanceStateChangeRule",
    ] {
        assert!(t["Resources"].get(name).is_some(), "{name}");
    }
}

#[test]
fn iam_audit_passes_the_generated_policy_with_exit_code_0() {
    let policy = policy_json(&[]);
    let mut args = vec!["iam", "audit", "-f", "-"];
    args.extend(DEMO);
    let out = karpenter(&args, Some(&policy));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let last = stdout(&out).lines().last().unwrap_or_default().to_string();
    assert!(
        last.starts_with("summary: 0 missing, 0 over-broad"),
        "{last}"
    );
}

#[test]
fn iam_audit_exits_1_and_lists_the_gaps_of_an_older_policy() {
    let seed = aws_fixture("seed001_v0.32.json");
    let mut args = vec!["iam", "audit", "-f", &seed];
    args.extend(DEMO);
    let out = karpenter(&args, None);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("MISSING"), "{text}");
    assert!(text.contains("iam:ListInstanceProfiles/default"), "{text}");
    assert!(text.contains("summary: 12 missing, 0 over-broad"), "{text}");
    assert!(
        text.contains("account 111122223333"),
        "the account is inferred from the policy"
    );

    args.extend(["--without", "interruption,zonal-shift", "-o", "json"]);
    let out = karpenter(&args, None);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("-o json is JSON");
    assert_eq!(json["missing"].as_array().map(Vec::len), Some(11));
    assert_eq!(json["calls_skipped"], 4);
}

#[test]
fn iam_audit_reports_over_broad_grants_and_fails_on_them_only_when_asked() {
    let mut policy: Value = serde_json::from_str(&policy_json(&[])).expect("policy is JSON");
    policy["Statement"]
        .as_array_mut()
        .expect("a statement list")
        .push(serde_json::json!({"Sid": "Extra", "Effect": "Allow", "Action": "ec2:*", "Resource": "*"}));
    let text = policy.to_string();
    let mut args = vec!["iam", "audit", "-f", "-", "-o", "json"];
    args.extend(DEMO);
    let out = karpenter(&args, Some(&text));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("-o json is JSON");
    let findings = json["over_broad"].as_array().expect("a finding list");
    assert!(!findings.is_empty());
    assert!(
        findings
            .iter()
            .all(|f| f["statements"].to_string().contains("Extra"))
    );
    args.push("--fail-on-over-broad");
    assert_eq!(karpenter(&args, Some(&text)).status.code(), Some(1));
}

#[test]
fn iam_audit_reports_unreadable_policies_with_exit_code_2() {
    let mut args = vec!["iam", "audit", "-f", "-"];
    args.extend(DEMO);
    let bad = r#"{"Version":"2012-10-17","Statement":[{"Sid":"A","Effect":"Allow","Action":["ec2:RunInstances",7],"Resource":"*"}]}"#;
    let out = karpenter(&args, Some(bad));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("stdin: invalid IAM policy"), "{err}");
    assert!(
        err.contains("Statement[0] (Sid \"A\"): Action[1]: expected a string"),
        "{err}"
    );

    let out = karpenter(&args, Some("{not json"));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));

    let mut args = vec!["iam", "audit", "-f", "/nonexistent/policy.json"];
    args.extend(DEMO);
    let out = karpenter(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("reading /nonexistent/policy.json"));
}

#[test]
fn iam_policy_prints_a_terraform_data_block_on_request() {
    let mut args = vec!["iam", "policy"];
    args.extend(DEMO);
    args.extend(["-o", "terraform", "--terraform-name", "karpenter"]);
    let out = karpenter(&args, None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("data \"aws_iam_policy_document\" \"karpenter\" {"),
        "{text}"
    );
    assert!(text.contains("sid    = \"AllowScopedEC2InstanceAccessActions\""));
    assert!(text.contains("ec2:CreateFleet"));
}
