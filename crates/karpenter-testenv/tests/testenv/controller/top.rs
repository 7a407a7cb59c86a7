//! `karpenter top` on the real control plane + KWOK.
//!
//! - `--once`, through the same calls the command makes (`karpenter_top::list`, `view`,
//!   `render`): the controller's nodes with their type, price, capacity type and pods, a node
//!   Karpenter is disrupting marked so, and a pending pod with kube-scheduler's reason; and
//!   Karpenter's events (the pods it nominated), selected on the API server by
//!   `reportingController`, in `karpenter top --once -o json`.
//! - The interactive view: the `karpenter` binary in a real terminal (a detached tmux session
//!   of a fixed size), keys sent and the screen captured: a change made while it runs (a label
//!   put on a node) reaches the screen through its watches, and it sorts, pages, switches panes
//!   (the events pane among them) and explains the selected node with the controller's answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use karpenter_api::v1::NodeClaim;
use karpenter_kwok_provider::KwokOptions;
use karpenter_testenv::wait_for;
use karpenter_top::view::TablePrices;
use karpenter_top::{Options, view};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use super::{only, start};

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn top_once_lists_the_nodes_prices_and_pods_marks_a_disrupting_node_and_tells_a_pending_pods_reason()
 {
    let h = start("top", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large"])).await;
    let namespace = h.scope.namespace().to_owned();
    let mut held = h.deployment("held", 2, "500m");
    if let Some(template) = held.spec.template.metadata.as_mut() {
        template.annotations = Some(BTreeMap::from([(
            "karpenter.sh/do-not-disrupt".to_owned(),
            "true".to_owned(),
        )]));
    }
    let mut stuck = h.deployment("stuck", 1, "100m");
    if let Some(spec) = stuck.spec.template.spec.as_mut() {
        spec.node_selector = Some(BTreeMap::from([(
            "topology.kubernetes.io/zone".to_owned(),
            "nowhere-1".to_owned(),
        )]));
    }
    let deployments = Api::<Deployment>::namespaced(h.client.clone(), &namespace);
    for d in [&held, &stuck] {
        deployments
            .create(&PostParams::default(), d)
            .await
            .expect("creating the Deployment");
    }
    h.wait_running(2, Duration::from_secs(120)).await;
    let prices = TablePrices::embedded(0.6).expect("the embedded catalog");
    let options = Options {
        node_selector: vec![("karpenter.sh/nodepool".into(), Some(h.pool.clone()))],
        ..Options::default()
    };
    let claim = h
        .node_claims()
        .await
        .into_iter()
        .next()
        .expect("a NodeClaim");
    let node = claim
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("the NodeClaim's node");
    let mine = format!("{namespace}/");
    let reason_of_stuck = |v: &karpenter_top::View| {
        v.pending
            .iter()
            .find(|p| p.pod.starts_with(&mine) && p.pod.contains("stuck-"))
            .map(|p| p.reason.clone())
            .filter(|r| !r.is_empty())
    };
    let shown = wait_for(
        "top showing the node with its two pods and the stuck pod's scheduling reason",
        Duration::from_secs(60),
        || async {
            let listed = karpenter_top::list(&h.client).await.expect("listing");
            let v = view(&listed, &prices, &options, chrono::Utc::now());
            let ready = v.nodes.len() == 1 && v.nodes[0].pods == 2 && reason_of_stuck(&v).is_some();
            Ok(ready.then_some(v))
        },
    )
    .await
    .expect("top shows the cluster");
    let row = &shown.nodes[0];
    assert_eq!(row.name, node);
    assert_eq!(row.instance_type, "c5.large");
    assert_eq!(row.capacity_type, "on-demand");
    assert_eq!(row.node_pool, h.pool);
    assert_eq!(row.ready, "Ready");
    assert_eq!(row.usage[0].requested, 1.0, "two 500m pods");
    assert!(
        row.price.is_some_and(|p| p > 0.0),
        "c5.large is priced from the embedded catalog: {row:?}"
    );
    let reason = reason_of_stuck(&shown).unwrap_or_default();
    assert!(
        reason.contains("node affinity/selector"),
        "kube-scheduler's reason for the stuck pod: {reason}"
    );
    let text = karpenter_top::render(&shown, 160);
    assert!(text.contains(&node) && text.contains("c5.large"), "{text}");
    let stuck_line = text
        .lines()
        .find(|l| l.starts_with(&mine) && l.contains("stuck-"))
        .unwrap_or_default();
    assert!(
        stuck_line.contains("didn't match Pod's node affinity/selector"),
        "the stuck pod's line leads with what keeps it off the nodes:\n{text}"
    );
    // Karpenter's events: the API server selects them by reportingController (the
    // Deployment's and kube-scheduler's events about the same objects stay out), and
    // `karpenter top -o json` shows the two pods nominated for the NodeClaim launched.
    let selected = Api::<Event>::all(h.client.clone())
        .list(&ListParams::default().fields("reportingController=karpenter"))
        .await
        .expect("events.k8s.io Events selected by reportingController");
    assert!(
        selected
            .items
            .iter()
            .all(|e| e.reporting_controller.as_deref() == Some("karpenter")),
        "the selector keeps Karpenter's events only"
    );
    let in_namespace = Api::<Event>::namespaced(h.client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .expect("listing the namespace's events");
    assert!(
        in_namespace
            .items
            .iter()
            .any(|e| e.reporting_controller.as_deref() != Some("karpenter")),
        "other controllers' events are there to be left out: {:?}",
        in_namespace
            .items
            .iter()
            .map(|e| (&e.reporting_controller, &e.reason))
            .collect::<Vec<_>>()
    );
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let nominated = format!("Pod should schedule on: nodeclaim/{claim_name}");
    let held_pods = format!("Pod/{namespace}/held-");
    let json = wait_for(
        "karpenter top -o json showing the two pods nominated for the NodeClaim",
        Duration::from_secs(60),
        || async {
            let mut top = Command::new(karpenter_binary());
            top.args([
                "top",
                "--once",
                "-o",
                "json",
                "--no-controller",
                "--kubeconfig",
            ])
            .arg(h.env.kubeconfig_path());
            let out = without_aws(&mut top)
                .output()
                .expect("running karpenter top");
            assert!(
                out.status.success(),
                "karpenter top -o json: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("top's JSON");
            let nominations = json["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| {
                    e["reason"] == "Nominated"
                        && e["type"] == "Normal"
                        && e["note"] == nominated.as_str()
                        && e["object"]
                            .as_str()
                            .is_some_and(|o| o.starts_with(&held_pods))
                })
                .count();
            Ok((nominations == 2).then_some(json))
        },
    )
    .await
    .expect("top shows Karpenter's nominations");
    // No AWS credentials: `--pricing auto` prices from the embedded catalog and says why.
    let pricing = json["pricing"].as_str().unwrap_or_default();
    assert!(
        pricing.starts_with(
            "embedded catalog (on-demand: us-east-1 list prices; spot: on-demand x 0.40); not AWS's: no AWS credentials"
        ),
        "{pricing}"
    );
    let events = json["events"].as_array().cloned().unwrap_or_default();
    assert!(json.get("eventsProblem").is_none(), "{json}");
    assert!(
        events.iter().all(|e| e["reason"] != "ScalingReplicaSet"),
        "the Deployment controller's events are not Karpenter's"
    );
    let ages: Vec<i64> = events
        .iter()
        .map(|e| e["ageSeconds"].as_i64().unwrap_or(-1))
        .collect();
    assert!(
        ages.windows(2).all(|w| w[0] <= w[1]) && ages.iter().all(|a| *a >= 0),
        "newest first: {ages:?}"
    );
    // Delete the NodeClaim: the do-not-disrupt pods hold the drain, and top marks the node.
    Api::<NodeClaim>::all(h.client.clone())
        .delete(
            claim.metadata.name.as_deref().unwrap_or_default(),
            &DeleteParams::default(),
        )
        .await
        .expect("deleting the NodeClaim");
    let status = wait_for(
        "top marking the node Deleting and Disrupting",
        Duration::from_secs(60),
        || async {
            let listed = karpenter_top::list(&h.client).await.expect("listing");
            let v = view(&listed, &prices, &options, chrono::Utc::now());
            Ok(v.nodes
                .first()
                .map(|n| n.status.clone())
                .filter(|s| s.iter().any(|x| x == "Disrupting")))
        },
    )
    .await
    .expect("the node being drained is shown as disrupting");
    assert!(status.iter().any(|s| s == "Deleting"), "{status:?}");
    h.finish().await;
}

/// A tmux server of its own (its own socket, killed on drop) running one command in a detached
/// session of a fixed size.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    const SESSION: &str = "top";

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("running tmux (the interactive test needs tmux on PATH): {e}")
            });
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `command` (a shell line) in a `width` x `height` terminal.
    fn start(socket: PathBuf, width: u16, height: u16, command: &str) -> Tmux {
        let tmux = Tmux { socket };
        tmux.tmux(&[
            "new-session",
            "-d",
            "-s",
            Self::SESSION,
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            command,
        ]);
        tmux
    }

    /// The screen as text.
    fn capture(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", Self::SESSION])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", Self::SESSION];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    fn resize(&self, width: u16, height: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            Self::SESSION,
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// Waits until the screen satisfies `check`; the last screen in the failure message.
    async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let mut last = String::new();
        let found = wait_for(what, timeout, || {
            last = self.capture();
            let found = check(&last);
            async move { Ok(found) }
        })
        .await;
        found.unwrap_or_else(|e| panic!("{e}; the screen:\n{last}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The `karpenter` binary of this build: `scripts/test-integration` builds it beside the test
/// binary (`target/<profile>/karpenter`; the test binary is in `deps/` below it).
/// `command` with no AWS credentials to find (none in the environment, no shared files, no
/// instance metadata), whatever the machine running the tests has.
pub(super) fn without_aws(command: &mut Command) -> &mut Command {
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_ENDPOINT_URL",
    ] {
        command.env_remove(var);
    }
    command
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/aws-credentials",
        )
        .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        .env("AWS_EC2_METADATA_DISABLED", "true")
}

pub(super) fn karpenter_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("karpenter"))
        .expect("the target directory");
    assert!(
        bin.is_file(),
        "{} is missing: scripts/test-integration builds it (cargo test --workspace --test testenv --test help_cli --no-run)",
        bin.display()
    );
    bin
}

/// The row of each of `nodes` on the screen (its line number), when all are shown.
fn rows_of(screen: &str, nodes: &[&str]) -> Option<Vec<usize>> {
    nodes
        .iter()
        .map(|n| screen.lines().position(|l| l.contains(n)))
        .collect()
}

#[tokio::test]
#[ignore = "needs the Kubernetes test environment with KWOK: run scripts/test-integration"]
async fn the_interactive_top_in_a_terminal_sorts_pages_switches_panes_and_explains_the_selected_node()
 {
    let bin = karpenter_binary();
    let h = start("top-tmux", &[], KwokOptions::default()).await;
    h.node_pool(None, only(&["c5.large", "c5.xlarge"])).await;
    let namespace = h.scope.namespace().to_owned();
    let deployments = Api::<Deployment>::namespaced(h.client.clone(), &namespace);
    // One node after the other: a c5.large for a small pod, then a c5.xlarge for a pod the
    // first cannot take. Oldest first, the small node leads; by usage, the big one.
    deployments
        .create(&PostParams::default(), &h.deployment("small", 1, "500m"))
        .await
        .expect("creating the small Deployment");
    h.wait_running(1, Duration::from_secs(120)).await;
    deployments
        .create(&PostParams::default(), &h.deployment("big", 1, "3"))
        .await
        .expect("creating the big Deployment");
    h.wait_running(2, Duration::from_secs(120)).await;
    let claims = h.node_claims().await;
    let node_of = |it: &str| {
        claims
            .iter()
            .find(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("node.kubernetes.io/instance-type"))
                    .is_some_and(|t| t == it)
            })
            .and_then(|c| c.status.as_ref()?.node_name.clone())
            .unwrap_or_else(|| panic!("a {it} node: {claims:?}"))
    };
    let (small, big) = (node_of("c5.large"), node_of("c5.xlarge"));

    let socket = std::env::temp_dir().join(format!("karpenter-top-{}.tmux", h.scope.namespace()));
    let command = format!(
        "{} top --kubeconfig {} --pricing catalog --node-selector karpenter.sh/nodepool={} --controller-url http://{} --interval 1 --extra-labels top-watch; echo top exited $?; sleep 600",
        bin.display(),
        h.env.kubeconfig_path().display(),
        h.pool,
        h.controllers[0].metrics,
    );
    let tmux = Tmux::start(socket, 160, 40, &command);
    let nodes = [small.as_str(), big.as_str()];
    let rows = tmux
        .wait_for(
            "top showing both nodes with type, price and capacity type",
            Duration::from_secs(60),
            |screen| {
                let rows = rows_of(screen, &nodes)?;
                let line = |i: usize| screen.lines().nth(rows[i]).unwrap_or_default();
                (line(0).contains("c5.large")
                    && line(1).contains("c5.xlarge")
                    && line(0).contains("on-demand")
                    && line(0).contains("$0.")
                    && line(0).contains("1/")
                    && screen.contains("sort: creation │ page 1/1 │ node 1/2"))
                .then_some(rows)
            },
        )
        .await;
    assert!(rows[0] < rows[1], "oldest first: the small node leads");
    println!("the screen, oldest first:\n{}", tmux.capture());

    // A change made while top runs reaches the screen through its watches (it lists once): a
    // label put on the small node shows in that node's `--extra-labels` column.
    Api::<Node>::all(h.client.clone())
        .patch(
            &small,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"top-watch": "seen-live"}}})),
        )
        .await
        .expect("labelling the small node");
    tmux.wait_for(
        "the new label in the small node's row, from the watch",
        Duration::from_secs(30),
        |screen| {
            let rows = rows_of(screen, &nodes)?;
            let line = |i: usize| screen.lines().nth(rows[i]).unwrap_or_default();
            (line(0).contains("seen-live")
                && !line(1).contains("seen-live")
                && screen.contains("watching, updated"))
            .then_some(())
        },
    )
    .await;

    // `s` twice: creation -> name -> usage; the big node (3 of ~4 cpu) now leads.
    tmux.keys(&["s", "s"]);
    tmux.wait_for(
        "the nodes by usage, the big one first",
        Duration::from_secs(20),
        |screen| {
            let rows = rows_of(screen, &nodes)?;
            (screen.contains("sort: usage │") && rows[1] < rows[0]).then_some(())
        },
    )
    .await;
    println!("the screen, by usage:\n{}", tmux.capture());

    // A terminal 10 rows high has room for one node a page: PgDn shows the second.
    tmux.resize(160, 10);
    let first = tmux
        .wait_for(
            "one node a page after the resize",
            Duration::from_secs(20),
            |screen| {
                let shown: Vec<&str> = nodes
                    .iter()
                    .copied()
                    .filter(|n| screen.contains(n))
                    .collect();
                (screen.contains("page 1/2 │ node 1/2") && shown.len() == 1)
                    .then(|| shown[0].to_owned())
            },
        )
        .await;
    assert_eq!(first, big, "the usage order holds across the resize");
    tmux.keys(&["PageDown"]);
    tmux.wait_for("the second page", Duration::from_secs(20), |screen| {
        (screen.contains("page 2/2 │ node 2/2")
            && screen.contains(&small)
            && !screen.contains(&big))
        .then_some(())
    })
    .await;
    tmux.keys(&["PageUp"]);
    tmux.wait_for("the first page again", Duration::from_secs(20), |screen| {
        (screen.contains("page 1/2 │ node 1/2") && screen.contains(&big)).then_some(())
    })
    .await;

    // Back to 40 rows: Enter explains the selected (big) node with the controller's answer,
    // and the last disruption pass gives each node a verdict.
    tmux.resize(160, 40);
    let heading = format!("node {big} (pass of ");
    tmux.wait_for(
        "the controller's answer for the selected node and a verdict column",
        Duration::from_secs(90),
        |screen| {
            if !screen.contains(&heading) {
                tmux.keys(&["Enter"]);
                return None;
            }
            (screen.contains(&format!("explain node {big} · Esc: close"))
                && screen.contains("VERDICT"))
            .then_some(())
        },
    )
    .await;
    // Esc alone (an Esc followed at once by another key reads as Alt+key), then Tab.
    tmux.keys(&["Escape"]);
    tmux.wait_for(
        "the NodePools pane again",
        Duration::from_secs(20),
        |screen| screen.contains(" NodePools (").then_some(()),
    )
    .await;
    tmux.keys(&["Tab"]);
    tmux.wait_for("the pending pods pane", Duration::from_secs(20), |screen| {
        screen.contains(" Pending pods (").then_some(())
    })
    .await;
    // Tab again: Karpenter's events, newest first; those of this test's nodes and pods lead.
    let claim_names: Vec<String> = claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    tmux.keys(&["Tab"]);
    tmux.wait_for(
        "the events pane with an event of this test's objects",
        Duration::from_secs(20),
        |screen| {
            let pane = screen.split(" Events (").nth(1)?;
            let ours = pane.lines().any(|l| {
                l.contains(&format!("/{namespace}/"))
                    || nodes.iter().any(|n| l.contains(n))
                    || claim_names.iter().any(|c| l.contains(c.as_str()))
            });
            (pane.contains("AGE") && pane.contains("REASON") && ours).then_some(())
        },
    )
    .await;
    println!("the events pane:\n{}", tmux.capture());
    tmux.keys(&["Tab"]);
    tmux.wait_for(
        "the NodePools pane after the events",
        Duration::from_secs(20),
        |screen| screen.contains(" NodePools (").then_some(()),
    )
    .await;
    tmux.keys(&["q"]);
    tmux.wait_for("top quitting with 0", Duration::from_secs(20), |screen| {
        screen.contains("top exited 0").then_some(())
    })
    .await;
    drop(tmux);
    h.finish().await;
}
