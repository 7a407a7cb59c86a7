//! Graceful shutdown: one [`CancellationToken`] for the whole process,
//! tripped by SIGTERM (what the kubelet sends) or SIGINT (Ctrl-C).
//!
//! Owns the signal wiring only. Everything long-running takes a child of the
//! token and returns when it trips; the run loop then drains in order.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Why signal handling could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// The OS refused the signal handler.
    #[error("installing the {signal} handler")]
    Install {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Returns a token that trips on the first SIGTERM or SIGINT (or when `parent`
/// trips). The handlers are installed before this returns, so no signal is missed.
pub fn on_signals(parent: &CancellationToken) -> Result<CancellationToken, ShutdownError> {
    let mut term = signal(SignalKind::terminate()).map_err(|source| ShutdownError::Install {
        signal: "SIGTERM",
        source,
    })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|source| ShutdownError::Install {
        signal: "SIGINT",
        source,
    })?;
    let token = parent.child_token();
    let trip = token.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            () = trip.cancelled() => return,
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
        trip.cancel();
    });
    Ok(token)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn cancelling_the_parent_trips_the_signal_token() {
        let parent = CancellationToken::new();
        let token = on_signals(&parent).expect("installing handlers");
        assert!(!token.is_cancelled());
        parent.cancel();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the token trips with its parent");
    }
}
