//! Leader election and the controller run loop against a real API server:
//! one leader at a time, takeover after a crash (Lease expiry) or a graceful
//! release (at once), controllers only while leading, stop on lost leadership.
//!
//! Each test uses its own namespace (a `TestScope`), so Lease names never clash.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use karpenter_controller::{
    Clients, LeaderMetrics, LeaderState, Leadership, LeaseConfig, LeaseTimings, RunError, Runtime,
    Settings,
};
use karpenter_testenv::{KubeEnv, wait_for};
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

fn lease(namespace: &str, identity: &str, timings: LeaseTimings) -> LeaseConfig {
    LeaseConfig {
        namespace: namespace.to_string(),
        name: "karpenter-leader-election".to_string(),
        identity: identity.to_string(),
        timings,
    }
}

async fn wait_for_state(what: &str, leadership: &Leadership, wanted: LeaderState, secs: u64) {
    let mut rx = leadership.subscribe();
    tokio::time::timeout(Duration::from_secs(secs), rx.wait_for(|s| *s == wanted))
        .await
        .unwrap_or_else(|_| panic!("{what}: not {wanted:?} within {secs} s"))
        .unwrap_or_else(|_| panic!("{what}: the elector ended before {wanted:?}"));
}

async fn holder(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .expect("reading the Lease")
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
#[ignore = "needs a control plane: run scripts/test-integration"]
async fn one_of_two_electors_leads_and_the_other_takes_over_after_the_leader_crashes() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("leader-crash")
        .await
        .expect("creating a test scope");
    let ns = scope.namespace().to_string();
    let timings = LeaseTimings::default();
    let stop = CancellationToken::new();
    let a = Leadership::spawn(env.client(), lease(&ns, "a", timings), stop.clone());
    let b = Leadership::spawn(env.client(), lease(&ns, "b", timings), stop.clone());

    let api = Api::<Lease>::namespaced(env.client(), &ns);
    let first = wait_for("a leader", Duration::from_secs(30), || async {
        Ok(match (a.state(), b.state()) {
            (LeaderState::Leading, _) => Some("a"),
            (_, LeaderState::Leading) => Some("b"),
            _ => None,
        })
    })
    .await
    .expect("one elector leads");
    let (leader, standby) = if first == "a" { (a, b) } else { (b, a) };
    assert_eq!(standby.state(), LeaderState::Standby, "only one leads");
    assert_eq!(
        holder(&api, "karpenter-leader-election").await.as_deref(),
        Some(first)
    );

    // A crash: the leader stops renewing and does not release.
    leader.abort();
    wait_for_state(
        "the standby after the leader crashed",
        &standby,
        LeaderState::Leading,
        45,
    )
    .await;
    let second = if first == "a" { "b" } else { "a" };
    assert_eq!(
        holder(&api, "karpenter-leader-election").await.as_deref(),
        Some(second)
    );

    stop.cancel();
    standby
        .join()
        .await
        .expect("the new leader stops and releases");
    assert_eq!(
        holder(&api, "karpenter-leader-election").await,
        None,
        "released on stop"
    );
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs a control plane: run scripts/test-integration"]
async fn a_graceful_release_lets_the_standby_take_over_before_the_lease_would_expire() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("leader-release")
        .await
        .expect("creating a test scope");
    let ns = scope.namespace().to_string();
    // A 120 s lease: a takeover within the 30 s deadline below can only come from the release.
    let timings = LeaseTimings {
        lease_duration: Duration::from_secs(120),
        renew_deadline: Duration::from_secs(60),
        retry_period: Duration::from_secs(1),
    };
    let leader_stop = CancellationToken::new();
    let standby_stop = CancellationToken::new();
    let leader = Leadership::spawn(
        env.client(),
        lease(&ns, "leader", timings),
        leader_stop.clone(),
    );
    wait_for_state("the first elector", &leader, LeaderState::Leading, 30).await;
    let standby = Leadership::spawn(
        env.client(),
        lease(&ns, "standby", timings),
        standby_stop.clone(),
    );

    leader_stop.cancel();
    leader.join().await.expect("the leader stops and releases");
    wait_for_state(
        "the standby after the release",
        &standby,
        LeaderState::Leading,
        30,
    )
    .await;

    standby_stop.cancel();
    standby
        .join()
        .await
        .expect("the standby stops and releases");
    scope.cleanup().await.expect("cleaning up");
}

async fn renew_time(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .expect("reading the Lease")
        .spec
        .and_then(|s| s.renew_time)
        .map(|t| t.0.to_string())
}

/// Waits until the Lease's `renewTime` differs from `since`, and returns the new one.
async fn next_renewal(api: &Api<Lease>, name: &str, since: Option<String>) -> Option<String> {
    wait_for(
        "the leader to renew the Lease",
        Duration::from_secs(20),
        || async {
            let now = renew_time(api, name).await;
            Ok((now != since).then_some(now))
        },
    )
    .await
    .expect("the leader renews")
}

#[tokio::test]
#[ignore = "needs a control plane: run scripts/test-integration"]
async fn a_leader_renews_without_reading_the_lease_until_someone_else_writes_it() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env
        .scope("leader-fastpath")
        .await
        .expect("creating a test scope");
    let ns = scope.namespace().to_string();
    let name = "karpenter-leader-election";
    let timings = LeaseTimings {
        retry_period: Duration::from_secs(1),
        ..LeaseTimings::default()
    };
    let metrics = LeaderMetrics::default();
    let stop = CancellationToken::new();
    let leader = Leadership::spawn_with(
        env.client(),
        lease(&ns, "a", timings),
        stop.clone(),
        metrics.clone(),
    );
    wait_for_state("the elector", &leader, LeaderState::Leading, 30).await;
    let api = Api::<Lease>::namespaced(env.client(), &ns);

    // Renewals of a lease this leader wrote itself go straight to the write.
    let first = next_renewal(&api, name, renew_time(&api, name).await).await;
    next_renewal(&api, name, first).await;
    assert_eq!(
        metrics.slowpaths(name),
        0,
        "a leader renewing the Lease it last wrote should not need the slow path"
    );

    // Someone else writes the Lease: the optimistic write is refused (stale resourceVersion),
    // the leader reads the Lease, sees it still holds it, and renews on the slow path.
    let touch = serde_json::json!({"metadata": {"annotations": {"example.com/touched": "yes"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("annotating the Lease");
    wait_for(
        "a renewal on the slow path",
        Duration::from_secs(20),
        || async { Ok((metrics.slowpaths(name) >= 1).then_some(())) },
    )
    .await
    .expect("the leader falls back to the slow path");
    assert_eq!(leader.state(), LeaderState::Leading, "still leading");
    assert_eq!(holder(&api, name).await.as_deref(), Some("a"));

    // And back to the fast path.
    let since = renew_time(&api, name).await;
    let again = next_renewal(&api, name, since).await;
    next_renewal(&api, name, again).await;
    assert_eq!(
        metrics.slowpaths(name),
        1,
        "one refused optimistic write, one slow-path renewal"
    );

    stop.cancel();
    leader.join().await.expect("the leader stops and releases");
    scope.cleanup().await.expect("cleaning up");
}

async fn clients(env: &KubeEnv, settings: &Settings) -> Clients {
    let kubeconfig = Kubeconfig::read_from(env.kubeconfig_path()).expect("reading the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("loading the kubeconfig");
    Clients::from_config(config, settings).expect("building the clients")
}

/// The whole HTTP/1.1 response to `GET path` (status line, headers, body).
pub(crate) async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connecting");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sending");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reading");
    response
}

pub(crate) async fn http_status(addr: SocketAddr, path: &str) -> u16 {
    let response = http_get(addr, path).await;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {response:?}"))
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

#[tokio::test]
#[ignore = "needs a control plane: run scripts/test-integration"]
async fn a_standby_warms_up_and_is_ready_acts_only_once_leading_and_releases_the_lease_on_shutdown()
{
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env.scope("run-loop").await.expect("creating a test scope");
    let ns = scope.namespace().to_string();
    let settings =
        Settings::parse_from(["karpenter"], [("LEADER_ELECTION_NAMESPACE", ns.as_str())])
            .expect("settings");
    let timings = LeaseTimings {
        retry_period: Duration::from_millis(500),
        ..LeaseTimings::default()
    };

    // Someone else leads first.
    let other_stop = CancellationToken::new();
    let other = Leadership::spawn(
        env.client(),
        lease(&ns, "other", timings),
        other_stop.clone(),
    );
    wait_for_state("the other replica", &other, LeaderState::Leading, 30).await;

    let runtime = Runtime::new(settings.clone(), clients(&env, &settings).await)
        .with_lease(Some(lease(&ns, "us", timings)))
        .with_addresses(loopback(), loopback());
    let bound = runtime.bind().await.expect("binding the servers");
    let health = bound.health_addr().expect("health address");
    let metrics = bound.metrics_addr().expect("metrics address");

    // The controllers start at once: their caches warm up and they report ready while
    // another replica leads. They record who held the Lease when they were told to lead, then
    // run until cancelled.
    let seen_holder: Arc<Mutex<Option<Option<String>>>> = Arc::default();
    let seen = seen_holder.clone();
    let lease_api = Api::<Lease>::namespaced(env.client(), &ns);
    let api = lease_api.clone();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(bound.run(shutdown.clone(), move |mut ctx| async move {
        ctx.readiness.set_ready(true);
        if !ctx.leading.wait().await {
            return Ok(());
        }
        let now = holder(&api, "karpenter-leader-election").await;
        *seen.lock().map_err(|_| "poisoned")? = Some(now);
        ctx.cancel.cancelled().await;
        Ok(())
    }));

    assert_eq!(http_status(health, "/healthz").await, 200);
    wait_for("a warm standby ready", Duration::from_secs(10), || async {
        Ok((http_status(health, "/readyz").await == 200).then_some(()))
    })
    .await
    .expect("a standby whose caches are warm is ready (a rolling update can proceed)");
    assert_eq!(http_status(metrics, "/metrics").await, 200);
    assert!(
        seen_holder.lock().expect("lock").is_none(),
        "controllers acted while another replica leads"
    );

    other_stop.cancel();
    other.join().await.expect("the other replica releases");
    wait_for(
        "the controllers to lead",
        Duration::from_secs(30),
        || async { Ok(seen_holder.lock().expect("lock").clone()) },
    )
    .await
    .expect("the controllers are told to lead once we hold the Lease");
    assert_eq!(
        seen_holder.lock().expect("lock").clone(),
        Some(Some("us".to_string())),
        "the Lease was ours when the controllers were told to lead"
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the run loop drains within 30 s")
        .expect("the run task")
        .expect("a shutdown is a clean exit");
    assert_eq!(
        holder(&lease_api, "karpenter-leader-election").await,
        None,
        "released on shutdown"
    );
    assert!(
        tokio::net::TcpStream::connect(health).await.is_err(),
        "servers closed"
    );
    scope.cleanup().await.expect("cleaning up");
}

#[tokio::test]
#[ignore = "needs a control plane: run scripts/test-integration"]
async fn when_another_holder_takes_the_lease_the_controllers_stop_and_the_run_fails() {
    let env = KubeEnv::connect()
        .await
        .expect("connecting to the test environment");
    let scope = env.scope("run-lost").await.expect("creating a test scope");
    let ns = scope.namespace().to_string();
    let settings =
        Settings::parse_from(["karpenter"], [("LEADER_ELECTION_NAMESPACE", ns.as_str())])
            .expect("settings");
    let timings = LeaseTimings {
        retry_period: Duration::from_millis(500),
        ..LeaseTimings::default()
    };
    let runtime = Runtime::new(settings.clone(), clients(&env, &settings).await)
        .with_lease(Some(lease(&ns, "us", timings)))
        .with_addresses(loopback(), loopback());
    let bound = runtime.bind().await.expect("binding the servers");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
    let run = tokio::spawn(
        bound.run(CancellationToken::new(), move |mut ctx| async move {
            if ctx.leading.wait().await {
                let _ = started_tx.send(());
            }
            ctx.cancel.cancelled().await;
            let _ = stopped_tx.send(());
            Ok(())
        }),
    );
    tokio::time::timeout(Duration::from_secs(30), started_rx)
        .await
        .expect("the controllers start within 30 s")
        .expect("the controllers start");

    // Another holder overwrites the Lease (as a split brain would).
    let api = Api::<Lease>::namespaced(env.client(), &ns);
    let usurp = serde_json::json!({
        "spec": { "holderIdentity": "usurper", "leaseDurationSeconds": 3600 }
    });
    api.patch(
        "karpenter-leader-election",
        &PatchParams::default(),
        &Patch::Merge(&usurp),
    )
    .await
    .expect("overwriting the Lease");

    let result = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the run loop stops within 30 s")
        .expect("the run task");
    assert!(
        matches!(result, Err(RunError::LostLeadership(_))),
        "{result:?}"
    );
    tokio::time::timeout(Duration::from_secs(1), stopped_rx)
        .await
        .expect("the controllers were cancelled")
        .expect("the controllers were cancelled");
    assert_eq!(
        holder(&api, "karpenter-leader-election").await.as_deref(),
        Some("usurper"),
        "not released: it was not ours"
    );
    scope.cleanup().await.expect("cleaning up");
}
