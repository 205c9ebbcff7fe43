//! [`Transaction`] over an open SQLite transaction.
//!
//! Reads go to the database; changes are kept in a
//! [`Pending`](crate::store::pending::Pending) (the policy changes a task
//! in place through `get_mut`) and written out before the next query and at
//! commit, each with its row in `changes` and its effect on `counts`, so
//! that every query sees the transaction's own changes.

use std::cell::RefCell;
use std::sync::LazyLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, ToSql, params};

use super::SqliteBackend;
use super::schema::{KIND_VERSION, TaskRow, clamp, insert_task_sql, update_task_sql};
use crate::store::pending::{self, Database, Pending};
use crate::store::query::{
    self, PageQuery, SUMMARY_COLUMNS, SUMMARY_COLUMNS_BEFORE_KINDS, SortKey, Stale, StatusCounts,
    SummaryBuf, SummaryRow, parse_time, summary_of_row, time_text,
};
use crate::store::{Location, StoreError, Summary, Transaction};
use crate::task::{Status, Task, TaskMap};

/// What the database held of a task when this transaction first read it.
#[derive(Debug, Clone)]
pub(super) struct Before {
    status: Status,
    revision: u64,
    doc: String,
}

/// A new task's row.
static INSERT: LazyLock<String> = LazyLock::new(|| insert_task_sql(""));
/// A task's row, if it is still at the revision `?14` this transaction read.
static UPDATE_AT_REVISION: LazyLock<String> =
    LazyLock::new(|| update_task_sql(" AND revision = ?14"));

pub(super) struct SqlTxn<'c> {
    conn: &'c Connection,
    backend: &'c SqliteBackend,
    pending: Pending<Before>,
    /// Whether the tables have the `kind` column (schema
    /// [`KIND_VERSION`] or later), once asked.
    kinds: std::cell::Cell<Option<bool>>,
}

fn status_of(text: &str) -> rusqlite::Result<Status> {
    text.parse().map_err(|e: crate::task::ParseStatusError| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

impl SummaryRow for Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, i: usize) -> rusqlite::Result<String> {
        self.get(i)
    }
    fn opt_text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }
    fn int(&self, i: usize) -> rusqlite::Result<i64> {
        self.get(i)
    }
    fn opt_int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }
    fn status(&self, text: &str) -> rusqlite::Result<Status> {
        status_of(text)
    }
}

impl<'c> SqlTxn<'c> {
    pub fn new(conn: &'c Connection, backend: &'c SqliteBackend) -> Self {
        SqlTxn {
            conn,
            backend,
            pending: Pending::new(),
            kinds: std::cell::Cell::new(None),
        }
    }

    /// Whether the tables have the `kind` column: a writer's always (it
    /// migrated them), a reader's from schema [`KIND_VERSION`] on.
    fn has_kinds(&self) -> Result<bool, StoreError> {
        if let Some(known) = self.kinds.get() {
            return Ok(known);
        }
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.err("read the schema version"))?;
        let known = version >= KIND_VERSION;
        self.kinds.set(Some(known));
        Ok(known)
    }

    /// The summary columns of these tables ([`SUMMARY_COLUMNS`]).
    fn summary_columns(&self) -> Result<&'static str, StoreError> {
        Ok(if self.has_kinds()? {
            SUMMARY_COLUMNS
        } else {
            SUMMARY_COLUMNS_BEFORE_KINDS
        })
    }

    fn err(&self, action: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| self.backend.error(action, e)
    }

    fn parse(&self, id: &str, doc: &str) -> Result<Task, StoreError> {
        pending::parse(self, id, doc)
    }

    /// Every task in full, in store order.
    pub fn load_all(&self) -> Result<TaskMap, StoreError> {
        self.flush()?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT task_id, doc FROM tasks ORDER BY seq")
            .map_err(self.err("read the tasks"))?;
        let mut rows = stmt.query([]).map_err(self.err("read the tasks"))?;
        let mut tasks = TaskMap::new();
        while let Some(row) = rows.next().map_err(self.err("read the tasks"))? {
            let id: String = row.get(0).map_err(self.err("read the tasks"))?;
            let doc: String = row.get(1).map_err(self.err("read the tasks"))?;
            let task = self.parse(&id, &doc)?;
            tasks.insert(id, task);
        }
        Ok(tasks)
    }

    /// The row of `id` as it is in the database now.
    fn read_row(&self, id: &str) -> Result<Option<(Task, Before)>, StoreError> {
        let row = self
            .conn
            .prepare_cached("SELECT status, revision, doc FROM tasks WHERE task_id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |r| {
                    Ok((
                        status_of(&r.get::<_, String>(0)?)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .optional()
            })
            .map_err(self.err("read a task"))?;
        let Some((status, revision, doc)) = row else {
            return Ok(None);
        };
        let task = self.parse(id, &doc)?;
        Ok(Some((
            task,
            Before {
                status,
                revision: revision.max(0) as u64,
                doc,
            },
        )))
    }

    /// Write out every pending change, with its `changes` row and counts.
    pub fn flush(&self) -> Result<(), StoreError> {
        pending::flush(self)
    }

    fn write_delete(&self, id: &str, before: &Before) -> Result<(), StoreError> {
        let n = self
            .conn
            .prepare_cached("DELETE FROM tasks WHERE task_id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(self.err("delete a task"))?;
        if n != 1 {
            return Err(self.vanished(id));
        }
        self.record(id, before.revision, Some(before.status), None, None)
    }

    fn vanished(&self, id: &str) -> StoreError {
        StoreError::Database {
            location: self.backend.location(),
            action: "write a task",
            message: format!("the task {id} changed under the write lock"),
        }
    }

    fn write_put(&self, id: &str, task: &Task, before: Option<&Before>) -> Result<(), StoreError> {
        let doc = pending::encode(self, task)?;
        if before.is_some_and(|b| b.doc == doc) {
            // Read for a change that did not happen.
            return Ok(());
        }
        let row = TaskRow::new(id, task, &doc);
        let n = match before {
            Some(b) => {
                let revision = clamp(b.revision);
                let params: Vec<&dyn ToSql> = row
                    .params()
                    .into_iter()
                    .chain([&revision as &dyn ToSql])
                    .collect();
                self.conn
                    .prepare_cached(&UPDATE_AT_REVISION)
                    .and_then(|mut s| s.execute(&params[..]))
                    .map_err(self.err("update a task"))?
            }
            None => self
                .conn
                .prepare_cached(&INSERT)
                .and_then(|mut s| s.execute(&row.params()[..]))
                .map_err(self.err("insert a task"))?,
        };
        if n != 1 {
            return Err(self.vanished(id));
        }
        self.record(
            id,
            task.revision,
            before.map(|b| b.status),
            Some(task.status),
            task.updated_at,
        )
    }

    /// The `changes` row and the counts of one write.
    fn record(
        &self,
        id: &str,
        revision: u64,
        before: Option<Status>,
        after: Option<Status>,
        at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO changes (task_id, revision, status_before, status_after, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    revision.min(i64::MAX as u64) as i64,
                    before.map(Status::as_str),
                    after.map(Status::as_str),
                    at.map(time_text),
                ])
            })
            .map_err(self.err("record a change"))?;
        if before != after {
            let bump = |status: Status, by: i64| {
                self.conn
                    .prepare_cached(
                        "INSERT INTO counts (status, n) VALUES (?1, ?2) \
                         ON CONFLICT (status) DO UPDATE SET n = n + excluded.n",
                    )
                    .and_then(|mut s| s.execute(params![status.as_str(), by]))
                    .map_err(self.err("count the statuses"))
            };
            if let Some(s) = before {
                bump(s, -1)?;
            }
            if let Some(s) = after {
                bump(s, 1)?;
            }
        }
        Ok(())
    }

    /// The first claimable task in store order of kind `kind` (of any kind
    /// when `None`) that `wanted` accepts: its `seq` and id.
    fn first_claimable(
        &self,
        now: DateTime<Utc>,
        kind: Option<&str>,
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<(i64, String)>, StoreError> {
        let now_text = time_text(now);
        let columns = self.summary_columns()?;
        let of_kind = if kind.is_some() { "AND kind = ?3" } else { "" };
        // Unleased or lapsed working tasks, oldest first, refined exactly.
        let mut after: i64 = -1;
        loop {
            self.flush()?;
            let mut stmt = self
                .conn
                .prepare_cached(&format!(
                    "SELECT seq, {columns} FROM tasks WHERE status = 'working' {of_kind} \
                     AND seq > ?2 AND (claimed_by IS NULL OR lease_expires_at IS NULL \
                     OR lease_expires_at <= ?1) ORDER BY seq LIMIT 32"
                ))
                .map_err(self.err("look for a claimable task"))?;
            let map = |r: &rusqlite::Row<'_>| {
                // Columns shift by one for `seq`.
                Ok((r.get(0)?, summary_of_row(r, 1)?))
            };
            let rows: Vec<(i64, SummaryBuf)> = match kind {
                Some(kind) => stmt.query_map(params![now_text, after, kind], map),
                None => stmt.query_map(params![now_text, after], map),
            }
            .and_then(|rows| rows.collect())
            .map_err(self.err("look for a claimable task"))?;
            if let Some((seq, t)) = rows
                .iter()
                .find(|(_, t)| query::claimable(&t.summary(), now) && wanted(&t.summary()))
            {
                return Ok(Some((*seq, t.task_id.clone())));
            }
            match rows.last() {
                Some((seq, _)) if rows.len() == 32 => after = *seq,
                _ => return Ok(None),
            }
        }
    }

    /// Summaries of the rows that `sql` (a `WHERE ... ORDER BY ...` tail)
    /// selects.
    fn summaries_where(
        &self,
        tail: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        self.flush()?;
        let columns = self.summary_columns()?;
        let sql = format!("SELECT {columns} FROM tasks {tail}");
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(self.err("query the tasks"))?;
        let rows = stmt
            .query_map(params, |r| summary_of_row(r, 0))
            .map_err(self.err("query the tasks"))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(self.err("query the tasks"))
    }
}

/// The rows after an anchor whose `col` is `value` in the order (`col`
/// with nulls first, then `task_id`; the parameter `id`), or before it
/// (`backwards`: the rows after it in the reverse order).
fn after_in(
    col: &str,
    value: Option<String>,
    id: String,
    backwards: bool,
    arg: &dyn Fn(Box<dyn rusqlite::ToSql>) -> String,
) -> String {
    match (value, backwards) {
        (Some(v), false) => {
            let v = arg(Box::new(v));
            format!("({col} > {v} OR ({col} = {v} AND task_id > {id}))")
        }
        (None, false) => format!("({col} IS NOT NULL OR task_id > {id})"),
        (Some(v), true) => {
            let v = arg(Box::new(v));
            format!("({col} IS NULL OR {col} < {v} OR ({col} = {v} AND task_id < {id}))")
        }
        (None, true) => format!("({col} IS NULL AND task_id < {id})"),
    }
}

impl Database for SqlTxn<'_> {
    type Before = Before;
    fn pending(&self) -> &Pending<Before> {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut Pending<Before> {
        &mut self.pending
    }
    fn read(&self, id: &str) -> Result<Option<(Task, Before)>, StoreError> {
        self.read_row(id)
    }
    fn exists(&self, id: &str) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached("SELECT 1 FROM tasks WHERE task_id = ?1")
            .and_then(|mut s| s.exists([id]))
            .map_err(self.err("look a task up"))
    }
    fn read_summaries(&self) -> Result<Vec<SummaryBuf>, StoreError> {
        self.summaries_where("ORDER BY seq", &[])
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

impl Transaction for SqlTxn<'_> {
    pending::transaction_methods!();

    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.flush()?;
        self.conn
            .prepare_cached(
                "SELECT task_id FROM tasks WHERE idempotency_key = ?1 ORDER BY seq LIMIT 1",
            )
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .map_err(self.err("look an idempotency key up"))
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.flush()?;
        // A range scan of the unique index from the prefix on, stopped at
        // the first id that no longer starts with it.
        let mut stmt = self
            .conn
            .prepare_cached("SELECT task_id FROM tasks WHERE task_id >= ?1 ORDER BY task_id")
            .map_err(self.err("look ids up"))?;
        let mut rows = stmt.query([prefix]).map_err(self.err("look ids up"))?;
        let mut ids = Vec::new();
        while ids.len() < limit
            && let Some(row) = rows.next().map_err(self.err("look ids up"))?
        {
            let id: String = row.get(0).map_err(self.err("look ids up"))?;
            if !id.starts_with(prefix) {
                break;
            }
            ids.push(id);
        }
        Ok(ids)
    }

    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        if kinds.is_empty() {
            return Ok(self.first_claimable(now, None, wanted)?.map(|(_, id)| id));
        }
        if !self.has_kinds()? {
            // Tables from before kinds, which only a writer (who migrates
            // them first) could have given a task of a kind.
            return Ok(None);
        }
        // One walk of the (status, kind, seq) index per kind, the oldest
        // of their first claimable tasks taken.
        let mut best: Option<(i64, String)> = None;
        for kind in kinds {
            if let Some(found) = self.first_claimable(now, Some(kind), wanted)?
                && best.as_ref().is_none_or(|(seq, _)| found.0 < *seq)
            {
                best = Some(found);
            }
        }
        Ok(best.map(|(_, id)| id))
    }

    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        let counts = self.counts()?;
        let unfinished = counts.get(Status::Working) + counts.get(Status::InputRequired);
        let cutoff = chrono::TimeDelta::from_std(older_than)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .map(time_text);
        let future = time_text(now + chrono::TimeDelta::seconds(1));
        let now_text = time_text(now);
        let mut candidates = self.summaries_where(
            "WHERE status IN ('working', 'input_required') AND (updated_at IS NULL \
             OR updated_at <= ?1 OR updated_at > ?2 \
             OR (claimed_by IS NOT NULL AND lease_expires_at > ?3)) ORDER BY seq",
            &[&cutoff, &future, &now_text],
        )?;
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
        let cutoff = chrono::TimeDelta::from_std(older_than)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .map(time_text);
        let mut found = self.summaries_where(
            "WHERE status IN ('completed', 'failed', 'cancelled') AND (updated_at IS NULL \
             OR ttl_ms IS NOT NULL OR updated_at <= ?1) ORDER BY seq",
            &[&cutoff],
        )?;
        found.retain(|t| query::prune_candidate(&t.summary(), now, older_than));
        Ok(found)
    }

    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        if !q.kinds.is_empty() && !self.has_kinds()? {
            // Tables no writer has migrated yet have no `kind` column: the
            // kind filter is answered from the tasks in full.
            let tasks = self.get_where(&|t| {
                q.statuses.is_empty()
                    || q.statuses.contains(&t.status)
                    || q.after.as_deref() == Some(t.task_id)
            })?;
            return Ok(query::page_in_memory(tasks, q));
        }
        self.flush()?;
        let mut clauses: Vec<String> = Vec::new();
        let args: RefCell<Vec<Box<dyn rusqlite::ToSql>>> = RefCell::new(Vec::new());
        let arg = |v: Box<dyn rusqlite::ToSql>| {
            let mut args = args.borrow_mut();
            args.push(v);
            format!("?{}", args.len())
        };
        if !q.statuses.is_empty() {
            let list: Vec<String> = q
                .statuses
                .iter()
                .map(|s| arg(Box::new(s.as_str())))
                .collect();
            // When the filter keeps many tasks, reading the order's index
            // and skipping the others finds a page after a few rows, where
            // the status index would sort every match first: `+status`
            // keeps SQLite off the status index then. (One status sorted
            // by update has an index of its own, which it still uses.)
            let counts = self.counts()?;
            let matches: usize = q.statuses.iter().map(|s| counts.get(*s)).sum();
            let dense = matches.saturating_mul(20) >= counts.total();
            let single_by_update = q.statuses.len() == 1 && q.sort == SortKey::Updated;
            let column = if dense && !single_by_update && q.sort != SortKey::Store {
                "+status"
            } else {
                "status"
            };
            clauses.push(format!("{column} IN ({})", list.join(", ")));
        }
        if let Some(after) = &q.after {
            let anchor = self
                .conn
                .prepare_cached(
                    "SELECT seq, updated_at, created_at, title FROM tasks WHERE task_id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([after], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, Option<String>>(3)?,
                        ))
                    })
                    .optional()
                })
                .map_err(self.err("find the page's anchor"))?;
            // Rows after the anchor in each order (see `query::compare`);
            // an anchor that is not in the store starts from the beginning
            // (in `Id` order: where it would stand). Every order but the
            // store's is (column, task_id) with NULL first, walked forwards
            // or backwards (`Updated` is that order backwards).
            let id = || arg(Box::new(after.clone()));
            let lt = if q.descending { "<" } else { ">" };
            let clause = match (q.sort, anchor) {
                (SortKey::Id, _) => Some(format!("task_id {lt} {}", id())),
                (_, None) => None,
                (SortKey::Store, Some((seq, ..))) => Some(format!("seq {lt} {seq}")),
                (SortKey::Updated, Some((_, updated, ..))) => {
                    Some(after_in("updated_at", updated, id(), !q.descending, &arg))
                }
                (SortKey::Created, Some((_, _, created, _))) => {
                    Some(after_in("created_at", created, id(), q.descending, &arg))
                }
                (SortKey::Title, Some((.., title))) => {
                    Some(after_in("title", title, id(), q.descending, &arg))
                }
            };
            clauses.extend(clause);
        }
        if !q.kinds.is_empty() {
            let list: Vec<String> = q.kinds.iter().map(|k| arg(Box::new(k.clone()))).collect();
            clauses.push(format!("kind IN ({})", list.join(", ")));
        }
        if let Some(text) = q.text.as_deref().filter(|t| !t.is_empty()) {
            // LIKE matches ASCII letters regardless of case and every other
            // character exactly, as `query::text_matches` does.
            let pattern = arg(Box::new(query::like_pattern(text)));
            clauses.push(format!(
                "(task_id LIKE {pattern} ESCAPE '\\' OR title LIKE {pattern} ESCAPE '\\' \
                 OR idempotency_key LIKE {pattern} ESCAPE '\\' \
                 OR status_message LIKE {pattern} ESCAPE '\\' OR status LIKE {pattern} ESCAPE '\\')"
            ));
        }
        let backwards = q.descending != (q.sort == SortKey::Updated);
        let dir = if backwards { "DESC" } else { "" };
        let order = match q.sort {
            SortKey::Store => format!("seq {dir}"),
            // NULL is the smallest value: first forwards, last backwards.
            SortKey::Updated => format!("updated_at {dir}, task_id {dir}"),
            SortKey::Created => format!("created_at {dir}, task_id {dir}"),
            SortKey::Title => format!("title {dir}, task_id {dir}"),
            SortKey::Id => format!("task_id {dir}"),
        };
        let filter = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let limit = q.limit.map_or(-1, |l| l.min(i64::MAX as usize) as i64);
        let sql = format!("SELECT task_id, doc FROM tasks {filter} ORDER BY {order} LIMIT {limit}");
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(self.err("read a page of tasks"))?;
        let args = args.into_inner();
        let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| a.as_ref()).collect();
        let mut rows = stmt
            .query(params.as_slice())
            .map_err(self.err("read a page of tasks"))?;
        let mut tasks = Vec::new();
        while let Some(row) = rows.next().map_err(self.err("read a page of tasks"))? {
            let id: String = row.get(0).map_err(self.err("read a page of tasks"))?;
            let doc: String = row.get(1).map_err(self.err("read a page of tasks"))?;
            tasks.push(self.parse(&id, &doc)?);
        }
        Ok(tasks)
    }

    fn counts(&self) -> Result<StatusCounts, StoreError> {
        self.flush()?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT status, n FROM counts WHERE n > 0")
            .map_err(self.err("count the tasks"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    status_of(&r.get::<_, String>(0)?)?,
                    r.get::<_, i64>(1)?.max(0) as usize,
                ))
            })
            .map_err(self.err("count the tasks"))?;
        let mut counts = StatusCounts::default();
        for row in rows {
            let (status, n) = row.map_err(self.err("count the tasks"))?;
            counts.0.insert(status, n);
        }
        Ok(counts)
    }

    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        self.flush()?;
        // A range of the (status, lease) index: the stalled tasks only.
        // The times are stored as text whose order is time order
        // (`time_text`).
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM tasks WHERE status = 'working' AND lease_expires_at <= ?1",
            )
            .and_then(|mut stmt| stmt.query_row([time_text(now)], |r| r.get(0)))
            .map_err(self.err("count the stalled tasks"))?;
        Ok(n.max(0) as usize)
    }
}

/// One row of the `changes` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedChange {
    /// Its place in commit order.
    pub seq: i64,
    pub task_id: String,
    /// The task's revision after the change (before it, for a removal).
    pub revision: u64,
    /// `None` for a task that was added.
    pub before: Option<Status>,
    /// `None` for a task that was removed.
    pub after: Option<Status>,
    /// The task's `updated_at` as written (none for a removal, and for
    /// changes recorded by schema version 1).
    pub at: Option<DateTime<Utc>>,
}

/// What the change feed reads: the recorded changes after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeLog {
    /// The first change still recorded (`None`: none is).
    pub first: Option<i64>,
    /// The last change recorded (0 for none).
    pub last: i64,
    /// The changes after the cursor, in commit order, at most the limit
    /// asked for (of one task only, if asked).
    pub changes: Vec<RecordedChange>,
}

/// Read the changes after `after` in one snapshot.
pub(super) fn read_changes(
    conn: &Connection,
    after: i64,
    task: Option<&str>,
    limit: usize,
) -> rusqlite::Result<ChangeLog> {
    let (first, last): (Option<i64>, Option<i64>) = conn.query_row(
        "SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let limit = limit.min(i64::MAX as usize) as i64;
    // A store of schema version 1 (not yet migrated by a writer) records
    // no times.
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let at = if version >= 2 { "at" } else { "NULL" };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT seq, task_id, revision, status_before, status_after, {at} FROM changes \
         WHERE seq > ?1 AND (?2 IS NULL OR task_id = ?2) ORDER BY seq LIMIT ?3"
    ))?;
    let rows = stmt.query_map(params![after, task, limit], |r| {
        let status = |i| -> rusqlite::Result<Option<Status>> {
            r.get::<_, Option<String>>(i)?
                .map(|s| status_of(&s))
                .transpose()
        };
        Ok(RecordedChange {
            seq: r.get(0)?,
            task_id: r.get(1)?,
            revision: r.get::<_, i64>(2)?.max(0) as u64,
            before: status(3)?,
            after: status(4)?,
            at: parse_time(r.get(5)?),
        })
    })?;
    Ok(ChangeLog {
        first,
        last: last.unwrap_or(0),
        changes: rows.collect::<rusqlite::Result<_>>()?,
    })
}
