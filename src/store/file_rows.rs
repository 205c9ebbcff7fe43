//! The rows of a JSON file store for a reader that pages (the TUI): what
//! each task is sorted and filtered by, kept between two reads of the file,
//! with each task's text read again only when it changed.
//!
//! A file has no index, so the page query is answered from these rows in
//! memory; each task is kept without its payloads (input, result, request,
//! history, unknown fields), and the few tasks a page returns are read in
//! full from the text of the last read.

use std::ops::Range;
use std::sync::RwLock;

use indexmap::IndexMap;

use super::file::{TaskDigest, text_hash};
use super::query::{self, PageQuery, SortKey, StatusCounts};
use super::{FileBackend, StoreError, scan};
use crate::task::{Task, TaskMap};

/// One task as the rows keep it.
struct Row {
    /// Of the task's text (0: not known, read the checked way).
    hash: u64,
    /// Where the task's text is in the last read's bytes.
    range: Range<usize>,
    /// The task without its payloads.
    light: Task,
}

/// What the last read gave the full tasks from.
enum Text {
    /// The file's bytes, each row's text at its range.
    Bytes(Vec<u8>),
    /// Every task, parsed: a file not laid out as rudder writes it.
    Tasks(TaskMap),
}

struct State {
    rows: IndexMap<String, Row>,
    text: Text,
}

/// The rows of a JSON file store, read again with [`FileRows::refresh`].
pub struct FileRows {
    backend: FileBackend,
    state: RwLock<State>,
}

/// `task` without what no row, filter or order needs.
fn light(mut task: Task) -> Task {
    task.input_schema = None;
    task.input_value = None;
    task.result = None;
    task.request = None;
    task.history = Vec::new();
    task.extra = IndexMap::new();
    task
}

impl FileRows {
    /// The rows of the file `backend` reads; empty until the first
    /// [`FileRows::refresh`].
    pub fn new(backend: FileBackend) -> Self {
        FileRows {
            backend,
            state: RwLock::new(State {
                rows: IndexMap::new(),
                text: Text::Tasks(TaskMap::new()),
            }),
        }
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the file again: a task whose text did not change keeps its row,
    /// the others are read. Gives every task's digest in file order (what
    /// the change feed compares), or `None` when the file does not exist
    /// (the rows are then empty). A file that does not read leaves the rows
    /// as they were and gives the checked read's error.
    pub fn refresh(&self) -> Result<Option<IndexMap<String, TaskDigest>>, StoreError> {
        let Some(bytes) = self.backend.read_bytes()? else {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            state.rows = IndexMap::new();
            state.text = Text::Tasks(TaskMap::new());
            return Ok(None);
        };
        let quick = {
            let state = self.state();
            Self::quick(&bytes, &state.rows)
        };
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        let next = match quick {
            Some(fresh) => {
                let mut old = std::mem::take(&mut state.rows);
                let rows = fresh
                    .into_iter()
                    .map(|(id, hash, range, task)| {
                        let light = match task {
                            Some(t) => t,
                            // Reused: its hash was checked against this row.
                            None => old.swap_remove(&id).expect("a kept row").light,
                        };
                        (id, Row { hash, range, light })
                    })
                    .collect();
                State {
                    rows,
                    text: Text::Bytes(bytes),
                }
            }
            None => {
                // The checked read decides and places any error.
                drop(state);
                let tasks = super::codec::decode(self.backend.path(), &bytes)?;
                state = self.state.write().unwrap_or_else(|p| p.into_inner());
                let rows = tasks
                    .iter()
                    .map(|(id, t)| {
                        let row = Row {
                            hash: 0,
                            range: 0..0,
                            light: light(t.clone()),
                        };
                        (id.clone(), row)
                    })
                    .collect();
                State {
                    rows,
                    text: Text::Tasks(tasks),
                }
            }
        };
        *state = next;
        let digests = state
            .rows
            .iter()
            .map(|(id, r)| {
                let digest = TaskDigest {
                    revision: r.light.revision,
                    status: r.light.status,
                    updated_at: r.light.updated_at,
                    hash: r.hash,
                };
                (id.clone(), digest)
            })
            .collect();
        Ok(Some(digests))
    }

    /// The tasks of a file laid out as rudder writes it, in file order:
    /// id, hash, range, and the task (without payloads) unless `old` has
    /// its row with the same hash. `None` when the file does not split as
    /// a store, a changed task does not read, or an id repeats.
    #[allow(clippy::type_complexity)]
    fn quick(
        bytes: &[u8],
        old: &IndexMap<String, Row>,
    ) -> Option<Vec<(String, u64, Range<usize>, Option<Task>)>> {
        let text = std::str::from_utf8(bytes).ok()?;
        // Read on every core: each changed task is parsed where it is found.
        let runs = scan::split_map(text, |key, rest| {
            let len = scan::skip_container(rest.as_bytes(), 0)?;
            let json = &rest[..len];
            let hash = text_hash(json.as_bytes());
            if old.get(key).is_some_and(|r| r.hash == hash) {
                return Some(((hash, None), len));
            }
            let (task, used) = scan::parse_one::<Task>(json)?;
            if used != len || task.task_id != key {
                return None;
            }
            Some(((hash, Some(light(task))), len))
        })?;
        let base = text.as_ptr() as usize;
        let mut seen = std::collections::HashSet::with_capacity(runs.iter().map(Vec::len).sum());
        let mut out = Vec::with_capacity(seen.capacity());
        for (key, json, (hash, task)) in runs.into_iter().flatten() {
            // A repeated key is left to the checked read.
            if !seen.insert(key.clone()) {
                return None;
            }
            let start = json.as_ptr() as usize - base;
            out.push((key.into_owned(), hash, start..start + json.len(), task));
        }
        Some(out)
    }

    /// One page of tasks, read in full ([`PageQuery`] as
    /// [`query::page_in_memory`] answers it, over the rows).
    pub fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        let state = self.state();
        let rows = &state.rows;
        // The order as the query walks it: store order is the file's.
        let order = |a: (usize, &Task), b: (usize, &Task)| {
            let o = match q.sort {
                SortKey::Store => a.0.cmp(&b.0),
                sort => query::compare(sort, a.1, b.1),
            };
            if q.descending { o.reverse() } else { o }
        };
        let anchor = q.after.as_deref().map(|a| (a, rows.get_full(a)));
        let keep = |t: &Task| {
            (q.statuses.is_empty() || q.statuses.contains(&t.status))
                && q.text.as_deref().is_none_or(|n| query::text_matches(t, n))
        };
        let mut hits: Vec<(usize, &Task)> = rows
            .values()
            .enumerate()
            .map(|(i, r)| (i, &r.light))
            .filter(|(i, t)| {
                keep(t)
                    && match anchor {
                        None => true,
                        Some((_, Some((at, _, r)))) => order((*i, t), (at, &r.light)).is_gt(),
                        // An id not in the store starts where it would
                        // stand in id order, and from the start otherwise.
                        Some((id, None)) if q.sort == SortKey::Id => {
                            if q.descending {
                                t.task_id.as_str() < id
                            } else {
                                t.task_id.as_str() > id
                            }
                        }
                        Some((_, None)) => true,
                    }
            })
            .collect();
        let limit = q.limit.unwrap_or(usize::MAX);
        if hits.len() > limit {
            if limit == 0 {
                return Ok(Vec::new());
            }
            hits.select_nth_unstable_by(limit - 1, |a, b| order(*a, *b));
            hits.truncate(limit);
        }
        hits.sort_unstable_by(|a, b| order(*a, *b));
        let ids: Vec<&str> = hits.iter().map(|(_, t)| t.task_id.as_str()).collect();
        ids.into_iter()
            .filter_map(|id| self.full(&state, id).transpose())
            .collect()
    }

    /// How many tasks have each status.
    pub fn counts(&self) -> StatusCounts {
        let mut counts = StatusCounts::default();
        for r in self.state().rows.values() {
            *counts.0.entry(r.light.status).or_default() += 1;
        }
        counts
    }

    /// How many tasks are stalled at `now` ([`Task::stalled`]).
    pub fn stalled(&self, now: chrono::DateTime<chrono::Utc>) -> usize {
        let state = self.state();
        state.rows.values().filter(|r| r.light.stalled(now)).count()
    }

    /// One task in full, by its full id.
    pub fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        self.full(&self.state(), id)
    }

    fn full(&self, state: &State, id: &str) -> Result<Option<Task>, StoreError> {
        let Some(row) = state.rows.get(id) else {
            return Ok(None);
        };
        match &state.text {
            Text::Tasks(tasks) => Ok(tasks.get(id).cloned()),
            Text::Bytes(bytes) => serde_json::from_slice(&bytes[row.range.clone()])
                .map(Some)
                // It parsed when the rows were read.
                .map_err(|e| StoreError::Corrupt {
                    location: self.backend.location(),
                    line: None,
                    column: None,
                    message: e.to_string(),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewTask, Store};
    use crate::task::{Actor, Status};

    /// Every query the TUI's window asks, answered by the rows as by the
    /// in-memory reference over the whole file.
    fn agrees(rows: &FileRows, path: &std::path::Path) {
        let tasks = FileBackend::new(path)
            .load_existing()
            .expect("read")
            .unwrap_or_default();
        let all: Vec<Task> = tasks.values().cloned().collect();
        let mut afters: Vec<Option<String>> = vec![None, Some("zzzz".into()), Some("0".into())];
        afters.extend(all.iter().step_by(3).map(|t| Some(t.task_id.clone())));
        let filters = [
            vec![],
            vec![Status::Working],
            vec![Status::Completed, Status::Cancelled],
        ];
        for sort in [
            SortKey::Store,
            SortKey::Id,
            SortKey::Created,
            SortKey::Updated,
            SortKey::Title,
        ] {
            for descending in [false, true] {
                for after in &afters {
                    for statuses in &filters {
                        for (limit, text) in [(Some(3), None), (None, Some("2")), (Some(0), None)] {
                            let q = PageQuery {
                                statuses: statuses.clone(),
                                sort,
                                limit,
                                after: after.clone(),
                                descending,
                                text: text.map(str::to_string),
                            };
                            let want = query::page_in_memory(all.clone(), &q);
                            assert_eq!(rows.page(&q).expect("page"), want, "{q:?}");
                        }
                    }
                }
            }
        }
        let mut counts = StatusCounts::default();
        for t in &all {
            *counts.0.entry(t.status).or_default() += 1;
        }
        assert_eq!(rows.counts(), counts);
        for t in &all {
            assert_eq!(rows.task(&t.task_id).expect("task").as_ref(), Some(t));
        }
    }

    #[test]
    fn pages_agree_with_the_whole_file_across_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let rows = FileRows::new(FileBackend::new(&path));
        assert_eq!(rows.refresh().expect("read"), None, "no file yet");
        let store = Store::open(&path);
        let mut ids = Vec::new();
        for i in 0..12 {
            let new = NewTask {
                title: (i % 4 != 0).then(|| format!("job {}", i % 5)),
                request: Some(serde_json::json!({"n": i})),
                ..NewTask::default()
            };
            ids.push(store.create(new).expect("create").task.task_id);
        }
        store.cancel(&ids[3], None).expect("cancel");
        let first = rows.refresh().expect("read").expect("a file");
        assert_eq!(first.len(), 12);
        agrees(&rows, &path);
        // A task whose text did not change keeps its row as it was: a row
        // changed here (it can only be told apart this way) stays changed.
        {
            let mut state = rows.state.write().unwrap();
            state.rows[&ids[0]].light.revision = 99;
            state.rows[&ids[1]].light.revision = 99;
        }
        store
            .heartbeat(&ids[1], Some("beat 2".into()), None, Actor::Anyone)
            .expect("heartbeat");
        let next = rows.refresh().expect("read").expect("a file");
        assert_eq!(next[&ids[0]].revision, 99, "reused");
        assert_eq!(next[&ids[1]].revision, 2, "read again");
        rows.state.write().unwrap().rows[&ids[0]].light.revision = 1;
        agrees(&rows, &path);
        // A file not laid out as rudder writes it is read the checked way.
        let tasks = FileBackend::new(&path).load_existing().unwrap().unwrap();
        std::fs::write(&path, serde_json::to_vec(&tasks).unwrap()).expect("write");
        rows.refresh().expect("read").expect("a file");
        agrees(&rows, &path);
        // One that does not read keeps the rows and says where it broke.
        std::fs::write(&path, b"{\"x\": {\"task_id\": 3}}\n").expect("write");
        let e = rows.refresh().expect_err("refused");
        assert!(e.to_string().contains("line 1"), "{e}");
        assert_eq!(rows.counts().total(), 12);
        // Gone: nothing is known.
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(rows.refresh().expect("read"), None);
        assert_eq!(rows.counts().total(), 0);
        assert!(rows.task(&ids[0]).expect("task").is_none());
    }
}
