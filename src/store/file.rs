//! The JSON file backend and its writing protocol (DESIGN.md):
//!
//! 1. exclusive `flock` on the sidecar `<store>.lock` (never on the data file,
//!    whose inode changes with every rename; the lock file is never deleted);
//! 2. read the current file under the lock;
//! 3. apply the operation; a refusal releases the lock having written nothing;
//! 4. write a uniquely named temp file in the same directory (`create_new`,
//!    the store's permissions or 0600), `fsync` it, `rename` it over the store,
//!    `fsync` the directory;
//! 5. release the lock.
//!
//! This is the order SQLite's and etcd's rename-based updates use: the data is
//! durable before the name points to it, and the name is durable before the
//! caller is told the write happened.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::codec::{self, MAX_STORE_BYTES};
use super::error::human_bytes;
use super::fs::{Fs, LockFailure, LockGuard, RealFs};
use super::limits;
use super::txn::{FileTxn, Transaction};
use super::{Backend, StoreError};
use crate::task::TaskMap;

/// How long a writer waits for the store lock before giving up by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// A store kept in one JSON file on a local file system.
#[derive(Clone)]
pub struct FileBackend {
    /// The path as the user gave it (for messages and watching).
    path: PathBuf,
    /// Where the data really lives: `path` with symlinks followed, so that
    /// writes land beside the target and keep the link.
    target: PathBuf,
    lock_path: PathBuf,
    lock_timeout: Duration,
    /// The largest file this backend reads or writes.
    max_bytes: u64,
    fs: Arc<dyn Fs>,
    /// Whether leftover temp files were looked for already.
    swept: Arc<std::sync::atomic::AtomicBool>,
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
    /// The store at `path` on the real file system. The lock timeout is
    /// `$RUDDER_LOCK_TIMEOUT` (a duration such as `5s`) when set, else 30 s;
    /// `$RUDDER_MAX_STORE_BYTES` (a number of bytes) lowers the size limit
    /// (see [`FileBackend::with_max_bytes`]).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let target = resolve_symlinks(&path);
        let mut backend = FileBackend::build(path, target, Arc::new(RealFs));
        if let Some(t) = std::env::var("RUDDER_LOCK_TIMEOUT")
            .ok()
            .and_then(|t| crate::duration::parse_duration(&t).ok())
        {
            backend.lock_timeout = t;
        }
        if let Some(n) = std::env::var("RUDDER_MAX_STORE_BYTES")
            .ok()
            .and_then(|n| parse_max_bytes(&n).ok())
        {
            backend = backend.with_max_bytes(n);
        }
        backend
    }

    /// The store at `path` on another file system (a simulated one in tests).
    pub fn with_fs(path: impl Into<PathBuf>, fs: Arc<dyn Fs>) -> Self {
        let path = path.into();
        FileBackend::build(path.clone(), path, fs)
    }

    fn build(path: PathBuf, target: PathBuf, fs: Arc<dyn Fs>) -> Self {
        let lock_path = sidecar(&target, ".lock");
        FileBackend {
            path,
            target,
            lock_path,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_bytes: MAX_STORE_BYTES,
            fs,
            swept: Arc::default(),
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

    /// The largest file this backend reads or writes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The store path as given.
    pub fn path(&self) -> &Path {
        &self.path
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
        match self.fs.read(&self.target, self.max_bytes) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(StoreError::Corrupt {
                path: self.path.clone(),
                line: None,
                column: None,
                message: format!(
                    "the file is larger than the {} a store may hold",
                    human_bytes(self.max_bytes)
                ),
            }),
            Err(e) => Err(StoreError::io(&self.path, "read the store", e)),
        }
    }

    fn lock(&self) -> Result<LockGuard, StoreError> {
        let dir = self.dir();
        self.fs
            .create_dir_all(&dir)
            .map_err(|e| StoreError::io(&dir, "create the store directory", e))?;
        self.fs
            .lock(&self.lock_path, self.lock_timeout)
            .map_err(|failure| match failure {
                LockFailure::Timeout { waited, holder } => StoreError::LockTimeout {
                    path: self.lock_path.clone(),
                    waited,
                    holder,
                },
                LockFailure::Io(e) => {
                    StoreError::io(&self.lock_path, "open and lock the lock file", e)
                }
            })
    }

    /// Step 4 of the protocol: temp file, fsync, rename, fsync the directory.
    fn write_atomically(&self, bytes: &[u8]) -> Result<(), StoreError> {
        let dir = self.dir();
        let mode = self
            .fs
            .mode(&self.target)
            .map_err(|e| StoreError::io(&self.path, "stat the store for its permissions", e))?
            .unwrap_or(0o600);
        let tmp = sidecar(
            &self.target,
            &format!(
                ".tmp.{}.{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
        );
        let mut file = self
            .fs
            .create_new(&tmp, mode)
            .map_err(|e| StoreError::io(&tmp, "create a temporary file beside the store", e))?;
        let written = file
            .write_all(bytes)
            .map_err(|e| StoreError::io(&tmp, "write the temporary file", e))
            .and_then(|()| {
                file.sync()
                    .map_err(|e| StoreError::io(&tmp, "fsync the temporary file", e))
            })
            .and_then(|()| {
                self.fs.rename(&tmp, &self.target).map_err(|e| {
                    StoreError::io(&self.path, "rename the temporary file over the store", e)
                })
            });
        drop(file);
        if let Err(e) = written {
            // Best effort: if even this fails, the temp file is harmless
            // (readers and the watcher ignore it).
            let _ = self.fs.remove_file(&tmp);
            return Err(e);
        }
        self.fs.sync_dir(&dir).map_err(|e| {
            StoreError::io(
                &dir,
                "fsync the store directory (the change is visible but may not survive a power loss)",
                e,
            )
        })?;
        if !self.swept.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.remove_stale_temps(&dir);
        }
        Ok(())
    }

    /// Remove temp files that writers killed between creating and renaming
    /// them left behind. Only a lock holder ever creates a temp file, so
    /// while this writer holds the lock any other one is garbage. Done once
    /// per backend, after the write is durable; failures are harmless.
    fn remove_stale_temps(&self, dir: &Path) {
        let Some(name) = self.target.file_name() else {
            return;
        };
        let mut prefix = name.to_os_string();
        prefix.push(".tmp.");
        let prefix = prefix.to_string_lossy().into_owned();
        let Ok(entries) = self.fs.list_dir(dir) else {
            return;
        };
        for path in entries {
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            {
                let _ = self.fs.remove_file(&path);
            }
        }
    }
}

impl Backend for FileBackend {
    fn load(&self) -> Result<TaskMap, StoreError> {
        Ok(self.load_existing()?.unwrap_or_default())
    }

    /// Checked like [`Backend::load`] (a file that is not a valid store is
    /// refused the same way), but only the tasks `f` asks for are parsed.
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some(bytes) = self.read_bytes()? else {
            return f(&FileTxn::empty(&self.path));
        };
        match FileTxn::parse(&self.path, &bytes) {
            Some(txn) => f(&txn),
            None => f(&codec::decode_whole(&self.path, &bytes)?),
        }
    }

    fn exists(&self) -> Result<bool, StoreError> {
        self.fs
            .mode(&self.target)
            .map(|mode| mode.is_some())
            .map_err(|e| StoreError::io(&self.path, "stat the store to see whether it exists", e))
    }

    /// Every task is checked (a file that is not a valid store is refused
    /// with the position of the problem, having written nothing), but only
    /// the tasks `f` reads or changes are parsed in full, and on commit only
    /// the changed ones are serialized: the others are copied as they were.
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let lock = self.lock()?;
        let bytes = self.read_bytes()?;
        // A writer never renames into place what a reader would refuse: the
        // changed tasks' values are checked before encoding, the new file's
        // size after (below).
        let commit = |txn: &FileTxn| txn.check_changed().map(|()| txn.encode());
        let new = match &bytes {
            None => {
                let mut txn = FileTxn::empty(&self.path);
                f(&mut txn)?.then(|| commit(&txn)).transpose()?
            }
            Some(b) => match FileTxn::parse(&self.path, b) {
                Some(mut txn) => f(&mut txn)?.then(|| commit(&txn)).transpose()?,
                // Not a valid store, or an unusual one: the whole-file parse
                // gives the error with its position, or the tasks.
                None => {
                    let mut tasks = codec::decode_whole(&self.path, b)?;
                    if f(&mut tasks)? {
                        tasks.values().try_for_each(limits::check_task)?;
                        Some(codec::encode(&tasks, b.len()))
                    } else {
                        None
                    }
                }
            },
        };
        drop(bytes);
        if let Some(new) = new {
            let size = new.len() as u64;
            if size > self.max_bytes {
                return Err(StoreError::TooLarge {
                    path: self.path.clone(),
                    size,
                    limit: self.max_bytes,
                });
            }
            self.write_atomically(&new)?;
        }
        drop(lock);
        Ok(())
    }
}

/// Read a size limit as `$RUDDER_MAX_STORE_BYTES` gives it: a number of
/// bytes from 1 to [`MAX_STORE_BYTES`].
pub fn parse_max_bytes(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_STORE_BYTES).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a number of bytes from 1 to {MAX_STORE_BYTES} ({}), got {text:?}",
            human_bytes(MAX_STORE_BYTES)
        )),
    }
}

/// `<path><suffix>` in the same directory, e.g. `tasks.json.lock`.
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Follow symlinks (relative ones from their own directory), at most 40 deep.
fn resolve_symlinks(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&current) {
            Ok(next) => {
                current = match current.parent() {
                    Some(parent) if next.is_relative() => parent.join(next),
                    _ => next,
                };
            }
            Err(_) => break,
        }
    }
    current
}
