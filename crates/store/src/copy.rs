//! `rudder copy FROM TO`: every task of one store into another, in store
//! order, all fields kept (history and unknown fields included).
//!
//! - Streaming: a database is read a page at a time, a JSON file a buffer
//!   at a time (`rudder_file::FileStream`), and every store is written in
//!   batches, so FROM's tasks are never all in memory (only a JSON TO,
//!   which is written whole, holds them once).
//! - Consistent: a JSON FROM is opened once and read twice through that
//!   descriptor (one version of the file: writers rename a new one into
//!   place), first to check every task, so that a FROM that does not read
//!   is refused, with where it is wrong, before anything is written. Into
//!   a PostgreSQL store that holds no task the copy is one transaction and
//!   the file is read once: a task that does not read rolls it back, and
//!   the file is then read as above, so it is refused the same way.
//! - Idempotent: running it again (say, after an interruption) skips the
//!   tasks already there, and brings forward those that changed in FROM
//!   since (a higher revision).
//! - Safe: a TO that holds a task FROM does not have, or a newer revision
//!   of one, is refused before anything is written: that is someone
//!   else's data, or a store already in use.

use serde::Serialize;

use rudder_core::{Backend, CopyCounts, PageQuery, SortKey, StoreError};
use rudder_file::{FileStream, Revisions};

use crate::Store;
use rudder_model::task::Task;

/// How many tasks one read (a page of a database) moves.
pub const BATCH: usize = 1000;

/// How many tasks one write transaction into a database moves.
pub const WRITE_BATCH: usize = 10_000;

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    pub from: String,
    pub to: String,
    /// Tasks that were not in TO.
    pub copied: usize,
    /// Tasks TO had at an older revision, replaced by FROM's.
    pub updated: usize,
    /// Tasks TO already had as they are in FROM.
    pub unchanged: usize,
}

impl CopyReport {
    pub fn total(&self) -> usize {
        self.copied + self.updated + self.unchanged
    }
}

/// Read FROM's tasks in store order: a JSON file a run at a time (as many
/// as its read buffer holds), a database `BATCH` at a time.
fn for_each_batch(
    from: &Store,
    from_file: bool,
    file: Option<&mut FileStream>,
    mut f: impl FnMut(Vec<Task>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if from_file {
        return match file {
            Some(stream) => stream.for_each_run(f),
            // No file: nothing to copy.
            None => Ok(()),
        };
    }
    let mut after = None;
    loop {
        let page = from.page(&PageQuery {
            sort: SortKey::Store,
            limit: Some(BATCH),
            after: after.take(),
            ..PageQuery::default()
        })?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.task_id.clone());
        let full = page.len() == BATCH;
        f(page)?;
        if !full {
            return Ok(());
        }
    }
}

/// Copy every task of `from` into `to`; `progress` is told how many tasks
/// were done after each batch.
pub fn copy(
    from: &Store,
    to: &Store,
    mut progress: impl FnMut(usize),
) -> Result<CopyReport, StoreError> {
    let mut report = CopyReport {
        from: from.location(),
        to: to.location(),
        ..CopyReport::default()
    };
    let refuse = |reason: String| StoreError::CopyRefused {
        to: to.location(),
        reason,
    };
    // A JSON file is opened once (one version of it, whatever writers do
    // meanwhile) and read through as a stream.
    let streamed = from.backend().file_stream().transpose()?;
    let from_file = streamed.is_some();
    let mut file = streamed.flatten();
    // Into a PostgreSQL store that holds no task: one transaction, with
    // the indexes built at the end (rudder_postgres's `bulk.rs`). A file
    // is read once: a task that does not read rolls the whole copy back.
    let mut split = true;
    let loaded = to.backend().load_into_empty(&mut |sink| {
        let mut sent = 0;
        let mut each = |batch: Vec<Task>| {
            sink(&batch)?;
            sent += batch.len();
            progress(sent);
            Ok(())
        };
        match file.as_mut() {
            Some(stream) => {
                split = stream.single_pass(&mut each)?;
                match split {
                    true => Ok(()),
                    // Rolled back; read again below, checked first.
                    false => Err(refuse("the file needs the reference read".into())),
                }
            }
            None => for_each_batch(from, from_file, None, each),
        }
    });
    if let Some(loaded) = loaded {
        match loaded {
            Ok(Some(counts)) => {
                report.copied = counts.copied;
                return Ok(report);
            }
            Ok(None) => {}
            Err(_) if !split => {}
            Err(e) => return Err(e),
        }
    }
    // Then every task is checked, before anything is written, keeping
    // each id's revision for the check below; then the tasks are copied.
    let revisions = match (from_file, file.as_mut()) {
        (true, Some(stream)) => Some(stream.check()?),
        (true, None) => Some(Revisions::new()),
        (false, _) => None,
    };
    // First, without writing: every task TO holds must be FROM's, at the
    // same or an older revision.
    if to.backend().exists()? {
        let mut after = None;
        loop {
            let page = to.page(&PageQuery {
                sort: SortKey::Store,
                limit: Some(BATCH),
                after: after.take(),
                ..PageQuery::default()
            })?;
            let Some(last) = page.last() else { break };
            after = Some(last.task_id.clone());
            let full = page.len() == BATCH;
            let mut problem = None;
            let mut check = |src: &dyn Fn(&str) -> Result<Option<u64>, StoreError>| {
                for t in &page {
                    match src(&t.task_id)? {
                        None => {
                            problem = Some(format!(
                                "it holds task {} that {} does not have",
                                t.task_id,
                                from.location()
                            ));
                            break;
                        }
                        Some(revision) if revision < t.revision => {
                            problem = Some(format!(
                                "its task {} is at revision {}, newer than the {} in {}: \
                                 it is in use",
                                t.task_id,
                                t.revision,
                                revision,
                                from.location()
                            ));
                            break;
                        }
                        Some(_) => {}
                    }
                }
                Ok(())
            };
            match &revisions {
                Some(revisions) => check(&|id| Ok(revisions.get(id).copied()))?,
                None => from
                    .backend()
                    .snapshot(&mut |src| check(&|id| Ok(src.get(id)?.map(|t| t.revision))))?,
            }
            if let Some(p) = problem {
                return Err(refuse(p));
            }
            if !full {
                break;
            }
        }
    }
    // A file is rewritten whole by every write: one write for all of it.
    // A database takes larger batches than it is read in: each commit
    // waits for the disk.
    let write_batch = match to.backend().batch_size() {
        None => usize::MAX,
        Some(_) => WRITE_BATCH,
    };
    let mut pending = Vec::new();
    let mut write = |batch: Vec<Task>| -> Result<(), StoreError> {
        let counts = match to.backend().copy_batch(&batch) {
            Some(done) => done?
                .map_err(|newer| changed_while_copying(&refuse, &newer.task_id, newer.revision))?,
            None => write_checked(to.backend(), &batch, &refuse)?,
        };
        report.copied += counts.copied;
        report.updated += counts.updated;
        report.unchanged += counts.unchanged;
        progress(report.total());
        Ok(())
    };
    for_each_batch(from, from_file, file.as_mut(), |batch| {
        if pending.is_empty() && batch.len() == write_batch {
            return write(batch);
        }
        pending.extend(batch);
        // A run of a file may be longer than a batch.
        while pending.len() >= write_batch {
            let rest = pending.split_off(write_batch);
            write(std::mem::replace(&mut pending, rest))?;
        }
        Ok(())
    })?;
    if !pending.is_empty() {
        write(pending)?;
    }
    Ok(report)
}

fn changed_while_copying(
    refuse: &impl Fn(String) -> StoreError,
    id: &str,
    revision: u64,
) -> StoreError {
    refuse(format!(
        "its task {id} changed while copying (revision {revision})"
    ))
}

/// Write a batch through the backend's transaction, task by task.
fn write_checked(
    to: &dyn Backend,
    batch: &[Task],
    refuse: &impl Fn(String) -> StoreError,
) -> Result<CopyCounts, StoreError> {
    let mut counts = CopyCounts::default();
    to.transaction(&mut |dst| {
        counts = CopyCounts::default();
        for task in batch {
            match dst.get(&task.task_id)? {
                Some(existing) if existing == *task => counts.unchanged += 1,
                Some(existing) if existing.revision > task.revision => {
                    return Err(changed_while_copying(
                        refuse,
                        &task.task_id,
                        existing.revision,
                    ));
                }
                Some(_) => {
                    dst.insert(task.clone())?;
                    counts.updated += 1;
                }
                None => {
                    dst.insert(task.clone())?;
                    counts.copied += 1;
                }
            }
        }
        Ok(counts.copied + counts.updated > 0)
    })?;
    Ok(counts)
}
