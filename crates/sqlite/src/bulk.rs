//! `copy` into a SQLite store: a batch of tasks in one write transaction,
//! straight in SQL.
//!
//! The general [`Transaction`](crate::Transaction) path reads every
//! task twice (parsing its JSON) before writing it and updates the counts
//! row by row; a copy of a million tasks spent most of its time there. Here
//! each task is tried as an `INSERT ... ON CONFLICT DO NOTHING` (into a store
//! that started empty, that is all it costs); only a task already there is
//! looked up and compared, its stored text first, so a copy run again is
//! still idempotent and still refuses a newer revision exactly as before.
//! The counts are written once per batch.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::SqliteBackend;
use super::schema::{TaskRow, clamp, insert_task_sql, update_task_sql};
use rudder_core::query::time_text;
use rudder_core::{CopyCounts, NewerInStore, StoreError};
use rudder_model::task::{Status, Task};

/// Page cache of a copying connection (KiB, as `PRAGMA cache_size` takes
/// negative numbers): the task id index of a million random ids does not
/// fit SQLite's default 2 MiB, and every insert would read pages back.
const COPY_CACHE_KIB: i64 = 64 * 1024;

impl SqliteBackend {
    /// Write `tasks` (in this order, new ones at the end of the store
    /// order) in one durable transaction, with their `changes` rows and the
    /// counts, as `copy` does: a task already there as it is is left alone,
    /// an older revision of it is replaced, and a newer one refuses the
    /// whole batch (`Ok(Err(..))`, nothing written).
    pub fn copy_batch(
        &self,
        tasks: &[Task],
    ) -> Result<Result<CopyCounts, NewerInStore>, StoreError> {
        let mut outcome = Ok(CopyCounts::default());
        // Each batch is a large transaction: the WAL is truncated after
        // it, so that no copy leaves a large `-wal` behind (even while
        // another process keeps the store open).
        self.write_sql_then(
            &mut |tx| {
                outcome = self.copy_in(tx, tasks)?;
                Ok(matches!(outcome, Ok(c) if c.copied + c.updated > 0))
            },
            true,
        )?;
        Ok(outcome)
    }

    fn copy_in(
        &self,
        tx: &rusqlite::Transaction<'_>,
        tasks: &[Task],
    ) -> Result<Result<CopyCounts, NewerInStore>, StoreError> {
        let err = |action| move |e| self.error(action, e);
        tx.pragma_update(None, "cache_size", -COPY_CACHE_KIB)
            .map_err(err("size the page cache"))?;
        let mut insert = tx
            .prepare_cached(&insert_task_sql(" ON CONFLICT (task_id) DO NOTHING"))
            .map_err(err("insert a task"))?;
        let mut existing = tx
            .prepare_cached("SELECT status, revision, doc FROM tasks WHERE task_id = ?1")
            .map_err(err("read a task"))?;
        let mut update = tx
            .prepare_cached(&update_task_sql(""))
            .map_err(err("update a task"))?;
        let mut change = tx
            .prepare_cached(
                "INSERT INTO changes (task_id, revision, status_before, status_after, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(err("record a change"))?;
        let mut counts = CopyCounts::default();
        // Per status, what this batch adds (and takes away, for a task
        // whose status changed).
        let mut deltas: BTreeMap<&'static str, i64> = BTreeMap::new();
        for task in tasks {
            let doc = serde_json::to_string(task).map_err(|e| StoreError::Database {
                location: self.location(),
                action: "encode a task",
                message: e.to_string(),
            })?;
            let row = TaskRow::new(&task.task_id, task, &doc);
            let row = &row.params()[..];
            let before = if insert.execute(row).map_err(err("insert a task"))? == 1 {
                counts.copied += 1;
                None
            } else {
                let (status, revision, stored): (String, i64, String) = existing
                    .query_row([&task.task_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()
                    .map_err(err("read a task"))?
                    .ok_or_else(|| self.error_vanished(&task.task_id))?;
                let revision = revision.max(0) as u64;
                if revision > task.revision {
                    return Ok(Err(NewerInStore {
                        task_id: task.task_id.clone(),
                        revision,
                    }));
                }
                // The same text is the same task; other text may still
                // be (written by another version of rudder): compare tasks.
                if stored == doc || serde_json::from_str::<Task>(&stored).is_ok_and(|s| s == *task)
                {
                    counts.unchanged += 1;
                    continue;
                }
                update.execute(row).map_err(err("update a task"))?;
                counts.updated += 1;
                let status: Status = status.parse().map_err(|e| StoreError::Corrupt {
                    location: self.location(),
                    line: None,
                    column: None,
                    message: format!("the task {:?} has status {status:?}: {e}", task.task_id),
                })?;
                Some(status)
            };
            change
                .execute(params![
                    task.task_id,
                    clamp(task.revision),
                    before.map(Status::as_str),
                    task.status.as_str(),
                    task.updated_at.map(time_text),
                ])
                .map_err(err("record a change"))?;
            if before != Some(task.status) {
                if let Some(b) = before {
                    *deltas.entry(b.as_str()).or_default() -= 1;
                }
                *deltas.entry(task.status.as_str()).or_default() += 1;
            }
        }
        let mut bump = tx
            .prepare_cached(
                "INSERT INTO counts (status, n) VALUES (?1, ?2) \
                 ON CONFLICT (status) DO UPDATE SET n = n + excluded.n",
            )
            .map_err(err("count the statuses"))?;
        for (status, by) in deltas.into_iter().filter(|(_, by)| *by != 0) {
            bump.execute(params![status, by])
                .map_err(err("count the statuses"))?;
        }
        Ok(Ok(counts))
    }

    fn error_vanished(&self, id: &str) -> StoreError {
        StoreError::Database {
            location: self.location(),
            action: "write a task",
            message: format!("the task {id} changed under the write lock"),
        }
    }
}
