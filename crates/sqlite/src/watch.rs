//! The change feed of a SQLite store: the `changes` table read after a
//! cursor, woken when a writer closes the lock file, with `PRAGMA data_version`
//! as the safety net.

use std::path::PathBuf;

use crate::DbIdentity as Identity;
use crate::SqliteBackend;
use rudder_core::watch::{Catchup, FeedSource, MAX_BATCH, Wake, follow};
use rudder_fs::watch::{parent_dir, watch_dir};

/// The feed of a SQLite store.
pub struct SqliteSource {
    backend: SqliteBackend,
    task: Option<String>,
    /// The last change reported, in the database it was read from; `None`
    /// before the first read.
    cursor: Option<(Identity, i64)>,
    /// The data version last seen (the safety net's stamp).
    version: Option<(Identity, i64)>,
    reads: u64,
}

impl SqliteSource {
    /// The feed of the database at `path`, of the task `task` only if given.
    pub fn new(path: impl Into<PathBuf>, task: Option<String>) -> Self {
        SqliteSource {
            backend: SqliteBackend::new(path),
            task,
            cursor: None,
            version: None,
            reads: 0,
        }
    }

    /// The backend's lock timeout from `settings`.
    pub fn with_settings(mut self, settings: &rudder_core::Settings) -> Self {
        self.backend = self.backend.with_settings(settings);
        self
    }
}

impl FeedSource for SqliteSource {
    fn arm(&mut self, wake: Wake) -> Option<Box<dyn Send>> {
        // Every rudder writer closes the lock file after its commit (the
        // watch sees closes, not each write: see `watch_dir`); the database
        // and its -wal file are created, deleted and replaced. A writer
        // outside rudder (the `sqlite3` shell) takes no lock file: the
        // safety net's `data_version` sees its commits.
        let names = [
            self.backend.path().file_name(),
            self.backend.wal_path().file_name(),
            self.backend.lock_path().file_name(),
        ]
        .into_iter()
        .flatten()
        .map(|n| n.to_os_string())
        .collect();
        watch_dir(&parent_dir(self.backend.path()), names, wake)
    }

    fn may_have_changed(&mut self) -> bool {
        // A commit may change neither the -wal file's size nor its mtime
        // granule (the WAL is reused after a checkpoint): ask SQLite, which
        // answers from memory shared by its connections.
        match self.backend.data_version() {
            Ok(v) => std::mem::replace(&mut self.version, v) != v,
            Err(_) => true,
        }
    }

    fn catch_up(&mut self) -> Catchup {
        self.reads += 1;
        let (backend, task) = (&self.backend, self.task.as_deref());
        follow(&mut self.cursor, |after| {
            backend.changes_after(after, task, MAX_BATCH + 1)
        })
    }

    fn reads(&self) -> u64 {
        self.reads
    }
}
