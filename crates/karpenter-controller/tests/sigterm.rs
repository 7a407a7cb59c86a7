//! A real SIGTERM trips the shutdown token (its own test binary: the signal
//! goes to this whole process).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed expectation is the panic it should be"
)]

use std::time::Duration;

use karpenter_controller::shutdown::on_signals;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn sigterm_trips_the_shutdown_token() {
    let token = on_signals(&CancellationToken::new()).expect("installing handlers");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill failed: {status}");
    tokio::time::timeout(Duration::from_secs(10), token.cancelled())
        .await
        .expect("the token trips on SIGTERM");
}
