use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rudder_model::schema::Violation;
use rudder_model::task::{OpKind, Task};

/// Where a store is, as every error about the store itself names it, the
/// same for every backend: the store's display form ([`super::StoreUrl`]'s
/// `Display`) — a JSON file's path, `sqlite:PATH`, or a PostgreSQL URL with
/// its password redacted — and, for a store in a local file, that file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    shown: String,
    path: Option<PathBuf>,
}

impl Location {
    /// A JSON file store at `path`.
    pub fn file(path: impl Into<PathBuf>) -> Location {
        let path = path.into();
        Location {
            shown: path.display().to_string(),
            path: Some(path),
        }
    }

    /// A SQLite store at `path`: shown as `sqlite:PATH`.
    pub fn sqlite(path: impl Into<PathBuf>) -> Location {
        let path = path.into();
        Location {
            shown: format!("sqlite:{}", path.display()),
            path: Some(path),
        }
    }

    /// A store on a server, shown as `shown` (a URL already redacted).
    pub fn remote(shown: impl Into<String>) -> Location {
        Location {
            shown: shown.into(),
            path: None,
        }
    }

    /// The store's local file (the JSON file, the SQLite database); `None`
    /// for a database server.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The location as messages show it.
    pub fn as_str(&self) -> &str {
        &self.shown
    }
}

impl From<&super::StoreUrl> for Location {
    fn from(url: &super::StoreUrl) -> Location {
        match url {
            super::StoreUrl::File(p) => Location::file(p),
            super::StoreUrl::Sqlite(p) => Location::sqlite(p),
            super::StoreUrl::Postgres(u) => Location::remote(u.shown()),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Everything a store operation can fail with.
///
/// Errors about the store itself (corrupt, too large, an I/O or database
/// error, the lock, not a store) name it by its [`Location`], whatever the
/// backend: "what was wrong and where".
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
        "{location}: the store would grow to {size} bytes, more than the {} a store may hold; nothing was written (prune finished tasks)",
        human_bytes(*limit)
    )]
    TooLarge {
        location: Location,
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

    /// A task's `kind` that a store may not hold (see
    /// [`rudder_model::task::check_kind`]).
    #[error("the task's kind {kind:?} is refused: {reason}; nothing was written")]
    InvalidKind {
        kind: String,
        reason: rudder_model::task::KindError,
    },

    /// The store does not read back: a file that does not parse, a task
    /// document that does not deserialize, a damaged database.
    #[error("{location}: {} is corrupt{}: {message}; it was left untouched",
        if location.path().is_some() { "store file" } else { "store" },
        position(*line, *column))]
    Corrupt {
        location: Location,
        /// Where in the store file, when it is a text file.
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },

    /// A file-system call on the store's files failed.
    #[error("{location}: cannot {action}{}: {source}", other_file(location, file))]
    Io {
        location: Location,
        /// The file the call was on: the store's own, or one beside it (the
        /// lock file, a temporary file, the directory), which the message
        /// then names too.
        file: PathBuf,
        action: &'static str,
        source: io::Error,
    },

    /// `copy` refused a destination that holds other data.
    #[error("cannot copy into {to}: {reason}; nothing was copied")]
    CopyRefused { to: String, reason: String },

    /// A store that is readable but not one rudder may use: not a SQLite
    /// database, another application's database, a newer schema.
    #[error("{location}: {message}; it was left untouched")]
    NotAStore { location: Location, message: String },

    /// A database refused an operation (disk full, I/O error, corruption
    /// found mid-query).
    #[error("{location}: cannot {action}: {message}")]
    Database {
        location: Location,
        action: &'static str,
        message: String,
    },

    /// Another writer held the store's lock for longer than the lock timeout.
    #[error(
        "{location}: gave up after {} waiting for the store lock{}; $RUDDER_LOCK_TIMEOUT sets how long",
        readable_wait(*waited), holder.as_ref().map(|h| format!(" (last taken by {h})")).unwrap_or_default()
    )]
    LockTimeout {
        location: Location,
        waited: Duration,
        holder: Option<String>,
    },
}

/// `: FILE` when an I/O error's file is not the store's own.
fn other_file(location: &Location, file: &Path) -> String {
    if location.path() == Some(file) {
        String::new()
    } else {
        format!(": {}", file.display())
    }
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
    /// A database row with a status no rudder writes (a hand-edited row):
    /// every database backend reports it so, never reading it as another
    /// status.
    pub fn unknown_status(
        location: Location,
        e: &rudder_model::task::ParseStatusError,
    ) -> StoreError {
        StoreError::Corrupt {
            location,
            line: None,
            column: None,
            message: format!("a task's row has an {e}"),
        }
    }

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

    /// Whether this says the store's database server cannot be reached now
    /// (down, restarting, the connection cut), rather than that the store is
    /// wrong: worth waiting out.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Database {
                action, message, ..
            } => {
                *action == "connect"
                    || message.contains("error communicating with the server")
                    || message.contains("connection closed")
                    || message.contains("terminating connection")
            }
            _ => false,
        }
    }

    /// Where the store is, for the errors about the store itself.
    pub fn location(&self) -> Option<&Location> {
        match self {
            StoreError::TooLarge { location, .. }
            | StoreError::Corrupt { location, .. }
            | StoreError::Io { location, .. }
            | StoreError::NotAStore { location, .. }
            | StoreError::Database { location, .. }
            | StoreError::LockTimeout { location, .. } => Some(location),
            _ => None,
        }
    }

    pub fn io(
        location: Location,
        file: impl Into<PathBuf>,
        action: &'static str,
        source: io::Error,
    ) -> Self {
        StoreError::Io {
            location,
            file: file.into(),
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
            location: Location::file("/srv/tasks.json"),
            waited,
            holder: Some("pid 42 (rudder)".into()),
        };
        assert_eq!(
            error(Duration::new(30, 123_456_789)).to_string(),
            "/srv/tasks.json: gave up after 30.1s waiting for the store lock (last taken by pid 42 (rudder)); $RUDDER_LOCK_TIMEOUT sets how long"
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
