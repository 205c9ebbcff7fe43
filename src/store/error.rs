use std::io;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::schema::Violation;
use crate::task::{OpKind, Task};

/// Everything a store operation can fail with.
///
/// Refusals carry the task's current snapshot so that a caller can read the
/// real state instead of assuming its write won. [`StoreError::exit_code`]
/// maps each kind to the CLI's exit codes.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown task: {id}")]
    UnknownTask { id: String },

    #[error(
        "ambiguous task id {prefix:?}: it starts {}{} tasks ({}{})",
        if *more { "more than " } else { "" },
        candidates.len(),
        candidates.join(", "),
        if *more { ", ..." } else { "" }
    )]
    AmbiguousId {
        prefix: String,
        /// The matching ids, sorted; only the first ones when `more`.
        candidates: Vec<String>,
        /// Whether more tasks match than `candidates` lists.
        more: bool,
    },

    #[error("cannot {op} task {}: it is {} ({reason})", task.task_id, task.status)]
    Refused {
        op: OpKind,
        reason: String,
        task: Box<Task>,
    },

    #[error(
        "idempotency conflict: key {key:?} already belongs to task {} created with a different {field}",
        task.task_id
    )]
    IdempotencyConflict {
        key: String,
        field: &'static str,
        task: Box<Task>,
    },

    #[error(
        "cannot {op} task {}: it changed since revision {expected} (now revision {}, {})",
        task.task_id, task.revision, task.status
    )]
    StaleRevision {
        op: OpKind,
        expected: u64,
        task: Box<Task>,
    },

    #[error("cannot {op} task {}: {}", task.task_id, lease_reason(task))]
    LeaseLost { op: OpKind, task: Box<Task> },

    #[error(
        "input for task {id} does not match its schema: {}",
        join_violations(violations)
    )]
    InvalidInput {
        id: String,
        violations: Vec<Violation>,
    },

    #[error("{0}")]
    InvalidSchema(String),

    #[error("{}: store file is corrupt{}: {message}; it was left untouched", path.display(), position(*line, *column))]
    Corrupt {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },

    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },

    /// `copy` refused a destination that holds other data.
    #[error("cannot copy into {to}: {reason}; nothing was copied")]
    CopyRefused { to: String, reason: String },

    /// A store that is readable but not one rudder may use: not a SQLite
    /// database, another application's database, a newer schema.
    #[error("{location}: {message}; it was left untouched")]
    NotAStore { location: String, message: String },

    /// A database refused an operation (disk full, I/O error, corruption
    /// found mid-query).
    #[error("{location}: cannot {action}: {message}")]
    Database {
        location: String,
        action: &'static str,
        message: String,
    },

    #[error(
        "{}: gave up after {} waiting for the store lock{}",
        path.display(), humantime::format_duration(*waited), holder.as_ref().map(|h| format!(" (last taken by {h})")).unwrap_or_default()
    )]
    LockTimeout {
        path: PathBuf,
        waited: Duration,
        holder: Option<String>,
    },
}

fn lease_reason(task: &Task) -> String {
    match &task.claimed_by {
        Some(h) => format!("the lease is held by {h}"),
        None => "this worker no longer holds its lease".into(),
    }
}

fn join_violations(v: &[Violation]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l} column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

impl StoreError {
    /// The CLI exit code for this error (DESIGN.md "Exit codes").
    pub fn exit_code(&self) -> i32 {
        match self {
            StoreError::UnknownTask { .. } | StoreError::AmbiguousId { .. } => 3,
            StoreError::Refused { .. }
            | StoreError::IdempotencyConflict { .. }
            | StoreError::StaleRevision { .. }
            | StoreError::LeaseLost { .. }
            | StoreError::CopyRefused { .. } => 4,
            StoreError::InvalidInput { .. } => 5,
            StoreError::InvalidSchema(_) => 2,
            StoreError::Corrupt { .. }
            | StoreError::Io { .. }
            | StoreError::LockTimeout { .. }
            | StoreError::NotAStore { .. }
            | StoreError::Database { .. } => 6,
        }
    }

    /// The task's current snapshot, for refusals.
    pub fn task(&self) -> Option<&Task> {
        match self {
            StoreError::Refused { task, .. }
            | StoreError::IdempotencyConflict { task, .. }
            | StoreError::StaleRevision { task, .. }
            | StoreError::LeaseLost { task, .. } => Some(task),
            _ => None,
        }
    }

    /// A short machine-readable name of the kind of error.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::UnknownTask { .. } => "unknown_task",
            StoreError::AmbiguousId { .. } => "ambiguous_id",
            StoreError::Refused { .. } => "refused",
            StoreError::IdempotencyConflict { .. } => "idempotency_conflict",
            StoreError::StaleRevision { .. } => "stale_revision",
            StoreError::LeaseLost { .. } => "lease_lost",
            StoreError::InvalidInput { .. } => "invalid_input",
            StoreError::InvalidSchema(_) => "invalid_schema",
            StoreError::Corrupt { .. } => "corrupt_store",
            StoreError::Io { .. } => "io",
            StoreError::LockTimeout { .. } => "lock_timeout",
            StoreError::NotAStore { .. } => "not_a_store",
            StoreError::CopyRefused { .. } => "copy_refused",
            StoreError::Database { .. } => "database",
        }
    }

    /// The error as one JSON object (`--json` output).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "error": self.kind(),
            "message": self.to_string(),
            "exit_code": self.exit_code(),
        });
        if let Some(task) = self.task() {
            v["task"] = serde_json::to_value(task).unwrap_or(Value::Null);
        }
        match self {
            StoreError::InvalidInput { violations, .. } => {
                v["violations"] = serde_json::to_value(violations).unwrap_or(Value::Null);
            }
            StoreError::AmbiguousId { candidates, .. } => {
                v["candidates"] = json!(candidates);
            }
            StoreError::Corrupt {
                path, line, column, ..
            } => {
                v["path"] = json!(path);
                v["line"] = json!(line);
                v["column"] = json!(column);
            }
            _ => {}
        }
        v
    }

    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            action,
            source,
        }
    }
}
