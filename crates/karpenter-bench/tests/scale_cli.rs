//! `karpenter-bench scale` at a tiny size: the run completes and its report is consistent
//! (the cluster it says it generated, every pending pod placed or given a reason, a pass over
//! every node).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::process::Command;

fn scale(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-bench"))
        .arg("scale")
        .args(args)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("karpenter-bench runs: {e}"));
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn a_tiny_scale_run_places_or_explains_every_pending_pod_and_passes_over_every_node() {
    let report = scale(&[
        "--nodes",
        "30",
        "--bound-pods",
        "300",
        "--pending-pods",
        "120",
    ]);
    let generated = &report["generated"];
    assert_eq!(generated["nodes"], 30);
    assert_eq!(generated["bound_pods"], 300);
    assert_eq!(generated["pending_pods"], 120);
    let p = &report["provisioning"];
    assert_eq!(p["pods"], 120, "{p}");
    assert_eq!(p["unaccounted"], 0, "{p}");
    let placed = p["on_existing_nodes"].as_u64().unwrap()
        + p["on_new_node_claims"].as_u64().unwrap()
        + p["unschedulable"].as_u64().unwrap();
    assert_eq!(placed, 120, "{p}");
    assert!(p["on_existing_nodes"].as_u64().unwrap() > 0, "{p}");
    let d = &report["disruption"];
    assert_eq!(d["nodes"], 30, "{d}");
    assert!(report["peak_rss_mb"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_disruption_phase_alone_indexes_no_pending_pod_and_solves_nothing() {
    let report = scale(&[
        "--nodes",
        "20",
        "--bound-pods",
        "150",
        "--pending-pods",
        "50",
        "--phase",
        "disruption",
    ]);
    assert_eq!(report["generated"]["pending_pods"], 0);
    assert!(report["provisioning"].is_null());
    assert_eq!(report["disruption"]["nodes"], 20);
}
