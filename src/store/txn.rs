//! The tasks as an operation sees them inside a transaction.
//!
//! [`Transaction`] is what a backend hands to a read-modify-write: summaries
//! for the scans, full tasks only for those an operation reads or changes.
//! [`TaskMap`] implements it for a store held whole in memory; the JSON file
//! backend uses [`FileTxn`], which keeps every task it was not asked for as
//! the exact text it had in the file and writes that text back unchanged.

use std::borrow::Cow;
use std::path::Path;

use indexmap::IndexMap;

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::StoreError;
use super::codec::{self, Piece};
use super::index::{Summary, TaskIndex};
use super::query::{self, PageQuery, Stale, StatusCounts, SummaryBuf};
use super::{limits, scan};
use crate::task::{Task, TaskMap};

/// The tasks of a store under exclusive access, in store order.
pub trait Transaction {
    /// How many tasks there are.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Every task id, in store order.
    fn ids(&self) -> Box<dyn Iterator<Item = &str> + '_>;
    fn contains(&self, id: &str) -> bool;
    /// What the scans need of every task, in store order.
    fn summaries(&self) -> Box<dyn Iterator<Item = Summary<'_>> + '_>;
    /// What the scans need of the task `id`.
    fn summary(&self, id: &str) -> Option<Summary<'_>>;
    /// The task `id` in full.
    fn get(&self, id: &str) -> Result<Option<Task>, StoreError>;
    /// Every task whose summary `keep` accepts, in full, in store order.
    fn get_where(&self, keep: &dyn Fn(&Summary) -> bool) -> Result<Vec<Task>, StoreError> {
        let ids: Vec<&str> = self
            .summaries()
            .filter(|t| keep(t))
            .map(|t| t.task_id)
            .collect();
        let tasks = ids.into_iter().map(|id| self.get(id));
        tasks
            .map(|t| t.map(|t| t.expect("listed tasks exist")))
            .collect()
    }
    /// The task `id`, to change in place: written back if the transaction commits.
    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError>;
    /// Add a task under its `task_id` (at the end), or replace the task with
    /// that id where it stands.
    fn insert(&mut self, task: Task);
    /// Remove the task `id`; whether there was one.
    fn remove(&mut self, id: &str) -> bool;
    fn clear(&mut self);

    // The indexed operations the policy uses. The defaults scan the
    // summaries (the JSON file backend); a database answers from its
    // indexes. See `query.rs` for what each answer may contain.

    /// The id of the task created with idempotency key `key`.
    fn find_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .summaries()
            .find(|t| t.idempotency_key == Some(key))
            .map(|t| t.task_id.to_string()))
    }
    /// At most `limit` ids that start with `prefix`, in any order.
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        Ok(self
            .ids()
            .filter(|k| k.starts_with(prefix))
            .take(limit)
            .map(str::to_string)
            .collect())
    }
    /// The first claimable task in store order (see [`query::claimable`])
    /// that `wanted` accepts (a worker that runs only some kinds of task).
    fn next_claimable(
        &self,
        now: DateTime<Utc>,
        wanted: &dyn Fn(&Summary) -> bool,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .summaries()
            .find(|t| query::claimable(t, now) && wanted(t))
            .map(|t| t.task_id.to_string()))
    }
    /// The unfinished tasks reclaim must look at, in store order (at least
    /// those [`query::reclaim_candidate`] accepts).
    fn stale(&self, now: DateTime<Utc>, older_than: Duration) -> Result<Stale, StoreError> {
        let mut stale = Stale::default();
        for t in self.summaries().filter(|t| !t.status.is_terminal()) {
            stale.unfinished += 1;
            if query::reclaim_candidate(&t, now, older_than) {
                stale.candidates.push(SummaryBuf::of(&t));
            }
        }
        Ok(stale)
    }
    /// The finished tasks prune must look at, in store order (at least
    /// those [`query::prune_candidate`] accepts).
    fn prunable(
        &self,
        now: DateTime<Utc>,
        older_than: Duration,
    ) -> Result<Vec<SummaryBuf>, StoreError> {
        Ok(self
            .summaries()
            .filter(|t| query::prune_candidate(t, now, older_than))
            .map(|t| SummaryBuf::of(&t))
            .collect())
    }
    /// One page of tasks in full.
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        // The anchor too, wherever the filter leaves it: the page starts
        // after it.
        let tasks = self.get_where(&|t| {
            q.statuses.is_empty()
                || q.statuses.contains(&t.status)
                || q.after.as_deref() == Some(t.task_id)
        })?;
        Ok(query::page_in_memory(tasks, q))
    }
    /// How many tasks have each status.
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        let mut counts = StatusCounts::default();
        for t in self.summaries() {
            *counts.0.entry(t.status).or_default() += 1;
        }
        Ok(counts)
    }
}

impl Transaction for TaskMap {
    fn len(&self) -> usize {
        IndexMap::len(self)
    }
    fn ids(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        Box::new(self.keys().map(String::as_str))
    }
    fn contains(&self, id: &str) -> bool {
        self.contains_key(id)
    }
    fn summaries(&self) -> Box<dyn Iterator<Item = Summary<'_>> + '_> {
        Box::new(self.values().map(Summary::of))
    }
    fn summary(&self, id: &str) -> Option<Summary<'_>> {
        IndexMap::get(self, id).map(Summary::of)
    }
    fn get(&self, id: &str) -> Result<Option<Task>, StoreError> {
        Ok(IndexMap::get(self, id).cloned())
    }
    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError> {
        Ok(IndexMap::get_mut(self, id))
    }
    fn insert(&mut self, task: Task) {
        IndexMap::insert(self, task.task_id.clone(), task);
    }
    fn remove(&mut self, id: &str) -> bool {
        self.shift_remove(id).is_some()
    }
    fn clear(&mut self) {
        IndexMap::clear(self);
    }
}

/// One task of a [`FileTxn`].
enum Entry<'a> {
    /// Untouched: its text in the file, and what the scans need of it.
    Raw { json: &'a str, index: TaskIndex<'a> },
    /// Read for a change, or new: written anew on commit.
    Full(Box<Task>),
    /// Removed (kept as a tombstone so that removing many tasks stays cheap).
    Removed,
}

impl Entry<'_> {
    fn live(&self) -> bool {
        !matches!(self, Entry::Removed)
    }
}

/// The tasks of a store file, parsed only as far as an operation needs.
pub(super) struct FileTxn<'a> {
    path: &'a Path,
    entries: IndexMap<Cow<'a, str>, Entry<'a>>,
    live: usize,
    size_hint: usize,
}

impl<'a> FileTxn<'a> {
    /// An empty store (no file yet).
    pub fn empty(path: &'a Path) -> Self {
        FileTxn {
            path,
            entries: IndexMap::new(),
            live: 0,
            size_hint: 0,
        }
    }

    /// Split and check a store file. `None` unless the file is a valid store
    /// (then every task is known to deserialize); `None` may also mean the
    /// file is valid but unusual (say, a repeated key): the caller then reads
    /// it with [`codec::decode`], whose verdict and error positions are final.
    pub fn parse(path: &'a Path, bytes: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let runs = scan::split_map(text, |_, rest| scan::parse_one::<TaskIndex>(rest))?;
        let mut entries = IndexMap::with_capacity(runs.iter().map(Vec::len).sum());
        for (key, json, index) in runs.into_iter().flatten() {
            // A repeated key (serde_json keeps the last value at the first
            // position) is left to the whole-file parse.
            if index.task_id != key || entries.insert(key, Entry::Raw { json, index }).is_some() {
                return None;
            }
        }
        let live = entries.len();
        Some(FileTxn {
            path,
            entries,
            live,
            size_hint: bytes.len(),
        })
    }

    /// The file's new content: untouched tasks as they were, the others
    /// serialized as [`codec::encode`] does.
    pub fn encode(&self) -> Vec<u8> {
        let pieces = self.entries.iter().filter_map(|(key, e)| match e {
            Entry::Raw { json, .. } => Some((key.as_ref(), Piece::Raw(json))),
            Entry::Full(task) => Some((key.as_ref(), Piece::Task(task))),
            Entry::Removed => None,
        });
        codec::encode_pieces(pieces, self.size_hint)
    }

    /// Refuse the commit if a task read for a change, or new, holds a value
    /// that the store cannot hold (the untouched ones were read from the
    /// file, so a reader takes them as they are).
    pub fn check_changed(&self) -> Result<(), StoreError> {
        for entry in self.entries.values() {
            if let Entry::Full(task) = entry {
                limits::check_task(task)?;
            }
        }
        Ok(())
    }

    fn full(&self, key: &str, json: &str) -> Result<Task, StoreError> {
        serde_json::from_str(json).map_err(|e| StoreError::Corrupt {
            path: self.path.to_path_buf(),
            line: None,
            column: None,
            message: format!("the task {key:?} does not read back: {e}"),
        })
    }
}

impl Transaction for FileTxn<'_> {
    fn len(&self) -> usize {
        self.live
    }

    fn ids(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        Box::new(
            self.entries
                .iter()
                .filter(|(_, e)| e.live())
                .map(|(k, _)| k.as_ref()),
        )
    }

    fn contains(&self, id: &str) -> bool {
        self.entries.get(id).is_some_and(Entry::live)
    }

    fn summaries(&self) -> Box<dyn Iterator<Item = Summary<'_>> + '_> {
        Box::new(self.entries.values().filter_map(|e| match e {
            Entry::Raw { index, .. } => Some(index.summary()),
            Entry::Full(task) => Some(Summary::of(task)),
            Entry::Removed => None,
        }))
    }

    fn summary(&self, id: &str) -> Option<Summary<'_>> {
        match self.entries.get(id)? {
            Entry::Raw { index, .. } => Some(index.summary()),
            Entry::Full(task) => Some(Summary::of(task)),
            Entry::Removed => None,
        }
    }

    fn get(&self, id: &str) -> Result<Option<Task>, StoreError> {
        match self.entries.get(id) {
            Some(Entry::Raw { json, .. }) => self.full(id, json).map(Some),
            Some(Entry::Full(task)) => Ok(Some(Task::clone(task))),
            Some(Entry::Removed) | None => Ok(None),
        }
    }

    /// The tasks are read on all cores.
    fn get_where(&self, keep: &dyn Fn(&Summary) -> bool) -> Result<Vec<Task>, StoreError> {
        let chosen: Vec<(&str, &Entry)> = self
            .entries
            .iter()
            .filter(|(_, e)| match e {
                Entry::Raw { index, .. } => keep(&index.summary()),
                Entry::Full(task) => keep(&Summary::of(task)),
                Entry::Removed => false,
            })
            .map(|(k, e)| (k.as_ref(), e))
            .collect();
        let weight = |(_, e): &(&str, &Entry)| match e {
            Entry::Raw { json, .. } => json.len(),
            _ => 1,
        };
        let read = |&(key, e): &(&str, &Entry)| match e {
            Entry::Raw { json, .. } => Some(self.full(key, json)),
            Entry::Full(task) => Some(Ok(Task::clone(task))),
            Entry::Removed => None,
        };
        let tasks = scan::par_map(&chosen, weight, read).expect("only live tasks were chosen");
        tasks.into_iter().collect()
    }

    fn get_mut(&mut self, id: &str) -> Result<Option<&mut Task>, StoreError> {
        let Some(i) = self.entries.get_index_of(id) else {
            return Ok(None);
        };
        if let Entry::Raw { json, .. } = &self.entries[i] {
            let task = self.full(id, json)?;
            self.entries[i] = Entry::Full(Box::new(task));
        }
        match &mut self.entries[i] {
            Entry::Full(task) => Ok(Some(task)),
            _ => Ok(None),
        }
    }

    fn insert(&mut self, task: Task) {
        match self.entries.get_index_of(task.task_id.as_str()) {
            Some(i) if self.entries[i].live() => {
                self.entries[i] = Entry::Full(Box::new(task));
            }
            found => {
                // A removed id comes back at the end, as in a map.
                if let Some(i) = found {
                    self.entries.shift_remove_index(i);
                }
                let key = Cow::Owned(task.task_id.clone());
                self.entries.insert(key, Entry::Full(Box::new(task)));
                self.live += 1;
            }
        }
    }

    fn remove(&mut self, id: &str) -> bool {
        match self.entries.get_mut(id) {
            Some(e) if e.live() => {
                *e = Entry::Removed;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreError};
    use crate::task::{Actor, Status};

    const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
    const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

    /// Task A as another tool might write it: compact, its own key order, an
    /// escape rudder would not write, an unknown field, odd spacing.
    fn odd_task_a() -> String {
        format!(
            r#"{{"revision":2,"history":[],"status":"working","title":"caf\u00e9 \"x\"","task_id":"{A}","owner":{{"team":"支付平台","n":1.50}},"request":{{"b":1,"a":[ ]}}}}"#
        )
    }

    fn store_with(a: &str, b_status_line: &str) -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.json");
        let text = format!(
            "{{\n  \"{A}\": {a},\n  \"{B}\": {{\n    \"task_id\": \"{B}\",\n    {b_status_line},\n    \"revision\": 1,\n    \"history\": []\n  }}\n}}\n"
        );
        std::fs::write(&path, &text).unwrap();
        (dir, Store::open(&path), text)
    }

    #[test]
    fn a_write_copies_untouched_tasks_byte_for_byte() {
        let a = odd_task_a();
        let (_dir, store, _) = store_with(&a, "\"status\": \"working\"");
        let before = store.get(A).unwrap();
        store
            .heartbeat(B, Some("step 2".into()), None, Actor::Anyone)
            .unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.starts_with(&format!(
            "{{\n  \"{A}\": {a},\n  \"{B}\": {{\n    \"task_id\""
        )));
        assert!(text.ends_with("\n  }\n}\n"));
        assert_eq!(store.get(A).unwrap(), before);
        let b = store.get(B).unwrap();
        assert_eq!(b.status_message.as_deref(), Some("step 2"));
        assert_eq!(b.revision, 2);
        // The changed task is written as `encode` writes it.
        let whole = crate::store::encode(&store.load().unwrap(), 0);
        let whole = String::from_utf8(whole).unwrap();
        let b_text = &text[text.find(&format!("\"{B}\": ")).unwrap()..];
        assert!(whole.ends_with(b_text), "{whole}\n---\n{b_text}");

        // A create appends; A is still untouched; a prune removes B only.
        store.cancel(B, None).unwrap();
        let created = store.create(crate::store::NewTask::default()).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains(&a));
        let ids: Vec<String> = store.load().unwrap().into_keys().collect();
        assert_eq!(ids, [A, B, created.task.task_id.as_str()]);
        let pruned = store.prune(std::time::Duration::ZERO).unwrap();
        assert_eq!(pruned.removed.len(), 1);
        assert_eq!(pruned.removed[0].task_id, B);
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains(&a) && !text.contains(B));
        let ids: Vec<String> = store.load().unwrap().into_keys().collect();
        assert_eq!(ids, [A, created.task.task_id.as_str()]);
    }

    #[test]
    fn writers_refuse_a_semantically_broken_task_elsewhere() {
        let broken_b = [
            (
                "\"status\": \"working\",\n    \"updated_at\": \"yesterday\"",
                6,
            ),
            (
                "\"status\": \"working\",\n    \"progress\": {\"current\": \"1\", \"total\": 2}",
                6,
            ),
            ("\"status\": \"working\",\n    \"ttl_ms\": -5", 6),
            // (`1e999` itself is a number serde_json keeps exactly.)
            (
                "\"status\": \"working\",\n    \"poll_interval_ms\": 1e999",
                6,
            ),
            ("\"status\": \"paused\"", 5),
        ];
        for (line, at) in broken_b {
            let (_dir, store, text) = store_with(&odd_task_a(), line);
            let ops: [&dyn Fn() -> Result<(), StoreError>; 4] = [
                &|| store.heartbeat(A, None, None, Actor::Anyone).map(drop),
                &|| store.create(crate::store::NewTask::default()).map(drop),
                &|| store.prune(std::time::Duration::ZERO).map(drop),
                &|| {
                    store
                        .claim_next("w", std::time::Duration::from_secs(1))
                        .map(drop)
                },
            ];
            for op in ops {
                match op() {
                    Err(StoreError::Corrupt {
                        line: Some(l),
                        column: Some(_),
                        ..
                    }) => {
                        assert_eq!(l, at, "{line}");
                    }
                    other => panic!("{line}: {other:?}"),
                }
                assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
            }
            assert!(store.load().is_err());
            assert_eq!(store.get(A).map(|t| t.status).ok(), None::<Status>);
        }
    }
}
