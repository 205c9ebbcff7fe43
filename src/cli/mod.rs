//! The scriptable command line: parsing in [`args`], the commands here, the
//! human and JSON output in [`output`].

pub mod args;
mod commands;
pub mod output;

use std::path::PathBuf;

pub use args::{Cli, Command};
pub use commands::run;

use crate::store::StoreError;

/// Exit code for a usage error (bad flag, bad JSON argument, bad duration).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when `wait` timed out.
pub const EXIT_TIMEOUT: i32 = 124;

/// Why a command failed, and so its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("timed out after {0} waiting for task {1}")]
    Timeout(String, String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Store(e) => e.exit_code(),
            CliError::Timeout(..) => EXIT_TIMEOUT,
            CliError::Other(_) => 1,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            CliError::Store(e) => e.to_json(),
            other => serde_json::json!({
                "error": match other {
                    CliError::Usage(_) => "usage",
                    CliError::Timeout(..) => "timeout",
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
