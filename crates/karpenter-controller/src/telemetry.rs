//! Logging: JSON lines at `LOG_LEVEL` to every sink of `LOG_OUTPUT_PATHS`, close to upstream's
//! zap output; the logger's own failures to `LOG_ERROR_OUTPUT_PATHS`.
//!
//! Upstream writes `{"level":"INFO","time":"...","logger":"controller","message":"...",...}`.
//! tracing-subscriber's JSON formatter writes `level`, `timestamp` (RFC 3339),
//! `target` (our `logger`: the Rust module path), and the event's fields
//! flattened beside them, with the text under `message`.
//!
//! Sinks are zap's: `stdout`, `stderr` or a file, opened for append and created if missing,
//! all opened at start (one that cannot be opened stops the start, naming the setting and the
//! path). Each line goes to every output ([`LogSinks`], a tee `MakeWriter`); a sink that fails
//! does not stop the others. As zap's `ErrorOutputPaths`, the error outputs receive the
//! logger's internal errors, not error-level lines: a failed write to an output is reported
//! there, once per output and kind of failure (zap reports every one). Owns installing the
//! global subscriber only; it must not decide what is logged.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::fmt::format::{Format, Json, JsonFields};
use tracing_subscriber::fmt::{MakeWriter, SubscriberBuilder};

use crate::settings::{LogLevel, LogPath, LogPaths, Settings};

/// Why logging could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A global subscriber was already installed (e.g. by a test harness).
    #[error("installing the JSON log subscriber: {0}")]
    Install(String),
    /// A file of `LOG_OUTPUT_PATHS` or `LOG_ERROR_OUTPUT_PATHS` could not be opened for append.
    #[error("{setting}: cannot open the log file {}: {source}", path.display())]
    Open {
        /// `LOG_OUTPUT_PATHS` or `LOG_ERROR_OUTPUT_PATHS`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
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

/// The JSON subscriber at `level`, writing each line through `writer`.
pub fn json_subscriber<W>(
    level: LogLevel,
    writer: W,
) -> SubscriberBuilder<JsonFields, Format<Json>, EnvFilter, W>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_span_events(FmtSpan::NONE)
        .with_env_filter(filter_for(level))
        .with_writer(writer)
}

/// Opens the settings' log sinks and installs the global JSON subscriber writing to them.
pub fn init(settings: &Settings) -> Result<(), TelemetryError> {
    let sinks = LogSinks::open(&settings.log_output_paths, &settings.log_error_output_paths)?;
    json_subscriber(settings.log_level, sinks)
        .try_init()
        .map_err(|err| TelemetryError::Install(err.to_string()))
}

/// Where one sink writes.
#[derive(Debug)]
enum Target {
    Stdout,
    Stderr,
    File(Mutex<File>),
}

/// One opened sink, with the name it was given.
#[derive(Debug)]
struct Sink {
    name: String,
    target: Target,
}

impl Sink {
    fn open(setting: &'static str, path: &LogPath) -> Result<Self, TelemetryError> {
        let target = match path {
            LogPath::Stdout => Target::Stdout,
            LogPath::Stderr => Target::Stderr,
            LogPath::File(file) => Target::File(Mutex::new(
                OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(file)
                    .map_err(|source| TelemetryError::Open {
                        setting,
                        path: file.clone(),
                        source,
                    })?,
            )),
        };
        Ok(Sink {
            name: path.to_string(),
            target,
        })
    }

    /// Writes one whole line (stdout is line-buffered: a line is flushed at its newline).
    fn write_all(&self, line: &[u8]) -> io::Result<()> {
        match &self.target {
            Target::Stdout => io::stdout().lock().write_all(line),
            Target::Stderr => io::stderr().lock().write_all(line),
            Target::File(file) => file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write_all(line),
        }
    }
}

/// The opened sinks of `LOG_OUTPUT_PATHS` and `LOG_ERROR_OUTPUT_PATHS`; as a `MakeWriter`, a
/// tee of every output.
#[derive(Debug)]
pub struct LogSinks {
    outputs: Vec<Sink>,
    errors: Vec<Sink>,
    /// The failures already reported: (output, kind of error).
    reported: Mutex<HashSet<(usize, io::ErrorKind)>>,
}

impl LogSinks {
    /// Opens every sink (files for append, created if missing).
    pub fn open(outputs: &LogPaths, errors: &LogPaths) -> Result<Self, TelemetryError> {
        let open = |setting, paths: &LogPaths| -> Result<Vec<Sink>, TelemetryError> {
            paths
                .0
                .iter()
                .map(|path| Sink::open(setting, path))
                .collect()
        };
        Ok(LogSinks {
            outputs: open("LOG_OUTPUT_PATHS", outputs)?,
            errors: open("LOG_ERROR_OUTPUT_PATHS", errors)?,
            reported: Mutex::new(HashSet::new()),
        })
    }

    /// Writes `line` to every output; reports each output's failure to the error outputs.
    fn write_line(&self, line: &[u8]) {
        for (index, output) in self.outputs.iter().enumerate() {
            if let Err(error) = output.write_all(line) {
                self.report(index, output, &error);
            }
        }
    }

    /// Tells the error outputs that `output` failed, the first time it fails this way.
    fn report(&self, index: usize, output: &Sink, error: &io::Error) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((index, error.kind()));
        if !first {
            return;
        }
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let message = format!(
            "{time} write error: log output {}: {error} (reported once per output and kind of error)\n",
            output.name
        );
        for sink in &self.errors {
            // Nowhere left to say that the error output failed too (zap ignores it as well).
            let _ = sink.write_all(message.as_bytes());
        }
    }
}

impl Write for &LogSinks {
    /// Takes the whole line: a failing output is reported, never returned, so the others
    /// still get it and the formatter never retries.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_line(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogSinks {
    type Writer = &'a LogSinks;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::settings::parse_log_paths;

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
        let subscriber = json_subscriber(level, captured.clone()).finish();
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

    /// A new, empty directory under the system's temporary directory.
    fn temp_dir(test: &str) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "karpenter-telemetry-{test}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temporary directory");
        dir
    }

    fn paths(list: &[&Path]) -> LogPaths {
        let joined: Vec<String> = list.iter().map(|p| p.display().to_string()).collect();
        parse_log_paths(&joined.join(",")).expect("valid paths")
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Logs `messages` at info through `sinks`.
    fn log_through(sinks: LogSinks, messages: &[&str]) {
        let subscriber = json_subscriber(LogLevel::Info, sinks).finish();
        tracing::subscriber::with_default(subscriber, || {
            for message in messages {
                tracing::info!(nodepool = "default", "{message}");
            }
        });
    }

    fn messages(text: &str) -> Vec<String> {
        text.lines()
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
                value["message"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    }

    #[test]
    fn every_line_goes_to_every_output_file_appended_after_what_was_there() {
        let dir = temp_dir("tee");
        let (first, second, errors) = (
            dir.join("first.log"),
            dir.join("second.log"),
            dir.join("errors.log"),
        );
        std::fs::write(&first, "kept\n").expect("writing");
        let sinks =
            LogSinks::open(&paths(&[&first, &second]), &paths(&[&errors])).expect("the sinks open");
        assert!(second.exists(), "a missing output file is created at start");
        log_through(sinks, &["one", "two"]);

        let first_text = read(&first);
        assert_eq!(first_text.lines().next(), Some("kept"));
        assert_eq!(
            messages(first_text.split_once('\n').map_or("", |(_, rest)| rest)),
            ["one", "two"]
        );
        assert_eq!(messages(&read(&second)), ["one", "two"]);
        assert_eq!(
            read(&errors),
            "",
            "no failure, nothing for the error outputs"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_failing_output_is_reported_once_to_the_error_outputs_and_the_others_still_get_every_line()
    {
        let dir = temp_dir("failing");
        let (good, errors, more_errors) = (
            dir.join("good.log"),
            dir.join("errors.log"),
            dir.join("more-errors.log"),
        );
        // Every write to /dev/full fails with "no space left on device".
        let full = Path::new("/dev/full");
        let sinks = LogSinks::open(&paths(&[full, &good]), &paths(&[&errors, &more_errors]))
            .expect("the sinks open");
        log_through(sinks, &["one", "two", "three"]);

        assert_eq!(messages(&read(&good)), ["one", "two", "three"]);
        for error_output in [&errors, &more_errors] {
            let text = read(error_output);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1, "one report for one output and kind: {text}");
            assert!(
                lines[0].contains(" write error: log output /dev/full: No space left on device"),
                "{text}"
            );
            assert!(
                !text.contains("\"message\""),
                "log lines do not go to the error outputs: {text}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_output_that_cannot_be_opened_stops_the_start_naming_the_setting_and_the_path() {
        let dir = temp_dir("unopenable");
        let missing = dir.join("no-such-directory/karpenter.log");
        let err = LogSinks::open(&paths(&[&missing]), &LogPaths(vec![LogPath::Stderr]))
            .map(drop)
            .expect_err("a file in a missing directory cannot be opened");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "LOG_OUTPUT_PATHS: cannot open the log file {}: ",
                missing.display()
            )),
            "{message}"
        );
        let err = LogSinks::open(&paths(&[Path::new("/dev/null")]), &paths(&[&missing]))
            .map(drop)
            .expect_err("the error output cannot be opened");
        assert!(
            err.to_string()
                .starts_with("LOG_ERROR_OUTPUT_PATHS: cannot open the log file"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
