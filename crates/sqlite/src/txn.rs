//! [`Transaction`] over an open SQLite transaction.
//!
//! Reads go to the database; changes are kept in a
//! [`Pending`](crate::pending::Pending) (the policy changes a task
//! in place through `get_mut`) and written out before the next query and at
//! commit, each with its row in `changes` and its effect on `counts`, so
//! that every query sees the transaction's own changes.

use std::sync::LazyLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, ToSql, params};

use super::SqliteBackend;
use super::schema::{
    KIND_VERSION, TRAIL_VERSION, TaskRow, clamp, insert_task_sql, update_task_sql,
};
use rudder_core::query::{
    self, PageQuery, SortKey, Stale, StatusCounts, SummaryBuf, parse_time, time_text,
};
use rudder_core::trail::{self, TrailEntry, TrailQuery};
use rudder_core::{ChangeLog, Location, RecordedChange, StoreError, Summary, Transaction};
use rudder_model::task::{Status, Task, TaskMap};
use rudder_sql::builder::{self as sql, Anchor, Dialect, PageHints, Placeholder, Sql, Value};
use rudder_sql::pending::{self, Database, Pending};
use rudder_sql::{SUMMARY_COLUMNS, SUMMARY_COLUMNS_BEFORE_KINDS, SummaryRow, summary_of_row};

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
    /// The schema's version, once asked (a reader's store may be older
    /// than this rudder: no writer has migrated it yet).
    version: std::cell::Cell<Option<i64>>,
}

fn status_of(text: &str) -> rusqlite::Result<Status> {
    text.parse()
        .map_err(|e: rudder_model::task::ParseStatusError| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
}

/// A row of a summary query (a local type, for the seam's [`SummaryRow`]).
struct SqlRow<'a, 'b>(&'a Row<'b>);

impl SummaryRow for SqlRow<'_, '_> {
    type Error = rusqlite::Error;
    fn text(&self, i: usize) -> rusqlite::Result<String> {
        self.0.get(i)
    }
    fn opt_text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.0.get(i)
    }
    fn int(&self, i: usize) -> rusqlite::Result<i64> {
        self.0.get(i)
    }
    fn opt_int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.0.get(i)
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
            version: std::cell::Cell::new(None),
        }
    }

    /// Whether the tables have the `kind` column: a writer's always (it
    /// migrated them), a reader's from schema [`KIND_VERSION`] on.
    fn has_kinds(&self) -> Result<bool, StoreError> {
        Ok(self.version()? >= KIND_VERSION)
    }

    fn version(&self) -> Result<i64, StoreError> {
        if let Some(known) = self.version.get() {
            return Ok(known);
        }
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.err("read the schema version"))?;
        self.version.set(Some(version));
        Ok(version)
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
        let columns = self.summary_columns()?;
        let kinds: Vec<String> = kind.into_iter().map(str::to_string).collect();
        // Unleased or lapsed working tasks, oldest first, refined exactly.
        let mut after: i64 = -1;
        loop {
            self.flush()?;
            let q = sql::claimable(Dialect::SQLITE, columns, now, &kinds, after);
            let mut stmt = self
                .conn
                .prepare_cached(&q.text)
                .map_err(self.err("look for a claimable task"))?;
            let map = |r: &rusqlite::Row<'_>| {
                // Columns shift by one for `seq`.
                Ok((r.get(0)?, summary_of_row(&SqlRow(r), 1)?))
            };
            let rows: Vec<(i64, SummaryBuf)> = stmt
                .query_map(bind(&q.params).as_slice(), map)
                .and_then(|rows| rows.collect())
                .map_err(self.err("look for a claimable task"))?;
            if let Some((seq, t)) = rows
                .iter()
                .find(|(_, t)| query::claimable(&t.summary(), now) && wanted(&t.summary()))
            {
                return Ok(Some((*seq, t.task_id.clone())));
            }
            match rows.last() {
                Some((seq, _)) if rows.len() == sql::CLAIMABLE_BATCH => after = *seq,
                _ => return Ok(None),
            }
        }
    }

    /// Summaries of the rows that `q` selects.
    fn summaries_of(&self, q: &Sql) -> Result<Vec<SummaryBuf>, StoreError> {
        self.flush()?;
        let mut stmt = self
            .conn
            .prepare_cached(&q.text)
            .map_err(self.err("query the tasks"))?;
        let rows = stmt
            .query_map(bind(&q.params).as_slice(), |r| {
                summary_of_row(&SqlRow(r), 0)
            })
            .map_err(self.err("query the tasks"))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(self.err("query the tasks"))
    }
}

/// The parameters of a shared query, to bind.
fn bind(params: &[Value]) -> Vec<&dyn ToSql> {
    params
        .iter()
        .map(|v| match v {
            Value::Text(t) => t as &dyn ToSql,
            Value::Int(i) => i as &dyn ToSql,
        })
        .collect()
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
        let mut q = Sql::new(Placeholder::Question);
        q.push(&format!(
            "SELECT {} FROM tasks ORDER BY seq",
            self.summary_columns()?
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

    fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError> {
        if self.version()? < TRAIL_VERSION {
            // A store no writer has migrated yet has no trail table: read
            // from the tasks, as the file store does.
            return rudder_core::scan::trail(self, q);
        }
        self.flush()?;
        let s = rudder_sql::trail::query(Placeholder::Question, "trail", q);
        let action = "read the trail";
        let mut stmt = self
            .conn
            .prepare_cached(&s.text)
            .map_err(self.err(action))?;
        let mut rows = stmt
            .query(bind(&s.params).as_slice())
            .map_err(self.err(action))?;
        let mut found = Vec::new();
        while let Some(r) = rows.next().map_err(self.err(action))? {
            let row = || -> rusqlite::Result<(String, i64, String, Option<String>)> {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            };
            let (id, idx, entry, before) = row().map_err(self.err(action))?;
            found.push(rudder_sql::trail::parse(
                self.backend.location(),
                id,
                idx,
                &entry,
                before.as_deref(),
            )?);
        }
        Ok(trail::refine(found, q))
    }

    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        let counts = self.counts()?;
        let unfinished = counts.get(Status::Working) + counts.get(Status::InputRequired);
        let q = sql::stale(Dialect::SQLITE, self.summary_columns()?, now, older_than);
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
        let q = sql::prunable(Dialect::SQLITE, self.summary_columns()?, now, older_than);
        let mut found = self.summaries_of(&q)?;
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
        let mut hints = PageHints::default();
        if !q.statuses.is_empty() && q.sort != SortKey::Store {
            // When the filter keeps many tasks, reading the order's index
            // and skipping the others finds a page after a few rows, where
            // the status index would sort every match first: `+status`
            // keeps SQLite off the status index then. (One status sorted
            // by update has an index of its own, which it still uses.)
            let counts = self.counts()?;
            let matches: usize = q.statuses.iter().map(|s| counts.get(*s)).sum();
            let dense = matches.saturating_mul(20) >= counts.total();
            let single_by_update = q.statuses.len() == 1 && q.sort == SortKey::Updated;
            hints.status_unindexed = dense && !single_by_update;
        }
        let anchor = match &q.after {
            Some(after) => {
                let a = sql::anchor(Dialect::SQLITE, after);
                self.conn
                    .prepare_cached(&a.text)
                    .and_then(|mut s| {
                        s.query_row(bind(&a.params).as_slice(), |r| {
                            Ok(Anchor {
                                seq: r.get(0)?,
                                updated_at: r.get(1)?,
                                created_at: r.get(2)?,
                                title: r.get(3)?,
                            })
                        })
                        .optional()
                    })
                    .map_err(self.err("find the page's anchor"))?
            }
            None => None,
        };
        let mut tasks = Vec::new();
        for segment in sql::page(Dialect::SQLITE, q, anchor.as_ref(), hints) {
            let left = q.limit.map(|l| l.saturating_sub(tasks.len()));
            if left == Some(0) {
                break;
            }
            let s = segment.sql(left);
            let mut stmt = self
                .conn
                .prepare_cached(&s.text)
                .map_err(self.err("read a page of tasks"))?;
            let mut rows = stmt
                .query(bind(&s.params).as_slice())
                .map_err(self.err("read a page of tasks"))?;
            while let Some(row) = rows.next().map_err(self.err("read a page of tasks"))? {
                let id: String = row.get(0).map_err(self.err("read a page of tasks"))?;
                let doc: String = row.get(1).map_err(self.err("read a page of tasks"))?;
                tasks.push(self.parse(&id, &doc)?);
            }
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

/// Read the changes after `after` in one snapshot.
pub(super) fn read_changes(
    conn: &Connection,
    after: i64,
    task: Option<&str>,
    limit: usize,
) -> rusqlite::Result<ChangeLog> {
    let (first, last): (Option<i64>, Option<i64>) = conn
        .prepare_cached("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
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
