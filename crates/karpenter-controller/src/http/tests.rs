//! The endpoints answer over real sockets (ephemeral ports, loopback).

use std::net::SocketAddr;

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// A minimal HTTP/1.1 GET: returns (status code, headers+body text).
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connecting");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sending");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reading");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {response:?}"));
    (status, response)
}

async fn start() -> (
    Readiness,
    Metrics,
    SocketAddr,
    SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), HttpError>>,
) {
    let readiness = Readiness::new();
    let metrics = Metrics::new();
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let servers = HttpServers::bind(any, any, readiness.clone(), metrics.clone())
        .await
        .expect("binding");
    let health = servers.health_addr().expect("health address");
    let metrics_addr = servers.metrics_addr().expect("metrics address");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(servers.serve(cancel.clone()));
    (readiness, metrics, health, metrics_addr, cancel, task)
}

#[tokio::test]
async fn healthz_answers_ok_and_readyz_follows_the_readiness_handle() {
    let (readiness, _metrics, health, _, cancel, task) = start().await;
    assert_eq!(get(health, "/healthz").await.0, 200);
    assert_eq!(
        get(health, "/readyz").await.0,
        503,
        "not ready before the caller says so"
    );
    readiness.set_ready(true);
    assert_eq!(get(health, "/readyz").await.0, 200);
    readiness.set_ready(false);
    assert_eq!(get(health, "/readyz").await.0, 503);
    assert_eq!(
        get(health, "/metrics").await.0,
        404,
        "metrics are on their own port"
    );
    cancel.cancel();
    task.await
        .expect("server task")
        .expect("server stops cleanly");
}

#[tokio::test]
async fn metrics_serves_openmetrics_text_with_build_info_and_registered_metrics() {
    let (_readiness, metrics, _, metrics_addr, cancel, task) = start().await;
    let counter = Counter::<u64>::default();
    metrics.register(
        "karpenter_test_things",
        "Things counted by a test.",
        counter.clone(),
    );
    counter.inc();
    let (status, response) = get(metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        response
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{response}"
    );
    assert!(
        response.contains("karpenter_build_info{version="),
        "{response}"
    );
    assert!(
        response.contains("karpenter_test_things_total 1"),
        "{response}"
    );
    cancel.cancel();
    task.await
        .expect("server task")
        .expect("server stops cleanly");
}

#[tokio::test]
async fn after_cancel_the_listeners_are_closed() {
    let (_readiness, _metrics, health, metrics_addr, cancel, task) = start().await;
    cancel.cancel();
    task.await
        .expect("server task")
        .expect("server stops cleanly");
    assert!(
        TcpStream::connect(health).await.is_err(),
        "health port still open"
    );
    assert!(
        TcpStream::connect(metrics_addr).await.is_err(),
        "metrics port still open"
    );
}

#[tokio::test]
async fn binding_a_taken_port_names_the_server_and_the_address() {
    let taken = TcpListener::bind("127.0.0.1:0").await.expect("binding");
    let addr = taken.local_addr().expect("address");
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let err = HttpServers::bind(any, addr, Readiness::new(), Metrics::new())
        .await
        .expect_err("the port is taken");
    assert!(
        err.to_string()
            .contains(&format!("binding the metrics server to {addr}")),
        "{err}"
    );
}
