//! The CLI's contract with scripts: every kind of error it reports, the
//! exit code of each, and the JSON object it prints for one (docs/cli.md "Exit
//! codes"). The library's errors are typed and know nothing of
//! exit codes; this is the one place that maps them.

use serde_json::{Value, json};

use super::CliError;
use crate::demo::seed::FreshError;
use crate::store::StoreError;

/// Declares [`ErrorKind`] from one list, so that [`ErrorKind::ALL`] can
/// never miss a kind that the mapping functions below can return.
macro_rules! error_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal => $code:expr, )*) => {
        /// A kind of error, as `--json` names it in `"error"`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorKind {
            /// Every kind the CLI can report.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$variant,)*];

            /// The name `--json` prints in `"error"`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $name,)*
                }
            }

            /// The process exit code of an error of this kind.
            pub fn exit_code(self) -> i32 {
                match self {
                    $(ErrorKind::$variant => $code,)*
                }
            }
        }
    };
}

/// Exit code for a usage error (bad flag, bad JSON argument, bad duration).
pub const EXIT_USAGE: i32 = 2;
/// Exit code for an unknown or ambiguous task.
pub const EXIT_UNKNOWN: i32 = 3;
/// Exit code for a refused operation.
pub const EXIT_REFUSED: i32 = 4;
/// Exit code for input that does not match the task's schema.
pub const EXIT_INVALID_INPUT: i32 = 5;
/// Exit code when the store is unreadable or corrupt, an I/O error (also
/// writing the output), or the lock could not be had.
pub const EXIT_STORE: i32 = 6;
/// Exit code of `wait` when the task failed.
pub const EXIT_FAILED: i32 = 7;
/// Exit code of `wait` when the task was cancelled.
pub const EXIT_CANCELLED: i32 = 8;
/// Exit code of `wait` when the task waits for input.
pub const EXIT_INPUT_REQUIRED: i32 = 9;
/// Exit code of `claim` when no task was claimable within `--wait`.
pub const EXIT_NOTHING_TO_CLAIM: i32 = 10;
/// Exit code when `wait` timed out.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of an internal failure that has no kind of its own.
pub const EXIT_INTERNAL: i32 = 1;

error_kinds! {
    /// A bad flag, argument, JSON argument, duration or environment variable.
    Usage = "usage" => EXIT_USAGE,
    /// The given JSON Schema is not valid.
    InvalidSchema = "invalid_schema" => EXIT_USAGE,
    /// A task's kind is empty, too long, or holds whitespace or control characters.
    InvalidKind = "invalid_kind" => EXIT_USAGE,
    /// A value nests deeper than a store may hold.
    TooDeep = "too_deep" => EXIT_USAGE,
    /// A value holds an object led by serde_json's private number key.
    ReservedKey = "reserved_key" => EXIT_USAGE,
    /// No task has this id.
    UnknownTask = "unknown_task" => EXIT_UNKNOWN,
    /// The id prefix starts several task ids.
    AmbiguousId = "ambiguous_id" => EXIT_UNKNOWN,
    /// `wait`: the task disappeared while last seen unfinished.
    Vanished = "vanished" => EXIT_UNKNOWN,
    /// The state machine or a terminal task refuses the operation.
    Refused = "refused" => EXIT_REFUSED,
    /// The idempotency key belongs to a task created differently.
    IdempotencyConflict = "idempotency_conflict" => EXIT_REFUSED,
    /// The task changed since the revision given.
    StaleRevision = "stale_revision" => EXIT_REFUSED,
    /// Another worker holds the task's lease.
    LeaseLost = "lease_lost" => EXIT_REFUSED,
    /// The task's revision can grow no further.
    RevisionExhausted = "revision_exhausted" => EXIT_REFUSED,
    /// `copy`: TO holds other data.
    CopyRefused = "copy_refused" => EXIT_REFUSED,
    /// `--read-only`: the command would write.
    ReadOnly = "read_only" => EXIT_REFUSED,
    /// `get --reveal` by someone who may not write the store.
    RevealRefused = "reveal_refused" => EXIT_REFUSED,
    /// The input does not validate against the task's schema.
    InvalidInput = "invalid_input" => EXIT_INVALID_INPUT,
    /// The store file does not parse or is not a store.
    CorruptStore = "corrupt_store" => EXIT_STORE,
    /// A readable store that rudder may not use.
    NotAStore = "not_a_store" => EXIT_STORE,
    /// The database reported an error.
    Database = "database" => EXIT_STORE,
    /// The write would grow the store past its limit.
    TooLarge = "too_large" => EXIT_STORE,
    /// A file-system call failed.
    Io = "io" => EXIT_STORE,
    /// The store lock could not be had in time.
    LockTimeout = "lock_timeout" => EXIT_STORE,
    /// The answer could not be written.
    Output = "output" => EXIT_STORE,
    /// `claim`: no task was claimable within `--wait`.
    NothingToClaim = "nothing_to_claim" => EXIT_NOTHING_TO_CLAIM,
    /// `wait` timed out.
    Timeout = "timeout" => EXIT_TIMEOUT,
    /// Anything else: an internal failure.
    Internal = "error" => EXIT_INTERNAL,
}

impl ErrorKind {
    /// The kind of a store error.
    pub fn of_store(e: &StoreError) -> ErrorKind {
        ErrorKind::of_store_kind(e.kind())
    }

    /// The CLI's kind of a store error's kind (the library's
    /// classification, [`crate::store::ErrorKind`]).
    pub fn of_store_kind(kind: crate::store::ErrorKind) -> ErrorKind {
        use crate::store::ErrorKind as Kind;
        match kind {
            Kind::UnknownTask => ErrorKind::UnknownTask,
            Kind::AmbiguousId => ErrorKind::AmbiguousId,
            Kind::Refused => ErrorKind::Refused,
            Kind::IdempotencyConflict => ErrorKind::IdempotencyConflict,
            Kind::StaleRevision => ErrorKind::StaleRevision,
            Kind::LeaseLost => ErrorKind::LeaseLost,
            Kind::RevisionExhausted => ErrorKind::RevisionExhausted,
            Kind::TooDeep => ErrorKind::TooDeep,
            Kind::ReservedKey => ErrorKind::ReservedKey,
            Kind::TooLarge => ErrorKind::TooLarge,
            Kind::InvalidInput => ErrorKind::InvalidInput,
            Kind::InvalidSchema => ErrorKind::InvalidSchema,
            Kind::InvalidKind => ErrorKind::InvalidKind,
            Kind::Corrupt => ErrorKind::CorruptStore,
            Kind::Io => ErrorKind::Io,
            Kind::LockTimeout => ErrorKind::LockTimeout,
            Kind::NotAStore => ErrorKind::NotAStore,
            Kind::CopyRefused => ErrorKind::CopyRefused,
            // A server out of reach is reported as the database error it
            // always was ("database", exit 6): scripts match on the name.
            Kind::Database | Kind::Unreachable => ErrorKind::Database,
        }
    }

    /// The kind of a command's error.
    pub fn of_cli(e: &CliError) -> ErrorKind {
        match e {
            CliError::Usage { .. } => ErrorKind::Usage,
            CliError::Store(e) => ErrorKind::of_store(e),
            CliError::NoStore { .. } => ErrorKind::UnknownTask,
            CliError::Timeout(..) => ErrorKind::Timeout,
            CliError::NothingToClaim { .. } => ErrorKind::NothingToClaim,
            CliError::Vanished { .. } => ErrorKind::Vanished,
            CliError::ReadOnly { .. } => ErrorKind::ReadOnly,
            CliError::RevealRefused { .. } => ErrorKind::RevealRefused,
            CliError::Output { .. } => ErrorKind::Output,
            CliError::Other(_) => ErrorKind::Internal,
        }
    }

    /// The kind of the demo's refusal to seed a store.
    pub fn of_fresh(e: &FreshError) -> ErrorKind {
        match e {
            // The remedy is another `--store`: a usage error.
            FreshError::NotADemoStore { .. } => ErrorKind::Usage,
            FreshError::Store(e) => ErrorKind::of_store(e),
        }
    }
}

/// The exit code of `wait` for a task that ended up `status` (docs/architecture.md
/// "Exit codes"): 0 completed, 7 failed, 8 cancelled, 9 waiting for input
/// (and 0 for `working`, which `wait` never returns).
pub fn wait_exit_code(status: crate::task::Status) -> i32 {
    use crate::task::Status;
    match status {
        Status::Completed | Status::Working => 0,
        Status::Failed => EXIT_FAILED,
        Status::Cancelled => EXIT_CANCELLED,
        Status::InputRequired => EXIT_INPUT_REQUIRED,
    }
}

/// `{"error", "message", "exit_code"}` of `kind`.
fn base(kind: ErrorKind, message: String) -> Value {
    json!({
        "error": kind.as_str(),
        "message": message,
        "exit_code": kind.exit_code(),
    })
}

/// A store error as one JSON object: the base fields, the task's current
/// snapshot for refusals, and what each kind carries.
pub fn store_error_json(e: &StoreError) -> Value {
    let mut v = base(ErrorKind::of_store(e), e.to_string());
    if let Some(task) = e.task() {
        // Shown to whoever ran the command: secret answers masked.
        v["task"] = serde_json::to_value(crate::schema::masked_task(task)).unwrap_or(Value::Null);
    }
    // Every error about the store itself names it the same way, whatever
    // the backend: `store` as messages show it, and `path`, the store's
    // file, when it is one (what `corrupt_store` and `too_large` always
    // carried for the JSON file).
    if let Some(location) = e.location() {
        v["store"] = json!(location.as_str());
        if let Some(path) = location.path() {
            // A path that is not UTF-8 would make `json!` panic.
            v["path"] = json!(path.to_string_lossy());
        }
    }
    match e {
        StoreError::InvalidInput { violations, .. } => {
            v["violations"] = serde_json::to_value(violations).unwrap_or(Value::Null);
        }
        StoreError::AmbiguousId { candidates, .. } => {
            v["candidates"] = json!(candidates);
        }
        StoreError::Corrupt { line, column, .. } => {
            v["line"] = json!(line);
            v["column"] = json!(column);
        }
        StoreError::InvalidKind { kind, .. } => {
            v["field"] = json!("kind");
            v["kind"] = json!(kind);
        }
        StoreError::TooDeep { field, limit } => {
            v["field"] = json!(field);
            v["limit"] = json!(limit);
        }
        StoreError::ReservedKey { field, pointer } => {
            v["field"] = json!(field);
            v["pointer"] = json!(pointer);
        }
        StoreError::TooLarge { size, limit, .. } => {
            v["size"] = json!(size);
            v["limit"] = json!(limit);
        }
        _ => {}
    }
    v
}

/// A command's error as one JSON object.
pub fn cli_error_json(e: &CliError) -> Value {
    match e {
        CliError::Store(e) => store_error_json(e),
        CliError::Vanished { last, path, .. } => {
            let mut v = base(ErrorKind::Vanished, e.to_string());
            v["path"] = json!(path);
            v["task"] =
                serde_json::to_value(crate::schema::masked_task(last)).unwrap_or(Value::Null);
            v
        }
        CliError::Usage {
            culprit: Some(culprit),
            ..
        } => {
            let mut v = base(ErrorKind::Usage, e.to_string());
            match culprit {
                super::Culprit::Argument(a) => v["argument"] = json!(a),
                super::Culprit::Variable(name) => v["variable"] = json!(name),
            }
            v
        }
        CliError::ReadOnly { command } => {
            let mut v = base(ErrorKind::ReadOnly, e.to_string());
            v["command"] = json!(command);
            v
        }
        other => base(ErrorKind::of_cli(other), other.to_string()),
    }
}

/// The exit code of an interactive command's error (the TUI, the demo, the
/// worker): the kind's for the errors the CLI knows (the store's, a store
/// the demo refuses, a Python worker that cannot start, output that cannot
/// be written), 1 for anything else.
pub fn interactive_exit_code(e: &anyhow::Error) -> i32 {
    e.chain()
        .find_map(|c| {
            if let Some(e) = c.downcast_ref::<StoreError>() {
                Some(ErrorKind::of_store(e))
            } else if let Some(e) = c.downcast_ref::<FreshError>() {
                Some(ErrorKind::of_fresh(e))
            } else if let Some(e) = c.downcast_ref::<rudder_mcp::http::BindError>() {
                // `rudder demo --mcp`: an address or a token that cannot be
                // used is a usage error, as for `rudder mcp --http`.
                e.usage.then_some(ErrorKind::Usage)
            } else if c.downcast_ref::<crate::store::UrlError>().is_some() {
                // A store URL this build cannot open (`Store::connect`).
                Some(ErrorKind::Usage)
            } else if c
                .downcast_ref::<crate::tui::terminal::NeedsTerminal>()
                .is_some()
                || c.downcast_ref::<crate::demo::supervisor::PythonWorkerError>()
                    .is_some()
            {
                Some(ErrorKind::Usage)
            } else {
                c.downcast_ref::<super::OutputError>()
                    .map(|_| ErrorKind::Output)
            }
        })
        .unwrap_or(ErrorKind::Internal)
        .exit_code()
}

/// A command-line error clap found, as one JSON object: the message (every
/// line of it that says what is wrong, without clap's usage hint), and the
/// argument it is about; for missing arguments, `missing` lists each.
pub fn clap_error_json(e: &clap::Error) -> Value {
    use clap::error::{ContextKind, ContextValue, ErrorKind as ClapKind};
    let rendered = e.render().to_string();
    // clap says what is wrong first, then, after a blank line, how to use
    // the command: keep the first part, on one line.
    let message = rendered
        .split("\n\n")
        .next()
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let message = message.trim_start_matches("error: ").to_string();
    let mut v = base(
        ErrorKind::Usage,
        if message.is_empty() {
            "invalid arguments".to_string()
        } else {
            message
        },
    );
    match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => v["argument"] = json!(arg),
        Some(ContextValue::Strings(args)) => {
            if let Some(first) = args.first() {
                v["argument"] = json!(first);
            }
            if e.kind() == ClapKind::MissingRequiredArgument {
                v["missing"] = json!(args);
            }
        }
        _ => {}
    }
    if let Some(ContextValue::String(value)) = e.get(ContextKind::InvalidValue) {
        v["value"] = json!(value);
    }
    if let Some(ContextValue::String(sub)) = e.get(ContextKind::InvalidSubcommand) {
        v["argument"] = json!(sub);
    }
    v
}

/// A bad environment variable, as one JSON object naming it.
pub fn environment_error_json(variable: &str, message: &str) -> Value {
    cli_error_json(&CliError::environment(
        variable,
        format!("{variable}: {message}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_name() {
        let mut names: Vec<_> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "two kinds share a name");
    }

    #[test]
    fn store_errors_keep_their_exit_codes() {
        let unknown = StoreError::UnknownTask { id: "x".into() };
        assert_eq!(ErrorKind::of_store(&unknown).exit_code(), 3);
        let schema = StoreError::InvalidSchema("bad".into());
        assert_eq!(ErrorKind::of_store(&schema).exit_code(), 2);
        let json = store_error_json(&unknown);
        assert_eq!(json["error"], "unknown_task");
        assert_eq!(json["exit_code"], 3);
    }

    /// A store error's exit code is its class's, one code per class (two
    /// classes share 6), and its name the library's but where the CLI keeps
    /// `database` for a server out of reach: so a test of the library that
    /// asserts a kind or a class asserts what a script sees of it
    /// (crates/store/tests/store_table.rs, store_model.rs,
    /// crates/file/tests/crash_sim.rs).
    #[test]
    fn a_store_error_exits_with_its_class_code_under_its_own_name() {
        use crate::store::{ErrorClass, ErrorKind as Kind};
        for &kind in Kind::ALL {
            let code = match kind.class() {
                ErrorClass::Usage => EXIT_USAGE,
                ErrorClass::Unknown => EXIT_UNKNOWN,
                ErrorClass::Refused => EXIT_REFUSED,
                ErrorClass::InvalidInput => EXIT_INVALID_INPUT,
                ErrorClass::Store | ErrorClass::Retry => EXIT_STORE,
            };
            let cli = ErrorKind::of_store_kind(kind);
            assert_eq!(cli.exit_code(), code, "{kind}");
            let name = if kind == Kind::Unreachable {
                "database"
            } else {
                kind.as_str()
            };
            assert_eq!(cli.as_str(), name, "{kind}");
        }
    }
}
