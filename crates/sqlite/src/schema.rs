//! The database schema and its migrations.
//!
//! A rudder database is recognized by its `PRAGMA application_id`; its
//! schema version is `PRAGMA user_version`. Migration `i` of [`MIGRATIONS`]
//! takes a database from version `i` to `i + 1`; a fresh database (no
//! tables, no application id: a new or empty file) starts at version 0.
//! A database of a newer version, or one that is not rudder's, is refused
//! before anything is written to it.

use rusqlite::{Connection, ToSql};

use rudder_core::query::time_text;
use rudder_model::task::Task;

/// `application_id` of a rudder store: "Rudr" in ASCII.
pub const APPLICATION_ID: i32 = 0x5275_6472;

/// The schema, one migration per version.
///
/// - `tasks`: one row per task: the whole task as JSON text (`doc`, so that
///   fields this version does not know round-trip), and the columns the
///   queries need, with their indexes. `seq` is the store order. Times are
///   RFC 3339 UTC with nine fraction digits, so that text order is time
///   order (for years 0000–9999; the policy refines every answer in Rust,
///   so odder dates are only slower, never wrong). The idempotency key's
///   index is not unique: `create` keeps keys unique under the write lock,
///   but a JSON file written by hand or by the seed's store may repeat one,
///   and copying it must not fail; the first task in store order wins, as
///   in the file.
/// - `counts`: tasks per status, kept in the same transaction as each write
///   (the TUI's header reads it at every change; a `COUNT` over a million
///   rows would not be cheap).
/// - `changes`: one row per change of a task, in commit order, written in
///   the same transaction: the change feed reads it after a cursor.
///   Version 2 adds `at`, the task's `updated_at` as written (none for a
///   removal), so that a transition carries the writer's time.
/// - Version 2 also adds `tasks.status_message`, for the text filter of a
///   page (`LIKE` on the columns a person reads, without parsing `doc`).
/// - Version 3 indexes the working tasks by lease, so that the TUI's count
///   of stalled tasks (`lease_expires_at <= now`, asked once a second) is
///   a range of that index, not a walk over every working task.
/// - Version 4 adds `tasks.kind` ([`KIND_VERSION`]), filled from the
///   documents, indexed by (status, kind, seq): a worker claiming tasks of
///   one kind reads the working tasks of that kind in store order, never
///   those of other kinds; `list --kind` reads the same index.
/// - Version 6 adds `trail`, the store's trail (`rudder log`): one row per
///   history entry of every task (its place, time, actor and status, and
///   the entry as JSON), indexed by time and by actor. Triggers keep it
///   from the documents, so every way a task is written (a policy write,
///   a copy's batch) keeps it alike: an insert adds the task's entries, a
///   removal drops them, and an update that may have added entries (a
///   change of status, or a revision that moved by more than one, as a
///   copy's replacement does) writes them again. A write that changes no
///   status (a heartbeat, a claim) adds no entry and skips the trigger.
///   The migration fills it from the tasks already there. A document that
///   is not JSON (a hand edit) gives no rows: the task is reported corrupt
///   where it is read, and the trail never refuses the write.
/// - Version 5 adds `deliveries`, the record of what each `rudder notify`
///   delivered (docs/notify.md): one row per notifier name and event
///   (task, event, round), with the claim's holder and lease. Beside the
///   tasks, not in them: a delivery moves no task's revision.
pub const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE tasks (
    seq INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    idempotency_key TEXT,
    title TEXT,
    created_at TEXT,
    updated_at TEXT,
    claimed_by TEXT,
    lease_expires_at TEXT,
    ttl_ms INTEGER,
    revision INTEGER NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX tasks_by_key ON tasks(idempotency_key, seq) WHERE idempotency_key IS NOT NULL;
CREATE INDEX tasks_by_status ON tasks(status, seq);
CREATE INDEX tasks_by_status_updated ON tasks(status, updated_at, task_id);
CREATE INDEX tasks_by_updated ON tasks(updated_at, task_id);
CREATE INDEX tasks_by_created ON tasks(created_at, task_id);
CREATE INDEX tasks_by_title ON tasks(title, task_id);
CREATE TABLE counts (
    status TEXT PRIMARY KEY,
    n INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    status_before TEXT,
    status_after TEXT
);
"#,
    r#"
ALTER TABLE changes ADD COLUMN at TEXT;
ALTER TABLE tasks ADD COLUMN status_message TEXT;
UPDATE tasks SET status_message = json_extract(doc, '$.status_message')
    WHERE json_type(doc, '$.status_message') = 'text';
"#,
    r#"
CREATE INDEX tasks_by_status_lease ON tasks(status, lease_expires_at);
"#,
    r#"
ALTER TABLE tasks ADD COLUMN kind TEXT;
UPDATE tasks SET kind = json_extract(doc, '$.kind') WHERE json_type(doc, '$.kind') = 'text';
CREATE INDEX tasks_by_status_kind ON tasks(status, kind, seq);
"#,
    r#"
CREATE TABLE IF NOT EXISTS deliveries (
    notifier TEXT NOT NULL,
    task_id TEXT NOT NULL,
    event TEXT NOT NULL,
    round INTEGER NOT NULL,
    holder TEXT,
    lease_expires_at TEXT,
    delivered_at TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (notifier, task_id, event, round)
) WITHOUT ROWID;
"#,
    r#"
CREATE TABLE trail (
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    at TEXT NOT NULL,
    actor TEXT,
    status TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (task_id, idx)
) WITHOUT ROWID;
CREATE INDEX trail_by_at ON trail(at, task_id, idx);
CREATE INDEX trail_by_actor ON trail(actor, at, task_id, idx);
CREATE TRIGGER trail_of_new AFTER INSERT ON tasks WHEN json_valid(new.doc) BEGIN
    INSERT INTO trail (task_id, idx, at, actor, status, entry)
        SELECT new.task_id, h.key, COALESCE(json_extract(h.value, '$.at'), ''),
               json_extract(h.value, '$.actor'), COALESCE(json_extract(h.value, '$.status'), ''),
               h.value
        FROM json_each(new.doc, '$.history') h;
END;
CREATE TRIGGER trail_of_changed AFTER UPDATE OF doc ON tasks
    WHEN json_valid(new.doc) AND NOT (new.revision = old.revision + 1 AND new.status = old.status) BEGIN
    DELETE FROM trail WHERE task_id = old.task_id;
    INSERT INTO trail (task_id, idx, at, actor, status, entry)
        SELECT new.task_id, h.key, COALESCE(json_extract(h.value, '$.at'), ''),
               json_extract(h.value, '$.actor'), COALESCE(json_extract(h.value, '$.status'), ''),
               h.value
        FROM json_each(new.doc, '$.history') h;
END;
CREATE TRIGGER trail_of_removed AFTER DELETE ON tasks BEGIN
    DELETE FROM trail WHERE task_id = old.task_id;
END;
INSERT INTO trail (task_id, idx, at, actor, status, entry)
    SELECT t.task_id, h.key, COALESCE(json_extract(h.value, '$.at'), ''),
           json_extract(h.value, '$.actor'), COALESCE(json_extract(h.value, '$.status'), ''),
           h.value
    FROM (SELECT task_id, doc FROM tasks WHERE json_valid(doc)) t, json_each(t.doc, '$.history') h;
"#,
];

/// The version that gave the store its trail: a reader of an older store
/// (no writer has migrated it yet) reads the trail from the tasks.
pub const TRAIL_VERSION: i64 = 6;

/// The version that gave tasks their `kind` column: a reader of an older
/// store (no writer has migrated it yet) finds no kinds in the columns.
pub const KIND_VERSION: i64 = 4;

/// The schema version this rudder writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// The columns of a task's row that every write sets, in the order of
/// [`TaskRow::params`] (`?1` is the id).
const TASK_COLUMNS: [&str; 13] = [
    "task_id",
    "status",
    "idempotency_key",
    "title",
    "created_at",
    "updated_at",
    "claimed_by",
    "lease_expires_at",
    "ttl_ms",
    "revision",
    "doc",
    "status_message",
    "kind",
];

/// `INSERT INTO tasks (COLUMNS) VALUES (?1, …, ?13)`, then `tail`.
pub(super) fn insert_task_sql(tail: &str) -> String {
    let values: Vec<String> = (1..=TASK_COLUMNS.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO tasks ({}) VALUES ({}){tail}",
        TASK_COLUMNS.join(", "),
        values.join(", ")
    )
}

/// `UPDATE tasks SET` every column but the id `WHERE task_id = ?1`, then
/// `tail` (whose parameters start at `?14`).
pub(super) fn update_task_sql(tail: &str) -> String {
    let set: Vec<String> = TASK_COLUMNS
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, c)| format!("{c} = ?{}", i + 1))
        .collect();
    format!(
        "UPDATE tasks SET {} WHERE task_id = ?1{tail}",
        set.join(", ")
    )
}

/// A task's row as every write binds it (`TASK_COLUMNS`): `id` is the
/// task's id, `doc` its JSON text.
pub(super) struct TaskRow<'a> {
    id: &'a str,
    task: &'a Task,
    doc: &'a str,
    status: &'static str,
    created_at: Option<String>,
    updated_at: Option<String>,
    lease_expires_at: Option<String>,
    ttl_ms: Option<i64>,
    revision: i64,
}

/// A `u64` as SQLite's signed integer, saturated.
pub(super) fn clamp(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl<'a> TaskRow<'a> {
    pub(super) fn new(id: &'a str, task: &'a Task, doc: &'a str) -> Self {
        TaskRow {
            id,
            task,
            doc,
            status: task.status.as_str(),
            created_at: task.created_at.map(time_text),
            updated_at: task.updated_at.map(time_text),
            lease_expires_at: task.lease_expires_at.map(time_text),
            ttl_ms: task.ttl_ms.map(clamp),
            revision: clamp(task.revision),
        }
    }

    /// `?1` to `?13`, in `TASK_COLUMNS` order.
    pub(super) fn params(&self) -> [&dyn ToSql; 13] {
        [
            &self.id,
            &self.status,
            &self.task.idempotency_key,
            &self.task.title,
            &self.created_at,
            &self.updated_at,
            &self.task.claimed_by,
            &self.lease_expires_at,
            &self.ttl_ms,
            &self.revision,
            &self.doc,
            &self.task.status_message,
            &self.task.kind,
        ]
    }
}

/// What a database holds, as far as rudder is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No tables and no application id: a new database (version 0).
    Fresh,
    /// A rudder store at this version (≤ [`VERSION`]).
    Rudder(i64),
}

/// Why a database is not one this rudder may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A SQLite database of another application.
    Foreign(String),
    /// A rudder store of a newer schema version.
    Newer(i64),
}

/// Look at the database without writing to it.
pub fn inspect(conn: &Connection) -> rusqlite::Result<Result<State, Refusal>> {
    // One statement, so one snapshot: read one by one, the three could
    // straddle another process's first commit (its tables without its id).
    // Cached: every write transaction asks first (see `migrate_in`).
    let (app, version, objects): (i32, i64, i64) = conn
        .prepare_cached(
            "SELECT (SELECT application_id FROM pragma_application_id), \
                    (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_master)",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    if app == APPLICATION_ID {
        return Ok(if version > VERSION {
            Err(Refusal::Newer(version))
        } else {
            Ok(State::Rudder(version))
        });
    }
    Ok(if app == 0 && objects == 0 && version == 0 {
        Ok(State::Fresh)
    } else if app == 0 {
        Err(Refusal::Foreign(format!(
            "a SQLite database with {objects} tables or indexes of its own, not a rudder store"
        )))
    } else {
        Err(Refusal::Foreign(format!(
            "a SQLite database of another application (application_id {app:#x}), not a rudder store"
        )))
    })
}

/// Bring the database to [`VERSION`] inside the caller's write transaction.
pub fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<()> {
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        conn.execute_batch(sql)?;
        conn.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    conn.pragma_update(None, "application_id", APPLICATION_ID)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteBackend;
    use rudder_core::{NewTask, Store};

    /// A store of schema 3 (no `tasks.kind`) whose documents name kinds:
    /// a reader's kind filter answers from the documents; the first write
    /// migrates it to [`KIND_VERSION`], the column filled from them.
    #[test]
    fn a_version_3_store_is_read_then_migrated_with_its_kinds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.db");
        {
            let conn = Connection::open(&path).expect("open");
            for sql in &MIGRATIONS[..3] {
                conn.execute_batch(sql).expect("versions 1 to 3");
            }
            conn.pragma_update(None, "user_version", 3)
                .expect("version");
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .expect("id");
            for (id, kind) in [("t-diagnose", Some("diagnose")), ("t-none", None)] {
                let mut task = Task::new(id, rudder_model::task::Status::Working);
                task.kind = kind.map(str::to_string);
                task.revision = 1;
                let doc = serde_json::to_string(&task).expect("json");
                conn.execute(
                    "INSERT INTO tasks (task_id, status, revision, doc) \
                     VALUES (?1, 'working', 1, ?2)",
                    [id, doc.as_str()],
                )
                .expect("a task");
            }
            conn.execute("INSERT INTO counts (status, n) VALUES ('working', 2)", [])
                .expect("counts");
        }
        let store = Store::with_backend(SqliteBackend::new(&path));
        let diagnose = rudder_core::PageQuery {
            kinds: vec!["diagnose".into()],
            ..Default::default()
        };
        let ids = |store: &Store<SqliteBackend>| -> Vec<String> {
            let page = store.page(&diagnose).expect("page");
            page.into_iter().map(|t| t.task_id).collect()
        };
        assert_eq!(ids(&store), ["t-diagnose"]);

        store.create(NewTask::default()).expect("create");
        let conn = Connection::open(&path).expect("open");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, VERSION);
        let kind: Option<String> = conn
            .query_row(
                "SELECT kind FROM tasks WHERE task_id = 't-diagnose'",
                [],
                |r| r.get(0),
            )
            .expect("kind");
        assert_eq!(kind.as_deref(), Some("diagnose"));
        assert_eq!(ids(&store), ["t-diagnose"]);
        let claimed = store
            .claim_next(
                "w",
                std::time::Duration::from_secs(60),
                &["diagnose".into()],
            )
            .expect("claim");
        assert_eq!(claimed.map(|t| t.task_id).as_deref(), Some("t-diagnose"));
    }

    /// A store written by the first schema (no `changes.at`) is read as it
    /// is, then migrated by the next write, which records its time.
    #[test]
    fn a_version_1_store_is_read_then_migrated_by_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(MIGRATIONS[0]).expect("version 1");
            conn.pragma_update(None, "user_version", 1)
                .expect("version");
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .expect("id");
            conn.execute(
                "INSERT INTO changes (task_id, revision, status_before, status_after) \
                 VALUES ('old', 1, NULL, 'working')",
                [],
            )
            .expect("a change");
        }
        let backend = SqliteBackend::new(&path);
        let (_, log) = backend
            .changes_after(0, None, 10)
            .expect("read")
            .expect("a store");
        assert_eq!(log.changes.len(), 1);
        assert_eq!(log.changes[0].at, None);

        let task = Store::with_backend(SqliteBackend::new(&path))
            .create(NewTask::default())
            .expect("create")
            .task;
        let conn = Connection::open(&path).expect("open");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, VERSION);
        let (_, log) = backend
            .changes_after(1, None, 10)
            .expect("read")
            .expect("a store");
        assert_eq!(log.changes.len(), 1);
        assert_eq!(log.changes[0].task_id, task.task_id);
        assert_eq!(log.changes[0].at, task.updated_at);
    }
}
