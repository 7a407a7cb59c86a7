//! `karpenter explain -f` through the built binary: golden answers for the scenario directories
//! under `tests/explain/<scenario>/manifests`, in text and JSON (`tests/explain/<scenario>/golden`;
//! `UPDATE_GOLDEN=1 cargo test -p karpenter --test explain_cli` rewrites them, then read the
//! diff). Each case also asserts the one cause it is about, so a golden rewritten over a broken
//! rule does not pass unread.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

mod common;

use common::{karpenter, repo_root, stderr, stdout};

/// The time every pass runs at: 10:00 UTC, inside `frozen`'s 09:00-17:00 zero budget.
const NOW: &str = "2026-11-27T10:00:00Z";

/// Runs `explain -f <scenario> ARGS --now NOW`; its exit code and standard output.
fn explain(scenario: &str, args: &[&str]) -> (i32, String, String) {
    let dir = format!("crates/karpenter/tests/explain/{scenario}/manifests");
    let mut argv = vec!["explain", "-f", dir.as_str(), "--now", NOW];
    argv.extend_from_slice(args);
    let output = karpenter(&argv, None);
    (
        output.status.code().unwrap_or(-1),
        stdout(&output),
        stderr(&output),
    )
}

/// Compares `actual` with the golden file `name` of `scenario` (or rewrites it with
/// `UPDATE_GOLDEN=1`).
fn golden(scenario: &str, name: &str, actual: &str) {
    let path = repo_root()
        .join("crates/karpenter/tests/explain")
        .join(scenario)
        .join("golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    pretty_assertions::assert_eq!(expected, actual, "golden {}", path.display());
}

/// One case: the answer in text and in JSON against their goldens; the text.
fn case(scenario: &str, name: &str, args: &[&str]) -> String {
    let (code, text, err) = explain(scenario, args);
    assert_eq!(code, 0, "exit code; stderr:\n{err}");
    golden(scenario, &format!("{name}.txt"), &text);
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let (code, json, err) = explain(scenario, &json_args);
    assert_eq!(code, 0, "exit code (-o json); stderr:\n{err}");
    serde_json::from_str::<serde_json::Value>(&json).expect("-o json is JSON");
    golden(scenario, &format!("{name}.json"), &json);
    text
}

#[test]
fn a_pod_that_fits_is_told_the_nodeclaim_it_would_get() {
    let text = case("pending", "pod-web", &["pod", "shop/web"]);
    assert!(text.contains("goes to a new NodeClaim"), "{text}");
    assert!(text.contains("nodepool general"), "{text}");
}

#[test]
fn a_pod_with_an_impossible_requirement_is_told_why_per_nodepool() {
    let text = case("pending", "pod-lost", &["pod", "shop/lost"]);
    assert!(text.contains("fits nowhere"), "{text}");
    assert!(text.contains("nowhere-1"), "{text}");
    assert!(
        text.contains("nodepool gpu: not ready"),
        "the pool that is not Ready is named: {text}"
    );
}

#[test]
fn a_pod_held_by_a_nodepool_limit_is_told_the_limit() {
    let text = case("pending", "pod-capped", &["pod", "shop/capped"]);
    assert!(text.contains("nodepool small"), "{text}");
    assert!(text.contains("limit"), "{text}");
}

#[test]
fn a_node_kept_by_a_do_not_disrupt_pod_names_the_pod() {
    let text = case("disruption", "node-held", &["node", "held"]);
    assert!(text.contains("stays"), "{text}");
    assert!(text.contains("shop/db-0"), "{text}");
    assert!(text.contains("do-not-disrupt"), "{text}");
}

#[test]
fn a_node_kept_by_a_pdb_names_the_pdb() {
    let text = case("disruption", "node-guarded", &["node", "guarded"]);
    assert!(text.contains("stays"), "{text}");
    assert!(text.contains("shop/pay"), "{text}");
}

#[test]
fn a_node_kept_by_a_zero_budget_says_until_when() {
    let text = case("disruption", "node-idle", &["node", "idle"]);
    assert!(text.contains("stays"), "{text}");
    assert!(text.contains("budget"), "{text}");
    assert!(text.contains("17:00"), "{text}");
}

#[test]
fn an_empty_node_is_removed_by_the_pass() {
    let text = case("disruption", "node-empty", &["node", "empty"]);
    assert!(text.contains("is being disrupted"), "{text}");
}

#[test]
fn the_consolidation_dry_run_lists_the_command_and_every_node_left() {
    let text = case("disruption", "consolidation", &["consolidation"]);
    assert!(text.contains("command:"), "{text}");
    for node in ["held", "guarded", "cold", "idle"] {
        assert!(
            text.contains(&format!("node {node} stays")),
            "{node}: {text}"
        );
    }
}

#[test]
fn a_nodepool_shows_its_budgets_now_and_when_the_next_window_opens() {
    let text = case("disruption", "nodepool-frozen", &["nodepool", "frozen"]);
    assert!(text.contains("budget Underutilized: 0 more"), "{text}");
    assert!(
        text.contains("next window opens at 2026-11-27T17:00:00Z"),
        "{text}"
    );
}

#[test]
fn a_removal_simulation_says_where_each_pod_goes_and_what_holds_the_node() {
    let text = case(
        "disruption",
        "removal-cold",
        &["consolidation", "--node", "cold"],
    );
    assert!(text.contains("shop/cold-0 -> node "), "{text}");
    assert!(text.contains("consolidation would remove it"), "{text}");
    assert!(
        text.contains("a pass would not take it now") && text.contains("until 17:00 UTC"),
        "{text}"
    );
}

#[test]
fn a_removal_simulation_of_a_protected_node_names_the_protection() {
    let text = case(
        "disruption",
        "removal-guarded",
        &["consolidation", "--node", "guarded"],
    );
    assert!(text.contains("cannot be removed"), "{text}");
    assert!(text.contains("PDB shop/pay"), "{text}");
}

#[test]
fn a_pod_too_large_for_every_type_is_told_the_closest_and_what_it_lacks() {
    let text = case("pending", "pod-huge", &["pod", "shop/huge"]);
    assert!(
        text.contains("closest instance type m5.24xlarge: needs 200 cpu, has 95.69 allocatable"),
        "{text}"
    );
}

#[test]
fn what_the_manifests_do_not_have_is_no_answer_with_exit_1() {
    for (args, what) in [
        (&["pod", "shop/ghost"][..], "pod shop/ghost"),
        (&["node", "ghost"][..], "node ghost"),
        (&["nodepool", "ghost"][..], "NodePool ghost"),
        (&["consolidation", "--node", "ghost"][..], "node ghost"),
    ] {
        let (code, text, err) = explain("disruption", args);
        assert_eq!(code, 1, "{args:?}: {text}{err}");
        assert!(
            err.contains(&format!("{what} is not in the manifests")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn manifests_that_cannot_be_read_exit_2() {
    let output = karpenter(
        &["explain", "node", "x", "-f", "no/such/dir", "--now", NOW],
        None,
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let output = karpenter(
        &[
            "explain",
            "node",
            "held",
            "-f",
            "crates/karpenter/tests/explain/disruption/manifests",
            "--now",
            "yesterday",
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--now"), "{}", stderr(&output));
}

#[test]
fn a_node_waiting_for_consolidate_after_is_told_how_long_remains_and_until_when() {
    let text = case("waiting", "node-fresh", &["node", "fresh"]);
    assert!(
        text.contains("not consolidatable until 10:20:00 UTC"),
        "{text}"
    );
    assert!(
        text.contains("20m remaining, until 2026-11-27T10:20:00Z"),
        "{text}"
    );
}

#[test]
fn without_the_controller_an_unreachable_cluster_exits_2_naming_what_it_was_listing() {
    let dir = std::env::temp_dir().join(format!("explain-no-controller-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // Port 9 (discard) on loopback: nothing answers.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let output = karpenter(
        &[
            "explain",
            "node",
            "n1",
            "--no-controller",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        None,
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("listing the cluster's NodePools"), "{err}");
    let output = karpenter(
        &["explain", "node", "n1", "--no-controller", "-f", "x.yaml"],
        None,
    );
    assert_eq!(
        output.status.code(),
        Some(2),
        "-f and --no-controller conflict"
    );
    assert!(
        stderr(&output).contains("--no-controller"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
