//! What every manifest-reading subcommand (`simulate`, `validate`, `convert`) has in common:
//! the `-f` forms, exit codes, messages with `file:line:column`, and what they refuse.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::path::PathBuf;

mod common;

use common::{karpenter, stderr, stdout};

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          resources: {requests: {cpu: 500m, memory: 512Mi}}
";

/// A fresh directory for one test, with `files` written into it.
fn dir_with(test: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("inputs-cli-{}-{test}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("temp dir: {e}");
    }
    for (name, text) in files {
        if let Err(e) = std::fs::write(dir.join(name), text) {
            panic!("writing {name}: {e}");
        }
    }
    dir
}

fn path(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn every_subcommand_takes_files_directories_stdin_and_several_values_after_one_f() {
    let dir = dir_with(
        "forms",
        &[
            ("nodepool.yaml", NODEPOOL.as_bytes()),
            ("web.yaml", DEPLOYMENT.as_bytes()),
        ],
    );
    let (np, web, all) = (
        path(&dir, "nodepool.yaml"),
        path(&dir, "web.yaml"),
        dir.display().to_string(),
    );
    for command in ["simulate", "validate", "convert"] {
        for (form, args, stdin) in [
            ("a directory", vec![command, "-f", &all], None),
            (
                "two values after one -f",
                vec![command, "-f", &np, &web],
                None,
            ),
            ("two -f", vec![command, "-f", &np, "-f", &web], None),
            (
                "stdin and a file",
                vec![command, "-f", "-", &web],
                Some(NODEPOOL),
            ),
        ] {
            let out = karpenter(&args, stdin);
            assert_eq!(out.status.code(), Some(0), "{command} with {form}: {out:?}");
        }
    }
}

#[test]
fn exit_codes_are_those_of_the_readme_table() {
    let dir = dir_with(
        "exit",
        &[
            ("nodepool.yaml", NODEPOOL.as_bytes()),
            ("binary.yaml", b"\xff\xfe\x00"),
            ("bad.yaml", b"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {weight: 0}\n"),
        ],
    );
    let (np, binary, bad) = (
        path(&dir, "nodepool.yaml"),
        path(&dir, "binary.yaml"),
        path(&dir, "bad.yaml"),
    );
    let empty = dir_with("exit-empty", &[]).display().to_string();
    for (case, args, code) in [
        ("valid input", vec!["validate", "-f", &np], 0),
        ("an invalid object", vec!["validate", "-f", &bad], 1),
        (
            "a missing file",
            vec!["validate", "-f", "/nonexistent/a.yaml"],
            2,
        ),
        (
            "a file that is not UTF-8",
            vec!["validate", "-f", &binary],
            2,
        ),
        (
            "a directory without manifests",
            vec!["validate", "-f", &empty],
            2,
        ),
        ("valid input", vec!["convert", "-f", &np], 0),
        (
            "a missing file",
            vec!["convert", "-f", "/nonexistent/a.yaml"],
            2,
        ),
        (
            "a file that is not UTF-8",
            vec!["convert", "-f", &binary],
            2,
        ),
        ("valid input", vec!["simulate", "-f", &np], 0),
        ("an invalid object", vec!["simulate", "-f", &bad], 2),
        (
            "a missing file",
            vec!["simulate", "-f", "/nonexistent/a.yaml"],
            2,
        ),
        (
            "a file that is not UTF-8",
            vec!["simulate", "-f", &binary],
            2,
        ),
        (
            "an unknown region",
            vec!["simulate", "-f", &np, "--region", "mars-1"],
            2,
        ),
    ] {
        let out = karpenter(&args, None);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{} on {case}: {out:?}",
            args[0]
        );
    }
}

#[test]
fn regions_are_checked_and_prices_of_another_region_are_said_to_be_us_east_1s() {
    let dir = dir_with("regions", &[("nodepool.yaml", NODEPOOL.as_bytes())]);
    let np = path(&dir, "nodepool.yaml");
    for (region, code, out_text, err_text) in [
        ("us-east-1", 0, "in us-east-1", ""),
        (
            "eu-west-1",
            0,
            "no eu-west-1 prices are embedded: costs use us-east-1 list prices",
            "",
        ),
        (
            "eu-west1",
            2,
            "",
            "unknown region \"eu-west1\" (did you mean \"eu-west-1\"?)",
        ),
        (
            "mars-1",
            2,
            "",
            "unknown region \"mars-1\"; known regions: af-south-1",
        ),
    ] {
        let out = karpenter(&["simulate", "-f", &np, "--region", region], None);
        assert_eq!(out.status.code(), Some(code), "{region}: {out:?}");
        assert!(
            stdout(&out).contains(out_text),
            "{region}: {}",
            stdout(&out)
        );
        assert!(
            stderr(&out).contains(err_text),
            "{region}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn messages_name_file_line_and_column_and_are_printed_once() {
    let dir = dir_with(
        "positions",
        &[(
            "two.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec:\n  weight: 0\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements: []\n",
        )],
    );
    let file = path(&dir, "two.yaml");
    let validate = karpenter(&["validate", "-f", &file], None);
    assert!(
        stdout(&validate).contains(&format!(
            "{file}:9:11: NodePool/x: spec.weight: must be between 1 and 100, found 0"
        )),
        "{}",
        stdout(&validate)
    );
    let simulate = karpenter(&["simulate", "-f", &file], None);
    assert!(
        stderr(&simulate).contains(&format!("{file}:9:11: NodePool/x: spec.weight:")),
        "{}",
        stderr(&simulate)
    );
    let missing = karpenter(&["simulate", "-f", "/nonexistent/a.yaml"], None);
    let err = stderr(&missing);
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

#[test]
fn wrong_versions_duplicates_negative_counts_and_huge_counts_are_errors_naming_the_object() {
    let pool = |name: &str| NODEPOOL.replace("name: default", &format!("name: {name}"));
    for (case, files, command, code, expected) in [
        (
            "an unknown version of a Karpenter group",
            vec![(
                "a.yaml",
                NODEPOOL.replace("karpenter.sh/v1", "karpenter.sh/v2"),
            )],
            "validate",
            1,
            "a.yaml:1:13: NodePool/default: apiVersion: NodePool needs apiVersion karpenter.sh/v1, found \"karpenter.sh/v2\"",
        ),
        (
            "the same NodePool in two files",
            vec![("a.yaml", pool("default")), ("b.yaml", pool("default"))],
            "simulate",
            2,
            "b.yaml:1:1: NodePool/default: defined twice: first at ",
        ),
        (
            "negative replicas",
            vec![("a.yaml", DEPLOYMENT.replace("replicas: 3", "replicas: -3"))],
            "simulate",
            2,
            "a.yaml:5:13: Deployment/web: spec.replicas: must be at least 0, found -3",
        ),
        (
            "a negative request",
            vec![("a.yaml", DEPLOYMENT.replace("cpu: 500m", "cpu: -500m"))],
            "simulate",
            2,
            "Deployment/web: spec.template.spec.containers[0].resources.requests.cpu: must not be negative",
        ),
        (
            "two billion replicas",
            vec![(
                "a.yaml",
                DEPLOYMENT.replace("replicas: 3", "replicas: 2000000000"),
            )],
            "simulate",
            2,
            "a.yaml:5:13: Deployment/web: spec.replicas: 2000000000 pods is more than simulate's ceiling of 200000 pods",
        ),
    ] {
        let owned: Vec<(&str, Vec<u8>)> = files
            .iter()
            .map(|(n, t)| (*n, t.as_bytes().to_vec()))
            .collect();
        let refs: Vec<(&str, &[u8])> = owned.iter().map(|(n, t)| (*n, t.as_slice())).collect();
        let dir = dir_with(&case.replace(' ', "-"), &refs);
        let out = karpenter(&[command, "-f", &dir.display().to_string()], None);
        assert_eq!(out.status.code(), Some(code), "{case}: {out:?}");
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains(expected), "{case}: {text}");
    }
}
