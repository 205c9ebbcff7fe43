//! The tasks as an operation sees them inside a transaction.
//!
//! [`Transaction`] is what a backend hands to a read-modify-write: summaries
//! for the scans, full tasks only for those an operation reads or changes.
//! [`TaskMap`] implements it for a store held whole in memory; each backend
//! crate has its own.

use indexmap::IndexMap;

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::StoreError;
use super::Summary;
use super::query::{self, PageQuery, Stale, StatusCounts, SummaryBuf};
use super::trail::{self, TrailEntry, TrailQuery};
use rudder_model::task::{Task, TaskMap};

/// The tasks of a store under exclusive access, in store order.
pub trait Transaction {
    /// How many tasks there are.
    fn len(&self) -> Result<usize, StoreError>;
    fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }
    /// Every task id, in store order.
    fn ids(&self) -> Result<Box<dyn Iterator<Item = &str> + '_>, StoreError>;
    /// Whether there is a task `id` (a database says so from a query,
    /// which can fail).
    fn contains(&self, id: &str) -> Result<bool, StoreError>;
    /// What the scans need of every task, in store order.
    fn summaries(&self) -> Result<Box<dyn Iterator<Item = Summary<'_>> + '_>, StoreError>;
    /// What the scans need of the task `id`.
    fn summary(&self, id: &str) -> Result<Option<Summary<'_>>, StoreError>;
    /// The task `id` in full.
    fn get(&self, id: &str) -> Result<Option<Task>, StoreError>;
    /// Every task whose summary `keep` accepts, in full, in store order
    /// ([`scan::get_where`] reads them one by one).
    fn get_where(&self, keep: &dyn Fn(&Summary) -> bool) -> Result<Vec<Task>, StoreError>;
    /// The task `id`, to change in place: written back if the transaction commits.
    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError>;
    /// Add a task under its `task_id` (at the end), or replace the task with
    /// that id where it stands.
    fn insert(&mut self, task: Task) -> Result<(), StoreError>;
    /// Remove the task `id`; whether there was one.
    fn remove(&mut self, id: &str) -> Result<bool, StoreError>;
    /// Remove every task.
    fn clear(&mut self) -> Result<(), StoreError>;

    // The indexed operations the policy uses: every backend answers each
    // one, a database from its indexes, a store read whole by scanning
    // its summaries with the reference answers of [`scan`]. See
    // `query.rs` for what each answer may contain.

    /// The id of the task created with idempotency key `key`.
    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// At most `limit` ids that start with `prefix`, in any order.
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError>;
    /// The first claimable task in store order (see [`query::claimable`])
    /// of one of `kinds` (any task, with a kind or not, when empty) that
    /// `wanted` accepts. A database answers from its (status, kind, store
    /// order) index, so a worker of one kind never reads the tasks of
    /// others.
    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError>;
    /// The unfinished tasks reclaim must look at, in store order (at least
    /// those [`query::reclaim_candidate`] accepts).
    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError>;
    /// The finished tasks prune must look at, in store order (at least
    /// those [`query::prune_candidate`] accepts).
    fn prunable(
        &self,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError>;
    /// One page of tasks in full.
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError>;
    /// Hand `each` every task of the page `q`, in order, until it returns
    /// false, as [`Listed`] text where the backend holds the task's JSON
    /// exactly as it would be written (then no task is built). `Ok(false)`,
    /// the default: no such way here, nothing was handed, and the caller
    /// reads [`Transaction::page`] instead.
    fn page_listed(
        &self,
        _q: &PageQuery,
        _each: &mut dyn FnMut(Listed<'_>) -> bool,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// How many tasks have each status.
    fn counts(&self) -> Result<StatusCounts, StoreError>;
    /// The page of the store's trail `q` asks for ([`trail::in_memory`]
    /// says what; a database reads it from its trail's indexes).
    fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError>;
    /// How many tasks are stalled at `now` ([`query::stalled`]: working,
    /// with a lease that lapsed), in the whole store.
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError>;
}

/// The reference answers of [`Transaction`]'s indexed operations, by
/// scanning the summaries and reading tasks in full one by one: what a
/// store read whole answers with (the JSON file, a [`TaskMap`]), and what
/// the tests compare a database's indexed answers against.
pub mod scan {
    use super::*;

    /// [`Transaction::get_where`] by scanning.
    pub fn get_where<T: Transaction + ?Sized>(
        tasks: &T,
        keep: &dyn Fn(&Summary) -> bool,
    ) -> Result<Vec<Task>, StoreError> {
        let ids: Vec<&str> = tasks
            .summaries()?
            .filter(|t| keep(t))
            .map(|t| t.task_id)
            .collect();
        // A task gone since the listing (removed by another machine, on a
        // database whose statements each see the latest commit) is left
        // out: it is not a task of this read any more.
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.extend(tasks.get(id)?);
        }
        Ok(found)
    }

    /// [`Transaction::find_key`] by scanning.
    pub fn find_key<T: Transaction + ?Sized>(
        tasks: &T,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(tasks
            .summaries()?
            .find(|t| t.idempotency_key == Some(key))
            .map(|t| t.task_id.to_string()))
    }

    /// [`Transaction::ids_with_prefix`] by scanning.
    pub fn ids_with_prefix<T: Transaction + ?Sized>(
        tasks: &T,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(tasks
            .ids()?
            .filter(|k| k.starts_with(prefix))
            .take(limit)
            .map(str::to_string)
            .collect())
    }

    /// [`Transaction::next_claimable`] by scanning.
    pub fn next_claimable<T: Transaction + ?Sized>(
        tasks: &T,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        Ok(tasks
            .summaries()?
            .find(|t| query::claimable(t, now) && query::wants_kind(kinds, t.kind) && wanted(t))
            .map(|t| t.task_id.to_string()))
    }

    /// [`Transaction::stale`] by scanning.
    pub fn stale<T: Transaction + ?Sized>(
        tasks: &T,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Stale, StoreError> {
        let mut stale = Stale::default();
        for t in tasks.summaries()?.filter(|t| !t.status.is_terminal()) {
            stale.unfinished += 1;
            if query::reclaim_candidate(&t, now, older_than) {
                stale.candidates.push(SummaryBuf::of(&t));
            }
        }
        Ok(stale)
    }

    /// [`Transaction::prunable`] by scanning.
    pub fn prunable<T: Transaction + ?Sized>(
        tasks: &T,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        Ok(tasks
            .summaries()?
            .filter(|t| query::prune_candidate(t, now, older_than))
            .map(|t| SummaryBuf::of(&t))
            .collect())
    }

    /// [`Transaction::page`] by filtering every task in full.
    pub fn page<T: Transaction + ?Sized>(
        tasks: &T,
        q: &PageQuery,
    ) -> Result<Vec<Task>, StoreError> {
        // The anchor too, wherever the filter leaves it: the page starts
        // after it.
        let found = tasks.get_where(&|t| {
            (q.statuses.is_empty() || q.statuses.contains(&t.status)) && q.wants_kind(t.kind)
                || q.after.as_deref() == Some(t.task_id)
        })?;
        Ok(query::page_in_memory(found, q))
    }

    /// [`Transaction::counts`] by scanning.
    pub fn counts<T: Transaction + ?Sized>(tasks: &T) -> Result<StatusCounts, StoreError> {
        let mut counts = StatusCounts::default();
        for t in tasks.summaries()? {
            *counts.0.entry(t.status).or_default() += 1;
        }
        Ok(counts)
    }

    /// [`Transaction::stalled`] by scanning.
    pub fn stalled<T: Transaction + ?Sized>(
        tasks: &T,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        Ok(tasks
            .summaries()?
            .filter(|t| query::stalled(t, now))
            .count())
    }

    /// [`Transaction::trail`] from the tasks in full: the file store's
    /// answer, and a database's whose tables no writer has given a trail
    /// yet.
    pub fn trail<T: Transaction + ?Sized>(
        tasks: &T,
        q: &TrailQuery,
    ) -> Result<Vec<TrailEntry>, StoreError> {
        let found = match &q.task {
            Some(id) => tasks.get(id)?.into_iter().collect(),
            None => tasks.get_where(&|_| true)?,
        };
        Ok(trail::in_memory(&found, q))
    }
}

/// A task of a page as [`Transaction::page_listed`] hands it.
#[derive(Debug)]
pub enum Listed<'a> {
    /// A run of `count` tasks' JSON, each as `serde_json::to_writer`
    /// writes the task, joined by commas: tasks that nothing of is masked
    /// ([`rudder_model::schema::mask_task`] changes only a task with an
    /// input schema and an answer, or with earlier answers).
    Json { text: &'a [u8], count: usize },
    /// The task itself (one with an answer, which the caller masks as it
    /// shows it, or one the backend could not hand as text).
    Task(Box<Task>),
}

impl Transaction for TaskMap {
    fn len(&self) -> Result<usize, StoreError> {
        Ok(IndexMap::len(self))
    }
    fn ids(&self) -> Result<Box<dyn Iterator<Item = &str> + '_>, StoreError> {
        Ok(Box::new(self.keys().map(String::as_str)))
    }
    fn contains(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.contains_key(id))
    }
    fn summaries(&self) -> Result<Box<dyn Iterator<Item = Summary<'_>> + '_>, StoreError> {
        Ok(Box::new(self.values().map(Summary::of)))
    }
    fn summary(&self, id: &str) -> Result<Option<Summary<'_>>, StoreError> {
        Ok(IndexMap::get(self, id).map(Summary::of))
    }
    fn get(&self, id: &str) -> Result<Option<Task>, StoreError> {
        Ok(IndexMap::get(self, id).cloned())
    }
    fn get_where(&self, keep: &dyn Fn(&Summary) -> bool) -> Result<Vec<Task>, StoreError> {
        scan::get_where(self, keep)
    }
    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError> {
        Ok(IndexMap::get_mut(self, id))
    }
    fn insert(&mut self, task: Task) -> Result<(), StoreError> {
        IndexMap::insert(self, task.task_id.clone(), task);
        Ok(())
    }
    fn remove(&mut self, id: &str) -> Result<bool, StoreError> {
        Ok(self.shift_remove(id).is_some())
    }
    fn clear(&mut self) -> Result<(), StoreError> {
        IndexMap::clear(self);
        Ok(())
    }
    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        scan::find_key(self, key)
    }
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        scan::ids_with_prefix(self, prefix, limit)
    }
    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        kinds: &[String],
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        scan::next_claimable(self, now, kinds, wanted)
    }
    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        scan::stale(self, now, older_than)
    }
    fn prunable(
        &self,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        scan::prunable(self, now, older_than)
    }
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        scan::page(self, q)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        scan::counts(self)
    }
    fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError> {
        scan::trail(self, q)
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        scan::stalled(self, now)
    }
}
