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

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::codec::{self, MAX_STORE_BYTES};
use super::{Backend, StoreError};
use crate::task::TaskMap;

/// How long a writer waits for the store lock before giving up by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// A store kept in one JSON file on a local file system.
#[derive(Debug, Clone)]
pub struct FileBackend {
    /// The path as the user gave it (for messages and watching).
    path: PathBuf,
    /// Where the data really lives: `path` with symlinks followed, so that
    /// writes land beside the target and keep the link.
    target: PathBuf,
    lock_path: PathBuf,
    lock_timeout: Duration,
}

impl FileBackend {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let target = resolve_symlinks(&path);
        let lock_path = sidecar(&target, ".lock");
        FileBackend {
            path,
            target,
            lock_path,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
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

    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// The store path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sidecar lock file.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    fn dir(&self) -> PathBuf {
        match self.target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// Read the file's bytes; `None` when it does not exist.
    pub fn read_bytes(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let mut file = match File::open(&self.target) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(&self.path, "open the store", e)),
        };
        let len = file
            .metadata()
            .map_err(|e| StoreError::io(&self.path, "stat the store", e))?
            .len();
        if len > MAX_STORE_BYTES {
            return Err(StoreError::Corrupt {
                path: self.path.clone(),
                line: None,
                column: None,
                message: format!(
                    "the file is {len} bytes, more than the {MAX_STORE_BYTES} bytes a store may hold"
                ),
            });
        }
        let mut bytes = Vec::with_capacity(len as usize + 1);
        file.read_to_end(&mut bytes)
            .map_err(|e| StoreError::io(&self.path, "read the store", e))?;
        Ok(Some(bytes))
    }

    fn lock(&self) -> Result<File, StoreError> {
        let dir = self.dir();
        if !dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|e| StoreError::io(&dir, "create the store directory", e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.lock_path)
            .map_err(|e| StoreError::io(&self.lock_path, "open the lock file", e))?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) => {
                    if start.elapsed() >= self.lock_timeout {
                        let mut holder = String::new();
                        let _ = (&file).read_to_string(&mut holder);
                        let holder = holder.trim();
                        return Err(StoreError::LockTimeout {
                            path: self.lock_path.clone(),
                            waited: start.elapsed(),
                            holder: (!holder.is_empty()).then(|| holder.to_string()),
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(fs::TryLockError::Error(e)) => {
                    return Err(StoreError::io(&self.lock_path, "lock the store", e));
                }
            }
        }
        // Say who holds the lock, for the message of whoever times out waiting.
        // Best effort: the lock works without it.
        let who = format!("pid {}\n", std::process::id());
        if file.set_len(0).is_ok() {
            let _ = file.write_at(who.as_bytes(), 0);
        }
        Ok(file)
    }

    /// Steps 4 of the protocol: temp file, fsync, rename, fsync the directory.
    fn write_atomically(&self, bytes: &[u8]) -> Result<(), StoreError> {
        let dir = self.dir();
        let mode = match fs::metadata(&self.target) {
            Ok(m) => m.permissions().mode() & 0o7777,
            Err(_) => 0o600,
        };
        let tmp = sidecar(
            &self.target,
            &format!(
                ".tmp.{}.{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
        );
        let write_tmp = || -> Result<(), StoreError> {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| StoreError::io(&tmp, "create a temporary file", e))?;
            // The mode given to open() is masked by the umask; set it exactly.
            f.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(|e| StoreError::io(&tmp, "set permissions of the temporary file", e))?;
            f.write_all(bytes)
                .map_err(|e| StoreError::io(&tmp, "write the temporary file", e))?;
            f.sync_all()
                .map_err(|e| StoreError::io(&tmp, "fsync the temporary file", e))?;
            fs::rename(&tmp, &self.target).map_err(|e| {
                StoreError::io(&self.path, "rename the temporary file over the store", e)
            })
        };
        if let Err(e) = write_tmp() {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| {
            StoreError::io(
                &dir,
                "fsync the store directory (the change may not be durable)",
                e,
            )
        })
    }
}

impl Backend for FileBackend {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn load(&self) -> Result<TaskMap, StoreError> {
        Ok(self.load_existing()?.unwrap_or_default())
    }

    fn transact(
        &self,
        f: &mut dyn FnMut(&mut TaskMap) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let lock = self.lock()?;
        let bytes = self.read_bytes()?;
        let size = bytes.as_ref().map_or(0, Vec::len);
        let mut tasks = match &bytes {
            Some(b) => codec::decode(&self.path, b)?,
            None => TaskMap::new(),
        };
        drop(bytes);
        if f(&mut tasks)? {
            self.write_atomically(&codec::encode(&tasks, size))?;
        }
        drop(lock);
        Ok(())
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
        match fs::read_link(&current) {
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
