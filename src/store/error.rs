use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::schema::Violation;
use crate::task::{OpKind, Task};

/// Everything a store operation can fail with.
///
/// Refusals carry the task's current snapshot so that a caller can read the
/// real state instead of assuming its write won. The CLI maps each kind to
/// its exit code and JSON shape (`cli::exit`); nothing here knows of either.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown task: {}", if id.is_empty() { "\"\" (the id is empty)" } else { id })]
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

    /// The task's revision is `u64::MAX`: it can record no further change
    /// (a revision never wraps around to 0).
    #[error(
        "cannot {op} task {}: its revision is already {}, the largest a revision can be, so it can record no further change",
        task.task_id, task.revision
    )]
    RevisionExhausted { op: OpKind, task: Box<Task> },

    /// A JSON value nests deeper than a store may hold (see
    /// [`super::MAX_VALUE_DEPTH`]): written, it would make the store
    /// unreadable for every process.
    #[error(
        "the task's {field} nests deeper than the {limit} levels a value in the store may have; nothing was written"
    )]
    TooDeep { field: String, limit: usize },

    /// A JSON object whose first key is serde_json's private number marker
    /// (see [`super::RESERVED_KEY`]): every reader would take it for a number.
    #[error(
        "the task's {field} holds an object whose first key is {:?} (at {}), which the store would read back as a number; nothing was written",
        super::RESERVED_KEY,
        pointer_or_top(pointer)
    )]
    ReservedKey { field: String, pointer: String },

    /// The store file would grow past the size every reader accepts.
    #[error(
        "{}: the store would grow to {size} bytes, more than the {} a store may hold; nothing was written (prune finished tasks)",
        path.display(), human_bytes(*limit)
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },

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
        path.display(), readable_wait(*waited), holder.as_ref().map(|h| format!(" (last taken by {h})")).unwrap_or_default()
    )]
    LockTimeout {
        path: PathBuf,
        waited: Duration,
        holder: Option<String>,
    },
}

/// A wait as a person reads it: `250ms` below a second, else seconds with
/// one decimal (`30.0s`), never the nanoseconds an exact measurement has.
fn readable_wait(waited: Duration) -> String {
    if waited < Duration::from_secs(1) {
        format!("{}ms", waited.as_millis())
    } else {
        format!("{:.1}s", waited.as_secs_f64())
    }
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

fn pointer_or_top(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the top level"
    } else {
        pointer
    }
}

/// A byte count as people read limits: whole MiB or KiB when it is one.
pub fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l} column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

impl StoreError {
    /// The task's current snapshot, for refusals.
    pub fn task(&self) -> Option<&Task> {
        match self {
            StoreError::Refused { task, .. }
            | StoreError::IdempotencyConflict { task, .. }
            | StoreError::StaleRevision { task, .. }
            | StoreError::LeaseLost { task, .. }
            | StoreError::RevisionExhausted { task, .. } => Some(task),
            _ => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            action,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_timeout_says_how_long_in_readable_units() {
        let error = |waited| StoreError::LockTimeout {
            path: PathBuf::from("/srv/tasks.json.lock"),
            waited,
            holder: Some("pid 42 (rudder)".into()),
        };
        assert_eq!(
            error(Duration::new(30, 123_456_789)).to_string(),
            "/srv/tasks.json.lock: gave up after 30.1s waiting for the store lock (last taken by pid 42 (rudder))"
        );
        assert!(
            error(Duration::new(5, 7))
                .to_string()
                .contains("gave up after 5.0s waiting")
        );
        assert!(
            error(Duration::from_nanos(250_400_001))
                .to_string()
                .contains("gave up after 250ms waiting")
        );
    }
}
