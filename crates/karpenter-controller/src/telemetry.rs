//! Logging: JSON lines on stdout at `LOG_LEVEL`, close to upstream's zap output.
//!
//! Upstream writes `{"level":"INFO","time":"...","logger":"controller","message":"...",...}`.
//! tracing-subscriber's JSON formatter writes `level`, `timestamp` (RFC 3339),
//! `target` (our `logger`: the Rust module path), and the event's fields
//! flattened beside them, with the text under `message`. Owns installing the
//! global subscriber only; it must not decide what is logged.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::settings::LogLevel;

/// Why logging could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A global subscriber was already installed (e.g. by a test harness).
    #[error("installing the JSON log subscriber: {0}")]
    Install(String),
}

/// The tracing filter for a log level: our crates at that level, and
/// dependencies (kube, hyper, ...) no chattier than `info`.
pub fn filter_for(level: LogLevel) -> EnvFilter {
    let directive = match level {
        LogLevel::Debug => "info,karpenter=debug,karpenter_controller=debug",
        LogLevel::Info => "info",
        LogLevel::Error => "error",
    };
    EnvFilter::new(directive)
}

/// Installs the global JSON subscriber writing to stdout.
pub fn init(level: LogLevel) -> Result<(), TelemetryError> {
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_span_events(FmtSpan::NONE)
        .with_env_filter(filter_for(level))
        .with_writer(std::io::stdout)
        .try_init()
        .map_err(|err| TelemetryError::Install(err.to_string()))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn log_lines(level: LogLevel) -> Vec<serde_json::Value> {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_env_filter(filter_for(level))
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(nodeclaim = "default-abc", "debug line");
            tracing::info!(nodepool = "default", "info line");
            tracing::error!("error line");
        });
        let bytes = captured.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| serde_json::from_str(line).expect("each log line is JSON"))
            .collect()
    }

    #[test]
    fn each_log_line_is_json_with_level_time_logger_and_message() {
        let lines = log_lines(LogLevel::Info);
        let first = &lines[0];
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["message"], "info line");
        assert_eq!(first["nodepool"], "default");
        assert!(first["timestamp"].is_string(), "{first}");
        assert!(
            first["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("karpenter_controller")),
            "{first}"
        );
    }

    #[test]
    fn the_log_level_selects_which_lines_are_written() {
        let messages = |level| -> Vec<String> {
            log_lines(level)
                .iter()
                .map(|l| l["message"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(
            messages(LogLevel::Debug),
            ["debug line", "info line", "error line"]
        );
        assert_eq!(messages(LogLevel::Info), ["info line", "error line"]);
        assert_eq!(messages(LogLevel::Error), ["error line"]);
    }
}
