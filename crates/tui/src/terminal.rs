//! Whether there is a terminal to draw on, checked before anything starts.

use std::io::IsTerminal;

/// The TUI was started without a terminal (a pipe, a file, cron): a
/// usage error (exit 2), not a crash.
#[derive(Debug, thiserror::Error)]
#[error(
    "{command} needs a terminal ({what} is not one): run it in a terminal; \
     scripts read the store with `rudder list`, `rudder get` and `rudder wait`"
)]
pub struct NeedsTerminal {
    /// `rudder watch` or `rudder demo`.
    pub command: &'static str,
    /// Which stream is missing: stdout, or stdin (with no /dev/tty).
    pub what: &'static str,
}

/// `Err` unless stdout is a terminal and keys can be read (stdin is one,
/// or the process has a controlling terminal, which crossterm then reads).
pub fn check(command: &'static str) -> Result<(), NeedsTerminal> {
    if !std::io::stdout().is_terminal() {
        return Err(NeedsTerminal {
            command,
            what: "stdout",
        });
    }
    if !std::io::stdin().is_terminal() && std::fs::File::open("/dev/tty").is_err() {
        return Err(NeedsTerminal {
            command,
            what: "stdin",
        });
    }
    Ok(())
}
