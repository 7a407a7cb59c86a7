//! One `top` redraw over a cluster of 1,000 nodes and 10,000 bound pods plus 100 pending:
//! the view of the index and its text (`--once`), and the view drawn by ratatui into a
//! 160 x 40 buffer (the interactive screen; the terminal's diff and write are not in it):
//! `cargo bench -p karpenter-top`.

#![allow(
    clippy::expect_used,
    reason = "benchmark setup: a bad fixture is the panic it should be"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use karpenter_state::object::Object;
use karpenter_top::view::TablePrices;
use karpenter_top::{Explained, Listed, Options, Screen, Ui, render, view};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

fn cluster(nodes: usize, pods: usize) -> Listed {
    let mut listed = Listed::default();
    let types = ["c5.large", "m5.xlarge", "r5.2xlarge", "c6i.4xlarge"];
    for n in 0..nodes {
        let zone = ["us-east-1a", "us-east-1b", "us-east-1c"][n % 3];
        let capacity_type = if n % 3 == 0 { "spot" } else { "on-demand" };
        let node = serde_json::json!({
            "metadata": {"name": format!("node-{n:05}"), "creationTimestamp": "2026-11-27T08:00:00Z",
                "labels": {
                    "node.kubernetes.io/instance-type": types[n % types.len()],
                    "karpenter.sh/capacity-type": capacity_type,
                    "topology.kubernetes.io/zone": zone,
                    "karpenter.sh/nodepool": "general"
                }},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{n:08}")},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        });
        listed
            .cluster
            .apply(Object::Node(serde_json::from_value(node).expect("a node")));
    }
    for p in 0..pods + 100 {
        let bound = p < pods;
        let node = bound.then(|| format!("node-{:05}", p % nodes));
        let phase = if bound { "Running" } else { "Pending" };
        let pod = serde_json::json!({
            "metadata": {"name": format!("web-{p:06}"), "namespace": "shop", "uid": format!("u{p}"),
                "creationTimestamp": "2026-11-27T09:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": true}]},
            "spec": {"nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": phase}
        });
        listed
            .cluster
            .apply(Object::Pod(serde_json::from_value(pod).expect("a pod")));
    }
    listed
}

fn top(c: &mut Criterion) {
    let listed = cluster(1_000, 10_000);
    let prices = TablePrices::embedded(0.6).expect("the embedded catalog");
    let options = Options::default();
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-27T10:00:00Z")
        .expect("a time")
        .with_timezone(&chrono::Utc);
    let mut group = c.benchmark_group("top");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("redraw/1000-nodes-10000-pods", |b| {
        b.iter(|| black_box(render(&view(&listed, &prices, &options, now), 120)));
    });
    let ui = Ui {
        selected: 500,
        ..Ui::default()
    };
    let explained = Explained::default();
    group.bench_function("screen/1000-nodes-10000-pods", |b| {
        b.iter(|| {
            let view = view(&listed, &prices, &options, now);
            let mut buf = Buffer::empty(Rect::new(0, 0, 160, 40));
            Screen {
                view: &view,
                ui: &ui,
                explained: &explained,
                note: "",
            }
            .render(buf.area, &mut buf);
            black_box(buf)
        });
    });
    group.finish();
}

criterion_group!(benches, top);
criterion_main!(benches);
