use pretty_assertions::assert_eq;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use super::*;
use crate::ui::Key;
use crate::view::tests::{at, listed};
use crate::view::{Options, Prices, Sort, view};

struct Flat;

impl Prices for Flat {
    fn price(&self, it: &str, _: &str, ct: &str) -> Option<f64> {
        match (it, ct) {
            ("c5.large", "on-demand") => Some(0.085),
            ("m5.large", "spot") => Some(0.04),
            _ => None,
        }
    }
}

fn the_view(sort: Sort) -> View {
    view(
        &listed(),
        &Flat,
        &Options {
            sort,
            ..Options::default()
        },
        at("2026-11-27T10:00:00Z"),
    )
}

fn draw(screen: &Screen, width: u16, height: u16) -> String {
    let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
    screen.render(buf.area, &mut buf);
    text(&buf)
}

/// The fixture's nodes plus `more` on-demand c5.large nodes `extra-00`.. of increasing age.
fn with_more_nodes(more: usize, sort: Sort) -> View {
    let mut listed = listed();
    for n in 0..more {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("extra-{n:02}"),
                "creationTimestamp": format!("2026-11-27T07:{:02}:00Z", 59 - n),
                "labels": {"node.kubernetes.io/instance-type": "c5.large",
                    "karpenter.sh/capacity-type": "on-demand",
                    "karpenter.sh/nodepool": "general"}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-extra{n}")},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .expect("a test node");
        listed
            .cluster
            .apply(karpenter_state::object::Object::Node(node));
    }
    view(
        &listed,
        &Flat,
        &Options {
            sort,
            ..Options::default()
        },
        at("2026-11-27T10:00:00Z"),
    )
}

#[test]
fn the_screen_at_a_fixed_size_is_what_people_read() {
    let view = the_view(Sort::Creation);
    let ui = Ui::default();
    let explained = Explained::default();
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    assert_eq!(
        draw(&screen, 124, 14),
        "\
cpu      ████░░░░░░  44%  1.75/4
memory   ████░░░░░░  38%  3Gi/8Gi
3 nodes  $0.210/hour | $153.30/month  pods: 1 pending, 3 bound (2 running)

 NODE        CPU              MEMORY           PODS  TYPE      CAPACITY   PRICE      NODEPOOL  STATUS            AGE
>node-a      ████████░░  75%  █████░░░░░  50%  2/29  c5.large  on-demand  $0.0850/h  general   Ready             2h0m
 node-b      █░░░░░░░░░  12%  ███░░░░░░░  25%  1/29  m5.large  spot       $0.0400/h  general   Ready,Disrupting  30m0s
 general-x7  ░░░░░░░░░░   0%  ░░░░░░░░░░   0%  0/0   c5.large  on-demand  $0.0850/h  general   Launching         30s
 NodePools (1) · Tab: pending pods ─────────────────────────────────────────────────────────────────────────────────────────
NODEPOOL  READY  NODES  DRIFTED  LIMITS     BUDGETS NOW
general   True   3      0        cpu 0/100  -


sort: creation │ page 1/1 │ node 1/3 │ s sort · ↑↓ jk select · PgUp PgDn page · Enter explain · Tab pane · q quit
"
    );
}

#[test]
fn a_page_is_what_fits_and_page_down_shows_the_next_one() {
    let view = with_more_nodes(12, Sort::Name);
    let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut ui = Ui::new(Sort::Name);
    let explained = Explained::default();
    let note = "listed 10:00:00";
    let rows = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note,
    }
    .page_rows(14);
    assert_eq!(
        rows, 5,
        "14 rows: 3 of header, a gap, the title row, 5 nodes, a 3-row pane, the footer"
    );
    ui.on_key(Key::PageDown, &names, rows);
    ui.on_key(Key::Down, &names, rows);
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note,
    };
    let text = draw(&screen, 124, 14);
    let shown: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("c5.large") || l.contains("m5.large"))
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        shown,
        ["extra-05", ">extra-06", "extra-07", "extra-08", "extra-09"],
        "the second page by name, the seventh node selected:\n{text}"
    );
    assert!(
        text.contains("sort: name │ page 2/3 │ node 7/15 │ listed 10:00:00 │ s sort"),
        "{text}"
    );
}

#[test]
fn verdicts_the_saving_and_the_selected_nodes_explanation_come_from_the_controller() {
    let view = the_view(Sort::Creation);
    let mut ui = Ui::default();
    let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
    ui.on_key(Key::Down, &names, 10);
    ui.on_key(Key::Enter, &names, 10);
    let explained = Explained {
        verdicts: [("node-a", "do-not-disrupt"), ("node-b", "Drift")]
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect(),
        saving_per_hour: Some(0.04),
        budgets: Default::default(),
        node: Some((
            "node-b".into(),
            vec![
                "node node-b (pass of 2026-11-27T09:59:50Z)".into(),
                "  is being disrupted:".into(),
                "  Drift (Drifted budget): drifted".into(),
            ],
        )),
        problem: None,
    };
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    assert_eq!(
        draw(&screen, 140, 16),
        "\
cpu      ████░░░░░░  44%  1.75/4
memory   ████░░░░░░  38%  3Gi/8Gi
3 nodes  $0.210/hour | $153.30/month  pods: 1 pending, 3 bound (2 running)  next consolidation saves $0.040/hour | $29.20/month

 NODE        CPU              MEMORY           PODS  TYPE      CAPACITY   PRICE      NODEPOOL  STATUS            AGE    VERDICT
 node-a      ████████░░  75%  █████░░░░░  50%  2/29  c5.large  on-demand  $0.0850/h  general   Ready             2h0m   do-not-disrupt
>node-b      █░░░░░░░░░  12%  ███░░░░░░░  25%  1/29  m5.large  spot       $0.0400/h  general   Ready,Disrupting  30m0s  Drift
 general-x7  ░░░░░░░░░░   0%  ░░░░░░░░░░   0%  0/0   c5.large  on-demand  $0.0850/h  general   Launching         30s    -
 explain node node-b · Esc: close ──────────────────────────────────────────────────────────────────────────────────────────────────────────
node node-b (pass of 2026-11-27T09:59:50Z)
  is being disrupted:
  Drift (Drifted budget): drifted



sort: creation │ page 1/1 │ node 2/3 │ s sort · ↑↓ jk select · PgUp PgDn page · Enter explain · Tab pane · q quit
"
    );
}

#[test]
fn the_pending_pane_tells_each_pods_reason_and_a_controller_problem_shows_in_the_footer() {
    let view = the_view(Sort::Creation);
    let mut ui = Ui::default();
    ui.on_key(Key::Tab, &[], 10);
    let explained = Explained {
        problem: Some("no karpenter Service".into()),
        ..Explained::default()
    };
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    let text = draw(&screen, 200, 14);
    assert!(text.contains(" Pending pods (1) · Tab: events "), "{text}");
    assert!(
        text.contains("shop/huge    2m0s  2 Insufficient cpu"),
        "{text}"
    );
    assert!(
        text.contains("│ node 1/3 │ controller: no karpenter Service │ s sort"),
        "{text}"
    );
}

#[test]
fn an_empty_pane_says_so_rather_than_vanishing() {
    let mut view = the_view(Sort::Creation);
    view.pending.clear();
    view.node_pools.clear();
    view.events.clear();
    let mut ui = Ui::default();
    let explained = Explained::default();
    let screen = |ui: &Ui| {
        draw(
            &Screen {
                view: &view,
                ui,
                explained: &explained,
                note: "",
            },
            124,
            14,
        )
    };
    assert!(screen(&ui).contains(" NodePools (0) · Tab: pending pods"));
    assert!(screen(&ui).contains("\nno NodePools\n"));
    ui.on_key(Key::Tab, &[], 10);
    let text = screen(&ui);
    assert!(text.contains(" Pending pods (0) · Tab: events"), "{text}");
    assert!(text.contains("\nno pending pods\n"), "{text}");
    ui.on_key(Key::Tab, &[], 10);
    let text = screen(&ui);
    assert!(text.contains(" Events (0) · Tab: NodePools"), "{text}");
    assert!(text.contains("\nno events from karpenter\n"), "{text}");
}

#[test]
fn the_events_pane_at_a_fixed_width_is_a_table_of_karpenters_events_newest_first() {
    let view = the_view(Sort::Creation);
    let mut ui = Ui::default();
    ui.on_key(Key::Tab, &[], 10);
    ui.on_key(Key::Tab, &[], 10);
    let explained = Explained::default();
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    assert_eq!(
        draw(&screen, 124, 18),
        "\
cpu      ████░░░░░░  44%  1.75/4
memory   ████░░░░░░  38%  3Gi/8Gi
3 nodes  $0.210/hour | $153.30/month  pods: 1 pending, 3 bound (2 running)

 NODE        CPU              MEMORY           PODS  TYPE      CAPACITY   PRICE      NODEPOOL  STATUS            AGE
>node-a      ████████░░  75%  █████░░░░░  50%  2/29  c5.large  on-demand  $0.0850/h  general   Ready             2h0m
 node-b      █░░░░░░░░░  12%  ███░░░░░░░  25%  1/29  m5.large  spot       $0.0400/h  general   Ready,Disrupting  30m0s
 general-x7  ░░░░░░░░░░   0%  ░░░░░░░░░░   0%  0/0   c5.large  on-demand  $0.0850/h  general   Launching         30s
 Events (4) · Tab: NodePools ───────────────────────────────────────────────────────────────────────────────────────────────
AGE       TYPE     REASON                 OBJECT                NOTE
10s (x3)  Warning  FailedScheduling       Pod/shop/huge         Failed to schedule pod, incompatible with nodepool \"general…
30s       Normal   Nominated              Pod/shop/web-1        Pod should schedule on: nodeclaim/general-x7
2m0s      Normal   DisruptionTerminating  Node/node-b           Disrupting Node: Drifted
5m0s      Warning  SpotInterrupted        NodeClaim/general-b2  Spot interruption warning was triggered



sort: creation │ page 1/1 │ node 1/3 │ s sort · ↑↓ jk select · PgUp PgDn page · Enter explain · Tab pane · q quit
"
    );
    let mut buf = Buffer::empty(Rect::new(0, 0, 124, 18));
    screen.render(buf.area, &mut buf);
    let colour = |row: u16| buf[(0, row)].fg;
    assert_eq!(
        [colour(9), colour(10), colour(11), colour(13)],
        [Color::Reset, Color::Yellow, Color::Reset, Color::Yellow],
        "the title row plain, the Warning events yellow"
    );
}

#[test]
fn events_that_cannot_be_listed_say_why_in_their_pane() {
    let mut view = the_view(Sort::Creation);
    view.events.clear();
    view.events_problem =
        Some("listing Events: ApiError: events.events.k8s.io is forbidden".into());
    let mut ui = Ui::default();
    ui.on_key(Key::Tab, &[], 10);
    ui.on_key(Key::Tab, &[], 10);
    let explained = Explained::default();
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    let text = draw(&screen, 124, 14);
    assert!(text.contains(" Events (0) · Tab: NodePools"), "{text}");
    assert!(
        text.contains("\nevents cannot be listed: listing Events: ApiError: events.events.k8s.io is forbidden\n"),
        "{text}"
    );
    assert!(
        text.contains("node-a"),
        "the nodes are still shown:\n{text}"
    );
}

#[test]
fn a_terminal_too_small_for_the_pane_still_shows_a_node_and_the_footer() {
    let view = the_view(Sort::Creation);
    let ui = Ui::default();
    let explained = Explained::default();
    let screen = Screen {
        view: &view,
        ui: &ui,
        explained: &explained,
        note: "",
    };
    let text = draw(&screen, 60, 7);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(lines[5].starts_with(">node"), "{text}");
    assert!(lines[6].starts_with("sort: creation │ page 1/3"), "{text}");
    assert_eq!(screen.page_rows(7), 1);
}
