//! Standard output for every subcommand: a reader that stops early (`karpenter explain ... |
//! head`) closes the pipe, which is not an error of ours: the rest is dropped and the command
//! ends as it would have (`print!` would panic there).

use std::io::Write;

use anyhow::Context;

/// Writes `text` to standard output; a closed pipe is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing to standard output")
        }
        _ => Ok(()),
    }
}

/// [`print()`] with a newline after `text`.
pub fn println(text: &str) -> anyhow::Result<()> {
    print(&format!("{text}\n"))
}
