//! Table tests for the IAM policy evaluator: one row per operator, qualifier and element rule.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_aws::iam::PolicyDocument;
use karpenter_aws::iam::eval::{CompiledPolicy, Decision, Request};

use Decision::{Allow, ExplicitDeny, ImplicitDeny};

const INSTANCE: &str = "arn:aws:ec2:us-west-2:111122223333:instance/i-1";
const VOLUME: &str = "arn:aws:ec2:us-west-2:111122223333:volume/vol-1";

/// A policy with one Allow statement on ec2:RunInstances / `*` and this Condition.
fn allow_if(condition: &str) -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{condition}}}]}}"#
    )
}

fn run() -> Request {
    Request::new("ec2:RunInstances", INSTANCE)
}

fn decide(policy: &str, request: &Request) -> Decision {
    let doc = PolicyDocument::parse(policy).unwrap_or_else(|e| panic!("{policy}: {e}"));
    let compiled = CompiledPolicy::compile("test.json", &doc).unwrap_or_else(|e| panic!("{e}"));
    compiled.evaluate(request).decision
}

fn check(cases: Vec<(&str, String, Request, Decision)>) {
    let mut failures = Vec::new();
    for (name, policy, request, want) in cases {
        let got = decide(&policy, &request);
        if got != want {
            failures.push(format!("{name}: got {got:?}, want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn string_operators_compare_single_values_with_or_over_policy_values() {
    let tag = |v: &str| run().with("aws:RequestTag/team", v);
    check(vec![
        (
            "StringEquals matches",
            allow_if(r#"{"StringEquals":{"aws:RequestTag/team":"a"}}"#),
            tag("a"),
            Allow,
        ),
        (
            "StringEquals is case-sensitive",
            allow_if(r#"{"StringEquals":{"aws:RequestTag/team":"a"}}"#),
            tag("A"),
            ImplicitDeny,
        ),
        (
            "StringEquals ORs its values",
            allow_if(r#"{"StringEquals":{"aws:RequestTag/team":["x","a"]}}"#),
            tag("a"),
            Allow,
        ),
        (
            "StringEquals treats * literally",
            allow_if(r#"{"StringEquals":{"aws:RequestTag/team":"*"}}"#),
            tag("a"),
            ImplicitDeny,
        ),
        (
            "StringEquals needs the key",
            allow_if(r#"{"StringEquals":{"aws:RequestTag/team":"a"}}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "condition key names are case-insensitive",
            allow_if(r#"{"StringEquals":{"AWS:REQUESTTAG/TEAM":"a"}}"#),
            tag("a"),
            Allow,
        ),
        (
            "StringNotEquals allows other values",
            allow_if(r#"{"StringNotEquals":{"aws:RequestTag/team":"a"}}"#),
            tag("b"),
            Allow,
        ),
        (
            "StringNotEquals is a NOR over values",
            allow_if(r#"{"StringNotEquals":{"aws:RequestTag/team":["b","a"]}}"#),
            tag("a"),
            ImplicitDeny,
        ),
        (
            "StringNotEquals is true when the key is absent",
            allow_if(r#"{"StringNotEquals":{"aws:RequestTag/team":"a"}}"#),
            run(),
            Allow,
        ),
        (
            "StringEqualsIgnoreCase folds case",
            allow_if(r#"{"StringEqualsIgnoreCase":{"aws:RequestTag/team":"OWNED"}}"#),
            tag("owned"),
            Allow,
        ),
        (
            "StringNotEqualsIgnoreCase folds case",
            allow_if(r#"{"StringNotEqualsIgnoreCase":{"aws:RequestTag/team":"OWNED"}}"#),
            tag("owned"),
            ImplicitDeny,
        ),
        (
            "StringLike star",
            allow_if(r#"{"StringLike":{"aws:RequestTag/team":"pl*"}}"#),
            tag("platform"),
            Allow,
        ),
        (
            "StringLike question mark",
            allow_if(r#"{"StringLike":{"aws:RequestTag/team":"te?m"}}"#),
            tag("team"),
            Allow,
        ),
        (
            "StringLike star matches the empty value",
            allow_if(r#"{"StringLike":{"aws:RequestTag/team":"*"}}"#),
            tag(""),
            Allow,
        ),
        (
            "StringLike star still needs the key",
            allow_if(r#"{"StringLike":{"aws:RequestTag/team":"*"}}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "StringNotLike rejects a match",
            allow_if(r#"{"StringNotLike":{"aws:RequestTag/team":"pl*"}}"#),
            tag("platform"),
            ImplicitDeny,
        ),
        (
            "StringNotLike accepts a non-match",
            allow_if(r#"{"StringNotLike":{"aws:RequestTag/team":"pl*"}}"#),
            tag("data"),
            Allow,
        ),
        (
            "StringNotLike is true when the key is absent",
            allow_if(r#"{"StringNotLike":{"aws:RequestTag/team":"pl*"}}"#),
            run(),
            Allow,
        ),
    ]);
}

#[test]
fn arn_operators_match_each_arn_part_separately() {
    let src = |v: &str| run().with("aws:SourceArn", v);
    let arn = "arn:aws:eks:us-west-2:111122223333:cluster/demo";
    check(vec![
        (
            "ArnEquals exact",
            allow_if(&format!(r#"{{"ArnEquals":{{"aws:SourceArn":"{arn}"}}}}"#)),
            src(arn),
            Allow,
        ),
        (
            "ArnEquals with wildcards",
            allow_if(r#"{"ArnEquals":{"aws:SourceArn":"arn:aws:eks:*:*:cluster/demo"}}"#),
            src(arn),
            Allow,
        ),
        (
            "ArnLike wildcard in resource part",
            allow_if(
                r#"{"ArnLike":{"aws:SourceArn":"arn:aws:eks:us-west-2:111122223333:cluster/*"}}"#,
            ),
            src(arn),
            Allow,
        ),
        (
            "ArnLike wildcard does not span parts",
            allow_if(r#"{"ArnLike":{"aws:SourceArn":"arn:aws:eks:*:cluster/demo"}}"#),
            src(arn),
            ImplicitDeny,
        ),
        (
            "ArnLike is case-sensitive",
            allow_if(r#"{"ArnLike":{"aws:SourceArn":"arn:aws:eks:*:*:cluster/DEMO"}}"#),
            src(arn),
            ImplicitDeny,
        ),
        (
            "ArnNotEquals rejects a match",
            allow_if(&format!(
                r#"{{"ArnNotEquals":{{"aws:SourceArn":"{arn}"}}}}"#
            )),
            src(arn),
            ImplicitDeny,
        ),
        (
            "ArnNotLike accepts another ARN",
            allow_if(r#"{"ArnNotLike":{"aws:SourceArn":"arn:aws:eks:*:*:cluster/prod-*"}}"#),
            src(arn),
            Allow,
        ),
        (
            "ArnNotLike is true when the key is absent",
            allow_if(r#"{"ArnNotLike":{"aws:SourceArn":"arn:aws:eks:*:*:cluster/*"}}"#),
            run(),
            Allow,
        ),
    ]);
}

#[test]
fn bool_null_numeric_date_and_ip_operators_compare_typed_values() {
    let secure = |v: &str| run().with("aws:SecureTransport", v);
    let n = |v: &str| run().with("ec2:VolumeSize", v);
    let at = |v: &str| run().with("aws:CurrentTime", v);
    let ip = |v: &str| run().with("aws:SourceIp", v);
    check(vec![
        (
            "Bool true",
            allow_if(r#"{"Bool":{"aws:SecureTransport":"true"}}"#),
            secure("true"),
            Allow,
        ),
        (
            "Bool accepts a JSON boolean",
            allow_if(r#"{"Bool":{"aws:SecureTransport":true}}"#),
            secure("true"),
            Allow,
        ),
        (
            "Bool false does not match true",
            allow_if(r#"{"Bool":{"aws:SecureTransport":false}}"#),
            secure("true"),
            ImplicitDeny,
        ),
        (
            "Bool needs the key",
            allow_if(r#"{"Bool":{"aws:SecureTransport":"false"}}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "Null true: key absent",
            allow_if(r#"{"Null":{"aws:RequestTag/team":"true"}}"#),
            run(),
            Allow,
        ),
        (
            "Null true: key present",
            allow_if(r#"{"Null":{"aws:RequestTag/team":"true"}}"#),
            run().with("aws:RequestTag/team", "a"),
            ImplicitDeny,
        ),
        (
            "Null false: key present",
            allow_if(r#"{"Null":{"aws:RequestTag/team":"false"}}"#),
            run().with("aws:RequestTag/team", "a"),
            Allow,
        ),
        (
            "Null false: key absent",
            allow_if(r#"{"Null":{"aws:RequestTag/team":"false"}}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "Null true: empty multivalued key counts as absent",
            allow_if(r#"{"Null":{"aws:TagKeys":"true"}}"#),
            run().with_multi("aws:TagKeys", Vec::<String>::new()),
            Allow,
        ),
        (
            "NumericEquals",
            allow_if(r#"{"NumericEquals":{"ec2:VolumeSize":"20"}}"#),
            n("20"),
            Allow,
        ),
        (
            "NumericEquals accepts a JSON number",
            allow_if(r#"{"NumericEquals":{"ec2:VolumeSize":20}}"#),
            n("20.0"),
            Allow,
        ),
        (
            "NumericNotEquals",
            allow_if(r#"{"NumericNotEquals":{"ec2:VolumeSize":"20"}}"#),
            n("20"),
            ImplicitDeny,
        ),
        (
            "NumericLessThan",
            allow_if(r#"{"NumericLessThan":{"ec2:VolumeSize":"100"}}"#),
            n("99"),
            Allow,
        ),
        (
            "NumericLessThan is strict",
            allow_if(r#"{"NumericLessThan":{"ec2:VolumeSize":"100"}}"#),
            n("100"),
            ImplicitDeny,
        ),
        (
            "NumericLessThanEquals",
            allow_if(r#"{"NumericLessThanEquals":{"ec2:VolumeSize":"100"}}"#),
            n("100"),
            Allow,
        ),
        (
            "NumericGreaterThan",
            allow_if(r#"{"NumericGreaterThan":{"ec2:VolumeSize":"100"}}"#),
            n("100"),
            ImplicitDeny,
        ),
        (
            "NumericGreaterThanEquals",
            allow_if(r#"{"NumericGreaterThanEquals":{"ec2:VolumeSize":"100"}}"#),
            n("100"),
            Allow,
        ),
        (
            "Numeric on a non-number is false",
            allow_if(r#"{"NumericGreaterThan":{"ec2:VolumeSize":"1"}}"#),
            n("big"),
            ImplicitDeny,
        ),
        (
            "DateLessThan",
            allow_if(r#"{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}"#),
            at("2029-12-31T23:59:59Z"),
            Allow,
        ),
        (
            "DateGreaterThan with epoch seconds",
            allow_if(r#"{"DateGreaterThan":{"aws:CurrentTime":"1704067200"}}"#),
            at("2024-01-01T00:00:01Z"),
            Allow,
        ),
        (
            "DateEquals across time zones",
            allow_if(r#"{"DateEquals":{"aws:CurrentTime":"2024-01-01T02:00:00+02:00"}}"#),
            at("2024-01-01T00:00:00Z"),
            Allow,
        ),
        (
            "DateNotEquals",
            allow_if(r#"{"DateNotEquals":{"aws:CurrentTime":"2024-01-01"}}"#),
            at("2024-01-01T00:00:00Z"),
            ImplicitDeny,
        ),
        (
            "IpAddress in range",
            allow_if(r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#),
            ip("10.1.2.3"),
            Allow,
        ),
        (
            "IpAddress out of range",
            allow_if(r#"{"IpAddress":{"aws:SourceIp":["192.168.0.0/16","10.0.0.0/8"]}}"#),
            ip("172.16.0.1"),
            ImplicitDeny,
        ),
        (
            "NotIpAddress out of range",
            allow_if(r#"{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#),
            ip("172.16.0.1"),
            Allow,
        ),
        (
            "NotIpAddress IPv6",
            allow_if(r#"{"NotIpAddress":{"aws:SourceIp":"2001:db8::/32"}}"#),
            ip("2001:db8::1"),
            ImplicitDeny,
        ),
    ]);
}

#[test]
fn set_qualifiers_compare_multivalued_keys() {
    let keys = |v: &[&str]| run().with_multi("aws:TagKeys", v.iter().copied());
    let all = allow_if(
        r#"{"ForAllValues:StringEquals":{"aws:TagKeys":["Name","karpenter.sh/nodeclaim"]}}"#,
    );
    let any = allow_if(
        r#"{"ForAnyValue:StringEquals":{"aws:TagKeys":["Name","karpenter.sh/nodeclaim"]}}"#,
    );
    check(vec![
        (
            "ForAllValues: a subset",
            all.clone(),
            keys(&["Name"]),
            Allow,
        ),
        (
            "ForAllValues: the whole set",
            all.clone(),
            keys(&["karpenter.sh/nodeclaim", "Name"]),
            Allow,
        ),
        (
            "ForAllValues: one value outside",
            all.clone(),
            keys(&["Name", "kubernetes.io/cluster/x"]),
            ImplicitDeny,
        ),
        (
            "ForAllValues: absent key is vacuously true",
            all.clone(),
            run(),
            Allow,
        ),
        (
            "ForAllValues: empty set is vacuously true",
            all,
            keys(&[]),
            Allow,
        ),
        (
            "ForAnyValue: one value inside",
            any.clone(),
            keys(&["Owner", "Name"]),
            Allow,
        ),
        (
            "ForAnyValue: none inside",
            any.clone(),
            keys(&["Owner"]),
            ImplicitDeny,
        ),
        ("ForAnyValue: absent key is false", any, run(), ImplicitDeny),
        (
            "ForAllValues:StringLike",
            allow_if(r#"{"ForAllValues:StringLike":{"aws:TagKeys":"karpenter.sh/*"}}"#),
            keys(&["karpenter.sh/a", "karpenter.sh/b"]),
            Allow,
        ),
        (
            "ForAllValues:StringNotEquals: none of the forbidden keys",
            allow_if(r#"{"ForAllValues:StringNotEquals":{"aws:TagKeys":"Owner"}}"#),
            keys(&["Name"]),
            Allow,
        ),
        (
            "ForAllValues:StringNotEquals: a forbidden key",
            allow_if(r#"{"ForAllValues:StringNotEquals":{"aws:TagKeys":"Owner"}}"#),
            keys(&["Name", "Owner"]),
            ImplicitDeny,
        ),
        (
            "ForAnyValue:StringNotEquals: one value differs",
            allow_if(r#"{"ForAnyValue:StringNotEquals":{"aws:TagKeys":["Name","Owner"]}}"#),
            keys(&["Dept", "Name"]),
            Allow,
        ),
        (
            "ForAnyValue:StringNotEquals: all listed",
            allow_if(r#"{"ForAnyValue:StringNotEquals":{"aws:TagKeys":["Name","Owner"]}}"#),
            keys(&["Owner", "Name"]),
            ImplicitDeny,
        ),
        (
            "unqualified positive operator on a multivalued key: any value",
            allow_if(r#"{"StringEquals":{"aws:TagKeys":"Name"}}"#),
            keys(&["Owner", "Name"]),
            Allow,
        ),
        (
            "unqualified negated operator on a multivalued key: no value may match",
            allow_if(r#"{"StringNotEquals":{"aws:TagKeys":"Name"}}"#),
            keys(&["Owner", "Name"]),
            ImplicitDeny,
        ),
    ]);
}

#[test]
fn if_exists_makes_an_absent_key_pass() {
    let cond =
        allow_if(r#"{"StringEqualsIfExists":{"aws:RequestTag/eks:eks-cluster-name":"demo"}}"#);
    check(vec![
        ("IfExists: absent", cond.clone(), run(), Allow),
        (
            "IfExists: present and equal",
            cond.clone(),
            run().with("aws:RequestTag/eks:eks-cluster-name", "demo"),
            Allow,
        ),
        (
            "IfExists: present and different",
            cond,
            run().with("aws:RequestTag/eks:eks-cluster-name", "prod"),
            ImplicitDeny,
        ),
        (
            "ArnLikeIfExists: absent",
            allow_if(r#"{"ArnLikeIfExists":{"aws:SourceArn":"arn:aws:eks:*:*:cluster/x"}}"#),
            run(),
            Allow,
        ),
        (
            "NumericLessThanIfExists: present and too big",
            allow_if(r#"{"NumericLessThanIfExists":{"ec2:VolumeSize":"100"}}"#),
            run().with("ec2:VolumeSize", "500"),
            ImplicitDeny,
        ),
        (
            "ForAnyValue:StringEqualsIfExists: absent",
            allow_if(r#"{"ForAnyValue:StringEqualsIfExists":{"aws:TagKeys":"Name"}}"#),
            run(),
            Allow,
        ),
        (
            "BoolIfExists: absent",
            allow_if(r#"{"BoolIfExists":{"aws:MultiFactorAuthPresent":"true"}}"#),
            run(),
            Allow,
        ),
    ]);
}

#[test]
fn keys_and_operators_are_anded() {
    let both = allow_if(
        r#"{"StringEquals":{"aws:RequestTag/a":"1","aws:RequestTag/b":"2"},"StringLike":{"aws:RequestTag/c":"x*"}}"#,
    );
    let full = run()
        .with("aws:RequestTag/a", "1")
        .with("aws:RequestTag/b", "2")
        .with("aws:RequestTag/c", "xyz");
    check(vec![
        (
            "all keys and operators hold",
            both.clone(),
            full.clone(),
            Allow,
        ),
        (
            "one key of an operator fails",
            both.clone(),
            full.clone().with("aws:RequestTag/b", "3"),
            ImplicitDeny,
        ),
        (
            "another operator fails",
            both,
            full.with("aws:RequestTag/c", "abc"),
            ImplicitDeny,
        ),
    ]);
}

#[test]
fn explicit_deny_wins_and_deny_conditions_select_what_is_denied() {
    let guarded = |deny_condition: &str| {
        format!(
            r#"{{"Version":"2012-10-17","Statement":[
                {{"Effect":"Allow","Action":"ec2:*","Resource":"*"}},
                {{"Sid":"DenyForeign","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*","Condition":{deny_condition}}}]}}"#
        )
    };
    let term = |tag: Option<&str>| {
        let r = Request::new("ec2:TerminateInstances", INSTANCE);
        match tag {
            Some(v) => r.with_resource_tag("kubernetes.io/cluster/demo", v),
            None => r,
        }
    };
    let not_owned =
        guarded(r#"{"StringNotEquals":{"aws:ResourceTag/kubernetes.io/cluster/demo":"owned"}}"#);
    let untagged = guarded(r#"{"Null":{"aws:ResourceTag/kubernetes.io/cluster/demo":"true"}}"#);
    let if_exists = guarded(
        r#"{"StringNotEqualsIfExists":{"aws:ResourceTag/kubernetes.io/cluster/demo":"owned"}}"#,
    );
    let positive =
        guarded(r#"{"StringEquals":{"aws:ResourceTag/kubernetes.io/cluster/demo":"shared"}}"#);
    check(vec![
        ("Deny StringNotEquals: owned passes", not_owned.clone(), term(Some("owned")), Allow),
        ("Deny StringNotEquals: shared is denied", not_owned.clone(), term(Some("shared")), ExplicitDeny),
        ("Deny StringNotEquals: untagged is denied (negated, key absent)", not_owned.clone(), term(None), ExplicitDeny),
        ("Deny does not touch other actions", not_owned, Request::new("ec2:StopInstances", INSTANCE), Allow),
        ("Deny Null: untagged is denied", untagged.clone(), term(None), ExplicitDeny),
        ("Deny Null: tagged passes", untagged, term(Some("shared")), Allow),
        ("Deny StringNotEqualsIfExists: untagged is denied too (IfExists adds nothing to a negated operator)", if_exists.clone(), term(None), ExplicitDeny),
        ("Deny StringNotEqualsIfExists: shared is denied", if_exists, term(Some("shared")), ExplicitDeny),
        ("Deny StringEquals: absent key does not deny", positive.clone(), term(None), Allow),
        ("Deny StringEquals: matching value denies", positive, term(Some("shared")), ExplicitDeny),
        (
            "an unconditional Deny beats a more specific Allow",
            r#"{"Version":"2012-10-17","Statement":[
                {"Effect":"Deny","Action":"ec2:*","Resource":"*"},
                {"Effect":"Allow","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:us-west-2:111122223333:instance/i-1"}]}"#.to_string(),
            run(),
            ExplicitDeny,
        ),
    ]);
}

#[test]
fn action_and_resource_elements_match_with_wildcards_and_negation() {
    let p = |stmt: &str| format!(r#"{{"Version":"2012-10-17","Statement":[{stmt}]}}"#);
    check(vec![
        (
            "actions are case-insensitive",
            p(r#"{"Effect":"Allow","Action":"EC2:runinstances","Resource":"*"}"#),
            run(),
            Allow,
        ),
        (
            "action star",
            p(r#"{"Effect":"Allow","Action":"*","Resource":"*"}"#),
            run(),
            Allow,
        ),
        (
            "action prefix wildcard",
            p(r#"{"Effect":"Allow","Action":"ec2:Run*","Resource":"*"}"#),
            run(),
            Allow,
        ),
        (
            "action question mark",
            p(r#"{"Effect":"Allow","Action":"ec2:?unInstances","Resource":"*"}"#),
            run(),
            Allow,
        ),
        (
            "another service",
            p(r#"{"Effect":"Allow","Action":"iam:*","Resource":"*"}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "NotAction allows what it does not list",
            p(r#"{"Effect":"Allow","NotAction":"iam:*","Resource":"*"}"#),
            run(),
            Allow,
        ),
        (
            "NotAction excludes what it lists",
            p(r#"{"Effect":"Allow","NotAction":["iam:*","ec2:Run*"],"Resource":"*"}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "Deny with NotAction denies everything else",
            p(
                r#"{"Effect":"Allow","Action":"*","Resource":"*"},{"Effect":"Deny","NotAction":"ec2:Describe*","Resource":"*"}"#,
            ),
            run(),
            ExplicitDeny,
        ),
        (
            "resources are case-sensitive",
            p(
                r#"{"Effect":"Allow","Action":"ec2:*","Resource":"arn:aws:ec2:us-west-2:111122223333:INSTANCE/*"}"#,
            ),
            run(),
            ImplicitDeny,
        ),
        (
            "resource wildcard",
            p(
                r#"{"Effect":"Allow","Action":"ec2:*","Resource":"arn:aws:ec2:us-west-2:*:instance/*"}"#,
            ),
            run(),
            Allow,
        ),
        (
            "resource question mark",
            p(
                r#"{"Effect":"Allow","Action":"ec2:*","Resource":"arn:aws:ec2:us-west-?:*:instance/i-?"}"#,
            ),
            run(),
            Allow,
        ),
        (
            "another resource type",
            p(
                r#"{"Effect":"Allow","Action":"ec2:*","Resource":"arn:aws:ec2:us-west-2:*:volume/*"}"#,
            ),
            run(),
            ImplicitDeny,
        ),
        (
            "NotResource allows what it does not list",
            p(r#"{"Effect":"Allow","Action":"ec2:*","NotResource":"arn:aws:ec2:*:*:instance/*"}"#),
            Request::new("ec2:CreateTags", VOLUME),
            Allow,
        ),
        (
            "NotResource excludes what it lists",
            p(r#"{"Effect":"Allow","Action":"ec2:*","NotResource":"arn:aws:ec2:*:*:instance/*"}"#),
            run(),
            ImplicitDeny,
        ),
        (
            "nothing applies: implicit deny",
            p(r#"{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}"#),
            run(),
            ImplicitDeny,
        ),
    ]);
}

#[test]
fn policy_variables_are_substituted_in_resources_and_string_conditions() {
    let v12 = |stmt: &str| format!(r#"{{"Version":"2012-10-17","Statement":[{stmt}]}}"#);
    let v08 = |stmt: &str| format!(r#"{{"Version":"2008-10-17","Statement":[{stmt}]}}"#);
    let team = |r: Request, t: &str| r.with("aws:PrincipalTag/team", t);
    let own_resource = r#"{"Effect":"Allow","Action":"ec2:*","Resource":"arn:aws:ec2:us-west-2:*:instance/${aws:PrincipalTag/team}-*"}"#;
    let tagged = Request::new(
        "ec2:StopInstances",
        "arn:aws:ec2:us-west-2:1:instance/blue-1",
    );
    let same_team = r#"{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/team":"${aws:PrincipalTag/team}"}}}"#;
    let defaulted = r#"{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/team":"${aws:PrincipalTag/team, 'shared'}"}}}"#;
    let escaped = r#"{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringLike":{"aws:RequestTag/name":"a${*}b"}}}"#;
    check(vec![
        (
            "variable in Resource",
            v12(own_resource),
            team(tagged.clone(), "blue"),
            Allow,
        ),
        (
            "variable in Resource, other value",
            v12(own_resource),
            team(tagged.clone(), "red"),
            ImplicitDeny,
        ),
        (
            "variable without a value matches nothing",
            v12(own_resource),
            tagged.clone(),
            ImplicitDeny,
        ),
        (
            "no substitution under 2008-10-17",
            v08(own_resource),
            team(tagged, "blue"),
            ImplicitDeny,
        ),
        (
            "variable in a condition value",
            v12(same_team),
            team(run().with_resource_tag("team", "blue"), "blue"),
            Allow,
        ),
        (
            "variable in a condition value, mismatch",
            v12(same_team),
            team(run().with_resource_tag("team", "red"), "blue"),
            ImplicitDeny,
        ),
        (
            "default value when the variable is missing",
            v12(defaulted),
            run().with_resource_tag("team", "shared"),
            Allow,
        ),
        (
            "variable values are literal, not wildcards",
            v12(same_team),
            team(run().with_resource_tag("team", "blue"), "*"),
            ImplicitDeny,
        ),
        (
            "${*} is a literal star",
            v12(escaped),
            run().with("aws:RequestTag/name", "a*b"),
            Allow,
        ),
        (
            "${*} is not a wildcard",
            v12(escaped),
            run().with("aws:RequestTag/name", "axb"),
            ImplicitDeny,
        ),
        (
            "request tag as a variable",
            v12(
                r#"{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:ResourceTag/owner":"${aws:RequestTag/owner}"}}}"#,
            ),
            run()
                .with_request_tag("owner", "me")
                .with_resource_tag("owner", "me"),
            Allow,
        ),
    ]);
}

#[test]
fn policies_with_invalid_conditions_do_not_compile() {
    let cases = [
        (
            r#"{"StringEqual":{"k":"v"}}"#,
            "unknown condition operator \"StringEqual\"",
        ),
        (
            r#"{"stringEquals":{"k":"v"}}"#,
            "did you mean StringEquals?",
        ),
        (
            r#"{"NumericLessThan":{"k":"ten"}}"#,
            "\"ten\" is not a valid value for NumericLessThan",
        ),
        (r#"{"Bool":{"k":"yes"}}"#, "not a valid value for Bool"),
        (r#"{"Null":{"k":"maybe"}}"#, "not a valid value for Null"),
        (
            r#"{"DateLessThan":{"k":"soon"}}"#,
            "not a valid value for DateLessThan",
        ),
        (
            r#"{"IpAddress":{"k":"10.0.0.0/99"}}"#,
            "not a valid value for IpAddress",
        ),
    ];
    for (cond, want) in cases {
        let doc = PolicyDocument::parse(&allow_if(cond)).unwrap();
        let err = CompiledPolicy::compile("p.json", &doc)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{cond}: {err}");
        assert!(err.starts_with("p.json: Statement[0]: Condition."), "{err}");
    }
    let doc = PolicyDocument::parse(
        r#"{"Statement":[{"Effect":"Allow","Action":"RunInstances","Resource":"*"}]}"#,
    )
    .unwrap();
    let err = CompiledPolicy::compile("p.json", &doc)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not of the form service:Action"), "{err}");
}
