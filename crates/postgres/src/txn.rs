//! [`Transaction`] over an open PostgreSQL transaction.
//!
//! As for SQLite, reads go to the database and changes are kept in a
//! [`Pending`](crate::pending::Pending) (the policy changes a task
//! in place through `get_mut`), written out before the next query and at
//! commit. Every update and delete is conditional on
//! the revision (and claim) it read: a row that moved in between makes the
//! write fail whole, and the operation is run again on fresh data.
//!
//! Commit order. The feed reads `rudder_changes` after a cursor (`seq`).
//! Identity values are handed out when a row is inserted, not when its
//! transaction commits, so with concurrent writers a plain `seq > cursor`
//! could skip a change: T1 takes seq 10, T2 takes 11 and commits, a reader
//! moves its cursor to 11, T1 commits 10 behind it. Two answers exist:
//! bound the reader by the oldest running transaction (`pg_snapshot_xmin`,
//! which needs the reader to track transaction ids and hold back every
//! change behind a slow writer), or make the inserts happen in commit
//! order. This backend does the second: the changes of a transaction are
//! inserted at its very end, under a transaction-level advisory lock held
//! until its commit, so a later seq is always a later commit and the
//! cursor is simply the last seq seen. The lock covers only the few
//! statements after the real work (recording the changes, the counts, the
//! `NOTIFY`, the commit), so writers of different tasks still run side by
//! side and queue only for that last moment; the counts, updated under
//! the same lock, never deadlock.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Row, Statement};

use super::schema::{CHANGES_LOCK, CHANNEL};
use super::{PostgresBackend, Retry, transient};
use rudder_core::query::{self, PageQuery, Stale, StatusCounts, SummaryBuf, parse_time, time_text};
use rudder_core::trail::{self, TrailEntry, TrailQuery};
use rudder_core::{ChangeLog, Location, RecordedChange, StoreError, Summary, Transaction};
use rudder_model::task::{ParseStatusError, Status, Task, TaskMap};
use rudder_sql::builder::{self as sql, Anchor, Dialect, PageHints, Placeholder, Sql, Value};
use rudder_sql::pending::{self, Database, Pending};
use rudder_sql::{SUMMARY_COLUMNS, SUMMARY_COLUMNS_BEFORE_KINDS, SummaryRow};

/// The statements of a connection, by their text: prepared (`Some`), or
/// run once unprepared (`None`: prepared at their second use). A
/// short-lived process (`rudder heartbeat`) runs each statement once, in
/// one round trip (Parse, Bind and Execute sent together), where preparing
/// it first would take a round trip more; a long-lived one has it
/// prepared from its second use on.
pub(crate) type Statements = HashMap<String, Option<Statement>>;

/// Whether `text` holds a NUL character: as an id or key, one that no row
/// can have (see [`Columns`]), so a lookup of it finds nothing without
/// asking the server, which would refuse the parameter.
fn holds_nul(text: &str) -> bool {
    text.contains('\0')
}

/// The text columns of a task's row that are not the document itself.
/// PostgreSQL's `text` cannot hold a NUL character, which a Rust string
/// (and the document, escaped) can: in the free-text columns, which only
/// the text filter and the title order read, it is shown as U+FFFD; an
/// identifier holding one (matched exactly, so no stand-in will do) is
/// refused with what and why.
pub(crate) struct Columns<'t> {
    pub title: Option<std::borrow::Cow<'t, str>>,
    pub status_message: Option<std::borrow::Cow<'t, str>>,
}

impl<'t> Columns<'t> {
    pub fn of(txn: &PgTxn<'_>, task: &'t Task) -> Result<Self, StoreError> {
        let identifiers = [
            ("task_id", Some(task.task_id.as_str())),
            ("idempotency_key", task.idempotency_key.as_deref()),
            ("claimed_by", task.claimed_by.as_deref()),
            ("kind", task.kind.as_deref()),
        ];
        if let Some((field, _)) = identifiers.iter().find(|(_, v)| v.is_some_and(holds_nul)) {
            return Err(StoreError::Database {
                location: txn.backend.location(),
                action: "write a task",
                message: format!(
                    "the task's {field} holds a NUL character, which PostgreSQL cannot store; nothing was written"
                ),
            });
        }
        let free = |t: &'t Option<String>| {
            t.as_deref().map(|t| match t.contains('\0') {
                true => std::borrow::Cow::Owned(t.replace('\0', "\u{fffd}")),
                false => std::borrow::Cow::Borrowed(t),
            })
        };
        Ok(Columns {
            title: free(&task.title),
            status_message: free(&task.status_message),
        })
    }
}

/// What the database held of a task when this transaction first read it.
#[derive(Debug, Clone)]
pub(crate) struct Before {
    status: Status,
    revision: i64,
    claimed_by: Option<String>,
    doc: String,
}

/// A change to record at commit.
struct ChangeRow {
    task_id: String,
    revision: i64,
    /// The task's `updated_at` (none for a removal).
    at: Option<String>,
    before: Option<Status>,
    after: Option<Status>,
}

pub(crate) struct PgTxn<'c> {
    pub(super) tx: RefCell<postgres::Transaction<'c>>,
    statements: RefCell<&'c mut Statements>,
    pub(super) backend: &'c PostgresBackend,
    /// A write transaction (locks what it changes) or a read.
    write: bool,
    pending: Pending<Before>,
    /// The first driver failure: whether to run the operation again, and
    /// whether the connection broke.
    failure: Cell<Option<(Retry, bool)>>,
    changes: RefCell<Vec<ChangeRow>>,
    /// A task that [`Database::exists`] read and locked in a write, kept
    /// for the read that follows (an operation on one task asks whether it
    /// exists, then reads it to change it): one round trip instead of two.
    /// Locked, it cannot change before this transaction ends; this
    /// transaction changes it only through a read that takes it from here.
    locked: RefCell<Option<(String, Task, Before)>>,
    /// Trim the change log at commit whatever the write (bulk work).
    trim: Cell<bool>,
    deltas: RefCell<BTreeMap<Status, i64>>,
    found_version: Option<i32>,
    /// The version of the tables this transaction works on (a reader may
    /// find an older one that no writer migrated yet).
    schema: i32,
}

fn status_of(text: &str) -> Result<Status, ParseStatusError> {
    // The column is only ever written from a `Status`: anything else is
    // corrupt data (`StoreError::unknown_status`), reported as SQLite
    // reports it, never read as another status.
    text.parse()
}

fn to_i64(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// A row of a summary query (a local type, for the seam's [`SummaryRow`]).
struct PgRow<'a>(&'a Row);

/// The columns are typed by the schema, so reading them cannot fail; the
/// status may be one no rudder wrote.
impl SummaryRow for PgRow<'_> {
    type Error = ParseStatusError;
    fn text(&self, i: usize) -> Result<String, Self::Error> {
        Ok(self.0.get(i))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error> {
        Ok(self.0.get(i))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error> {
        Ok(self.0.get(i))
    }
    fn int(&self, i: usize) -> Result<i64, Self::Error> {
        Ok(self.0.get(i))
    }
    fn status(&self, text: &str) -> Result<Status, Self::Error> {
        status_of(text)
    }
}

/// The statement that adds tasks per status to the counts: the statuses
/// and the numbers are the array parameters `$statuses` and `$by`, read
/// after the tables in `from` (`"l, "`: after the changes lock's row).
fn add_counts(statuses: u8, by: u8, from: &str) -> String {
    format!(
        "INSERT INTO rudder_counts (status, n) \
         SELECT u.* FROM {from}unnest(${statuses}::text[], ${by}::int8[]) AS u \
         ON CONFLICT (status) DO UPDATE SET n = rudder_counts.n + excluded.n"
    )
}

impl<'c> PgTxn<'c> {
    pub fn new(
        tx: postgres::Transaction<'c>,
        statements: &'c mut Statements,
        backend: &'c PostgresBackend,
        write: bool,
    ) -> Self {
        PgTxn {
            tx: RefCell::new(tx),
            statements: RefCell::new(statements),
            backend,
            write,
            pending: Pending::new(),
            failure: Cell::new(None),
            changes: RefCell::new(Vec::new()),
            locked: RefCell::new(None),
            trim: Cell::new(false),
            deltas: RefCell::new(BTreeMap::new()),
            found_version: None,
            schema: super::schema::VERSION,
        }
    }

    /// Whether the tables have the `kind` column.
    fn has_kinds(&self) -> bool {
        self.schema >= super::schema::KIND_VERSION
    }

    /// The summary columns of these tables ([`SUMMARY_COLUMNS`]).
    fn summary_columns(&self) -> &'static str {
        if self.has_kinds() {
            SUMMARY_COLUMNS
        } else {
            SUMMARY_COLUMNS_BEFORE_KINDS
        }
    }

    /// The tables are at version `v` (a reader's, older than this rudder's).
    pub fn set_schema(&mut self, v: i32) {
        self.schema = v;
    }

    pub fn set_found_version(&mut self, v: Option<i32>) {
        self.found_version = v;
    }

    /// The schema version found before this transaction (`None`: none).
    pub fn found_version(&self) -> Option<i32> {
        self.found_version
    }

    /// How the first driver failure of this transaction may be handled.
    pub fn failure(&self) -> Option<(Retry, bool)> {
        self.failure.get()
    }

    pub(super) fn fail(&self, action: &'static str, e: postgres::Error) -> StoreError {
        if self.failure.get().is_none() {
            self.failure.set(Some(transient(&e)));
        }
        self.backend.error(action, &e)
    }

    /// The server's refusal so far is final: not worth running the
    /// transaction again (a broken connection still is).
    pub(super) fn final_failure(&self) {
        if let Some((_, false)) = self.failure.get() {
            self.failure.set(Some((Retry::No, false)));
        }
    }

    /// A write found its row moved: roll back and run the operation again.
    fn conflict(&self, id: &str) -> StoreError {
        if self.failure.get().is_none() {
            self.failure.set(Some((Retry::Safe, false)));
        }
        StoreError::Database {
            location: self.backend.location(),
            action: "write a task",
            message: format!("the task {id} changed while it was being written"),
        }
    }

    fn statement(&self, sql: &str, action: &'static str) -> Result<Statement, StoreError> {
        if let Some(Some(s)) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let s = self
            .tx
            .borrow_mut()
            .prepare(sql)
            .map_err(|e| self.fail(action, e))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), Some(s.clone()));
        Ok(s)
    }

    /// The statement `sql` if this connection has it prepared; else
    /// prepared now (with the parameters' `types`) if it ran once before,
    /// or `None`: run it unprepared this once (see [`Statements`]).
    fn typed_statement(
        &self,
        sql: &str,
        types: impl FnOnce() -> Vec<Type>,
        action: &'static str,
    ) -> Result<Option<Statement>, StoreError> {
        match self.statements.borrow().get(sql) {
            Some(Some(s)) => return Ok(Some(s.clone())),
            None => return Ok(None),
            Some(None) => {}
        }
        let s = self
            .tx
            .borrow_mut()
            .prepare_typed(sql, &types())
            .map_err(|e| self.fail(action, e))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), Some(s.clone()));
        Ok(Some(s))
    }

    /// [`PgTxn::query`] with each parameter's type given: one round trip
    /// the first time this connection runs `sql` (see [`Statements`]).
    pub(super) fn query_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        action: &'static str,
    ) -> Result<Vec<Row>, StoreError> {
        let types = || params.iter().map(|(_, t)| t.clone()).collect();
        let rows = match self.typed_statement(sql, types, action)? {
            Some(s) => {
                let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
                self.tx.borrow_mut().query(&s, &values)
            }
            None => {
                let rows = self.tx.borrow_mut().query_typed(sql, params);
                if rows.is_ok() {
                    self.statements.borrow_mut().insert(sql.to_string(), None);
                }
                rows
            }
        };
        rows.map_err(|e| self.fail(action, e))
    }

    /// [`PgTxn::execute`] with the parameters' types given (see
    /// [`PgTxn::query_typed`]).
    pub(super) fn execute_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        action: &'static str,
    ) -> Result<u64, StoreError> {
        let types = || params.iter().map(|(_, t)| t.clone()).collect();
        let n = match self.typed_statement(sql, types, action)? {
            Some(s) => {
                let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
                self.tx.borrow_mut().execute(&s, &values)
            }
            None => {
                let n = self.tx.borrow_mut().execute_typed(sql, params);
                if n.is_ok() {
                    self.statements.borrow_mut().insert(sql.to_string(), None);
                }
                n
            }
        };
        n.map_err(|e| self.fail(action, e))
    }

    pub(super) fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        action: &'static str,
    ) -> Result<Vec<Row>, StoreError> {
        let s = self.statement(sql, action)?;
        self.tx
            .borrow_mut()
            .query(&s, params)
            .map_err(|e| self.fail(action, e))
    }

    pub(super) fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        action: &'static str,
    ) -> Result<u64, StoreError> {
        let s = self.statement(sql, action)?;
        self.tx
            .borrow_mut()
            .execute(&s, params)
            .map_err(|e| self.fail(action, e))
    }

    /// Run `sql` once, unprepared (DDL, or text made for one use: nothing
    /// is kept in the connection's statement cache).
    pub(super) fn run_once(&self, sql: &str, action: &'static str) -> Result<(), StoreError> {
        self.tx
            .borrow_mut()
            .batch_execute(sql)
            .map_err(|e| self.fail(action, e))
    }

    /// [`rudder_core::Backend::delivery`] inside this write transaction:
    /// whether it wrote.
    pub(super) fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<bool, StoreError> {
        let action = "read the delivery record";
        let rows = self.query(
            "SELECT holder, lease_expires_at, delivered_at, attempts FROM rudder_deliveries \
             WHERE notifier = $1 AND task_id = $2 AND event = $3 AND round = $4 FOR UPDATE",
            &[&name, &key.task_id, &key.event, &key.round],
            action,
        )?;
        let record = match rows.first() {
            None => None,
            Some(r) => Some(rudder_core::delivery::Delivery {
                holder: r.try_get(0).map_err(|e| self.fail(action, e))?,
                lease_expires_at: parse_time(r.try_get(1).map_err(|e| self.fail(action, e))?),
                delivered_at: parse_time(r.try_get(2).map_err(|e| self.fail(action, e))?),
                attempts: r
                    .try_get::<_, i64>(3)
                    .map_err(|e| self.fail(action, e))?
                    .clamp(0, i64::from(u32::MAX)) as u32,
            }),
        };
        let Some(new) = f(record.as_ref()) else {
            return Ok(false);
        };
        let lease = new.lease_expires_at.map(time_text);
        let delivered = new.delivered_at.map(time_text);
        let attempts = i64::from(new.attempts);
        let params: [&(dyn ToSql + Sync); 8] = [
            &name,
            &key.task_id,
            &key.event,
            &key.round,
            &new.holder,
            &lease,
            &delivered,
            &attempts,
        ];
        let sql = match record {
            None => {
                "INSERT INTO rudder_deliveries (notifier, task_id, event, round, holder, \
                 lease_expires_at, delivered_at, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            }
            Some(_) => {
                "UPDATE rudder_deliveries SET holder = $5, lease_expires_at = $6, \
                 delivered_at = $7, attempts = $8 \
                 WHERE notifier = $1 AND task_id = $2 AND event = $3 AND round = $4"
            }
        };
        self.execute(sql, &params, "write the delivery record")?;
        Ok(true)
    }

    fn parse(&self, id: &str, doc: &str) -> Result<Task, StoreError> {
        pending::parse(self, id, doc)
    }

    /// Every task in full, in store order.
    pub fn load_all(&self) -> Result<TaskMap, StoreError> {
        self.flush()?;
        let rows = self.query(
            "SELECT task_id, doc FROM rudder_tasks ORDER BY seq",
            &[],
            "read the tasks",
        )?;
        let mut tasks = TaskMap::with_capacity(rows.len());
        for row in rows {
            let id: String = row.get(0);
            let task = self.parse(&id, row.get(1))?;
            tasks.insert(id, task);
        }
        Ok(tasks)
    }

    /// The last recorded change (0 for none).
    pub fn last_change(&self) -> Result<i64, StoreError> {
        let rows = self.query(
            "SELECT coalesce(max(seq), 0)::int8 FROM rudder_changes",
            &[],
            "read the changes",
        )?;
        Ok(rows.first().map_or(0, |r| r.get(0)))
    }

    /// The changes table's oid (another table after a store was dropped
    /// and made again) and its last `seq` (0 for none).
    pub fn changes_head(&self) -> Result<(i64, i64), StoreError> {
        let rows = self.query(
            "SELECT 'rudder_changes'::regclass::oid::int8, \
             coalesce((SELECT max(seq) FROM rudder_changes), 0)::int8",
            &[],
            "read the changes",
        )?;
        Ok(rows.first().map_or((0, 0), |r| (r.get(0), r.get(1))))
    }

    /// The changes after `after` (at most `limit`, of `task` only if
    /// given), with [`PgTxn::changes_head`]'s oid.
    pub fn read_changes(
        &self,
        after: i64,
        task: Option<&str>,
        limit: usize,
    ) -> Result<(i64, ChangeLog), StoreError> {
        let action = "read the changes";
        let head = self.query(
            "SELECT 'rudder_changes'::regclass::oid::int8, \
             (SELECT min(seq) FROM rudder_changes), \
             coalesce((SELECT max(seq) FROM rudder_changes), 0)::int8",
            &[],
            action,
        )?;
        let (oid, first, last): (i64, Option<i64>, i64) = head
            .first()
            .map_or((0, None, 0), |r| (r.get(0), r.get(1), r.get(2)));
        let rows = self.query(
            "SELECT seq, task_id, revision, status_before, status_after, at \
             FROM rudder_changes WHERE seq > $1 AND ($2::text IS NULL OR task_id = $2) \
             ORDER BY seq LIMIT $3",
            &[&after, &task, &to_i64(limit as u64)],
            action,
        )?;
        let status = |text: Option<&str>| text.map(|t| self.status(t)).transpose();
        let changes = rows
            .iter()
            .map(|r| {
                Ok(RecordedChange {
                    seq: r.get(0),
                    task_id: r.get(1),
                    revision: r.get::<_, i64>(2).max(0) as u64,
                    before: status(r.get(3))?,
                    after: status(r.get(4))?,
                    at: parse_time(r.get(5)),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((
            oid,
            ChangeLog {
                first,
                last,
                changes,
            },
        ))
    }

    /// The task `id` if [`Database::exists`] read and locked it.
    fn take_locked(&self, id: &str) -> Option<(Task, Before)> {
        let mut locked = self.locked.borrow_mut();
        match locked.take() {
            Some((held, task, before)) if held == id => Some((task, before)),
            other => {
                *locked = other;
                None
            }
        }
    }

    /// The row of `id`; locked for this transaction when `lock`.
    fn read_row(&self, id: &str, lock: bool) -> Result<Option<(Task, Before)>, StoreError> {
        if holds_nul(id) {
            return Ok(None);
        }
        let sql = if lock {
            "SELECT status, revision, claimed_by, doc FROM rudder_tasks WHERE task_id = $1 \
             FOR UPDATE"
        } else {
            "SELECT status, revision, claimed_by, doc FROM rudder_tasks WHERE task_id = $1"
        };
        let rows = self.query_typed(sql, &[(&id, Type::TEXT)], "read a task")?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let doc: String = row.get(3);
        let task = self.parse(id, &doc)?;
        Ok(Some((
            task,
            Before {
                status: self.status(row.get(0))?,
                revision: row.get(1),
                claimed_by: row.get(2),
                doc,
            },
        )))
    }

    /// Write out every pending change.
    pub fn flush(&self) -> Result<(), StoreError> {
        pending::flush(self)
    }

    fn write_delete(&self, id: &str, before: &Before) -> Result<(), StoreError> {
        let n = self.execute_typed(
            "DELETE FROM rudder_tasks WHERE task_id = $1 AND revision = $2",
            &[(&id, Type::TEXT), (&before.revision, Type::INT8)],
            "delete a task",
        )?;
        if n != 1 {
            return Err(self.conflict(id));
        }
        self.record(id, before.revision, None, Some(before.status), None);
        Ok(())
    }

    fn write_put(&self, id: &str, task: &Task, before: Option<&Before>) -> Result<(), StoreError> {
        let doc = pending::encode(self, task)?;
        if before.is_some_and(|b| b.doc == doc) {
            return Ok(());
        }
        let time = |t: Option<DateTime<Utc>>| t.map(time_text);
        let ttl = task.ttl_ms.map(to_i64);
        let revision = to_i64(task.revision);
        let status = task.status.as_str();
        let (created, updated, lease) = (
            time(task.created_at),
            time(task.updated_at),
            time(task.lease_expires_at),
        );
        let columns = Columns::of(self, task)?;
        // The row's columns in order: `$1` to `$13` of both statements.
        let row: [(&(dyn ToSql + Sync), Type); 13] = [
            (&id, Type::TEXT),
            (&status, Type::TEXT),
            (&task.idempotency_key, Type::TEXT),
            (&columns.title, Type::TEXT),
            (&created, Type::TEXT),
            (&updated, Type::TEXT),
            (&task.claimed_by, Type::TEXT),
            (&lease, Type::TEXT),
            (&ttl, Type::INT8),
            (&revision, Type::INT8),
            (&doc, Type::TEXT),
            (&task.kind, Type::TEXT),
            (&columns.status_message, Type::TEXT),
        ];
        let n = match before {
            Some(b) => {
                let params: Vec<(&(dyn ToSql + Sync), Type)> = row
                    .into_iter()
                    .chain([
                        (&b.revision as &(dyn ToSql + Sync), Type::INT8),
                        (&b.claimed_by, Type::TEXT),
                    ])
                    .collect();
                self.execute_typed(
                    "UPDATE rudder_tasks SET status = $2, idempotency_key = $3, title = $4, \
                     created_at = $5, updated_at = $6, claimed_by = $7, lease_expires_at = $8, \
                     ttl_ms = $9, revision = $10, doc = $11, kind = $12, status_message = $13 \
                     WHERE task_id = $1 AND revision = $14 AND claimed_by IS NOT DISTINCT FROM $15",
                    &params,
                    "update a task",
                )?
            }
            None => self.execute_typed(
                "INSERT INTO rudder_tasks (task_id, status, idempotency_key, title, created_at, \
                 updated_at, claimed_by, lease_expires_at, ttl_ms, revision, doc, kind, \
                 status_message) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                &row,
                "insert a task",
            )?,
        };
        if n != 1 {
            return Err(self.conflict(id));
        }
        self.record(
            id,
            revision,
            updated.clone(),
            before.map(|b| b.status),
            Some(task.status),
        );
        Ok(())
    }

    pub(super) fn record(
        &self,
        id: &str,
        revision: i64,
        at: Option<String>,
        before: Option<Status>,
        after: Option<Status>,
    ) {
        self.changes.borrow_mut().push(ChangeRow {
            task_id: id.to_string(),
            revision,
            at,
            before,
            after,
        });
        if before != after {
            let mut deltas = self.deltas.borrow_mut();
            if let Some(s) = before {
                *deltas.entry(s).or_default() -= 1;
            }
            if let Some(s) = after {
                *deltas.entry(s).or_default() += 1;
            }
        }
    }

    /// End a read.
    pub fn finish_read(self) -> Result<(), postgres::Error> {
        self.tx.into_inner().rollback()
    }

    /// Commit (`write`) or roll back. Returns whether it committed; an
    /// error says whether the operation may be run again.
    pub fn finish_write(self, write: bool) -> Result<bool, (StoreError, Retry, bool)> {
        let failed = |txn: &PgTxn<'_>, e: StoreError| {
            let (retry, broken) = txn.failure().unwrap_or((Retry::No, false));
            (e, retry, broken)
        };
        if !write {
            let tx = self.tx.into_inner();
            tx.rollback().map_err(|e| {
                let (retry, broken) = transient(&e);
                (self.backend.error("end the transaction", &e), retry, broken)
            })?;
            return Ok(false);
        }
        if let Err(e) = self.flush() {
            return Err(failed(&self, e));
        }
        if let Err(e) = self.record_changes() {
            return Err(failed(&self, e));
        }
        let backend = self.backend;
        let tx = self.tx.into_inner();
        tx.commit().map_err(|e| {
            // Only a commit the server refused as a conflict (or a deferred
            // constraint) is known not to have been applied. Anything else
            // (a broken connection, or a backend terminated *during* the
            // commit, which may have made it durable before saying so) may
            // or may not be in: reported, never run again.
            let refused = e.code().is_some_and(|c| {
                *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED
                    || c.code().starts_with("23")
            });
            if refused {
                return (backend.error("commit", &e), Retry::Safe, false);
            }
            (
                StoreError::Database {
                    location: backend.location(),
                    action: "commit",
                    message: format!(
                        "the commit did not complete ({e}): the change may or may not have \
                         been saved; look at the task before trying again"
                    ),
                },
                Retry::No,
                true,
            )
        })?;
        Ok(true)
    }

    /// Trim the change log at commit (`copy` batches, migrations), not
    /// only when this write's changes pass a multiple of the step.
    pub(crate) fn trim_at_commit(&self) {
        self.trim.set(true);
    }

    /// The changes, the counts and the wake-up of the feed, in commit order
    /// (see the module comment); then the change log's retention, under
    /// the same lock.
    fn record_changes(&self) -> Result<(), StoreError> {
        let changes = std::mem::take(&mut *self.changes.borrow_mut());
        let retention = self.backend.retention();
        if changes.is_empty() {
            if self.trim.get() {
                self.execute(
                    "SELECT pg_advisory_xact_lock($1)",
                    &[&CHANGES_LOCK],
                    "trim the change log",
                )?;
                let last = self.last_change()?;
                self.trim_changes(&retention, last)?;
            }
            return Ok(());
        }
        // One statement takes the lock, records the changes and the counts
        // and wakes the feed: the rows are read from the lock's row (`FROM
        // l`), so no seq is drawn before the lock is held. The lone change
        // of a one-task write goes as plain parameters and a write that
        // moves no task between statuses (a heartbeat) has no counts to
        // add: a new backend's first run of a statement pays for every
        // function and table it names (see docs/performance.md).
        let deltas = self.deltas.borrow();
        let statuses: Vec<&str> = deltas.keys().map(|s| s.as_str()).collect();
        let by: Vec<i64> = deltas.values().copied().collect();
        let counts = if deltas.is_empty() {
            String::new()
        } else {
            format!(", ct AS ({})", add_counts(7, 8, "l, "))
        };
        // `$2` to `$6`: the change itself, or the changes as arrays.
        let one = &changes[0];
        let (one_before, one_after) = (
            one.before.map(Status::as_str),
            one.after.map(Status::as_str),
        );
        let ids: Vec<&str> = changes.iter().map(|c| c.task_id.as_str()).collect();
        let revisions: Vec<i64> = changes.iter().map(|c| c.revision).collect();
        let before: Vec<Option<&str>> = changes
            .iter()
            .map(|c| c.before.map(Status::as_str))
            .collect();
        let after: Vec<Option<&str>> = changes
            .iter()
            .map(|c| c.after.map(Status::as_str))
            .collect();
        let at: Vec<Option<&str>> = changes.iter().map(|c| c.at.as_deref()).collect();
        let (rows_of, first, last, change): (&str, &str, &str, [(&(dyn ToSql + Sync), Type); 5]) =
            if changes.len() == 1 {
                (
                    "SELECT $2, $3, $4, $5, $6 FROM l",
                    "seq",
                    "seq",
                    [
                        (&one.task_id, Type::TEXT),
                        (&one.revision, Type::INT8),
                        (&one_before, Type::TEXT),
                        (&one_after, Type::TEXT),
                        (&one.at, Type::TEXT),
                    ],
                )
            } else {
                (
                    "SELECT u.* FROM l, \
                     unnest($2::text[], $3::int8[], $4::text[], $5::text[], $6::text[]) AS u",
                    "min(seq)",
                    "max(seq)",
                    [
                        (&ids, Type::TEXT_ARRAY),
                        (&revisions, Type::INT8_ARRAY),
                        (&before, Type::TEXT_ARRAY),
                        (&after, Type::TEXT_ARRAY),
                        (&at, Type::TEXT_ARRAY),
                    ],
                )
            };
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&CHANGES_LOCK, Type::INT8)];
        params.extend_from_slice(&change);
        if !deltas.is_empty() {
            params.extend([
                (&statuses as &(dyn ToSql + Sync), Type::TEXT_ARRAY),
                (&by, Type::INT8_ARRAY),
            ]);
        }
        let rows = self.query_typed(
            &format!(
                "WITH l AS (SELECT pg_advisory_xact_lock($1)), \
                 ch AS (INSERT INTO rudder_changes \
                   (task_id, revision, status_before, status_after, at) {rows_of} \
                   RETURNING seq){counts} \
                 SELECT {first}, {last}, pg_notify('{CHANNEL}', {last}::text) FROM ch"
            ),
            &params,
            "record the changes",
        )?;
        let (first, last): (Option<i64>, Option<i64>) =
            rows.first().map_or((None, None), |r| (r.get(0), r.get(1)));
        if let (Some(first), Some(last)) = (first, last)
            && (self.trim.get() || retention.due(first - 1, last))
        {
            self.trim_changes(&retention, last)?;
        }
        Ok(())
    }

    /// Record the changes of a load of `n` tasks into an empty store
    /// (`bulk.rs`): every task, in store order, as created, with
    /// `statuses` (tasks per status) added to the counts, under the
    /// changes lock as [`Self::record_changes`] records a write's; then the
    /// log's retention. The changes the trim would remove at once are not
    /// written at all ([`Self::trimmed_in_advance`]).
    pub(crate) fn record_loaded(
        &self,
        n: i64,
        statuses: &BTreeMap<Status, i64>,
    ) -> Result<(), StoreError> {
        self.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&CHANGES_LOCK],
            "record the changes",
        )?;
        let retention = self.backend.retention();
        let skip = self.trimmed_in_advance(&retention, n)?;
        let names: Vec<&str> = statuses.keys().map(|s| s.as_str()).collect();
        let by: Vec<i64> = statuses.values().copied().collect();
        let rows = self.query(
            &format!(
                "WITH ch AS (\
                   INSERT INTO rudder_changes (task_id, revision, status_before, status_after, at) \
                   SELECT task_id, revision, NULL, status, updated_at FROM rudder_tasks \
                   ORDER BY seq OFFSET $3 \
                   RETURNING seq), \
                 ct AS ({}) \
                 SELECT max(seq), pg_notify('{CHANNEL}', max(seq)::text) FROM ch",
                add_counts(1, 2, "")
            ),
            &[&names, &by, &skip],
            "record the changes",
        )?;
        if let Some(last) = rows.first().and_then(|r| r.get::<_, Option<i64>>(0)) {
            self.trim_changes(&retention, last)?;
        }
        Ok(())
    }

    /// Run a shared query ([`sql`]).
    fn query_sql(&self, q: &Sql, action: &'static str) -> Result<Vec<Row>, StoreError> {
        let params: Vec<(&(dyn ToSql + Sync), Type)> = q
            .params
            .iter()
            .map(|v| match v {
                Value::Text(t) => (t as &(dyn ToSql + Sync), Type::TEXT),
                Value::Int(i) => (i as &(dyn ToSql + Sync), Type::INT8),
            })
            .collect();
        self.query_typed(&q.text, &params, action)
    }

    /// Summaries of the rows that `q` selects.
    fn summaries_of(&self, q: &Sql) -> Result<Vec<SummaryBuf>, StoreError> {
        self.flush()?;
        let rows = self.query_sql(q, "query the tasks")?;
        rows.iter().map(|r| self.summary_of_row(r, 0)).collect()
    }

    /// [`rudder_sql::summary_of_row`]: the columns are typed by the schema, so
    /// only a status no rudder wrote can fail it.
    fn summary_of_row(&self, row: &Row, at: usize) -> Result<SummaryBuf, StoreError> {
        rudder_sql::summary_of_row(&PgRow(row), at).map_err(|e| self.corrupt(e))
    }

    /// A row no rudder wrote (an unknown status): reported, as SQLite does.
    fn corrupt(&self, e: ParseStatusError) -> StoreError {
        StoreError::unknown_status(self.backend.location(), &e)
    }

    /// The status `text` of a row.
    fn status(&self, text: &str) -> Result<Status, StoreError> {
        status_of(text).map_err(|e| self.corrupt(e))
    }

    /// Lock the task `id` at `revision` unless another transaction holds
    /// it (a claim never waits for another worker).
    fn try_lock(&self, id: &str, revision: i64) -> Result<bool, StoreError> {
        let rows = self.query_typed(
            "SELECT 1 FROM rudder_tasks WHERE task_id = $1 AND revision = $2 \
             FOR UPDATE SKIP LOCKED",
            &[(&id, Type::TEXT), (&revision, Type::INT8)],
            "look for a claimable task",
        )?;
        Ok(!rows.is_empty())
    }
}

impl Database for PgTxn<'_> {
    type Before = Before;
    fn pending(&self) -> &Pending<Before> {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut Pending<Before> {
        &mut self.pending
    }
    fn read(&self, id: &str) -> Result<Option<(Task, Before)>, StoreError> {
        if let Some(row) = self.take_locked(id) {
            return Ok(Some(row));
        }
        self.read_row(id, false)
    }
    /// Locked until the commit in a write: another machine changing the
    /// same task waits for this one, then reads what it wrote.
    fn read_to_change(&self, id: &str) -> Result<Option<(Task, Before)>, StoreError> {
        if let Some(row) = self.take_locked(id) {
            return Ok(Some(row));
        }
        self.read_row(id, self.write)
    }
    /// In a write, the task is read and locked at once, for the read to
    /// change it that follows (see `PgTxn::locked`).
    fn exists(&self, id: &str) -> Result<bool, StoreError> {
        if holds_nul(id) {
            return Ok(false);
        }
        if self.write {
            let row = self.read_row(id, true)?;
            let found = row.is_some();
            *self.locked.borrow_mut() = row.map(|(task, before)| (id.to_string(), task, before));
            return Ok(found);
        }
        let rows = self.query_typed(
            "SELECT 1 FROM rudder_tasks WHERE task_id = $1",
            &[(&id, Type::TEXT)],
            "look a task up",
        )?;
        Ok(!rows.is_empty())
    }
    fn read_summaries(&self) -> Result<Vec<SummaryBuf>, StoreError> {
        let mut q = Sql::new(Placeholder::Dollar);
        q.push(&format!(
            "SELECT {} FROM rudder_tasks ORDER BY seq",
            self.summary_columns()
        ));
        self.summaries_of(&q)
    }
    fn read_tasks(&self) -> Result<TaskMap, StoreError> {
        self.load_all()
    }
    fn location(&self) -> Location {
        self.backend.location()
    }
    fn put(&self, id: &str, task: &Task, before: Option<&Before>) -> Result<(), StoreError> {
        self.write_put(id, task, before)
    }
    fn delete(&self, id: &str, before: &Before) -> Result<(), StoreError> {
        self.write_delete(id, before)
    }
}

impl Transaction for PgTxn<'_> {
    pending::transaction_methods!();

    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.flush()?;
        if holds_nul(key) {
            return Ok(None);
        }
        let rows = self.query_typed(
            "SELECT task_id FROM rudder_tasks WHERE idempotency_key = $1 ORDER BY seq LIMIT 1",
            &[(&key, Type::TEXT)],
            "look an idempotency key up",
        )?;
        Ok(rows.first().map(|r| r.get(0)))
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.flush()?;
        if holds_nul(prefix) {
            return Ok(Vec::new());
        }
        // The ids with the prefix come first from the prefix on (byte
        // order): a range scan of the unique index, cut at `limit`.
        let rows = self.query(
            "SELECT task_id FROM rudder_tasks WHERE task_id >= $1 ORDER BY task_id LIMIT $2",
            &[&prefix, &to_i64(limit as u64)],
            "look ids up",
        )?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .take_while(|id| id.starts_with(prefix))
            .collect())
    }

    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        if !kinds.is_empty() && !self.has_kinds() {
            // Tables from before kinds, which only a writer (who migrates
            // them first) could have given a task of a kind.
            return Ok(None);
        }
        let columns = self.summary_columns();
        // One kind walks the (status, kind, seq) index in order; several
        // read the index's ranges of those kinds and sort them.
        let mut after: i64 = -1;
        loop {
            self.flush()?;
            let q = sql::claimable(Dialect::POSTGRES, columns, now, kinds, after);
            let rows = self.query_sql(&q, "look for a claimable task")?;
            for row in &rows {
                let t = self.summary_of_row(row, 1)?;
                if !(query::claimable(&t.summary(), now)
                    && query::wants_kind(kinds, t.kind.as_deref())
                    && wanted(&t.summary()))
                {
                    continue;
                }
                // In a write, only a task no other worker is claiming right
                // now (SKIP LOCKED): N workers never queue on one task.
                if !self.write || self.try_lock(&t.task_id, to_i64(t.revision))? {
                    return Ok(Some(t.task_id));
                }
            }
            match rows.last() {
                Some(row) if rows.len() == sql::CLAIMABLE_BATCH => after = row.get(0),
                _ => return Ok(None),
            }
        }
    }

    fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError> {
        if self.schema < super::schema::TRAIL_VERSION {
            // Tables no writer has migrated yet have no trail: read from
            // the tasks, as the file store does.
            return rudder_core::scan::trail(self, q);
        }
        self.flush()?;
        let s = rudder_sql::trail::query(Placeholder::Dollar, "rudder_trail", q);
        let rows = self.query_sql(&s, "read the trail")?;
        let mut found = Vec::with_capacity(rows.len());
        for r in &rows {
            found.push(rudder_sql::trail::parse(
                self.backend.location(),
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
            )?);
        }
        Ok(trail::refine(found, q))
    }

    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        let counts = self.counts()?;
        let unfinished = counts.get(Status::Working) + counts.get(Status::InputRequired);
        let q = sql::stale(Dialect::POSTGRES, self.summary_columns(), now, older_than);
        let mut candidates = self.summaries_of(&q)?;
        candidates.retain(|t| query::reclaim_candidate(&t.summary(), now, older_than));
        Ok(Stale {
            candidates,
            unfinished,
        })
    }

    fn prunable(
        &self,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        let q = sql::prunable(Dialect::POSTGRES, self.summary_columns(), now, older_than);
        let mut found = self.summaries_of(&q)?;
        found.retain(|t| query::prune_candidate(&t.summary(), now, older_than));
        Ok(found)
    }

    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        if self.schema < super::schema::TEXT_VERSION && q.text.is_some()
            || !q.kinds.is_empty() && !self.has_kinds()
        {
            // Tables no writer has migrated yet have no `status_message`
            // or `kind` column: the text or kind filter is answered from
            // the tasks in full.
            let tasks = self.get_where(&|t| {
                q.statuses.is_empty()
                    || q.statuses.contains(&t.status)
                    || q.after.as_deref() == Some(t.task_id)
            })?;
            return Ok(query::page_in_memory(tasks, q));
        }
        self.flush()?;
        let anchor = match &q.after {
            Some(after) => {
                let a = sql::anchor(Dialect::POSTGRES, after);
                let rows = self.query_sql(&a, "find the page's anchor")?;
                rows.first().map(|r| Anchor {
                    seq: r.get(0),
                    updated_at: r.get(1),
                    created_at: r.get(2),
                    title: r.get(3),
                })
            }
            None => None,
        };
        let mut tasks = Vec::new();
        for segment in sql::page(Dialect::POSTGRES, q, anchor.as_ref(), PageHints::default()) {
            let left = q.limit.map(|l| l.saturating_sub(tasks.len()));
            if left == Some(0) {
                break;
            }
            let rows = self.query_sql(&segment.sql(left), "read a page of tasks")?;
            for r in &rows {
                tasks.push(self.parse(r.get(0), r.get(1))?);
            }
        }
        Ok(tasks)
    }

    fn counts(&self) -> Result<StatusCounts, StoreError> {
        self.flush()?;
        let rows = self.query_typed(
            "SELECT status, n FROM rudder_counts WHERE n <> 0",
            &[],
            "count the tasks",
        )?;
        let mut n: BTreeMap<Status, i64> = BTreeMap::new();
        for row in rows {
            *n.entry(self.status(row.get(0))?).or_default() += row.get::<_, i64>(1);
        }
        // This transaction's own changes, counted at its commit.
        for (s, d) in self.deltas.borrow().iter() {
            *n.entry(*s).or_default() += d;
        }
        let mut counts = StatusCounts::default();
        for (s, v) in n {
            if v > 0 {
                counts.0.insert(s, v as usize);
            }
        }
        Ok(counts)
    }

    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        self.flush()?;
        // A range of the (status, lease) index: the stalled tasks only.
        // The times are stored as text whose order is time order
        // (`time_text`).
        let rows = self.query(
            "SELECT COUNT(*) FROM rudder_tasks WHERE status = 'working' AND lease_expires_at <= $1",
            &[&time_text(now)],
            "count the stalled tasks",
        )?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)).max(0) as usize)
    }
}
