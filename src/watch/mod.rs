//! The change feed: a stream of store snapshots and the transitions they imply.
//!
//! DESIGN.md "Watching": the store's *directory* is watched with `notify` (an
//! atomic rename would leave a watch on the file pointing at the old inode),
//! events are filtered by the store's name, a rescan means "reload", bursts
//! are coalesced for a few milliseconds, and a cheap periodic `stat` catches
//! changes on file systems whose events go missing. A missing file is a state
//! of its own; an unparsable one is reported while the last good snapshot is
//! kept.
//!
//! A SQLite store is watched the same way (its directory, for the database
//! and its `-wal` file, whose writes are the commits) and checked cheaply on
//! every tick: the feed re-reads the tasks only when the `changes` table has
//! a change after the last one it saw.
//!
//! A PostgreSQL store is checked the same way on every tick, and woken by
//! `LISTEN` on a connection of its own (see `PostgresBackend::listen`):
//! every writing transaction notifies at its commit, and the listener also
//! wakes the feed when it (re)connects. A server that cannot be reached is
//! reported as "store unreachable" (the last good tasks kept); when it is
//! back, the next read is whole.

mod diff;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use chrono::Utc;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

pub use diff::{Diff, Transition, diff};

use crate::store::{Backend, FileBackend, PostgresBackend, SqliteBackend, StoreUrl};
use crate::task::TaskMap;

/// One thing the feed observed.
#[derive(Debug, Clone)]
pub enum FeedEvent {
    /// The store as it now is, and what changed since the previous snapshot
    /// (everything "appeared" in the first one).
    Snapshot { tasks: Arc<TaskMap>, diff: Diff },
    /// The store file does not exist (yet, or any more).
    Missing,
    /// The file exists but cannot be read or parsed; the last good snapshot
    /// stays the current one.
    Unreadable { message: String },
}

/// Tuning of the feed; the defaults suit interactive use.
#[derive(Debug, Clone, Copy)]
pub struct FeedOptions {
    /// How long to wait for a burst of events to end before re-reading.
    pub coalesce: Duration,
    /// How often to `stat` the file in case an event went missing.
    pub stat_interval: Duration,
    /// Use file system notifications (`false`: rely on the `stat` check only).
    pub notify: bool,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            coalesce: Duration::from_millis(5),
            stat_interval: Duration::from_millis(500),
            notify: true,
        }
    }
}

/// A running change feed. Dropping it stops the watcher.
pub struct ChangeFeed {
    rx: mpsc::Receiver<FeedEvent>,
    task: tokio::task::JoinHandle<()>,
    reads: Arc<AtomicU64>,
}

impl ChangeFeed {
    /// Start watching `path`; the first event describes the current state.
    /// Must be called from within a tokio runtime.
    /// `path` is a store URL or path (see [`StoreUrl`]).
    pub fn start(path: impl Into<PathBuf>, options: FeedOptions) -> ChangeFeed {
        let (tx, rx) = mpsc::channel(16);
        let path = path.into();
        let source = match StoreUrl::parse(path.as_os_str()) {
            Ok(StoreUrl::File(p)) => Ok(Source::File(FileBackend::new(p))),
            Ok(StoreUrl::Sqlite(p)) => Ok(Source::Sqlite(SqliteBackend::new(p))),
            Ok(StoreUrl::Postgres(u)) => Ok(Source::Postgres(PostgresBackend::new(u))),
            Err(e) => Err(e.to_string()),
        };
        let reads = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&reads);
        let task = tokio::spawn(async move {
            match source {
                Ok(source) => run(source, options, tx, counter).await,
                Err(message) => {
                    let _ = tx.send(FeedEvent::Unreadable { message }).await;
                }
            }
        });

        ChangeFeed { rx, task, reads }
    }

    /// How many times the feed has read the store file so far: once at
    /// start, then once per change (an idle store is not re-read).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The next event; `None` only if the feed stopped.
    pub async fn next(&mut self) -> Option<FeedEvent> {
        self.rx.recv().await
    }
}

impl Drop for ChangeFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the feed reads.
enum Source {
    File(FileBackend),
    Sqlite(SqliteBackend),
    /// Woken by `LISTEN`, checked on every tick.
    Postgres(PostgresBackend),
}

impl Source {
    /// The file whose directory is watched.
    fn target(&self) -> &Path {
        match self {
            Source::File(b) => b.target(),
            Source::Sqlite(b) => b.path(),
            Source::Postgres(_) => Path::new(""),
        }
    }

    fn dir(&self) -> PathBuf {
        match self {
            Source::File(b) => b.dir(),
            Source::Sqlite(b) => match b.path().parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            },
            Source::Postgres(_) => PathBuf::new(),
        }
    }

    /// The names in that directory whose changes mean new content.
    fn names(&self) -> Vec<std::ffi::OsString> {
        let mut names: Vec<_> = self
            .target()
            .file_name()
            .map(|n| n.to_os_string())
            .into_iter()
            .collect();
        if let Source::Sqlite(b) = self {
            names.extend(b.wal_path().file_name().map(|n| n.to_os_string()));
        }
        names
    }
}

/// Whether a database error means the server could not be reached (as
/// opposed to one that answered with a refusal).
fn unreachable(e: &crate::store::StoreError) -> bool {
    match e {
        crate::store::StoreError::Database {
            action, message, ..
        } => {
            *action == "connect"
                || message.contains("error communicating with the server")
                || message.contains("connection closed")
                || message.contains("terminating connection")
        }
        _ => false,
    }
}

/// Whether an event can mean new content. Opening and reading the file (as
/// this feed itself does on every reload) raises access events: reacting to
/// them would make the feed re-read the file forever.
fn changes_content(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// What identifies one version of the file cheaply.
type Stamp = Option<(u64, u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// The reader side: remembers what was last reported to emit only changes.
struct Reader {
    source: Source,
    /// SQLite: the last change seen.
    cursor: Option<i64>,
    reads: Arc<AtomicU64>,
    last_good: Arc<TaskMap>,
    last_bytes: Option<Vec<u8>>,
    /// What was last emitted.
    last: Emitted,
    stamp: Stamp,
}

/// The kind of the last event, to emit only changes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Emitted {
    Nothing,
    Snapshot,
    Missing,
    Unreadable(String),
}

impl Reader {
    fn reload(&mut self) -> Option<FeedEvent> {
        let backend = match &self.source {
            Source::File(b) => b,
            Source::Sqlite(_) | Source::Postgres(_) => return self.reload_db(),
        };
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.stamp = stamp(backend.target());
        let bytes = match backend.read_bytes() {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.last_bytes = None;
                self.last_good = Arc::new(TaskMap::new());
                return self.emit(Emitted::Missing, FeedEvent::Missing);
            }
            Err(e) => return self.unreadable(e.to_string()),
        };
        if self.last == Emitted::Snapshot && self.last_bytes.as_deref() == Some(bytes.as_slice()) {
            return None;
        }
        match crate::store::decode(backend.path(), &bytes) {
            Ok(tasks) => {
                let diff = diff(&self.last_good, &tasks, Utc::now());
                let first = self.last != Emitted::Snapshot;
                self.last_bytes = Some(bytes);
                if !first && diff.is_empty() {
                    return None;
                }
                self.last_good = Arc::new(tasks);
                self.last = Emitted::Snapshot;
                Some(FeedEvent::Snapshot {
                    tasks: self.last_good.clone(),
                    diff,
                })
            }
            Err(e) => self.unreadable(e.to_string()),
        }
    }

    /// Re-read a database if a change was recorded since the last read.
    fn reload_db(&mut self) -> Option<FeedEvent> {
        let (last_change, backend): (_, &dyn Backend) = match &self.source {
            Source::Sqlite(b) => (b.last_change(), b),
            Source::Postgres(b) => (b.last_change(), b),
            Source::File(_) => return None,
        };
        let cursor = match last_change {
            Ok(Some(c)) => c,
            Err(e) if matches!(self.source, Source::Postgres(_)) && unreachable(&e) => {
                return self.unreadable(format!("store unreachable: {e}"));
            }
            // No database, or one not written yet: waiting for it.
            Ok(None) => {
                self.cursor = None;
                self.last_good = Arc::new(TaskMap::new());
                return self.emit(Emitted::Missing, FeedEvent::Missing);
            }
            Err(e) => return self.unreadable(e.to_string()),
        };
        if self.last == Emitted::Snapshot && self.cursor == Some(cursor) {
            return None;
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        // The cursor is read before the tasks: a commit in between is seen
        // now and again at the next check, never missed.
        match backend.load() {
            Ok(tasks) => {
                self.cursor = Some(cursor);
                let diff = diff(&self.last_good, &tasks, Utc::now());
                let first = self.last != Emitted::Snapshot;
                if !first && diff.is_empty() {
                    return None;
                }
                self.last_good = Arc::new(tasks);
                self.last = Emitted::Snapshot;
                Some(FeedEvent::Snapshot {
                    tasks: self.last_good.clone(),
                    diff,
                })
            }
            Err(e) => self.unreadable(e.to_string()),
        }
    }

    fn unreadable(&mut self, message: String) -> Option<FeedEvent> {
        // Whatever comes next is read whole (the database may have been
        // restored, or changed while it could not be read): a reset.
        self.cursor = None;
        self.last_bytes = None;
        let event = FeedEvent::Unreadable {
            message: message.clone(),
        };
        self.emit(Emitted::Unreadable(message), event)
    }

    /// Emit a non-snapshot event unless it repeats the last one.
    fn emit(&mut self, kind: Emitted, event: FeedEvent) -> Option<FeedEvent> {
        if self.last == kind {
            return None;
        }
        self.last = kind;
        Some(event)
    }
}

async fn run(
    source: Source,
    options: FeedOptions,
    tx: mpsc::Sender<FeedEvent>,
    reads: Arc<AtomicU64>,
) {
    let target = source.target().to_path_buf();
    let names = source.names();
    let sqlite = matches!(source, Source::Sqlite(_) | Source::Postgres(_));
    let options = FeedOptions {
        // A database server has no file to watch.
        notify: options.notify && !matches!(source, Source::Postgres(_)),
        ..options
    };
    let dir = source.dir();
    let (poke_tx, mut poke_rx) = mpsc::unbounded_channel::<()>();
    let make_watcher = || -> Option<RecommendedWatcher> {
        if !options.notify {
            return None;
        }
        let poke = poke_tx.clone();
        let names = names.clone();
        let mut w = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let relevant = match &ev {
                Ok(ev) => {
                    ev.need_rescan()
                        || (changes_content(&ev.kind)
                            && ev.paths.iter().any(|p| {
                                p.file_name().is_some_and(|n| names.iter().any(|m| m == n))
                            }))
                }
                Err(_) => true,
            };
            if relevant {
                let _ = poke.send(());
            }
        })
        .ok()?;
        w.watch(&dir, RecursiveMode::NonRecursive).ok()?;
        Some(w)
    };
    // Kept alive for as long as the feed runs; re-armed if the directory
    // appears later.
    let mut watcher = make_watcher();
    if let Source::Postgres(b) = &source {
        // LISTEN on a connection of its own, on a thread of its own (the
        // client blocks); it ends within a second of the feed.
        let listener = PostgresBackend::new(b.url().clone());
        let poke = poke_tx.clone();
        std::thread::spawn(move || {
            listener.listen(&mut || poke.send(()).is_ok(), &|| !poke.is_closed());
        });
    }
    let mut reader = Reader {
        source,
        cursor: None,
        reads,
        last_good: Arc::new(TaskMap::new()),
        last_bytes: None,
        last: Emitted::Nothing,
        stamp: None,
    };
    let mut tick = tokio::time::interval(options.stat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut due = true;
    loop {
        if due {
            // Reading and decoding a large store takes tens of
            // milliseconds: keep it off the runtime thread, which in the
            // TUI also handles keys.
            let (back, event) = match tokio::task::spawn_blocking(move || {
                let event = reader.reload();
                (reader, event)
            })
            .await
            {
                Ok(done) => done,
                Err(_) => return, // the reload panicked or the runtime is shutting down
            };
            reader = back;
            if let Some(event) = event
                && tx.send(event).await.is_err()
            {
                return;
            }
        }
        due = tokio::select! {
            poke = poke_rx.recv() => {
                if poke.is_none() { return; }
                tokio::time::sleep(options.coalesce).await;
                while poke_rx.try_recv().is_ok() {}
                true
            }
            _ = tick.tick() => {
                if watcher.is_none() && options.notify {
                    watcher = make_watcher();
                }
                // A database is asked (one cheap query) rather than stat'ed:
                // a commit may change neither the -wal file's size nor its
                // mtime granule.
                sqlite || stamp(&target) != reader.stamp
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewTask, Store};

    #[tokio::test]
    async fn an_idle_store_is_not_reread_because_the_feed_read_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        Store::open(&path)
            .create(NewTask::default())
            .expect("create");
        let mut feed = ChangeFeed::start(&path, FeedOptions::default());
        assert!(matches!(
            feed.next().await,
            Some(FeedEvent::Snapshot { .. })
        ));
        // Reading the file raises inotify access events; a feed that took
        // them for changes would re-read it hundreds of times a second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            feed.reads() <= 2,
            "an idle store was read {} times",
            feed.reads()
        );

        Store::open(&path)
            .create(NewTask::default())
            .expect("create");
        assert!(matches!(
            feed.next().await,
            Some(FeedEvent::Snapshot { .. })
        ));
        assert!(feed.reads() >= 2);
    }
}
