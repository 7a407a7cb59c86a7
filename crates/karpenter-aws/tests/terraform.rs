//! `karpenter iam policy -o terraform`: the Terraform rendering, parsed back with an HCL parser
//! and evaluated, says statement for statement what the JSON policy says.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use karpenter_aws::iam::{Scope, generate, terraform};
use serde_json::{Value, json};

fn scope() -> Scope {
    Scope::new("karpenter-demo", "us-west-2", None).unwrap_or_else(|e| panic!("{e}"))
}

/// The JSON policy's statements in Terraform's vocabulary.
fn expected(doc: &Value) -> Vec<Value> {
    let list = |v: &Value| match v {
        Value::Array(items) => Value::Array(items.clone()),
        Value::Null => Value::Null,
        other => json!([other]),
    };
    doc["Statement"]
        .as_array()
        .unwrap_or_else(|| panic!("statements"))
        .iter()
        .map(|s| {
            let mut conditions = Vec::new();
            if let Some(ops) = s["Condition"].as_object() {
                for (test, keys) in ops {
                    for (variable, values) in keys.as_object().into_iter().flatten() {
                        conditions.push(
                            json!({"test": test, "variable": variable, "values": list(values)}),
                        );
                    }
                }
            }
            json!({
                "sid": s["Sid"], "effect": s["Effect"], "actions": list(&s["Action"]),
                "resources": list(&s["Resource"]), "conditions": conditions,
            })
        })
        .collect()
}

#[test]
fn the_terraform_policy_document_says_what_the_json_policy_says() {
    let doc = generate::controller_policy(&scope());
    let text = terraform::policy_document(&doc, "karpenter_controller");
    let body: hcl::Body = hcl::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let data = body
        .blocks()
        .find(|b| b.identifier() == "data")
        .unwrap_or_else(|| panic!("a data block:\n{text}"));
    let labels: Vec<&str> = data.labels().iter().map(|l| l.as_str()).collect();
    assert_eq!(labels, ["aws_iam_policy_document", "karpenter_controller"]);
    let ctx = hcl::eval::Context::new();
    let eval = |body: &hcl::Body, key: &str| -> Value {
        body.attributes()
            .find(|a| a.key() == key)
            .map(|a| {
                let value = hcl::eval::Evaluate::evaluate(a.expr(), &ctx)
                    .unwrap_or_else(|e| panic!("evaluating {key}: {e}"));
                serde_json::to_value(value).unwrap_or_else(|e| panic!("{e}"))
            })
            .unwrap_or(Value::Null)
    };
    let got: Vec<Value> = data
        .body()
        .blocks()
        .filter(|b| b.identifier() == "statement")
        .map(|s| {
            let conditions: Vec<Value> = s
                .body()
                .blocks()
                .filter(|b| b.identifier() == "condition")
                .map(|c| {
                    json!({"test": eval(c.body(), "test"), "variable": eval(c.body(), "variable"),
                           "values": eval(c.body(), "values")})
                })
                .collect();
            json!({
                "sid": eval(s.body(), "sid"), "effect": eval(s.body(), "effect"),
                "actions": eval(s.body(), "actions"), "resources": eval(s.body(), "resources"),
                "conditions": conditions,
            })
        })
        .collect();
    let json_doc = serde_json::to_value(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, expected(&json_doc));
    assert!(
        got.len() >= 10,
        "every statement of the policy: {}",
        got.len()
    );
}
