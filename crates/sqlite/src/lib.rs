//! The SQLite backend (docs/architecture.md "Stores and backends").
//!
//! One database file in WAL mode with `synchronous=FULL`: a commit is
//! durable when the call returns. Writes run in `BEGIN IMMEDIATE`
//! transactions, so writers queue on SQLite's own lock (waiting at most the
//! lock timeout, `$RUDDER_LOCK_TIMEOUT`) and never conflict half-way;
//! readers see a consistent snapshot and never wait for writers.
//!
//! Before anything is written, the file is checked: a file that is not a
//! SQLite database, a database of another application, or a rudder store of
//! a newer schema is refused, untouched. A new database is created 0600
//! (SQLite gives its `-wal` and `-shm` files the database's mode).

mod bulk;
mod retention;
mod schema;
mod shm;
mod txn;
mod watch;

use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use rudder_core::{Backend, ChangeLog, Location, StoreError, Transaction};
use rudder_fs::{Fs, LockFailure, LockGuard, RealFs};
use rudder_model::task::TaskMap;
use rudder_sql::retention::Retention;
pub use schema::{APPLICATION_ID, VERSION as SCHEMA_VERSION};
use txn::SqlTxn;
pub use watch::SqliteSource;

/// A database file's (device, inode): what a change feed's cursor is good for.
pub type DbIdentity = (u64, u64);

/// The largest a `-wal` file stays after a checkpoint (SQLite's
/// `journal_size_limit`): about what the auto-checkpoint lets it grow to
/// (1000 pages), so one large transaction does not leave a large WAL that
/// every later process reads again.
const WAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// An open connection and what it was opened on.
struct Open {
    conn: Connection,
    /// The database's (device, inode): a file replaced under the same name
    /// is opened anew.
    at: DbIdentity,
    /// [`shm::epoch`] when it was opened: a connection of this process
    /// that found `-shm` replaced makes every older one reopen.
    epoch: u64,
    /// Where the kernel names the `-shm` file this connection maps.
    shm: Option<PathBuf>,
    /// What this connection last found of that file.
    shm_checked: shm::Checked,
    /// Opened `immutable` (a reader that may not create `-wal` and `-shm`,
    /// see [`SqliteBackend::open_immutable`]): the database file as it was
    /// before the connection opened. A read is good if the file is still
    /// that after it; the connection is never kept.
    immutable: Option<Stamp>,
}

/// What a database file looked like: a checkpoint (the only way a WAL
/// database's file changes) changes its size or times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// How a read on a connection went.
enum Read<T> {
    Done(T),
    /// An immutable read whose database file changed under it (a writer's
    /// checkpoint): what it read may mix two states, so it does not count.
    Changed,
}

/// How many times a read the caller may repeat is run on an immutable
/// connection whose file changed under it before that is an error.
const IMMUTABLE_TRIES: u32 = 5;

/// The databases (by the path the store was given) that this process found
/// replaced under a connection it had open: every backend of this process
/// refuses them from then on (see [`SqliteBackend::replaced`]).
static REPLACED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

impl Open {
    /// Whether this connection's WAL index is stale (see shm.rs).
    fn index_is_stale(&mut self) -> bool {
        match &self.shm {
            Some(shm) => self.shm_checked.check(shm) == shm::Index::Stale,
            None => false,
        }
    }
}

/// A store kept in a SQLite database on a local file system.
pub struct SqliteBackend {
    path: PathBuf,
    lock_timeout: Duration,
    /// The sidecar lock file every write transaction holds (`<db>.lock`).
    lock_path: PathBuf,
    /// The connection reads use, apart from the writer's: in WAL a read
    /// never waits for a writer, and so a read must not queue behind this
    /// process's own write (its `fsync`, or SQLite's busy wait behind a
    /// writer outside rudder) for the mutex of a shared connection.
    reader: Mutex<Option<Box<Open>>>,
    /// The connection write transactions use.
    writer: Mutex<Option<Box<Open>>>,
    /// How much of the change log writers keep.
    retention: Retention,
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Whether the connection may create and migrate the database.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

impl SqliteBackend {
    /// The database at `path`. Nothing is opened or created yet. The lock
    /// timeout is the default (30 s; see [`SqliteBackend::with_settings`]).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path: PathBuf = path.into();
        let lock_path =
            path.with_file_name(rudder_fs::lock_name(path.file_name().unwrap_or_default()));
        SqliteBackend {
            path,
            lock_timeout: rudder_core::DEFAULT_LOCK_TIMEOUT,
            lock_path,
            reader: Mutex::new(None),
            writer: Mutex::new(None),
            retention: Retention::DEFAULT,
        }
    }

    /// Keep `retention` of the change log instead of
    /// [`Retention::DEFAULT`] (tests use a small one).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// The lock timeout of `settings`.
    pub fn with_settings(self, settings: &rudder_core::Settings) -> Self {
        self.with_lock_timeout(settings.lock_timeout)
    }

    /// Wait at most `timeout` for another writer (default 30 s; at most
    /// [`MAX_LOCK_TIMEOUT`](rudder_core::MAX_LOCK_TIMEOUT)).
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = rudder_core::lock_timeout::bounded(timeout);
        self
    }

    /// How long a writer waits for another.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The sidecar lock file that rudder's writers of this store take turns
    /// on (`<db>.lock`).
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store's location as messages name it: `sqlite:PATH`.
    pub fn location(&self) -> Location {
        Location::sqlite(&self.path)
    }

    /// The write-ahead log beside the database, whose changes wake the feed.
    pub fn wal_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_os_string();
        name.push("-wal");
        PathBuf::from(name)
    }

    pub(crate) fn error(&self, action: &'static str, e: rusqlite::Error) -> StoreError {
        sql_error(self.location(), self.lock_timeout, action, e)
    }

    fn identity(&self) -> Result<Option<(u64, u64)>, StoreError> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(Some((m.dev(), m.ino()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(
                self.location(),
                &self.path,
                "stat the database",
                e,
            )),
        }
    }

    /// Refuse what SQLite must not open, a path that is not a regular file
    /// (SQLite would wait on a FIFO for good), as the JSON store does.
    /// Returns whether the file is empty (a new database).
    ///
    /// Never by opening the file: closing any descriptor of a file releases
    /// every POSIX lock the process holds on it, SQLite's own among them
    /// (SQLite's "How To Corrupt", 2.2). Another process's last connection
    /// could then take the exclusive lock as it closes and delete `-wal` and
    /// `-shm` under this process's connections, which go on writing to the
    /// deleted files. A file that is not a SQLite database SQLite refuses
    /// itself, at its first read (`SQLITE_NOTADB`).
    fn check_file(&self) -> Result<bool, StoreError> {
        let refused = |e| StoreError::io(self.location(), &self.path, "open the database", e);
        let meta = std::fs::metadata(&self.path).map_err(refused)?;
        if !meta.file_type().is_file() {
            return Err(refused(rudder_fs::not_regular(&meta, "the store")));
        }
        Ok(meta.len() == 0)
    }

    /// Run `f` on a connection to a checked database; `None` when the
    /// database does not exist and `mode` is `Read` (nothing is created).
    /// `again`: `f` may be run again (it has no effect but its answer),
    /// which an immutable read whose file changed under it is.
    fn with_conn<T>(
        &self,
        mode: Mode,
        again: bool,
        mut f: impl FnMut(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        self.with_conn_at(mode, again, |conn, _| f(conn))
    }

    /// [`SqliteBackend::with_conn`], telling `f` the (device, inode) of the
    /// database it is connected to.
    fn with_conn_at<T>(
        &self,
        mode: Mode,
        again: bool,
        mut f: impl FnMut(&mut Connection, (u64, u64)) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.with_conn_once(mode, &mut f)? {
                Read::Done(v) => return Ok(v),
                Read::Changed if again && tries < IMMUTABLE_TRIES => {}
                Read::Changed => {
                    return Err(StoreError::Database {
                        location: self.location(),
                        action: "read",
                        message: "the database changed while it was read, and this user \
                                  reads it without its -wal and -shm (no write access to its \
                                  directory): read again"
                            .into(),
                    });
                }
            }
        }
    }

    /// One try of [`SqliteBackend::with_conn_at`].
    fn with_conn_once<T>(
        &self,
        mode: Mode,
        f: &mut impl FnMut(&mut Connection, (u64, u64)) -> Result<T, StoreError>,
    ) -> Result<Read<Option<T>>, StoreError> {
        let mut slot = lock_slot(match mode {
            Mode::Read => &self.reader,
            Mode::Write => &self.writer,
        });
        if self.was_replaced() {
            *slot = None;
            return Err(self.replaced());
        }
        let mut id = self.identity()?;
        if let (Some(open), Some(now)) = (slot.as_ref(), id)
            && open.at != now
        {
            // Another file at the path, while this connection has the old
            // one open: refused for good, never reopened (see `replaced`).
            // This process lets go of the old file at once.
            *slot = None;
            self.drop_idle_sibling(mode);
            REPLACED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.path.clone());
            return Err(self.replaced());
        }
        if id.is_none() {
            *slot = None;
            if mode == Mode::Read {
                return Ok(Read::Done(None));
            }
            self.create_file()?;
            id = self.identity()?;
        }
        let mut fresh = false;
        if let Some(open) = slot.as_mut()
            && (Some(open.at) != id || open.epoch != shm::epoch() || open.index_is_stale())
        {
            if Some(open.at) == id && open.epoch == shm::epoch() {
                // Our index is stale (see shm.rs): every connection of this
                // process lets go of it, so that the mapping goes too.
                shm::bump_epoch();
                self.drop_idle_sibling(mode);
            }
            *slot = None;
        }
        if slot.is_none() {
            let epoch = shm::epoch();
            let conn = self.open(mode)?;
            match conn {
                Some((conn, immutable)) => {
                    // Boxed: two slots of it inline would make the backend
                    // enum of every store this size.
                    *slot = Some(Box::new(Open {
                        conn,
                        at: id.unwrap_or_default(),
                        epoch,
                        shm: shm::shm_path(&self.path),
                        shm_checked: shm::Checked::default(),
                        immutable,
                    }));
                    fresh = true;
                }
                None => return Ok(Read::Done(None)),
            }
        }
        let open = slot.as_mut().expect("opened above");
        let at = open.at;
        if mode == Mode::Write {
            if let Err(e) = self.prepare_for_writes(&mut open.conn) {
                *slot = None;
                return Err(e);
            }
            // Under the write lock: a writer must write on the index at
            // the path, never on one another connection of this process
            // still holds after `-shm` was deleted. `None`: try again.
            if fresh && open.index_is_stale() {
                *slot = None;
                self.drop_idle_sibling(mode);
                return Ok(Read::Done(None));
            }
        }
        let result = f(&mut open.conn, at);
        if let Some(before) = open.immutable {
            // Never kept: the next read looks again for a `-wal` it can
            // read through, and reads the file as it is then.
            *slot = None;
            if Stamp::of(&self.path).ok() != Some(before) {
                return Ok(Read::Changed);
            }
        }
        if matches!(
            result,
            Err(StoreError::Database { .. } | StoreError::NotAStore { .. })
        ) {
            // Start from a fresh connection next time.
            *slot = None;
        }
        result.map(|v| Read::Done(Some(v)))
    }

    /// Whether this process found the database at this path replaced.
    fn was_replaced(&self) -> bool {
        REPLACED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&self.path)
    }

    /// The database file was replaced (`mv other.db tasks.db`) while this
    /// process had the old one open. SQLite finds a database's `-wal` and
    /// `-shm` by name: the old file's stay at the path while any process
    /// has the old file open, and whoever opens the new file reads the old
    /// WAL's pages as its own, and the last to close it checkpoints them
    /// into it. No reader can undo that, so a process that sees it stops
    /// using the store (a `wait` ends with this error instead of waiting
    /// for a change it may never see), and tells what to do. A store
    /// deleted, seen missing, then made again is opened anew.
    fn replaced(&self) -> StoreError {
        StoreError::Database {
            location: self.location(),
            action: "read the database",
            message: format!(
                "the database file {} was replaced (another file moved or copied over it) \
                 while this process had it open; SQLite would pair the old file's -wal and \
                 -shm, kept at the path while any process has the old file open, with the \
                 new file, so this process stopped using it: stop every process that has \
                 the store open, then start them again (to replace a store, `rudder copy` \
                 into it, or use sqlite3's .backup; see docs/stores.md)",
                self.path.display()
            ),
        }
    }

    /// Close this backend's other connection (the writer's for `mode`
    /// Read, the reader's for Write) if no thread is using it: SQLite maps
    /// one WAL index per database and process, kept while any connection
    /// holds it, so an idle sibling would hand a stale index to the
    /// connection reopened beside it. One in use checks its index at its
    /// next use, and a writer waiting for it retries. Never waits: the
    /// caller holds its own slot (and a writer the lock file), and a
    /// snapshot's callback may write to the same store.
    fn drop_idle_sibling(&self, mode: Mode) {
        let sibling = match mode {
            Mode::Read => &self.writer,
            Mode::Write => &self.reader,
        };
        if let Ok(mut open) = sibling.try_lock() {
            *open = None;
        }
    }

    /// Create the database file, private to the user, with its directory.
    fn create_file(&self) -> Result<(), StoreError> {
        if let Some(dir) = self.path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::io(self.location(), dir, "create the store directory", e)
            })?;
        }
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(StoreError::io(
                self.location(),
                &self.path,
                "create the database",
                e,
            )),
        }
    }

    /// Open and check the database; `None` for a fresh (empty) database
    /// opened to read. A reader that may not create the `-wal` and `-shm`
    /// files SQLite needs (a read-only mount, another user's directory)
    /// while the store has none (idle: the last connection deleted them)
    /// reads the file itself, `immutable` (its [`Stamp`] given back).
    fn open(&self, mode: Mode) -> Result<Option<(Connection, Option<Stamp>)>, StoreError> {
        let empty = self.check_file()?;
        if empty && mode == Mode::Read {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags)
            .map_err(|e| self.error("open the database", e))?;
        conn.busy_timeout(self.lock_timeout)
            .map_err(|e| self.error("set the busy timeout", e))?;
        let state = match schema::inspect(&conn) {
            Ok(state) => state,
            Err(e) if mode == Mode::Read && cannot_open_sidecars(&e) => {
                drop(conn);
                return self.open_immutable(e);
            }
            Err(e) => return Err(self.error("read the schema version", e)),
        };
        if !self.accept(mode, state)? {
            return Ok(None);
        }
        // Durable on return from every commit; per connection.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| self.error("set synchronous=FULL", e))?;
        // A WAL is cut back to this size when a checkpoint lets it start
        // over. (The last connection to close checkpoints the WAL into the
        // database and deletes it, SQLite's default, which rudder keeps: an
        // idle store is whole in its `.db` file, and no later process has
        // to read a large WAL back.)
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(|e| self.error("limit the WAL's size", e))?;
        // Room for every statement rudder caches: rusqlite keeps 16, and a
        // connection that lists (one text per sort and filter), claims,
        // reads and writes uses more; an evicted one is parsed again at its
        // next use.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Some((conn, None)))
    }

    /// Whether a database in `state` may be used for `mode`: `false` for
    /// a fresh one read (an empty store), an error for one rudder refuses.
    fn accept(
        &self,
        mode: Mode,
        state: Result<schema::State, schema::Refusal>,
    ) -> Result<bool, StoreError> {
        match state {
            Ok(schema::State::Fresh) if mode == Mode::Read => Ok(false),
            Ok(_) => Ok(true),
            Err(schema::Refusal::Foreign(message)) => Err(StoreError::NotAStore {
                location: self.location(),
                message,
            }),
            Err(schema::Refusal::Newer(v)) => Err(StoreError::NotAStore {
                location: self.location(),
                message: format!(
                    "the store was written by a newer rudder (schema version {v}; this \
                     rudder knows up to {}): upgrade rudder to use it",
                    schema::VERSION
                ),
            }),
        }
    }

    /// Open the database to read without its `-wal` and `-shm` (SQLite's
    /// `immutable`: no locks, no WAL), for a reader that cannot create
    /// them, `refused` saying how it could not. Sound only while there is
    /// no WAL, so never where a `-wal` exists (its commits would be
    /// missed): a WAL is read through its `-shm` once a writer has the
    /// store open (SQLite reads a `-shm` it may not write). A writer that
    /// starts meanwhile commits to a new WAL (the file read is the state
    /// before it) and checkpoints into the file only as its last
    /// connection closes: the read counts if the file's [`Stamp`] is the
    /// same after it (see [`SqliteBackend::with_conn_at`]).
    fn open_immutable(
        &self,
        refused: rusqlite::Error,
    ) -> Result<Option<(Connection, Option<Stamp>)>, StoreError> {
        let before = Stamp::of(&self.path)
            .map_err(|e| StoreError::io(self.location(), &self.path, "stat the database", e))?;
        if self.wal_path().exists() {
            return Err(StoreError::Database {
                location: self.location(),
                action: "open the database to read",
                message: format!(
                    "{refused}: its -wal file is there but this user cannot create the -shm \
                     beside it (no write access to the directory); it reads again while a \
                     writer has the store open, or once the store's owner opened it once"
                ),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(immutable_uri(&self.path), flags)
            .map_err(|e| self.error("open the database to read", e))?;
        let state = schema::inspect(&conn).map_err(|e| self.error("read the schema version", e))?;
        if !self.accept(Mode::Read, state)? {
            return Ok(None);
        }
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Some((conn, Some(before))))
    }

    /// Whether this process certainly cannot write the store: why, for a
    /// reader to say it reads only (the TUI's `[read-only]`). `None` when it
    /// may (a write may still fail for another reason).
    pub fn cannot_write(&self) -> Option<String> {
        rudder_fs::cannot_write(&self.path)
    }

    /// Switch to WAL, which is kept in the file (a no-op once done). The
    /// schema itself is created or migrated inside the first write
    /// transaction ([`SqliteBackend::migrate_in`]), so that a new store
    /// appears with its first task, never empty in between.
    fn prepare_for_writes(&self, conn: &mut Connection) -> Result<(), StoreError> {
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .map_err(|e| self.error("read the journal mode", e))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .map_err(|e| self.error("switch to WAL", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database {
                location: self.location(),
                action: "switch to WAL",
                message: format!("the journal mode stayed {mode}"),
            });
        }
        Ok(())
    }

    /// Under the write lock: create or migrate the schema if needed
    /// (checked again here, as another process may have just done it).
    /// Returns whether it migrated an existing store.
    fn migrate_in(&self, conn: &Connection) -> Result<bool, StoreError> {
        let state = schema::inspect(conn).map_err(|e| self.error("read the schema version", e))?;
        match state {
            Ok(schema::State::Rudder(v)) if v == schema::VERSION => Ok(false),
            Ok(schema::State::Rudder(v)) => schema::migrate(conn, v).map(|()| true),
            Ok(schema::State::Fresh) => schema::migrate(conn, 0).map(|()| false),
            Err(_) => {
                return Err(StoreError::NotAStore {
                    location: self.location(),
                    message: "the database changed into one rudder cannot use".into(),
                });
            }
        }
        .map_err(|e| self.error("create the tables", e))
    }

    /// The sequence number of the last recorded change (0 for none); `None`
    /// while there is no store yet (no database, or one whose first write
    /// has not committed).
    pub fn last_change(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .changes_after(i64::MAX, None, 0)?
            .map(|(_, log)| log.last))
    }

    /// The recorded changes after the change `after` (at most `limit`, of
    /// the task `task` only if given), with the (device, inode) of the
    /// database they were read from: the change feed's cursor is only
    /// good for that one file. `None` while there is no store yet (no
    /// database, or one whose first write has not committed).
    pub fn changes_after(
        &self,
        after: i64,
        task: Option<&str>,
        limit: usize,
    ) -> Result<Option<(DbIdentity, ChangeLog)>, StoreError> {
        self.with_conn_at(Mode::Read, true, |conn, at| {
            let tx = conn
                .transaction()
                .map_err(|e| self.error("begin a read", e))?;
            let log = txn::read_changes(&tx, after, task, limit)
                .map_err(|e| self.error("read the changes", e))?;
            Ok((at, log))
        })
    }

    /// `PRAGMA data_version` of this backend's connection with the
    /// database's (device, inode): it changes when another connection
    /// commits, which the change feed checks cheaply (no table is read).
    /// `None` while there is no store yet.
    pub fn data_version(&self) -> Result<Option<(DbIdentity, i64)>, StoreError> {
        self.with_conn_at(Mode::Read, true, |conn, at| {
            let v = conn
                .pragma_query_value(None, "data_version", |r| r.get(0))
                .map_err(|e| self.error("read the data version", e))?;
            Ok((at, v))
        })
    }
}

impl Backend for SqliteBackend {
    fn location(&self) -> Location {
        SqliteBackend::location(self)
    }
    /// The feed reads on connections of its own, with this lock timeout.
    fn feed_source(&self, task: Option<String>) -> Box<dyn rudder_core::watch::FeedSource> {
        let backend = SqliteBackend::new(self.path.clone()).with_lock_timeout(self.lock_timeout);
        Box::new(crate::SqliteSource::of(backend, task))
    }

    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // Not again: a snapshot's callback may have written out what it
        // read (a streamed `list`).
        let ran = self.with_conn(Mode::Read, false, |conn| {
            // A deferred transaction: one consistent snapshot from its first
            // read, without blocking writers (WAL).
            let tx = conn
                .transaction()
                .map_err(|e| self.error("begin a read", e))?;
            let txn = SqlTxn::new(&tx, self);
            f(&txn)
        })?;
        match ran {
            Some(()) => Ok(()),
            None => f(&TaskMap::new()),
        }
    }

    fn exists(&self) -> Result<bool, StoreError> {
        Ok(self.identity()?.is_some())
    }

    fn cannot_write(&self) -> Option<String> {
        SqliteBackend::cannot_write(self)
    }

    /// A read is a few indexed lookups on a connection of its own that no
    /// writer holds (WAL readers take no lock).
    fn quick_reads(&self) -> bool {
        true
    }

    /// In the `deliveries` table (schema version 5), in a write
    /// transaction of its own.
    fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        use rudder_core::query::{parse_time, time_text};
        use rusqlite::OptionalExtension;
        self.write_sql(&mut |tx| {
            let read = |tx: &rusqlite::Transaction<'_>| {
                tx.prepare_cached(
                    "SELECT holder, lease_expires_at, delivered_at, attempts FROM deliveries \
                     WHERE notifier = ?1 AND task_id = ?2 AND event = ?3 AND round = ?4",
                )?
                .query_row(
                    rusqlite::params![name, key.task_id, key.event, key.round],
                    |r| {
                        Ok(rudder_core::delivery::Delivery {
                            holder: r.get(0)?,
                            lease_expires_at: parse_time(r.get(1)?),
                            delivered_at: parse_time(r.get(2)?),
                            attempts: r.get::<_, i64>(3)?.clamp(0, u32::MAX as i64) as u32,
                        })
                    },
                )
                .optional()
            };
            let record = read(tx).map_err(|e| self.error("read the delivery record", e))?;
            let Some(new) = f(record.as_ref()) else {
                return Ok(false);
            };
            tx.prepare_cached(
                "INSERT INTO deliveries (notifier, task_id, event, round, holder, \
                 lease_expires_at, delivered_at, attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (notifier, task_id, event, round) DO UPDATE SET \
                 holder = excluded.holder, lease_expires_at = excluded.lease_expires_at, \
                 delivered_at = excluded.delivered_at, attempts = excluded.attempts",
            )
            .and_then(|mut s| {
                s.execute(rusqlite::params![
                    name,
                    key.task_id,
                    key.event,
                    key.round,
                    new.holder,
                    new.lease_expires_at.map(time_text),
                    new.delivered_at.map(time_text),
                    i64::from(new.attempts),
                ])
            })
            .map_err(|e| self.error("write the delivery record", e))?;
            Ok(true)
        })
    }

    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.write_sql(&mut |tx| {
            let mut txn = SqlTxn::new(tx, self);
            let write = f(&mut txn)?;
            if write {
                txn.flush()?;
            }
            Ok(write)
        })
    }
}

/// How many prepared statements a connection keeps.
const STATEMENT_CACHE: usize = 64;

impl SqliteBackend {
    /// Run `f` in a write transaction on the migrated schema, committing
    /// when it returns true (rolling back when false), again after a busy
    /// commit until the lock timeout is used up.
    ///
    /// The transaction runs under rudder's own lock on `<db>.lock`, which
    /// keeps rudder's writers apart even when SQLite's `-shm` file is
    /// deleted under them (see shm.rs).
    fn write_sql(
        &self,
        f: &mut dyn FnMut(&rusqlite::Transaction<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.write_sql_then(f, false)
    }

    /// [`SqliteBackend::write_sql`]; with `compact`, the WAL is then
    /// checkpointed into the database and truncated, as after bulk work.
    pub(crate) fn write_sql_then(
        &self,
        f: &mut dyn FnMut(&rusqlite::Transaction<'_>) -> Result<bool, StoreError>,
        compact: bool,
    ) -> Result<(), StoreError> {
        let start = Instant::now();
        // A file rudder refuses (not a database, another application's, a
        // newer schema) is refused before the lock file appears beside it:
        // a refused operation writes nothing. Only then: a connection opened
        // outside the lock may rebuild the WAL index while a writer commits.
        if !self.lock_path.exists() {
            self.with_conn(Mode::Read, true, |_| Ok(()))?;
        }
        self.create_dir()?;
        loop {
            let lock = self.write_lock(start)?;
            let mut migrated = false;
            let mut lost = false;
            let done = self.with_conn(Mode::Write, false, |conn| {
                // BEGIN IMMEDIATE takes the write lock now (waiting up to the
                // busy timeout), so the reads below see the latest commit and
                // nothing can change them before ours.
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| self.error("lock the database", e))?;
                migrated = self.migrate_in(&tx)?;
                let before =
                    retention::last_seq(&tx).map_err(|e| self.error("read the changes", e))?;
                if !f(&tx)? {
                    return tx
                        .rollback()
                        .map_err(|e| self.error("end the transaction", e));
                }
                // A lock file deleted meanwhile may have let another
                // writer in: start over rather than commit beside it.
                if !lock.still_held().unwrap_or(false) {
                    lost = true;
                    return tx
                        .rollback()
                        .map_err(|e| self.error("end the transaction", e));
                }
                // The change log's retention: after bulk work, and when
                // this write's changes pass a multiple of its step.
                let after =
                    retention::last_seq(&tx).map_err(|e| self.error("read the changes", e))?;
                if compact || migrated || self.retention.due(before, after) {
                    retention::trim(&tx, &self.retention, after)
                        .map_err(|e| self.error("trim the change log", e))?;
                }
                tx.commit().map_err(|e| self.error("commit", e))
            });
            if done.is_ok() {
                self.after_commit();
            }
            match done {
                Ok(Some(())) if !lost => {
                    if compact || migrated {
                        self.compact_wal();
                    }
                    return Ok(());
                }
                // The lock was lost, or this process still maps a deleted
                // `-shm` file through another connection, which lets go of
                // it at its next use: nothing was written, try again.
                Ok(_) if start.elapsed() < self.lock_timeout => {
                    drop(lock);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(_) => {
                    return Err(StoreError::Database {
                        location: self.location(),
                        action: "write",
                        message: format!(
                            "the database's -shm file was deleted while this process had \
                             the store open, and it still maps the old one after {:.1}s; \
                             nothing was written (restart the process)",
                            start.elapsed().as_secs_f64()
                        ),
                    });
                }
                // A commit that found the database busy (a checkpoint, a
                // writer outside rudder) wrote nothing: run `f` again on
                // fresh data until the lock timeout is used up.
                Err(StoreError::LockTimeout { .. }) if start.elapsed() < self.lock_timeout => {
                    drop(lock);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Take rudder's lock on `<db>.lock`, waiting what is left of the lock
    /// timeout since `start`.
    fn write_lock(&self, start: Instant) -> Result<LockGuard, StoreError> {
        let left = self.lock_timeout.saturating_sub(start.elapsed());
        RealFs
            .lock(&self.lock_path, left, &self.path)
            .map_err(|failure| match failure {
                LockFailure::Timeout { waited, holder } => StoreError::LockTimeout {
                    location: self.location(),
                    waited: waited.max(start.elapsed()),
                    holder,
                },
                LockFailure::Io(e) => StoreError::io(
                    self.location(),
                    &self.lock_path,
                    "open and lock the lock file",
                    e,
                ),
            })
    }

    /// Still under the write lock, after a commit: if `-shm` was deleted
    /// during the transaction, another process may have built an index
    /// from the WAL that lacks this commit. Remove it, so that the next one
    /// to open the store builds it again (with this commit), and let go of
    /// ours (see shm.rs).
    ///
    /// The connection's [`shm::Checked`] answers: one `stat` while the file
    /// at the path is the one it last found mapped, a read of
    /// `/proc/self/maps` otherwise (which costs with the process's
    /// mappings: a Python interpreter has hundreds).
    fn after_commit(&self) {
        let mut slot = lock_slot(&self.writer);
        let Some(open) = slot.as_mut() else {
            return;
        };
        if !open.index_is_stale() {
            return;
        }
        if let Some(shm) = &open.shm {
            // Best effort: a file already gone is what we want.
            let _ = std::fs::remove_file(shm);
        }
        *slot = None;
        shm::bump_epoch();
    }

    /// Checkpoint the whole WAL into the database and truncate it (after
    /// `copy` and migrations, which write more than the WAL should keep).
    /// Best effort: a reader in the middle of a long read keeps its part of
    /// the WAL, which the last connection to close checkpoints anyway.
    fn compact_wal(&self) {
        let _ = self.with_conn(Mode::Write, false, |conn| {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(|e| self.error("checkpoint the WAL", e))
        });
    }

    /// The store's directory, created if missing (0700), for the lock file.
    fn create_dir(&self) -> Result<(), StoreError> {
        if let Some(dir) = self.path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::io(self.location(), dir, "create the store directory", e)
            })?;
        }
        Ok(())
    }
}

/// A connection slot, also after a panic elsewhere while it was held (the
/// slot is only ever replaced whole).
fn lock_slot(slot: &Mutex<Option<Box<Open>>>) -> std::sync::MutexGuard<'_, Option<Box<Open>>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// A rusqlite error as a store error naming the database.
fn sql_error(
    location: Location,
    lock_timeout: Duration,
    action: &'static str,
    e: rusqlite::Error,
) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::LockTimeout {
            location,
            waited: lock_timeout,
            holder: None,
        },
        Some(ErrorCode::NotADatabase) => StoreError::NotAStore {
            location,
            message: "the file is not a SQLite database".into(),
        },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            location,
            line: None,
            column: None,
            message: format!("the database is damaged ({e})"),
        },
        _ => match &e {
            rusqlite::Error::FromSqlConversionFailure(_, _, inner) => {
                match inner.downcast_ref::<rudder_model::task::ParseStatusError>() {
                    Some(bad) => StoreError::unknown_status(location, bad),
                    None => StoreError::Database {
                        location,
                        action,
                        message: e.to_string(),
                    },
                }
            }
            _ => StoreError::Database {
                location,
                action,
                message: e.to_string(),
            },
        },
    }
}

/// Whether SQLite could not open (or create) the `-wal` or `-shm` file a
/// WAL database needs: what a reader without write access to the
/// directory meets once the store is idle.
fn cannot_open_sidecars(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly)
    )
}

/// A `file:` URI for `path` with `immutable=1`, every byte that is not
/// plainly safe in a URI path percent-encoded.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}
