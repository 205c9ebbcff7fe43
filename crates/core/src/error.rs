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

    /// A store in memory ([`crate::memory::MemoryBackend`]): shown as
    /// `memory:NAME`.
    pub fn memory(name: &str) -> Location {
        Location {
            shown: format!("memory:{name}"),
            path: None,
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
            super::StoreUrl::Memory(name) => Location::memory(name),
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

    /// The store's database server cannot be reached now: down,
    /// restarting, the connection refused or cut. The backend decides it
    /// from the driver's typed codes (SQLSTATE class 08 and the shutdown
    /// codes, a closed connection, the socket's `io::ErrorKind`) where it
    /// raises the error; worth waiting out, unlike [`StoreError::Database`].
    #[error("{location}: cannot {action}: {message}")]
    Unreachable {
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
    // An empty path: the call was on no file (a database server's store).
    if location.path() == Some(file) || file.as_os_str().is_empty() {
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
        self.kind() == ErrorKind::Unreachable
    }

    /// The one classification of this error, made where it was raised;
    /// each face maps it once (the CLI's exit codes, the worker API, MCP's
    /// JSON-RPC errors, Python's exceptions).
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::UnknownTask { .. } => ErrorKind::UnknownTask,
            StoreError::AmbiguousId { .. } => ErrorKind::AmbiguousId,
            StoreError::Refused { .. } => ErrorKind::Refused,
            StoreError::IdempotencyConflict { .. } => ErrorKind::IdempotencyConflict,
            StoreError::StaleRevision { .. } => ErrorKind::StaleRevision,
            StoreError::LeaseLost { .. } => ErrorKind::LeaseLost,
            StoreError::RevisionExhausted { .. } => ErrorKind::RevisionExhausted,
            StoreError::TooDeep { .. } => ErrorKind::TooDeep,
            StoreError::ReservedKey { .. } => ErrorKind::ReservedKey,
            StoreError::TooLarge { .. } => ErrorKind::TooLarge,
            StoreError::InvalidInput { .. } => ErrorKind::InvalidInput,
            StoreError::InvalidSchema(_) => ErrorKind::InvalidSchema,
            StoreError::InvalidKind { .. } => ErrorKind::InvalidKind,
            StoreError::Corrupt { .. } => ErrorKind::Corrupt,
            StoreError::Io { .. } => ErrorKind::Io,
            StoreError::CopyRefused { .. } => ErrorKind::CopyRefused,
            StoreError::NotAStore { .. } => ErrorKind::NotAStore,
            StoreError::Database { .. } => ErrorKind::Database,
            StoreError::Unreachable { .. } => ErrorKind::Unreachable,
            StoreError::LockTimeout { .. } => ErrorKind::LockTimeout,
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
            | StoreError::Unreachable { location, .. }
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

/// What kind of failure a [`StoreError`] is ([`StoreError::kind`]), with
/// its name (MCP's error data says it). The CLI's `--json` `"error"`
/// keeps `database` for [`ErrorKind::Unreachable`], the name scripts have
/// always matched on (src/cli/exit.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    UnknownTask,
    AmbiguousId,
    Refused,
    IdempotencyConflict,
    StaleRevision,
    LeaseLost,
    RevisionExhausted,
    TooDeep,
    ReservedKey,
    TooLarge,
    InvalidInput,
    InvalidSchema,
    InvalidKind,
    Corrupt,
    Io,
    CopyRefused,
    NotAStore,
    Database,
    Unreachable,
    LockTimeout,
}

/// The coarse class of an [`ErrorKind`]: what a caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// No such task (or the prefix is ambiguous).
    Unknown,
    /// Refused by the policy, nothing written; the error carries the task.
    Refused,
    /// The request itself is wrong (a value, a schema, a kind): fix it.
    Usage,
    /// The input does not validate against the task's schema.
    InvalidInput,
    /// The store is corrupt, not a store, or too large: a person must look.
    Store,
    /// The store could not be reached or locked now: trying again may help.
    Retry,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::UnknownTask,
        ErrorKind::AmbiguousId,
        ErrorKind::Refused,
        ErrorKind::IdempotencyConflict,
        ErrorKind::StaleRevision,
        ErrorKind::LeaseLost,
        ErrorKind::RevisionExhausted,
        ErrorKind::TooDeep,
        ErrorKind::ReservedKey,
        ErrorKind::TooLarge,
        ErrorKind::InvalidInput,
        ErrorKind::InvalidSchema,
        ErrorKind::InvalidKind,
        ErrorKind::Corrupt,
        ErrorKind::Io,
        ErrorKind::CopyRefused,
        ErrorKind::NotAStore,
        ErrorKind::Database,
        ErrorKind::Unreachable,
        ErrorKind::LockTimeout,
    ];

    /// The kind's name, as every face reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownTask => "unknown_task",
            ErrorKind::AmbiguousId => "ambiguous_id",
            ErrorKind::Refused => "refused",
            ErrorKind::IdempotencyConflict => "idempotency_conflict",
            ErrorKind::StaleRevision => "stale_revision",
            ErrorKind::LeaseLost => "lease_lost",
            ErrorKind::RevisionExhausted => "revision_exhausted",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::ReservedKey => "reserved_key",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::InvalidSchema => "invalid_schema",
            ErrorKind::InvalidKind => "invalid_kind",
            ErrorKind::Corrupt => "corrupt_store",
            ErrorKind::Io => "io",
            ErrorKind::CopyRefused => "copy_refused",
            ErrorKind::NotAStore => "not_a_store",
            ErrorKind::Database => "database",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::LockTimeout => "lock_timeout",
        }
    }

    /// What a caller can do about an error of this kind.
    pub fn class(self) -> ErrorClass {
        match self {
            ErrorKind::UnknownTask | ErrorKind::AmbiguousId => ErrorClass::Unknown,
            ErrorKind::Refused
            | ErrorKind::IdempotencyConflict
            | ErrorKind::StaleRevision
            | ErrorKind::LeaseLost
            | ErrorKind::RevisionExhausted
            | ErrorKind::CopyRefused => ErrorClass::Refused,
            ErrorKind::TooDeep
            | ErrorKind::ReservedKey
            | ErrorKind::InvalidSchema
            | ErrorKind::InvalidKind => ErrorClass::Usage,
            ErrorKind::InvalidInput => ErrorClass::InvalidInput,
            ErrorKind::TooLarge | ErrorKind::Corrupt | ErrorKind::NotAStore => ErrorClass::Store,
            // An I/O or database failure mid-operation may pass (a full
            // disk freed, a deadlock): a worker retries it, a person is told.
            ErrorKind::Io
            | ErrorKind::Database
            | ErrorKind::Unreachable
            | ErrorKind::LockTimeout => ErrorClass::Retry,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    /// Every kind has a name of its own (faces report kinds by name), and
    /// only what may pass by itself is worth a retry.
    #[test]
    fn kinds_have_distinct_names_and_classes() {
        let all = ErrorKind::ALL;
        let names: std::collections::BTreeSet<_> = all.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), all.len());
        let retry: Vec<_> = all
            .iter()
            .filter(|k| k.class() == ErrorClass::Retry)
            .map(|k| k.as_str())
            .collect();
        assert_eq!(retry, ["io", "database", "unreachable", "lock_timeout"]);
        let unreachable = StoreError::Unreachable {
            location: Location::remote("postgres://h/db"),
            action: "connect",
            message: "connection refused".into(),
        };
        assert!(unreachable.is_unreachable());
        // A database error is never taken for one by its words.
        let database = StoreError::Database {
            location: Location::remote("postgres://h/db"),
            action: "connect",
            message: "connection closed".into(),
        };
        assert!(!database.is_unreachable());
    }
}
