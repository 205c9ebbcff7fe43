//! The JSON file backend and its writing protocol (docs/architecture.md):
//!
//! 1. exclusive `flock` on the sidecar `<store>.lock` (never on the data file,
//!    whose inode changes with every rename; the lock file is never deleted);
//! 2. read the current file under the lock;
//! 3. apply the operation; a refusal releases the lock having written nothing;
//! 4. write a uniquely named temp file in the same directory (`create_new`,
//!    the store's permissions or 0600), `fsync` it, `rename` it over the store,
//!    `fsync` the directory;
//! 5. record the new file's identity in the lock file (for the next writer,
//!    which then need not check the untouched tasks again: see
//!    `docs/durability.md`), and release the lock.
//!
//! This is the order SQLite's and etcd's rename-based updates use: the data is
//! durable before the name points to it, and the name is durable before the
//! caller is told the write happened.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use indexmap::IndexMap;

use super::codec::Written;
use super::codec::{self, MAX_STORE_BYTES};
use super::fs::{
    FileMeta, Fs, Identity, LockFailure, LockGuard, ReadFile, ReadSeek, RealFs, Record,
};
use super::scan;
use super::txn::{Encoded, FileTxn};
use crate::index::TaskIndex;
use rudder_core::limits;
use rudder_core::{Backend, DEFAULT_LOCK_TIMEOUT, StoreError, Transaction};
use rudder_core::{Location, Settings, human_bytes};
use rudder_fs::{lock_name, temp_name, temp_pid};
use rudder_model::task::{Status, TaskMap};

/// What the change feed keeps of one task of the file between two reads:
/// what it compares, and a hash of the task's text, so that a task whose
/// text did not change is not read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskDigest {
    pub revision: u64,
    pub status: Status,
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Of the task's JSON text as the file holds it (0: not known).
    pub hash: u64,
}

impl TaskDigest {
    /// What a summary says of its task (the hash not known).
    pub fn of(s: &rudder_core::Summary<'_>) -> Self {
        TaskDigest {
            revision: s.revision,
            status: s.status,
            updated_at: s.updated_at,
            hash: 0,
        }
    }

    /// Whether the two say the same about their task (the hashes aside).
    pub fn same(&self, other: &TaskDigest) -> bool {
        (self.revision, self.status, self.updated_at)
            == (other.revision, other.status, other.updated_at)
    }
}

pub(super) fn text_hash(text: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    // 0 means "not known".
    h.finish().max(1)
}

/// A store kept in one JSON file on a local file system.
#[derive(Clone)]
pub struct FileBackend {
    /// The path as the user gave it (for messages and watching).
    path: PathBuf,
    /// Where the data really lives: `path` with symlinks followed, so that
    /// writes land beside the target and keep the link.
    pub(crate) target: PathBuf,
    /// Why `path` may not be followed (a symlink a stranger planted in a
    /// sticky shared directory): every operation is refused with this.
    unsafe_link: Option<Arc<str>>,
    lock_path: PathBuf,
    pub(crate) lock_timeout: Duration,
    /// The largest file this backend reads or writes.
    pub(crate) max_bytes: u64,
    pub(crate) fs: Arc<dyn Fs>,
    /// Whether leftover temp files were looked for already.
    swept: Arc<std::sync::atomic::AtomicBool>,
    /// Whether the last transaction or read ran on the trusted path (for tests).
    trusted_now: Arc<AtomicBool>,
}

impl std::fmt::Debug for FileBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBackend")
            .field("path", &self.path)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl FileBackend {
    /// The store at `path` on the real file system, with the default
    /// [`Settings`] (see [`FileBackend::with_settings`]).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let (target, unsafe_link) = match resolve_symlinks(&path) {
            Ok(target) => (target, None),
            Err(why) => (path.clone(), Some(why.into())),
        };
        let mut backend = FileBackend::build(path, target, Arc::new(RealFs));
        backend.unsafe_link = unsafe_link;
        backend
    }

    /// The lock timeout and size limit of `settings`.
    pub fn with_settings(self, settings: &Settings) -> Self {
        let backend = self.with_lock_timeout(settings.lock_timeout);
        match settings.max_store_bytes {
            Some(n) => backend.with_max_bytes(n),
            None => backend,
        }
    }

    /// The store at `path` on another file system (a simulated one in tests).
    pub fn with_fs(path: impl Into<PathBuf>, fs: Arc<dyn Fs>) -> Self {
        let path = path.into();
        FileBackend::build(path.clone(), path, fs)
    }

    fn build(path: PathBuf, target: PathBuf, fs: Arc<dyn Fs>) -> Self {
        let lock_path = target.with_file_name(lock_name(target.file_name().unwrap_or_default()));
        FileBackend {
            path,
            target,
            unsafe_link: None,
            lock_path,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_bytes: MAX_STORE_BYTES,
            fs,
            swept: Arc::default(),
            trusted_now: Arc::default(),
        }
    }

    /// Read all tasks without the lock; `None` when the file does not exist.
    pub fn load_existing(&self) -> Result<Option<TaskMap>, StoreError> {
        self.read_bytes()?
            .map(|bytes| codec::decode(&self.path, &bytes))
            .transpose()
    }

    /// The file the data really lives in (the path with symlinks followed).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Wait at most `timeout` for the store lock (default 30 s).
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Read and write no file larger than `limit` bytes instead of
    /// [`MAX_STORE_BYTES`] (which is also the most a limit can be): a write
    /// that would grow the file past it is refused, as a read of such a file
    /// is. For tests, and for capping a store; every process that shares the
    /// store should use the same limit.
    pub fn with_max_bytes(mut self, limit: u64) -> Self {
        self.max_bytes = limit.min(MAX_STORE_BYTES);
        self
    }

    /// How long a writer waits for the store lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The largest file this backend reads or writes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The store path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store as errors name it: its path as given.
    pub fn location(&self) -> Location {
        Location::file(&self.path)
    }

    /// The directory the data lives in (writes and watching happen there).
    pub fn dir(&self) -> PathBuf {
        match self.target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// The file's bytes; `None` when it does not exist. A file larger than
    /// the limit ([`MAX_STORE_BYTES`] unless lowered) is refused without
    /// being read whole.
    pub fn read_bytes(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read_file()?.map(|r| r.bytes))
    }

    /// [`FileBackend::read_bytes`] into `buf` (its allocation kept, for a
    /// reader that reads the file again at every change): `None` when it
    /// does not exist, else the identity of what was read, if known.
    pub(super) fn read_bytes_into(
        &self,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Option<Identity>>, StoreError> {
        self.check_link()?;
        self.fs
            .read_into(&self.target, self.max_bytes, buf)
            .map_err(|e| self.read_error(e))
    }

    /// The identity of the store file now, if the file system tells it
    /// (`None` for a missing file too).
    pub(super) fn identity(&self) -> Option<Identity> {
        self.fs.identity(&self.target).ok().flatten()
    }

    /// [`FileBackend::read_bytes`], with the identity of what was read.
    fn read_file(&self) -> Result<Option<ReadFile>, StoreError> {
        self.check_link()?;
        self.fs
            .read_identified(&self.target, self.max_bytes)
            .map_err(|e| self.read_error(e))
    }

    /// The file opened to be read a part at a time (a stable version of it:
    /// writers rename a new file into place), refused as
    /// [`FileBackend::read_bytes`] refuses it; `None` when it does not
    /// exist.
    pub(super) fn open_read(&self) -> Result<Option<Box<dyn ReadSeek>>, StoreError> {
        self.check_link()?;
        self.fs
            .open_read(&self.target, self.max_bytes)
            .map_err(|e| self.read_error(e))
    }

    /// What a failed read of the store is.
    fn read_error(&self, e: std::io::Error) -> StoreError {
        let corrupt = |message| StoreError::Corrupt {
            location: self.location(),
            line: None,
            column: None,
            message,
        };
        match e.kind() {
            std::io::ErrorKind::FileTooLarge => corrupt(format!(
                "the file is larger than the {} a store may hold",
                human_bytes(self.max_bytes)
            )),
            std::io::ErrorKind::InvalidInput => corrupt(e.to_string()),
            _ => StoreError::io(self.location(), &self.path, "read the store", e),
        }
    }

    /// [`Backend::snapshot`], but only if the file exists: whether it did
    /// (the change feed tells a missing store from an empty one).
    pub fn snapshot_existing(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        let Some(read) = self.read_file()? else {
            return Ok(false);
        };
        let bytes = &read.bytes;
        // A reader takes no lock, but a record is a fact about a file, as
        // good a proof to a reader as to a writer.
        self.trusted_now.store(false, Relaxed);
        let record = self.fs.recorded(&self.lock_path);
        if trusts(&read, record)
            && let Some(txn) = FileTxn::trusted(&self.path, bytes)
        {
            let txn = txn.with_canonical(vouched(record));
            let answer = f(&txn);
            if !txn.poisoned() {
                self.trusted_now.store(true, Relaxed);
                return answer.map(|()| true);
            }
        }
        match FileTxn::parse(&self.path, bytes) {
            Some(txn) => f(&txn)?,
            None => f(&codec::decode_whole(&self.path, bytes)?)?,
        }
        Ok(true)
    }

    /// Every task's [`TaskDigest`], in file order; `None` when the file
    /// does not exist. A task whose text is the same as in `previous`
    /// (same hash) keeps its digest from there without being read; only
    /// the others are read (checked as a task, not built). A file that does
    /// not split as a store, or a changed task that does not read, is read
    /// the checked way ([`FileBackend::snapshot_existing`]), whose verdict
    /// and error position are final.
    pub fn digests(
        &self,
        previous: &IndexMap<String, TaskDigest>,
    ) -> Result<Option<IndexMap<String, TaskDigest>>, StoreError> {
        let Some(read) = self.read_file()? else {
            return Ok(None);
        };
        let bytes = &read.bytes;
        let quick = || -> Option<IndexMap<String, TaskDigest>> {
            let text = std::str::from_utf8(bytes).ok()?;
            let runs = scan::split_map(text, |_, rest| {
                Some(((), scan::skip_container(rest.as_bytes(), 0)?))
            })?;
            let mut out = IndexMap::with_capacity(runs.iter().map(Vec::len).sum());
            for (key, json, ()) in runs.into_iter().flatten() {
                let hash = text_hash(json.as_bytes());
                let digest = match previous.get(key.as_ref()) {
                    Some(p) if p.hash == hash => *p,
                    _ => {
                        let (task, len) = scan::parse_one::<TaskIndex>(json)?;
                        if len != json.len() || task.task_id != key {
                            return None;
                        }
                        TaskDigest {
                            revision: task.revision,
                            status: task.status,
                            updated_at: task.updated_at,
                            hash,
                        }
                    }
                };
                // A repeated key is left to the checked read.
                if out.insert(key.into_owned(), digest).is_some() {
                    return None;
                }
            }
            Some(out)
        };
        if let Some(out) = quick() {
            return Ok(Some(out));
        }
        let mut out = IndexMap::new();
        let existed = self.snapshot_existing(&mut |txn| {
            out = txn
                .summaries()?
                .map(|s| (s.task_id.to_string(), TaskDigest::of(&s)))
                .collect();
            Ok(())
        })?;
        Ok(existed.then_some(out))
    }

    fn check_link(&self) -> Result<(), StoreError> {
        match &self.unsafe_link {
            None => Ok(()),
            Some(why) => Err(StoreError::io(
                self.location(),
                &self.path,
                "follow the store path",
                std::io::Error::new(std::io::ErrorKind::PermissionDenied, why.to_string()),
            )),
        }
    }

    /// The store's owner, group and mode, which a rewrite and the lock file
    /// keep; a new store's are private to the current user.
    fn store_meta(&self) -> Result<FileMeta, StoreError> {
        let meta = self.fs.meta(&self.target).map_err(|e| {
            StoreError::io(
                self.location(),
                &self.path,
                "stat the store for its permissions",
                e,
            )
        })?;
        if let Some(meta) = meta {
            return Ok(meta);
        }
        let dir = self.dir();
        let dir_meta = self.fs.meta(&dir).map_err(|e| {
            StoreError::io(
                self.location(),
                &dir,
                "stat the store's directory for its group",
                e,
            )
        })?;
        Ok(FileMeta::new_in(dir_meta))
    }

    pub(super) fn lock(&self) -> Result<LockGuard, StoreError> {
        self.check_link()?;
        let dir = self.dir();
        self.fs
            .create_dir_all(&dir)
            .map_err(|e| StoreError::io(self.location(), &dir, "create the store directory", e))?;
        self.fs
            .lock(&self.lock_path, self.lock_timeout, &self.target)
            .map_err(|failure| match failure {
                LockFailure::Timeout { waited, holder } => StoreError::LockTimeout {
                    location: self.location(),
                    waited,
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

    /// Step 4 of the protocol: temp file, fsync, rename over `target` (the
    /// store, or a file beside it written under the same lock), fsync the
    /// directory.
    /// `Ok(Written::LockLost)` when, just before the rename, `lock` turned
    /// out to be lost (its file deleted, so another writer may hold a new
    /// one): nothing was written and the caller must start over.
    pub(super) fn write_atomically(
        &self,
        target: &Path,
        parts: &[&[u8]],
        lock: &LockGuard,
    ) -> Result<Written, StoreError> {
        let dir = self.dir();
        let meta = self.store_meta()?;
        // Before a store-sized temp file exists: in a directory that refuses
        // the rename it could not be removed either.
        self.fs
            .check_replaceable(&dir, target)
            .map_err(|e| StoreError::io(self.location(), &dir, "replace the store", e))?;
        let tmp = target.with_file_name(temp_name(
            target.file_name().unwrap_or_default(),
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string(),
        ));
        let mut file = self.fs.create_new(&tmp, &meta).map_err(|e| {
            StoreError::io(
                self.location(),
                &tmp,
                "create a temporary file beside the store",
                e,
            )
        })?;
        let mut settled = None;
        let written = file
            .write_all_vectored(parts)
            .map_err(|e| StoreError::io(self.location(), &tmp, "write the temporary file", e))
            .and_then(|()| {
                file.sync().map_err(|e| {
                    StoreError::io(self.location(), &tmp, "fsync the temporary file", e)
                })
            })
            .and_then(|()| {
                // Best effort: without it, the next writer checks every task.
                settled = file.settle().ok().flatten();
                lock.still_held().map_err(|e| {
                    StoreError::io(self.location(), &self.lock_path, "stat the lock file", e)
                })
            })
            .and_then(|held| {
                if !held {
                    return Ok(false);
                }
                match self.fs.rename(&tmp, target) {
                    Ok(()) => Ok(true),
                    // Our temp file was swept: only a writer that believed it
                    // held the lock does that, so the lock was lost.
                    Err(e)
                        if e.kind() == std::io::ErrorKind::NotFound
                            && !lock.still_held().unwrap_or(true) =>
                    {
                        Ok(false)
                    }
                    Err(e) => Err(StoreError::io(
                        self.location(),
                        target,
                        "rename the temporary file over the store",
                        e,
                    )),
                }
            });
        // What the store is now, if it is still exactly what we wrote: the
        // same file, data untouched since our write (a write since the
        // rename would have stamped a later time), settled by the rename.
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let identity = match (&written, settled) {
            (Ok(true), Some(before)) => file.identity().ok().flatten().filter(|now| {
                now.dev == before.dev
                    && now.ino == before.ino
                    && now.size == before.size
                    && now.mtime_ns == before.mtime_ns
                    && now.size == total as u64
                    && now.settled()
            }),
            _ => None,
        };
        drop(file);
        match written {
            Ok(true) => {}
            Ok(false) => {
                let _ = self.fs.remove_file(&tmp);
                return Ok(Written::LockLost);
            }
            Err(e) => {
                // Best effort: if even this fails, the temp file is harmless
                // (readers and the watcher ignore it).
                let _ = self.fs.remove_file(&tmp);
                return Err(e);
            }
        }
        self.fs.sync_dir(&dir).map_err(|e| {
            StoreError::io(
                self.location(),
                &dir,
                "fsync the store directory (the change is visible but may not survive a power loss)",
                e,
            )
        })?;
        if !self.swept.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.remove_stale_temps(&dir);
        }
        Ok(Written::Done(identity))
    }

    /// Remove temp files that writers killed between creating and renaming
    /// them left behind: exact temp names of this store whose process is
    /// gone (a live one may be a writer whose lock file was deleted under
    /// it). Done once per backend, after the write is durable; failures are
    /// harmless.
    fn remove_stale_temps(&self, dir: &Path) {
        let Some(name) = self.target.file_name() else {
            return;
        };
        let Ok(entries) = self.fs.list_dir(dir) else {
            return;
        };
        for path in entries {
            let pid = path.file_name().and_then(|n| temp_pid(name, n));
            if pid.is_some_and(|pid| !process_alive(pid)) {
                let _ = self.fs.remove_file(&path);
            }
        }
    }
}

impl Backend for FileBackend {
    /// In the sidecar file `<store>.deliveries`, written under the store's
    /// lock by the same atomic protocol (see `deliveries.rs`).
    fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        crate::deliveries::update(self, name, key, f)
    }

    fn location(&self) -> Location {
        FileBackend::location(self)
    }
    fn feed_source(&self, task: Option<String>) -> Box<dyn rudder_core::watch::FeedSource> {
        Box::new(crate::FileSource::of(self.clone(), task))
    }
    fn cannot_write(&self) -> Option<String> {
        // Writes land beside the link's target, not the link.
        crate::fs::cannot_write(&self.target)
    }
    /// Every transaction reads and rewrites the whole file, so a batch
    /// would cost as much as everything: one step.
    fn batch_size(&self) -> Option<usize> {
        None
    }

    /// Checked like [`Backend::load`] (a file that is not a valid store is
    /// refused the same way), but only the tasks `f` asks for are parsed.
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        match self.snapshot_existing(f)? {
            true => Ok(()),
            false => f(&FileTxn::empty(&self.path)),
        }
    }

    fn exists(&self) -> Result<bool, StoreError> {
        self.check_link()?;
        self.fs
            .meta(&self.target)
            .map(|meta| meta.is_some())
            .map_err(|e| {
                StoreError::io(
                    self.location(),
                    &self.path,
                    "stat the store to see whether it exists",
                    e,
                )
            })
    }

    /// Every task is checked (a file that is not a valid store is refused
    /// with the position of the problem, having written nothing), but only
    /// the tasks `f` reads or changes are parsed in full, and on commit only
    /// the changed ones are serialized: the others are written straight
    /// from the bytes read. A file that a rudder writer checked and wrote,
    /// unchanged since (its identity is the one recorded in the lock file),
    /// is not checked again: see `docs/durability.md`.
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        // Each round after the first means a cleanup script deleted the lock
        // file while we held it (only possible where the directory could
        // not be locked); give up as a lock wait would.
        let start = std::time::Instant::now();
        while start.elapsed() < self.lock_timeout {
            let lock = self.lock()?;
            self.trusted_now.store(false, Relaxed);
            let read = self.read_file()?;
            let done = match &read {
                None => {
                    let mut txn = FileTxn::empty(&self.path);
                    match f(&mut txn)? {
                        true => self.commit(&txn.encoded(), &lock)?,
                        false => true,
                    }
                }
                Some(read) => match self.trusted_run(read, lock.recorded(), f)? {
                    Some(Run::Write(new)) => self.commit(&new, &lock)?,
                    Some(Run::Nothing) => true,
                    None => self.checked_run(read, &lock, f)?,
                },
            };
            drop(read);
            drop(lock);
            if done {
                return Ok(());
            }
        }
        Err(StoreError::io(
            self.location(),
            &self.lock_path,
            "keep the store lock",
            std::io::Error::other(format!(
                "the lock file was deleted under every write attempt for {}",
                humantime::format_duration(Duration::from_millis(
                    self.lock_timeout.as_millis() as u64
                ))
            )),
        ))
    }
}

/// Whether `read` is the file whose identity a rudder writer recorded
/// after checking and writing it (see `docs/durability.md`).
fn trusts(read: &ReadFile, recorded: Option<Record>) -> bool {
    read.identity.is_some_and(|id| {
        id.settled()
            && id.size == read.bytes.len() as u64
            && recorded.map(|r| r.identity) == Some(id)
    })
}

/// Whether the record (of a file [`trusts`] accepts) says that every
/// task's text is what this version's encoder writes for it.
fn vouched(recorded: Option<Record>) -> bool {
    recorded.and_then(|r| r.canonical) == Some(codec::ENCODER_VERSION)
}

/// What a transaction on a trusted file came to.
enum Run<'a> {
    Write(Encoded<'a>),
    Nothing,
}

impl FileBackend {
    /// Run `f` on a file whose identity is the one a rudder writer recorded
    /// after checking and writing it, without checking it again. `None`
    /// when the file is not such a file, or turned out not to be (the
    /// transaction is then to be run on the checked path).
    fn trusted_run<'a>(
        &'a self,
        read: &'a ReadFile,
        recorded: Option<Record>,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<Option<Run<'a>>, StoreError> {
        self.trusted_now.store(false, Relaxed);
        if !trusts(read, recorded) {
            return Ok(None);
        }
        let Some(txn) = FileTxn::trusted(&self.path, &read.bytes) else {
            return Ok(None);
        };
        let mut txn = txn.with_canonical(vouched(recorded));
        let result = f(&mut txn);
        if txn.poisoned() {
            return Ok(None);
        }
        self.trusted_now.store(true, Relaxed);
        Ok(Some(if result? {
            // A writer never renames into place what a reader would refuse.
            txn.check_changed()?;
            Run::Write(txn.encoded())
        } else {
            Run::Nothing
        }))
    }

    /// Run `f` on a file checked whole first; `Ok(false)` when the lock was
    /// lost before the write.
    fn checked_run(
        &self,
        read: &ReadFile,
        lock: &LockGuard,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        self.trusted_now.store(false, Relaxed);
        let bytes = &read.bytes;
        match FileTxn::parse(&self.path, bytes) {
            Some(mut txn) => {
                if f(&mut txn)? {
                    txn.check_changed()?;
                    return self.commit(&txn.encoded(), lock);
                }
                // Checked whole and unchanged: the next writer need not
                // check it again, if it is in the layout the trusted path
                // reads.
                // (Its tasks' text is another's: not vouched for.)
                if txn.as_written() {
                    lock.record(
                        read.identity
                            .filter(|id| id.settled() && id.size == bytes.len() as u64)
                            .map(Record::verified),
                    );
                }
                Ok(true)
            }
            // Not a valid store, or an unusual one: the whole-file parse
            // gives the error with its position, or the tasks.
            None => {
                let mut tasks = codec::decode_whole(&self.path, bytes)?;
                if !f(&mut tasks)? {
                    return Ok(true);
                }
                tasks.values().try_for_each(limits::check_task)?;
                let new = codec::encode(&tasks, bytes.len());
                // Every task written anew, but not checked to read back as
                // itself (a rare file): not vouched for.
                self.write(&[&new], true, false, lock)
            }
        }
    }

    /// Write `new` and record what the next writer may trust; `Ok(false)`
    /// when the lock was lost before the rename.
    fn commit(&self, new: &Encoded, lock: &LockGuard) -> Result<bool, StoreError> {
        self.write(&new.slices(), new.plain, new.canonical, lock)
    }

    fn write(
        &self,
        parts: &[&[u8]],
        plain: bool,
        canonical: bool,
        lock: &LockGuard,
    ) -> Result<bool, StoreError> {
        // Nor a file larger than a reader takes.
        let size: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if size > self.max_bytes {
            return Err(StoreError::TooLarge {
                location: self.location(),
                size,
                limit: self.max_bytes,
            });
        }
        match self.write_atomically(&self.target, parts, lock)? {
            Written::LockLost => Ok(false),
            Written::Done(identity) => {
                // Only content this writer checked (or made) in the layout
                // the trusted path reads is recorded; anything else clears
                // the record.
                // The encoder's version is vouched for only when every
                // task's text is its own ([`Encoded::canonical`]).
                lock.record(identity.filter(|_| plain).map(|identity| Record {
                    identity,
                    canonical: canonical.then_some(codec::ENCODER_VERSION),
                }));
                Ok(true)
            }
        }
    }

    /// Whether the last transaction (or read of some tasks) ran on the
    /// trusted path, whatever its outcome (for tests).
    #[doc(hidden)]
    pub fn last_run_trusted(&self) -> bool {
        self.trusted_now.load(Relaxed)
    }
}

/// Follow symlinks (relative ones from their own directory), at most 40
/// deep, the way the kernel's `fs.protected_symlinks` would: a link in a
/// sticky world-writable directory (such as `/tmp`) is followed only when it
/// belongs to the current user or to the directory's owner. Following
/// another user's link there would let them choose where we create and
/// rewrite files.
fn resolve_symlinks(path: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let euid = super::fs::FileMeta::private().uid;
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        let Ok(link) = std::fs::symlink_metadata(&current) else {
            break;
        };
        if !link.file_type().is_symlink() {
            break;
        }
        let parent = match current.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Ok(dir) = std::fs::metadata(&parent)
            && dir.mode() & 0o1002 == 0o1002
            && link.uid() != euid
            && link.uid() != dir.uid()
        {
            return Err(format!(
                "{} is a symlink owned by uid {} in the shared sticky directory {}; \
                 rudder does not follow another user's link there (as the kernel's \
                 fs.protected_symlinks would not): use the real path",
                current.display(),
                link.uid(),
                parent.display()
            ));
        }
        let Ok(next) = std::fs::read_link(&current) else {
            break;
        };
        current = if next.is_relative() {
            parent.join(next)
        } else {
            next
        };
    }
    Ok(current)
}

/// Whether a process with this pid exists (`kill(pid, 0)`) and is not a
/// zombie: a writer killed by SIGKILL whose parent has not reaped it yet
/// still answers signal 0, though it will never write again.
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM };
    exists && !is_zombie(pid)
}

/// Whether `/proc/PID/stat` says the process is dead and not yet reaped
/// (state `Z` or `X`); `false` where there is no `/proc` to ask.
fn is_zombie(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `PID (COMM) STATE ...`: COMM may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}
