//! The change feed of a JSON file store: changes derived by comparing what
//! each task's summary says between two reads of the file.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;

use super::{Catchup, FeedSource, MAX_BATCH, ResetReason, TaskChange, Unavailable, Wake};
use crate::store::{FileBackend, StoreError};
use crate::task::Status;

/// What identifies one version of the file cheaply.
type Stamp = Option<(u64, u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// What the feed remembers of a task: a task whose revision, status and
/// last update are all unchanged did not change. (`updated_at` covers
/// writers that keep no revision, such as the seed's store.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    revision: u64,
    status: Status,
    updated_at: Option<DateTime<Utc>>,
}

/// The feed of a JSON file store.
pub struct FileSource {
    backend: FileBackend,
    task: Option<String>,
    /// The tasks as of the last good read, in store order; `None` before
    /// the first.
    known: Option<IndexMap<String, Known>>,
    stamp: Stamp,
    reads: u64,
}

impl FileSource {
    /// The feed of the file at `path`, of the task `task` only if given.
    pub fn new(path: impl Into<PathBuf>, task: Option<String>) -> Self {
        FileSource {
            backend: FileBackend::new(path),
            task,
            known: None,
            stamp: None,
            reads: 0,
        }
    }

    /// Every task's (or the one task's) summary, read without parsing any
    /// task in full; `None` when the file does not exist.
    fn read(&self) -> Result<Option<IndexMap<String, Known>>, StoreError> {
        let mut now = IndexMap::new();
        let known = |s: crate::store::Summary<'_>| Known {
            revision: s.revision,
            status: s.status,
            updated_at: s.updated_at,
        };
        let task = self.task.as_deref();
        let existed = self.backend.snapshot_existing(&mut |txn| {
            now.clear();
            match task {
                // A file a rudder writer wrote is searched for the task's
                // key line: nothing else is read.
                Some(id) => now.extend(txn.summary(id).map(|s| (id.to_string(), known(s)))),
                None => now.extend(txn.summaries().map(|s| (s.task_id.to_string(), known(s)))),
            }
            Ok(())
        })?;
        Ok(existed.then_some(now))
    }
}

/// What changed from `old` to `new`: tasks in `new`'s order, then removals.
fn compare(old: &IndexMap<String, Known>, new: &IndexMap<String, Known>) -> Vec<TaskChange> {
    let mut changes = Vec::new();
    for (id, k) in new {
        let before = old.get(id);
        if before != Some(k) {
            changes.push(TaskChange {
                task_id: id.clone(),
                revision: k.revision,
                from: before.map(|b| b.status),
                to: Some(k.status),
                at: k.updated_at,
            });
        }
    }
    for (id, k) in old {
        if !new.contains_key(id) {
            changes.push(TaskChange {
                task_id: id.clone(),
                revision: k.revision,
                from: Some(k.status),
                to: None,
                at: None,
            });
        }
    }
    changes
}

impl FeedSource for FileSource {
    fn arm(&mut self, wake: Wake) -> Option<Box<dyn Send>> {
        let names = self
            .backend
            .target()
            .file_name()
            .map(|n| n.to_os_string())
            .into_iter()
            .collect();
        super::watch_dir(&self.backend.dir(), names, wake)
    }

    fn may_have_changed(&mut self) -> bool {
        stamp(self.backend.target()) != self.stamp
    }

    fn catch_up(&mut self) -> Catchup {
        self.reads += 1;
        self.stamp = stamp(self.backend.target());
        let new = match self.read() {
            Ok(Some(new)) => new,
            // The last good state is kept: a store that comes back is
            // compared with it.
            Ok(None) => return Catchup::Unavailable(Unavailable::Missing),
            Err(e) => {
                return Catchup::Unavailable(Unavailable::Unreadable {
                    message: e.to_string(),
                });
            }
        };
        let Some(old) = self.known.replace(new) else {
            return Catchup::Reset(ResetReason::Start);
        };
        let changes = compare(&old, self.known.as_ref().expect("just set"));
        if changes.len() > MAX_BATCH {
            return Catchup::Reset(ResetReason::Overflow);
        }
        Catchup::Changes(changes)
    }

    fn reads(&self) -> u64 {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(rev: u64, status: Status) -> Known {
        Known {
            revision: rev,
            status,
            updated_at: None,
        }
    }

    #[test]
    fn compares_revision_status_and_update_per_task() {
        let old: IndexMap<String, Known> = [
            ("a".to_string(), known(1, Status::Working)),
            ("b".to_string(), known(1, Status::InputRequired)),
            ("c".to_string(), known(1, Status::Working)),
        ]
        .into_iter()
        .collect();
        let mut new = old.clone();
        new.shift_remove("c");
        new["a"].revision = 2;
        new["b"].status = Status::Working;
        new.insert("d".into(), known(1, Status::InputRequired));
        let got: Vec<_> = compare(&old, &new)
            .into_iter()
            .map(|c| (c.task_id, c.from, c.to))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), Some(Status::Working), Some(Status::Working)),
                (
                    "b".into(),
                    Some(Status::InputRequired),
                    Some(Status::Working)
                ),
                ("d".into(), None, Some(Status::InputRequired)),
                ("c".into(), Some(Status::Working), None),
            ]
        );
        assert!(compare(&new, &new).is_empty());
    }
}
