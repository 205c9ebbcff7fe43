//! The store's trail read from a database's `trail` table (SQLite) or
//! `rudder_trail` (PostgreSQL), written once for both.
//!
//! Each row is one history entry as JSON beside the columns its indexes
//! need (time, actor); the status before it is the row one place earlier
//! in the same task, read by primary key. [`parse`] turns a row into a
//! [`TrailEntry`] and [`rudder_core::trail::refine`] orders and cuts what
//! was read exactly as the in-memory reference does.

use rudder_core::query::time_text;
use rudder_core::trail::{TrailEntry, TrailQuery};
use rudder_core::{Location, StoreError};
use rudder_model::task::{HistoryEntry, Status};

use crate::builder::{Placeholder, Sql, Value};

/// The statement that reads the page `q` asks for from `table`: rows of
/// `task_id, idx, entry, status before`, in trail order.
pub fn query(style: Placeholder, table: &str, q: &TrailQuery) -> Sql {
    let mut s = Sql::new(style);
    let mut clauses: Vec<String> = Vec::new();
    if let Some(task) = &q.task {
        clauses.push(format!("t.task_id = {}", s.text_arg(task.clone())));
    }
    // One lower bound on the time, the later of `since` and the page's
    // start: the index's range starts there, so a page after the first
    // does not read again every row the pages before it read (a row-value
    // comparison alone does not bound the range).
    let lower = match (q.since, q.after.as_ref().map(|a| a.at)) {
        (Some(since), Some(at)) => Some(since.max(at)),
        (since, at) => since.or(at),
    };
    if let Some(lower) = lower {
        clauses.push(format!("t.at >= {}", s.text_arg(time_text(lower))));
    }
    if let Some(actor) = &q.actor {
        clauses.push(format!("t.actor = {}", s.text_arg(actor.clone())));
    }
    if let Some(after) = &q.after {
        let at = s.text_arg(time_text(after.at));
        let id = s.text_arg(after.task_id.clone());
        let idx = s.arg(Value::Int(i64::try_from(after.index).unwrap_or(i64::MAX)));
        clauses.push(format!("(t.at, t.task_id, t.idx) > ({at}, {id}, {idx})"));
    }
    let mut text = format!(
        "SELECT t.task_id, t.idx, t.entry, \
         (SELECT p.status FROM {table} p WHERE p.task_id = t.task_id AND p.idx = t.idx - 1) \
         FROM {table} t"
    );
    if !clauses.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&clauses.join(" AND "));
    }
    text.push_str(" ORDER BY t.at, t.task_id, t.idx");
    if let Some(limit) = q.limit {
        let n = s.arg(Value::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
        text.push_str(&format!(" LIMIT {n}"));
    }
    s.text = text;
    s
}

/// One row of [`query`] as a trail entry; an entry the store cannot read
/// is a corrupt store, said with the task's id.
pub fn parse(
    location: Location,
    task_id: String,
    idx: i64,
    entry: &str,
    before: Option<&str>,
) -> Result<TrailEntry, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        location: location.clone(),
        line: None,
        column: None,
        message: format!("the history of task {task_id}: {message}"),
    };
    let parsed: HistoryEntry =
        serde_json::from_str(entry).map_err(|e| corrupt(format!("entry {idx}: {e}")))?;
    let before = before
        .map(|b| b.parse::<Status>())
        .transpose()
        .map_err(|e| corrupt(format!("entry {}: {e}", idx - 1)))?;
    Ok(TrailEntry {
        index: usize::try_from(idx).map_err(|_| corrupt(format!("entry {idx}")))?,
        task_id,
        before,
        entry: parsed,
    })
}
