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

use super::file::TaskDigest;
use super::fs::Identity;
use super::{FileBackend, scan};
use crate::index;
use rudder_core::StoreError;
use rudder_core::query::{self, PageQuery, SortKey, StatusCounts};
use rudder_model::task::{Task, TaskMap};

/// One task as the rows keep it.
struct Row {
    /// Where the task's text is in the last read's bytes (empty: not
    /// known, the file was read the checked way).
    range: Range<usize>,
    /// The task without its payloads.
    light: Task,
}

impl Row {
    fn digest(&self) -> TaskDigest {
        TaskDigest {
            revision: self.light.revision,
            status: self.light.status,
            updated_at: self.light.updated_at,
            hash: 0,
        }
    }
}

/// What the last read gave the full tasks from.
enum Text {
    /// The file's bytes, each row's text at its range.
    Bytes(Vec<u8>),
    /// Every task, parsed: a file not laid out as rudder writes it.
    Tasks(TaskMap),
}

impl Text {
    /// The text of `row` as the last read had it, if known.
    fn of(&self, row: &Row) -> Option<&[u8]> {
        match self {
            Text::Bytes(bytes) if !row.range.is_empty() => bytes.get(row.range.clone()),
            _ => None,
        }
    }
}

struct State {
    rows: IndexMap<String, Row>,
    text: Text,
    /// Whether the file existed at the last read. A missing file shows no
    /// rows, but they are kept: they are the last good state, which the
    /// next read is compared with.
    present: bool,
    /// The identity of the file the last good read read, if settled.
    identity: Option<Identity>,
    /// The buffer of the read before the last, which the next read reuses
    /// (a large file read into fresh memory at every change pays for
    /// clearing it page by page).
    spare: Vec<u8>,
}

/// The rows of a JSON file store, read again with [`FileRows::refresh`].
pub struct FileRows {
    backend: FileBackend,
    state: RwLock<State>,
    /// How many times the file was read.
    reads: std::sync::atomic::AtomicU64,
}

/// One task that changed between two good reads of the file: what its
/// summary said before (`None`: it appeared) and after (`None`: it is
/// gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowChange {
    pub task_id: String,
    pub before: Option<TaskDigest>,
    pub after: Option<TaskDigest>,
}

/// `task` without what no row, filter or order needs.
fn light(mut task: Task) -> Task {
    task.input_schema = None;
    task.input_value = None;
    task.answered = Vec::new();
    task.result = None;
    task.request = None;
    task.history = Vec::new();
    task.extra = IndexMap::new();
    task
}

/// The task whose text is `json`, without its payloads, if it reads on its
/// own as a task of that id (as [`super::codec::decode`] reads a task).
fn parse_light(key: &str, json: &[u8]) -> Option<Task> {
    let (task, used) = scan::parse_one_bytes::<Task>(json)?;
    (used == json.len() && task.task_id == key && !index::too_deep(&task)).then(|| light(task))
}

/// What a read found of the file, against the rows before, in file order.
enum Piece {
    /// The rows at these indices, one after the other, their text
    /// unchanged, now `shift` bytes further on.
    Same(Range<usize>, isize),
    /// The row at this index, its text changed (now at the range): the task
    /// read again.
    Changed(usize, Range<usize>, Box<Task>),
    /// A task no row had, at the range.
    Added(String, Range<usize>, Box<Task>),
}

/// More changed tasks than this in one read are left to the read that
/// parses on every core.
const FOLLOW_MAX_CHANGED: usize = 4096;

/// Whether `b` holds only white space from `i` on.
fn only_ws(b: &[u8], i: usize) -> bool {
    scan::skip_ws(b, i) == b.len()
}

/// How many bytes `a` and `b` have in common from their starts.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The file `new` read against `rows` and the text `old` they were read
/// from, without scanning or parsing what did not change: where an entry's
/// value starts, the bytes it has in common with the row of its key (from
/// that row's value on) are compared in one go, and every row whose value
/// ends inside them is the same (the same bytes are the same complete JSON
/// values, keys and separators, which read before). Only the rest is
/// scanned, and only changed tasks are parsed. `None` when the file does
/// not read this way (not laid out as a store, a repeated id, a changed
/// task that does not read, too many changed tasks): the read that splits
/// the file decides then.
fn follow(rows: &IndexMap<String, Row>, old: &Text, new: &[u8]) -> Option<Vec<Piece>> {
    let Text::Bytes(old) = old else {
        return None;
    };
    let b = new;
    let mut i = scan::skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = scan::skip_ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return only_ws(b, i + 1).then_some(out);
    }
    let mut consumed = vec![false; rows.len()];
    let mut added = std::collections::HashSet::new();
    let mut changed = 0;
    let mut next = 0;
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = scan::skip_str(b, i)?;
        let key = scan::key(std::str::from_utf8(&b[i..key_end]).ok()?)?;
        i = scan::skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = scan::skip_ws(b, i + 1);
        if b.get(start) != Some(&b'{') {
            return None;
        }
        // The row expected next (writers keep the order), else any.
        let at = match rows.get_index(next) {
            Some((id, _)) if *id == key => Some(next),
            _ => rows.get_index_of(key.as_ref()),
        };
        let end = match at {
            Some(k) if consumed[k] => return None,
            Some(k) => {
                let from = rows[k].range.start;
                let common = common_prefix(&b[start..], &old[from..]);
                if rows[k].range.len() <= common {
                    // This row and those after it that the common bytes
                    // hold.
                    let mut m = k;
                    while let Some((_, r)) = rows.get_index(m)
                        && r.range.end - from <= common
                    {
                        if std::mem::replace(&mut consumed[m], true) {
                            return None;
                        }
                        m += 1;
                    }
                    next = m;
                    let shift = start as isize - from as isize;
                    out.push(Piece::Same(k..m, shift));
                    (rows[m - 1].range.end as isize + shift) as usize
                } else {
                    consumed[k] = true;
                    next = k + 1;
                    let end = scan::skip_container(b, start)?;
                    changed += 1;
                    let task = parse_light(&key, &b[start..end])?;
                    out.push(Piece::Changed(k, start..end, Box::new(task)));
                    end
                }
            }
            None => {
                if !added.insert(key.clone()) {
                    return None;
                }
                let end = scan::skip_container(b, start)?;
                changed += 1;
                let task = parse_light(&key, &b[start..end])?;
                out.push(Piece::Added(key.into_owned(), start..end, Box::new(task)));
                end
            }
        };
        if changed > FOLLOW_MAX_CHANGED {
            return None;
        }
        i = scan::skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = scan::skip_ws(b, i + 1),
            Some(b'}') => return only_ws(b, i + 1).then_some(out),
            _ => return None,
        }
    }
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
                present: false,
                identity: None,
                spare: Vec::new(),
            }),
            reads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many times the file was read (a refresh that found the file as
    /// it was does not read it).
    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn state_mut(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the file again: a task whose text did not change keeps its row,
    /// the others are read. Gives what changed since the last good read
    /// (tasks in file order, then those gone; every task at the first
    /// read), or `None` when the file does not exist (no rows are shown
    /// then, but they are kept to compare the next read with). A file that
    /// does not read leaves the rows as they were and gives the checked
    /// read's error. A file whose settled identity is the last read's is
    /// not read again: that names the same content (see
    /// [`Identity::settled`]), and a rudder writer's own events come in
    /// twice (the rename, then its closing the file).
    pub fn refresh(&self) -> Result<Option<Vec<RowChange>>, StoreError> {
        {
            let state = self.state();
            if state.present
                && state.identity.is_some()
                && self.backend.identity() == state.identity
            {
                return Ok(Some(Vec::new()));
            }
        }
        let mut bytes = std::mem::take(&mut self.state_mut().spare);
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(identity) = self.backend.read_bytes_into(&mut bytes)? else {
            let mut state = self.state_mut();
            state.present = false;
            state.identity = None;
            state.spare = bytes;
            return Ok(None);
        };
        // Worked out beside readers; only the swap locks them out.
        let found = {
            let state = self.state();
            follow(&state.rows, &state.text, &bytes)
                .or_else(|| Self::split(&bytes, &state.rows, &state.text))
        };
        let mut state = self.state_mut();
        state.identity = identity.filter(Identity::settled);
        let Some(found) = found else {
            // The checked read decides and places any error.
            drop(state);
            let decoded = super::codec::decode(self.backend.path(), &bytes);
            let mut state = self.state_mut();
            state.spare = bytes;
            return match decoded {
                Ok(tasks) => Ok(Some(Self::replace(&mut state, tasks))),
                Err(e) => {
                    state.identity = None;
                    Err(e)
                }
            };
        };
        let changes = Self::apply(&mut state, found, bytes);
        state.present = true;
        Ok(Some(changes))
    }

    /// The rows become what `found` says of `bytes`: what changed.
    fn apply(state: &mut State, found: Vec<Piece>, bytes: Vec<u8>) -> Vec<RowChange> {
        let old_len = state.rows.len();
        let mut changes = Vec::new();
        let changed = |id: &str, before: &Row, after: &Row, changes: &mut Vec<RowChange>| {
            if !before.digest().same(&after.digest()) {
                changes.push(RowChange {
                    task_id: id.to_string(),
                    before: Some(before.digest()),
                    after: Some(after.digest()),
                });
            }
        };
        let appeared = |id: &str, row: &Row| RowChange {
            task_id: id.to_string(),
            before: None,
            after: Some(row.digest()),
        };
        // In place when the rows kept their places (new ones after them):
        // the common case, one task written.
        let mut expect = 0;
        let in_place = found.iter().all(|p| match p {
            Piece::Same(r, _) if r.start == expect => {
                expect = r.end;
                true
            }
            Piece::Changed(k, ..) if *k == expect => {
                expect += 1;
                true
            }
            Piece::Added(..) => expect == old_len,
            _ => false,
        }) && expect == old_len;
        if in_place {
            for piece in found {
                match piece {
                    Piece::Same(rows, shift) => {
                        for k in rows {
                            let r = &mut state.rows[k].range;
                            *r = (r.start as isize + shift) as usize
                                ..(r.end as isize + shift) as usize;
                        }
                    }
                    Piece::Changed(k, range, light) => {
                        let (id, row) = state.rows.get_index_mut(k).expect("a row");
                        let next = Row {
                            range,
                            light: *light,
                        };
                        changed(id, row, &next, &mut changes);
                        *row = next;
                    }
                    Piece::Added(id, range, light) => {
                        let row = Row {
                            range,
                            light: *light,
                        };
                        changes.push(appeared(&id, &row));
                        state.rows.insert(id, row);
                    }
                }
            }
        } else {
            let mut old: Vec<Option<(String, Row)>> = std::mem::take(&mut state.rows)
                .into_iter()
                .map(Some)
                .collect();
            let mut rows = IndexMap::with_capacity(old.len());
            for piece in found {
                match piece {
                    Piece::Same(ks, shift) => {
                        for k in ks {
                            let (id, mut row) = old[k].take().expect("each row once");
                            row.range = (row.range.start as isize + shift) as usize
                                ..(row.range.end as isize + shift) as usize;
                            rows.insert(id, row);
                        }
                    }
                    Piece::Changed(k, range, light) => {
                        let (id, row) = old[k].take().expect("each row once");
                        let next = Row {
                            range,
                            light: *light,
                        };
                        changed(&id, &row, &next, &mut changes);
                        rows.insert(id, next);
                    }
                    Piece::Added(id, range, light) => {
                        let row = Row {
                            range,
                            light: *light,
                        };
                        changes.push(appeared(&id, &row));
                        rows.insert(id, row);
                    }
                }
            }
            for (id, row) in old.into_iter().flatten() {
                changes.push(RowChange {
                    task_id: id,
                    before: Some(row.digest()),
                    after: None,
                });
            }
            state.rows = rows;
        }
        if let Text::Bytes(old) = std::mem::replace(&mut state.text, Text::Bytes(bytes)) {
            state.spare = old;
        }
        changes
    }

    /// The rows become `tasks` (read the checked way): what changed.
    fn replace(state: &mut State, tasks: TaskMap) -> Vec<RowChange> {
        let rows: IndexMap<String, Row> = tasks
            .iter()
            .map(|(id, t)| {
                let row = Row {
                    range: 0..0,
                    light: light(t.clone()),
                };
                (id.clone(), row)
            })
            .collect();
        let changes = Self::compare(&state.rows, &rows);
        state.rows = rows;
        if let Text::Bytes(old) = std::mem::replace(&mut state.text, Text::Tasks(tasks)) {
            state.spare = old;
        }
        state.present = true;
        changes
    }

    /// What changed from the rows `old` to `new`, by their digests.
    fn compare(old: &IndexMap<String, Row>, new: &IndexMap<String, Row>) -> Vec<RowChange> {
        let mut changes = Vec::new();
        for (id, row) in new {
            let before = old.get(id).map(Row::digest);
            if !before.is_some_and(|b| b.same(&row.digest())) {
                changes.push(RowChange {
                    task_id: id.clone(),
                    before,
                    after: Some(row.digest()),
                });
            }
        }
        for (id, row) in old {
            if !new.contains_key(id) {
                changes.push(RowChange {
                    task_id: id.clone(),
                    before: Some(row.digest()),
                    after: None,
                });
            }
        }
        changes
    }

    /// The entries of a file laid out as rudder writes it, split on every
    /// core, against the rows before (a task whose text is a row's keeps
    /// it): for the first read and any read [`follow`] gives up on.
    /// `None` when the file does not split as a store, a changed task
    /// does not read, or an id repeats.
    fn split(bytes: &[u8], old: &IndexMap<String, Row>, text: &Text) -> Option<Vec<Piece>> {
        let utf8 = std::str::from_utf8(bytes).ok()?;
        let runs = scan::split_map(utf8, |key, rest| {
            let len = scan::skip_container(rest.as_bytes(), 0)?;
            let json = &rest.as_bytes()[..len];
            let at = old.get_full(key);
            if let Some((k, _, row)) = at
                && text.of(row) == Some(json)
            {
                return Some((Err(k), len));
            }
            let task = Box::new(parse_light(key, json)?);
            Some((Ok((at.map(|(k, _, _)| k), task)), len))
        })?;
        let base = bytes.as_ptr() as usize;
        let mut seen = std::collections::HashSet::with_capacity(runs.iter().map(Vec::len).sum());
        let mut out = Vec::with_capacity(seen.capacity());
        for (key, json, found) in runs.into_iter().flatten() {
            // A repeated key is left to the checked read.
            if !seen.insert(key.clone()) {
                return None;
            }
            let start = json.as_ptr() as usize - base;
            let range = start..start + json.len();
            out.push(match found {
                Err(k) => Piece::Same(k..k + 1, start as isize - old[k].range.start as isize),
                Ok((Some(k), task)) => Piece::Changed(k, range, task),
                Ok((None, task)) => Piece::Added(key.into_owned(), range, task),
            });
        }
        Some(out)
    }

    /// One page of tasks, read in full ([`PageQuery`] as
    /// [`query::page_in_memory`] answers it, over the rows).
    pub fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        let state = self.state();
        if !state.present {
            return Ok(Vec::new());
        }
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
        let keep = |t: &Task| q.keeps(t);
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
        let state = self.state();
        if state.present {
            for r in state.rows.values() {
                *counts.0.entry(r.light.status).or_default() += 1;
            }
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
        let Some(row) = state.rows.get(id).filter(|_| state.present) else {
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
    use crate::codec;
    use rudder_core::NewTask;
    use rudder_model::task::{Actor, Status};

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
                                kinds: Vec::new(),
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
        let store = crate::open_store(&path);
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
        assert_eq!(next.len(), 1, "{next:?}");
        assert_eq!(next[0].task_id, ids[1]);
        assert_eq!(
            next[0].before.map(|d| d.revision),
            Some(99),
            "compared with the row"
        );
        assert_eq!(next[0].after.map(|d| d.revision), Some(2), "read again");
        assert_eq!(rows.state().rows[&ids[0]].light.revision, 99, "reused");
        rows.state.write().unwrap().rows[&ids[0]].light.revision = 1;
        agrees(&rows, &path);
        // The same tasks in another layout: nothing changed.
        let tasks = FileBackend::new(&path).load_existing().unwrap().unwrap();
        std::fs::write(&path, serde_json::to_vec(&tasks).unwrap()).expect("write");
        assert_eq!(rows.refresh().expect("read"), Some(vec![]));
        agrees(&rows, &path);
        // One that does not read keeps the rows and says where it broke.
        std::fs::write(&path, b"{\"x\": {\"task_id\": 3}}\n").expect("write");
        let e = rows.refresh().expect_err("refused");
        assert!(e.to_string().contains("line 1"), "{e}");
        assert_eq!(rows.counts().total(), 12);
        // Gone: nothing is shown.
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(rows.refresh().expect("read"), None);
        assert_eq!(rows.counts().total(), 0);
        assert!(rows.task(&ids[0]).expect("task").is_none());
        assert!(rows.page(&PageQuery::default()).expect("page").is_empty());
        // Back, one task changed meanwhile: compared with the last good read.
        std::fs::write(&path, codec::encode(&tasks, 0)).expect("write");
        store.cancel(&ids[5], None).expect("cancel");
        let back = rows.refresh().expect("read").expect("a file");
        assert_eq!(
            back.iter().map(|c| c.task_id.as_str()).collect::<Vec<_>>(),
            [ids[5].as_str()]
        );
        agrees(&rows, &path);
    }

    /// A file that rudder wrote (its identity settled by the rename) and
    /// that has not changed since is not read again; any write is.
    #[test]
    fn a_file_unchanged_since_the_last_read_is_not_read_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let store = crate::open_store(&path);
        let id = store
            .create(NewTask::default())
            .expect("create")
            .task
            .task_id;
        let rows = FileRows::new(FileBackend::new(&path));
        assert_eq!(rows.refresh().expect("read").expect("a file").len(), 1);
        assert_eq!(rows.reads(), 1);
        // (A file system whose clock is too coarse to settle it is read.)
        let settled = rows.state().identity.is_some();
        assert_eq!(rows.refresh().expect("read"), Some(vec![]));
        assert_eq!(rows.reads(), if settled { 1 } else { 2 });
        let before = rows.reads();
        store
            .heartbeat(&id, Some("beat".into()), None, Actor::Anyone)
            .expect("heartbeat");
        let changes = rows.refresh().expect("read").expect("a file");
        assert_eq!(changes.len(), 1);
        assert_eq!(rows.reads(), before + 1);
        // Written in place (by another tool): read, whatever its identity.
        let text = std::fs::read(&path).expect("read");
        std::fs::write(&path, &text).expect("write");
        assert_eq!(rows.refresh().expect("read"), Some(vec![]));
        assert_eq!(rows.reads(), before + 2);
    }

    /// What changed between two versions of the tasks, by their digests:
    /// the reference the rows' changes must equal.
    fn reference(old: &TaskMap, new: &TaskMap) -> Vec<RowChange> {
        let digest = |t: &Task| TaskDigest {
            revision: t.revision,
            status: t.status,
            updated_at: t.updated_at,
            hash: 0,
        };
        let mut out = Vec::new();
        for (id, t) in new {
            let before = old.get(id).map(digest);
            if !before.is_some_and(|b| b.same(&digest(t))) {
                out.push(RowChange {
                    task_id: id.clone(),
                    before,
                    after: Some(digest(t)),
                });
            }
        }
        for (id, t) in old {
            if !new.contains_key(id) {
                out.push(RowChange {
                    task_id: id.clone(),
                    before: Some(digest(t)),
                    after: None,
                });
            }
        }
        out
    }

    /// One edit of the tasks between two reads.
    #[derive(Debug, Clone)]
    enum Edit {
        /// A task's text changed (and its revision with it, or not).
        Touch(prop::sample::Index, String, bool),
        Add(String, prop::sample::Index),
        Remove(prop::sample::Index),
        Swap(prop::sample::Index, prop::sample::Index),
        Layout(u8),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<prop::sample::Index>(), tricky::text(), any::<bool>())
                .prop_map(|(i, t, b)| Edit::Touch(i, t, b)),
            (tricky::text(), any::<prop::sample::Index>()).prop_map(|(t, i)| Edit::Add(t, i)),
            any::<prop::sample::Index>().prop_map(Edit::Remove),
            (any::<prop::sample::Index>(), any::<prop::sample::Index>())
                .prop_map(|(a, b)| Edit::Swap(a, b)),
            (0..3u8).prop_map(Edit::Layout),
        ]
    }

    use crate::tricky;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever the tasks hold and however they change between reads,
        /// each read follows the last one (the file is never split or read
        /// the checked way again), reports exactly what changed, and the
        /// rows answer as the whole file does.
        #[test]
        fn rows_follow_every_change_of_the_file(
            first in tricky::tasks(),
            edits in prop::collection::vec(edit(), 1..6),
            kind in 0..3u8,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("tasks.json");
            std::fs::write(&path, tricky::layout(&first, kind)).expect("write");
            let rows = FileRows::new(FileBackend::new(&path));
            let all = rows.refresh().expect("read").expect("a file");
            prop_assert_eq!(all, reference(&TaskMap::new(), &first));
            let (mut tasks, mut kind, mut added) = (first, kind, 0);
            for e in edits {
                let before = tasks.clone();
                let n = tasks.len();
                match e {
                    Edit::Touch(i, text, bump) if n > 0 => {
                        let t = &mut tasks[i.index(n)];
                        t.status_message = Some(text);
                        if bump {
                            t.revision += 1;
                        }
                    }
                    Edit::Add(text, i) => {
                        added += 1;
                        let t = tricky::task(format!("new{added}{text}"), text, 1);
                        tasks.shift_insert(i.index(n + 1), t.task_id.clone(), t);
                    }
                    Edit::Remove(i) if n > 0 => {
                        tasks.shift_remove_index(i.index(n));
                    }
                    Edit::Swap(a, b) if n > 0 => tasks.swap_indices(a.index(n), b.index(n)),
                    Edit::Layout(k) => kind = k,
                    _ => {}
                }
                let bytes = tricky::layout(&tasks, kind);
                {
                    let state = rows.state();
                    prop_assert!(
                        follow(&state.rows, &state.text, &bytes).is_some(),
                        "the read did not follow"
                    );
                }
                std::fs::write(&path, &bytes).expect("write");
                let changes = rows.refresh().expect("read").expect("a file");
                prop_assert_eq!(changes, reference(&before, &tasks));
                prop_assert_eq!(
                    rows.page(&PageQuery::default()).expect("page"),
                    tasks.values().cloned().collect::<Vec<_>>()
                );
            }
            agrees(&rows, &path);
        }
    }

    /// A read that does not follow the last (a repeated id, a changed task
    /// that does not read, something after the object) is refused by the
    /// follower and decided by the checked read.
    #[test]
    fn the_follower_leaves_what_it_cannot_tell_to_the_checked_read() {
        let tasks: TaskMap = (0..3)
            .map(|i| {
                let t = tricky::task(format!("t{i}"), "a \"}\" b".into(), 1);
                (t.task_id.clone(), t)
            })
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let good = String::from_utf8(codec::encode(&tasks, 0)).unwrap();
        std::fs::write(&path, &good).expect("write");
        let rows = FileRows::new(FileBackend::new(&path));
        rows.refresh().expect("read");
        let t1 = &good[good.find("  \"t1\"").unwrap()..good.find(",\n  \"t2\"").unwrap()];
        for bad in [
            good.replacen("\n}", &format!(",\n{t1}\n}}"), 1),
            good.replacen("\"status\": \"working\"", "\"status\": \"no\"", 1),
            good.replacen("\"task_id\": \"t2\"", "\"task_id\": \"t9\"", 1),
            format!("{good}x"),
            good.replacen("{", "[", 1),
        ] {
            let state = rows.state();
            assert!(
                follow(&state.rows, &state.text, bad.as_bytes()).is_none(),
                "{bad}"
            );
            drop(state);
            std::fs::write(&path, &bad).expect("write");
            let want = codec::decode(&path, bad.as_bytes()).expect_err("refused");
            assert_eq!(
                rows.refresh().expect_err("refused").to_string(),
                want.to_string()
            );
            assert_eq!(rows.counts().total(), 3, "kept");
        }
    }
}
