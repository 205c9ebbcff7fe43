//! The scriptable command line: parsing in [`args`], the commands here, the
//! human and JSON output in [`output`].

pub mod args;
mod commands;
pub mod output;

use std::path::PathBuf;

pub use args::{Cli, Command};
pub use commands::run;

use crate::store::StoreError;
use crate::task::{Status, Task};
pub use output::OutputError;

/// Exit code for a usage error (bad flag, bad JSON argument, bad duration).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the store is unreadable or corrupt, an I/O error (also
/// writing the output), or the lock could not be had.
pub const EXIT_STORE: i32 = 6;
/// Exit code of `wait` when the task failed.
pub const EXIT_FAILED: i32 = 7;
/// Exit code of `wait` when the task was cancelled.
pub const EXIT_CANCELLED: i32 = 8;
/// Exit code of `wait` when the task waits for input.
pub const EXIT_INPUT_REQUIRED: i32 = 9;
/// Exit code when `wait` timed out.
pub const EXIT_TIMEOUT: i32 = 124;

/// The exit code of `wait` for a task that ended up `status` (DESIGN.md
/// "Exit codes"): 0 completed, 7 failed, 8 cancelled, 9 waiting for input
/// (and 0 for `working`, which `wait` never returns).
pub fn wait_exit_code(status: Status) -> i32 {
    match status {
        Status::Completed | Status::Working => 0,
        Status::Failed => EXIT_FAILED,
        Status::Cancelled => EXIT_CANCELLED,
        Status::InputRequired => EXIT_INPUT_REQUIRED,
    }
}

/// Why a command failed, and so its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("timed out after {0} waiting for task {1}")]
    Timeout(String, String),
    /// `wait` saw the task unfinished, then saw it gone from the store.
    #[error(
        "task {} vanished from {} while it was {} (revision {}){}: it was removed before wait saw how it ended \
         (most likely it finished and was pruned at once), so its outcome is unknown",
        last.task_id,
        path.display(),
        last.status,
        last.revision,
        if *store_gone { ", and the store file no longer exists" } else { "" }
    )]
    Vanished {
        /// The task as last seen.
        last: Box<Task>,
        /// The store.
        path: PathBuf,
        /// The whole store file is gone, not only the task.
        store_gone: bool,
    },
    /// The command did its work but its answer could not be written.
    #[error("{error}{}", done.as_ref().map(|d| format!("; {d}")).unwrap_or_default())]
    Output {
        error: OutputError,
        /// What the command did all the same, if it changed something.
        done: Option<String>,
    },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Store(e) => e.exit_code(),
            CliError::Timeout(..) => EXIT_TIMEOUT,
            CliError::Vanished { .. } => 3,
            CliError::Output { .. } => EXIT_STORE,
            CliError::Other(_) => 1,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            CliError::Store(e) => e.to_json(),
            CliError::Vanished { last, path, .. } => serde_json::json!({
                "error": "vanished",
                "message": self.to_string(),
                "exit_code": self.exit_code(),
                "path": path,
                "task": last,
            }),
            other => serde_json::json!({
                "error": match other {
                    CliError::Usage(_) => "usage",
                    CliError::Timeout(..) => "timeout",
                    CliError::Output { .. } => "output",
                    _ => "error",
                },
                "message": other.to_string(),
                "exit_code": other.exit_code(),
            }),
        }
    }
}

/// The store URL or path: `--store`, else `$RUDDER_STORE` (unless empty),
/// else `./tasks.json` (see [`crate::store::StoreUrl`]).
pub fn store_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("RUDDER_STORE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| PathBuf::from("tasks.json"))
}
