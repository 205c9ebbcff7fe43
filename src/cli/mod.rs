//! The scriptable command line: parsing in [`args`], the commands here, the
//! human and JSON output in [`output`].

pub mod args;
pub mod argv;
pub mod author;
mod commands;
pub mod exit;
mod log;
mod notify;
pub mod output;

use std::path::{Path, PathBuf};

pub use args::{Cli, Command};
pub use commands::{run, wants_json, writes};

use crate::store::{StoreError, StoreUrl};
use crate::task::Task;
pub use output::OutputError;

pub use exit::{
    EXIT_CANCELLED, EXIT_FAILED, EXIT_INPUT_REQUIRED, EXIT_NOTHING_TO_CLAIM, EXIT_STORE,
    EXIT_TIMEOUT, EXIT_USAGE, ErrorKind, wait_exit_code,
};

/// What a usage error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Culprit {
    /// A flag or argument, such as `--ttl`.
    Argument(String),
    /// An environment variable, such as `RUDDER_STORE`.
    Variable(String),
}

/// Why a command failed, and so its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A bad argument or environment variable; `culprit` names it when
    /// one is to blame.
    #[error("{message}")]
    Usage {
        message: String,
        culprit: Option<Culprit>,
    },
    /// `--read-only` and a command that writes to the store.
    #[error(
        "--read-only: {command} writes to the store, and every write is refused; nothing was done"
    )]
    ReadOnly { command: &'static str },
    /// `get --reveal` by someone who may not write the store (exit 4,
    /// `reveal_refused`): nothing was shown.
    #[error(
        "--reveal: {why}; secret answers are shown in clear only to someone who may write the store, nothing was shown"
    )]
    RevealRefused { why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("timed out after {0} waiting for task {1}")]
    Timeout(String, String),
    /// An id asked of a store that does not exist: `unknown task` (exit
    /// 3), naming the store, so a mistyped `--store` is seen for what it is.
    #[error(
        "unknown task: {id}: there is no store at {store} (it does not exist), so it holds no tasks"
    )]
    NoStore {
        id: String,
        /// The store as messages name it (password hidden).
        store: String,
    },
    /// `claim` found no claimable task within its `--wait`.
    #[error("no task was claimable{}", waited.as_ref().map(|w| format!(" within {w}")).unwrap_or_default())]
    NothingToClaim {
        /// The `--wait` given, as a person reads it.
        waited: Option<String>,
    },
    /// `wait` saw the task unfinished, then saw it gone from the store.
    #[error(
        "task {} vanished from {} while it was {} (revision {}){}: it was removed before wait saw how it ended \
         (most likely it finished and was pruned at once), so its outcome is unknown",
        last.task_id,
        path.display(),
        last.status,
        last.revision,
        if *store_gone { ", and the store itself no longer exists" } else { "" }
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
    /// A usage error about `argument` (a flag such as `--schema`).
    pub fn usage(argument: &str, message: impl Into<String>) -> Self {
        CliError::Usage {
            message: message.into(),
            culprit: Some(Culprit::Argument(argument.to_string())),
        }
    }

    /// A usage error about the environment variable `variable`.
    pub fn environment(variable: &str, message: impl Into<String>) -> Self {
        CliError::Usage {
            message: message.into(),
            culprit: Some(Culprit::Variable(variable.to_string())),
        }
    }

    /// The process exit code (see [`ErrorKind`]).
    pub fn exit_code(&self) -> i32 {
        ErrorKind::of_cli(self).exit_code()
    }

    /// The error as the one JSON object `--json` prints.
    pub fn to_json(&self) -> serde_json::Value {
        exit::cli_error_json(self)
    }
}

/// The store: `--store` (typed by clap), else `$RUDDER_STORE` (unless
/// empty), else `./tasks.json`; a `$RUDDER_STORE` that names no store is
/// an error of the environment.
pub fn store_url(flag: Option<StoreUrl>) -> Result<StoreUrl, CliError> {
    Ok(store_given(flag)?.unwrap_or_else(|| StoreUrl::from_path(Path::new("tasks.json"))))
}

/// The store the user gave: `--store`, else `$RUDDER_STORE` (unless
/// empty); `None` when neither is given (each command has its default).
pub fn store_given(flag: Option<StoreUrl>) -> Result<Option<StoreUrl>, CliError> {
    if flag.is_some() {
        return Ok(flag);
    }
    match std::env::var_os("RUDDER_STORE").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(text) => StoreUrl::parse(text)
            .map(Some)
            .map_err(|e| CliError::environment("RUDDER_STORE", format!("RUDDER_STORE: {e}"))),
    }
}
