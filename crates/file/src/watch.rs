//! The change feed of a JSON file store: changes derived by comparing what
//! each task's summary says between two reads of the file.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use indexmap::IndexMap;

use rudder_core::watch::{
    Catchup, FeedSource, MAX_BATCH, ResetReason, TaskChange, Unavailable, Wake,
};
use std::sync::Arc;

use crate::{FileBackend, FileRows, RowChange, TaskDigest};
use rudder_core::StoreError;
use rudder_fs::watch::watch_dir;

/// What identifies one version of the file cheaply.
type Stamp = Option<(u64, u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// What the feed remembers of a task: a task whose revision, status and
/// last update are all unchanged did not change. (`updated_at` covers
/// writers that keep no revision, such as the seed's store.) With a hash of
/// its text, so that a task whose text did not change is not read again.
type Known = TaskDigest;

/// The feed of a JSON file store.
pub struct FileSource {
    backend: FileBackend,
    task: Option<String>,
    /// The tasks as of the last good read, in store order; `None` before
    /// the first.
    known: Option<IndexMap<String, Known>>,
    stamp: Stamp,
    reads: u64,
    /// The rows a reader pages through, read again by the feed itself at
    /// each change (one read of the file serves both), which then tell
    /// what changed (`known` is not kept).
    rows: Option<Arc<FileRows>>,
    /// Whether the rows had a good read.
    started: bool,
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
            rows: None,
            started: false,
        }
    }

    /// The backend's lock timeout and size limit from `settings`.
    pub fn with_settings(mut self, settings: &rudder_core::Settings) -> Self {
        self.backend = self.backend.with_settings(settings);
        self
    }

    /// The feed of the whole file at `path` that also keeps `rows` up to
    /// date: they are read again before each event is sent, so a reader
    /// taking the event finds them as new as it.
    pub fn with_rows(path: impl Into<PathBuf>, rows: Arc<FileRows>) -> Self {
        FileSource {
            rows: Some(rows),
            ..FileSource::new(path, None)
        }
    }

    /// Every task's (or the one task's) digest, read without parsing any
    /// task in full (and of every task, only those whose text changed since
    /// the last read); `None` when the file does not exist.
    fn read(&self) -> Result<Option<IndexMap<String, Known>>, StoreError> {
        let Some(id) = self.task.as_deref() else {
            let empty = IndexMap::new();
            return self.backend.digests(self.known.as_ref().unwrap_or(&empty));
        };
        let mut now = IndexMap::new();
        let existed = self.backend.snapshot_existing(&mut |txn| {
            // A file a rudder writer wrote is searched for the task's key
            // line: nothing else is read.
            now = txn
                .summary(id)?
                .map(|s| (id.to_string(), TaskDigest::of(&s)))
                .into_iter()
                .collect();
            Ok(())
        })?;
        Ok(existed.then_some(now))
    }
}

impl FileSource {
    /// The catch-up of a good read of the rows, which found `changes`.
    fn changes(&mut self, changes: Vec<RowChange>) -> Catchup {
        if !std::mem::replace(&mut self.started, true) {
            return Catchup::Reset(ResetReason::Start);
        }
        if changes.len() > MAX_BATCH {
            return Catchup::Reset(ResetReason::Overflow);
        }
        Catchup::Changes(
            changes
                .into_iter()
                .map(|c| {
                    let now = c.after.or(c.before).expect("a digest on one side");
                    TaskChange {
                        task_id: c.task_id,
                        revision: now.revision,
                        from: c.before.map(|b| b.status),
                        to: c.after.map(|a| a.status),
                        at: c.after.and_then(|a| a.updated_at),
                    }
                })
                .collect(),
        )
    }
}

/// What changed from `old` to `new`: tasks in `new`'s order, then removals.
fn compare(old: &IndexMap<String, Known>, new: &IndexMap<String, Known>) -> Vec<TaskChange> {
    let mut changes = Vec::new();
    for (id, k) in new {
        let before = old.get(id);
        if !before.is_some_and(|b| b.same(k)) {
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
        watch_dir(&self.backend.dir(), names, wake)
    }

    fn may_have_changed(&mut self) -> bool {
        stamp(self.backend.target()) != self.stamp
    }

    fn catch_up(&mut self) -> Catchup {
        self.reads += 1;
        self.stamp = stamp(self.backend.target());
        if let Some(rows) = &self.rows {
            // The rows tell what changed since their last good read.
            return match rows.refresh() {
                Ok(Some(changes)) => self.changes(changes),
                Ok(None) => Catchup::Unavailable(Unavailable::Missing),
                Err(e) => Catchup::Unavailable(Unavailable::of(&e)),
            };
        }
        let new = match self.read() {
            Ok(Some(new)) => new,
            // The last good state is kept: a store that comes back is
            // compared with it.
            Ok(None) => return Catchup::Unavailable(Unavailable::Missing),
            Err(e) => return Catchup::Unavailable(Unavailable::of(&e)),
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
        // The rows skip a read of a file they know unchanged.
        self.rows.as_ref().map_or(self.reads, |r| r.reads())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_core::NewTask;
    use rudder_core::watch::{ChangeFeed, FeedEvent, FeedOptions};
    use rudder_model::task::Status;

    fn known(rev: u64, status: Status) -> Known {
        Known {
            revision: rev,
            status,
            updated_at: None,
            hash: 0,
        }
    }

    /// Only tasks whose text changed are read again: a digest kept from
    /// the last read (here with a revision no file holds) is reused as it
    /// is for a task whose text is the same.
    #[test]
    fn tasks_whose_text_did_not_change_are_not_read_again() {
        use rudder_core::NewTask;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let store = crate::open_store(&path);
        let a = store.create(NewTask::default()).expect("create").task;
        let b = store.create(NewTask::default()).expect("create").task;
        let backend = FileBackend::new(&path);
        let first = backend
            .digests(&IndexMap::new())
            .expect("read")
            .expect("a file");
        assert_eq!(first[&a.task_id].revision, 1);
        let mut kept = first.clone();
        kept[&a.task_id].revision = 99;
        kept[&b.task_id].revision = 99;
        store
            .heartbeat(&b.task_id, None, None, rudder_model::task::Actor::Anyone)
            .expect("heartbeat");
        let next = backend.digests(&kept).expect("read").expect("a file");
        assert_eq!(next[&a.task_id].revision, 99, "reused");
        assert_eq!(next[&b.task_id].revision, 2, "read again");
        // A file that does not read is refused with the checked read's
        // error, whatever was kept.
        std::fs::write(&path, b"{\"x\": {\"task_id\": 3}}\n").expect("write");
        let e = backend.digests(&kept).expect_err("refused");
        assert!(e.to_string().contains("line 1"), "{e}");
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

    #[tokio::test]
    async fn an_idle_store_is_not_reread_because_the_feed_read_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        crate::open_store(&path)
            .create(NewTask::default())
            .expect("create");
        let mut feed = ChangeFeed::with_source(
            Box::new(FileSource::new(&path, None)),
            FeedOptions::default(),
        );
        assert_eq!(
            feed.next().await,
            Some(FeedEvent::Reset(ResetReason::Start))
        );
        // Reading the file raises inotify access events; a feed that took
        // them for changes would re-read it hundreds of times a second.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert!(
            feed.reads() <= 2,
            "an idle store was read {} times",
            feed.reads()
        );

        crate::open_store(&path)
            .create(NewTask::default())
            .expect("create");
        assert!(matches!(feed.next().await, Some(FeedEvent::Changes(_))));
        assert!(feed.reads() >= 2);
    }
}
