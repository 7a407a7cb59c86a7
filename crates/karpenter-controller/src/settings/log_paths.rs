//! `LOG_OUTPUT_PATHS` / `LOG_ERROR_OUTPUT_PATHS`: comma-separated log sinks, read as zap
//! reads its `OutputPaths` and `ErrorOutputPaths` (upstream's `pkg/operator/logging`).
//!
//! Each entry is `stdout`, `stderr`, a file path (absolute or relative to the working
//! directory), or a `file://` URL (`file:///var/log/k.log`, `file://localhost/var/log/k.log`).
//! Other URL schemes are refused, as zap refuses a scheme without a registered sink. Unlike
//! zap, spaces around an entry are dropped (zap would open a file named `" /tmp/a"`). Owns the
//! parsing only: opening the files is `crate::telemetry`'s (settings do no I/O).

use std::fmt;
use std::path::PathBuf;

/// One log sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogPath {
    /// The process's standard output.
    Stdout,
    /// The process's standard error.
    Stderr,
    /// A file, opened for append and created if missing.
    File(PathBuf),
}

impl fmt::Display for LogPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogPath::Stdout => f.write_str("stdout"),
            LogPath::Stderr => f.write_str("stderr"),
            LogPath::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The sinks of one setting, in the order given (at least one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPaths(pub Vec<LogPath>);

impl fmt::Display for LogPaths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, path) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{path}")?;
        }
        Ok(())
    }
}

const ALLOWED: &str = "allowed: stdout, stderr, a file path or a file:// URL, comma-separated";

/// Parses `path,path,...`. Used as the clap value parser of both settings.
pub fn parse_log_paths(input: &str) -> Result<LogPaths, String> {
    input
        .split(',')
        .map(|entry| parse_one(entry.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map(LogPaths)
}

fn parse_one(entry: &str) -> Result<LogPath, String> {
    match entry {
        "" => return Err(format!("an empty path; {ALLOWED}")),
        "stdout" => return Ok(LogPath::Stdout),
        "stderr" => return Ok(LogPath::Stderr),
        _ if entry.starts_with('/') => return Ok(LogPath::File(PathBuf::from(entry))),
        _ => {}
    }
    let Some(scheme) = scheme(entry) else {
        return Ok(LogPath::File(PathBuf::from(entry)));
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(format!(
            "{entry:?}: no log sink for the URL scheme {scheme:?}; {ALLOWED}"
        ));
    }
    let rest = &entry[scheme.len() + 1..];
    let path = rest
        .strip_prefix("//localhost/")
        .map(|p| format!("/{p}"))
        .or_else(|| rest.strip_prefix("//").map(str::to_owned))
        .unwrap_or_default();
    if !path.starts_with('/') || path.contains(['?', '#']) {
        return Err(format!(
            "{entry:?}: a file URL is file:///absolute/path (host empty or localhost, no query or fragment); {ALLOWED}"
        ));
    }
    Ok(LogPath::File(PathBuf::from(path)))
}

/// The URL scheme of `entry` (`file` of `file:///x`), as Go's `url.Parse` reads one: letters,
/// digits, `+`, `-`, `.` before the first `:`, starting with a letter.
fn scheme(entry: &str) -> Option<&str> {
    let (scheme, _) = entry.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> LogPath {
        LogPath::File(PathBuf::from(path))
    }

    #[test]
    fn each_entry_is_stdout_stderr_or_a_file_in_the_order_given() {
        let cases: &[(&str, &[LogPath])] = &[
            ("stdout", &[LogPath::Stdout]),
            ("stderr", &[LogPath::Stderr]),
            (
                "stdout,/var/log/karpenter.log",
                &[LogPath::Stdout, file("/var/log/karpenter.log")],
            ),
            ("logs/k.log", &[file("logs/k.log")]),
            (" stderr , /tmp/a ", &[LogPath::Stderr, file("/tmp/a")]),
            ("file:///tmp/k.log", &[file("/tmp/k.log")]),
            ("file://localhost/tmp/k.log", &[file("/tmp/k.log")]),
            ("stdout,stdout", &[LogPath::Stdout, LogPath::Stdout]),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_log_paths(input),
                Ok(LogPaths(expected.to_vec())),
                "{input}"
            );
        }
    }

    #[test]
    fn an_empty_entry_or_another_url_scheme_is_refused_with_what_is_allowed() {
        let cases: &[(&str, &str)] = &[
            ("", "an empty path"),
            ("stdout,", "an empty path"),
            (
                "http://logs.example.com",
                "no log sink for the URL scheme \"http\"",
            ),
            ("file://host/tmp/a", "a file URL is file:///absolute/path"),
            ("file:///tmp/a?x=1", "no query or fragment"),
        ];
        for (input, expected) in cases {
            let err = parse_log_paths(input).expect_err(input);
            assert!(err.contains(expected), "{input}: {err}");
            assert!(err.contains("allowed: stdout, stderr"), "{input}: {err}");
        }
    }

    #[test]
    fn the_paths_are_written_back_as_given() {
        let paths = parse_log_paths("stdout,/tmp/a,stderr").expect("valid");
        assert_eq!(paths.to_string(), "stdout,/tmp/a,stderr");
    }
}
